"""The validity suite's observed figures: every coverage and error rate it checks, as a table.

Runs the simulation validity tests (tests/stats/test_validity_*.py) with $CALIB_VALIDITY_FIGURES set,
so that each check records its observed figure, and prints them: the check, the observed value, how it
must relate to the target (>= nominal coverage, <= error level, = a law's value) and the replicates.
Rows marked "deliberately wrong" are the procedures the suite must reject (Wald at small n, >= under
ties, no multiplicity correction, ...): their figures violate the target on purpose.
docs/statistics.md, "Validity suite", explains the settings and tolerances.

Run:  python benchmarks/validity.py            (default run, 10^4 replicates, about 25 s of CPU)
      python benchmarks/validity.py --large    (adds the 10^5-replicate runs; several minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "stats").glob("test_validity_*.py"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also run the 10^5-replicate checks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        env = dict(os.environ, CALIB_VALIDITY_FIGURES=str(figures))
        if args.large:
            env["CALIB_VALIDITY_LARGE"] = "1"
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", *TESTS], cwd=ROOT, env=env)
        lines = figures.read_text(encoding="utf-8").splitlines() if figures.exists() else []
        rows = [json.loads(line) for line in lines]
    width = max((len(r["check"]) for r in rows), default=10)
    print(f"\n{'check':<{width}}  {'observed':>10}  rel  {'target':>10}  replicates")
    for r in rows:
        reps = "exact" if r["replicates"] is None else str(r["replicates"])
        print(f"{r['check']:<{width}}  {r['observed']:>10.5g}  {r['relation']:<3}  {r['target']:>10.5g}  {reps}")
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
