"""Whether two run directories of the same study hold the same results: every table row for row, every summary number.

Used to check that a refactoring changed no behaviour: run a study before and after the change
(``calib study studies/NAME.toml --run-dir BEFORE --fresh``, then again into AFTER) and compare.

- every Parquet file under either run directory (``tables/*.parquet`` and any other): present in both,
  equal as data frames (polars ``DataFrame.equals``: same columns, dtypes and rows in the same order,
  nulls equal) and, where the bytes are the same too, said so (Parquet bytes also hold metadata such
  as a stage's fingerprint, so a byte difference alone is reported but is not a failure);
- ``report/summary.json``: every value equal, except the keys that record when and where the run
  happened (timings, the run record, provenance, versions), listed in :data:`IGNORED`.

Prints one verdict line per compared item and exits 1 on any difference (2 on bad arguments).

    python benchmarks/compare_runs_identical.py BEFORE AFTER
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import polars as pl

#: summary.json keys (at any depth) that say when or where a run happened, not what it found.
IGNORED = frozenset({"run_record", "provenance", "calib_version", "version", "started_at", "finished_at",
                     "seconds", "elapsed", "duration", "generated_at", "timings", "wall_seconds", "root",
                     "run_dir", "cache_dir", "path"})


def _parquets(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def compare_tables(before: Path, after: Path) -> list[tuple[str, bool, str]]:
    """(name, same, note) for every Parquet file under either run directory."""
    out = []
    for name in sorted(_parquets(before) | _parquets(after)):
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            out.append((name, False, "only in " + ("AFTER" if not a.exists() else "BEFORE")))
            continue
        fa, fb = pl.read_parquet(a), pl.read_parquet(b)
        if fa.schema != fb.schema:
            out.append((name, False, f"schemas differ: {dict(fa.schema)} vs {dict(fb.schema)}"))
        elif fa.height != fb.height:
            out.append((name, False, f"{fa.height} rows vs {fb.height}"))
        elif not fa.equals(fb):
            out.append((name, False, f"{fa.height} rows, same schema, values differ"))
        else:
            same_bytes = a.read_bytes() == b.read_bytes()
            out.append((name, True, f"{fa.height} rows equal" + ("; bytes identical" if same_bytes
                                                                else "; bytes differ (metadata)")))
    return out


def _diff(a: Any, b: Any, path: str, found: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key in IGNORED:
                continue
            where = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                found.append(f"{where}: only in {'AFTER' if key not in a else 'BEFORE'}")
            else:
                _diff(a[key], b[key], where, found)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append(f"{path}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", found)
    elif isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return
    elif a != b or type(a) is not type(b):
        found.append(f"{path}: {a!r} vs {b!r}")


def compare_summary(before: Path, after: Path) -> tuple[bool, list[str]]:
    """Whether report/summary.json says the same in both (ignoring :data:`IGNORED`), and the differences."""
    a, b = before / "report" / "summary.json", after / "report" / "summary.json"
    if not a.exists() and not b.exists():
        return True, ["no summary.json in either"]
    if not a.exists() or not b.exists():
        return False, ["summary.json only in " + ("AFTER" if not a.exists() else "BEFORE")]
    found: list[str] = []
    _diff(json.loads(a.read_text()), json.loads(b.read_text()), "", found)
    return not found, found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    before, after = Path(argv[0]), Path(argv[1])
    for root in (before, after):
        if not root.is_dir():
            print(f"{root}: not a folder", file=sys.stderr)
            return 2
    ok = True
    for name, same, note in compare_tables(before, after):
        ok &= same
        print(f"{'SAME' if same else 'DIFF'}  {name}: {note}")
    same, found = compare_summary(before, after)
    ok &= same
    print(f"{'SAME' if same else 'DIFF'}  report/summary.json" + ("" if same else f": {len(found)} difference(s)"))
    for line in found[:50]:
        print(f"      {line}")
    print("identical" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
