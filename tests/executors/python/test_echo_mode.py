"""The ``echo`` stand-in mode: a withheld helper hands its first argument back (issue 24 §2).

python-stdnum's validators start with ``number = compact(number)``, where ``compact`` is
``clean(number, ' -').strip().upper()`` and ``clean`` comes from the withheld ``stdnum.util``. Every stand-in
mode made ``number`` a stand-in or a constant, so ``len(number) == 15`` never held (the IMEI ``validate``:
coverage 0.40 and 0.46 for two of them on the third package list's seeds 6-10, the fifteenth round's tuning
sample; 0.80 and 0.92 now). In the ``echo`` mode a stand-in call returns its first argument, as cleaning,
converting and checking helpers do. The search asks for it (``synth.search``) on inputs whose run handed a
stand-in a plain value (``LOG.handed``), once it has found no new line for half its ``stagnation``; it is not
one of the modes drawn at random, so a search that keeps finding lines draws as before.
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import standins
from calib.executors.sandbox.harness.calls import standin_default
from calib.executors.sandbox.harness.pools import STANDIN_MODES
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "from stdnum.util import clean\n"
    "\n"
    "class InvalidLength(ValueError):\n"
    "    pass\n"
    "\n"
)
# the check digit of a 9-digit number, the number cleaned by the withheld helper first
X = (
    "def is_valid(number):\n"
    "    number = clean(number, ' -').strip()\n"
    "    if not number.isdigit():\n"
    "        return None\n"
    "    if len(number) != 9:\n"
    "        raise InvalidLength(number)\n"
    "    total = sum(int(d) for d in number[:-1])\n"
    "    check = (10 - total % 10) % 10\n"
    "    return check == int(number[-1])\n"
)


def test_in_the_echo_mode_a_call_returns_its_first_argument() -> None:
    assert "echo" in STANDIN_MODES
    LOG.reset(standin_default("echo"))
    try:
        text = "35-1234"
        assert CalibStandIn("util.clean")(text, " -") is text
        assert CalibStandIn("util.to_list")(value=[1]) is not None  # no positional argument: a stand-in
        assert standins.is_standin(CalibStandIn("util.now")())
    finally:
        LOG.reset()
    assert standins.is_standin(CalibStandIn("util.clean")("x"))  # the default mode: a stand-in


@needs_bwrap
def test_a_validator_behind_a_withheld_cleaner_reaches_its_check_digit() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        result = asyncio.run(ex.compare(X, [], context=CONTEXT))
    finally:
        ex.close()
    # before: 0.62 (the check-digit lines need ``number`` to be the input's 9 digits, never a stand-in)
    assert result.conclusive and result.coverage == 1.0, result.reason
    echoed = [i for i in result.inputs if i.valid and i.state.get("standins") == "echo"]
    assert echoed and any('"return":true' in (i.output or "") or '"return":false' in (i.output or "")
                          for i in echoed)
