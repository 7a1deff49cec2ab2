"""Speed of the statistics core on this machine (issue: "Foundation and the statistics core").

Prints two figures, each the best (and slowest) of a few repeats (target: under 2 s each on a 2-core machine):
* calibrating the conformal test and sweeping 100 alpha levels over 10 million control scores
  (with 100,000 member scores, so the sweep also counts claims and calibrated rates);
* census coverage of one document over 10^6 overlapping windows.

Run:  python benchmarks/stats.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calib.stats.census import census
from calib.stats.conformal import calibrate, sweep


def _best(fn, repeats: int) -> tuple[str, object]:
    """Run ``fn`` ``repeats`` times; return "best s (slowest s)" and the last result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return f"{min(times):.3f} s (slowest of {repeats}: {max(times):.3f} s)", out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    n_controls = 10_000_000
    controls = rng.lognormal(mean=-20, sigma=3, size=n_controls)
    members = rng.lognormal(mean=-18, sigma=3, size=100_000)
    alphas = np.geomspace(1 / (n_controls + 1), 0.5, 100)
    seconds, table = _best(lambda: sweep(controls, alphas, members=members), args.repeats)
    print(f"conformal sweep: 100 alpha levels over {n_controls:,} controls (+100,000 members): {seconds}")
    seconds, cal = _best(lambda: calibrate(controls, 0.001), args.repeats)
    print(f"conformal calibrate: one alpha over {n_controls:,} controls: {seconds} (K={cal.k})")

    n_windows = 1_000_000
    length = 60_000_000
    starts = np.sort(rng.integers(0, length - 400, size=n_windows))
    ends = starts + rng.integers(150, 400, size=n_windows)
    scores = 10.0 ** rng.uniform(-40, 0, size=n_windows)
    control_scores = 10.0 ** rng.uniform(-40, -12, size=n_windows)
    seconds, result = _best(
        lambda: census(starts, ends, scores, control_scores, document_length=length, budget=10**9),
        args.repeats,
    )
    print(f"census coverage: {n_windows:,} windows: {seconds} "
          f"(coverage {result.coverage:.4f}, within budget {result.coverage_within_budget:.4f})")
    assert table.height == 100


if __name__ == "__main__":
    main()
