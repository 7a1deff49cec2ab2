"""The search's time budget is CPU time of the exploring process, not wall-clock time.

On a busy machine (other sandboxes, a CI run on two cores) a wall-clock budget ended searches sooner, so
the same function, context and seed chose other inputs there. ``synth.spent`` counts the process's CPU
time, and wall-clock time only past ``WALL_FACTOR`` times the budget (a search whose runs mostly wait).
"""

from __future__ import annotations

import time

from calib.executors.sandbox.harness import synth


def test_waiting_counts_a_quarter_and_cpu_counts_whole() -> None:
    start = synth.clock()
    time.sleep(0.4)  # no CPU: only the wall-clock floor, 0.4 s / WALL_FACTOR, is spent
    share = synth.spent(start, 1.0)
    assert synth.WALL_FACTOR == 4
    assert 0.1 <= share < 0.4  # a wall-clock budget would have spent 0.4 of it already
    start = synth.clock()
    cpu0 = time.process_time()
    while time.process_time() - cpu0 < 0.3:  # 0.3 s of CPU, however long that takes on this machine
        pass
    assert synth.spent(start, 1.0) >= 0.3
    assert synth.spent(start, 0.1) >= 3.0  # the share of a smaller budget: three times over

