"""Whether two run directories of the same study hold the same results: every table row for row, every summary number.

Used to check that a refactoring changed no behaviour: run a study before and after the change
(``calib study studies/NAME.toml --run-dir BEFORE --fresh``, then again into AFTER) and compare.

- every Parquet file under either run directory (``tables/*.parquet`` and any other): present in both,
  equal as data frames (polars ``DataFrame.equals``: same columns, dtypes and rows in the same order,
  nulls equal) and, where the bytes are the same too, said so (Parquet bytes also hold metadata such
  as a stage's fingerprint, so a byte difference alone is reported but is not a failure);
- ``report/summary.json``: every value equal, except the keys that record when and where the run
  happened (timings, the run record, provenance, versions), listed in :data:`IGNORED`.

Two options make runs written in other places, or by a version before a documented summary rename,
comparable without hiding anything else:

- ``--path OLD=NEW`` (repeatable): every string value (table cells and summary values) of BEFORE has OLD
  replaced by NEW before comparing — e.g. the organism cache folder the two runs' model paths name;
- ``--summary-renames`` reads the table of docs/report.md "Summary versions" (version 1 key -> version 2
  key) and renames BEFORE's summary keys accordingly (``summary_version`` itself is then not compared).

Prints one verdict line per compared item and exits 1 on any difference (2 on bad arguments).

    python benchmarks/compare_runs_identical.py BEFORE AFTER [--path OLD=NEW ...] [--summary-renames]
"""

from __future__ import annotations

import argparse
import json
import math
import re
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


#: docs/report.md, relative to this file: the documented summary renames.
REPORT_DOC = Path(__file__).resolve().parent.parent / "docs" / "report.md"


def _replace(value: Any, paths: list[tuple[str, str]]) -> Any:
    """``value`` with every OLD of ``paths`` replaced by NEW in its strings (at any depth)."""
    if isinstance(value, str):
        for old, new in paths:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: _replace(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, paths) for v in value]
    return value


def _replace_frame(frame: pl.DataFrame, paths: list[tuple[str, str]]) -> pl.DataFrame:
    if not paths:
        return frame
    columns = []
    for name, dtype in frame.schema.items():
        column = pl.col(name)
        if dtype == pl.String:
            for old, new in paths:
                column = column.str.replace_all(old, new, literal=True)
        columns.append(column.alias(name))
    return frame.select(columns)


def documented_renames(doc: Path = REPORT_DOC) -> list[tuple[list[str], str]]:
    """(the version 1 key's path as parts, the version 2 key's last part) from docs/report.md "Summary versions"."""
    text = doc.read_text(encoding="utf-8").split("### Summary versions", 1)[1]
    text = text.split("| version 1 key |", 1)[1].split("\n\n", 1)[0]  # the section's own table
    out = []
    for old, new in re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", text, flags=re.MULTILINE):
        out.append((old.split("."), new.split(".")[-1]))
    return out


def _rename(value: Any, parts: list[str], new: str) -> None:
    """Rename the key at ``parts`` (``name[]`` walks every element of a list) to ``new``, in place."""
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = value.get(head[:-2]) if isinstance(value, dict) else None
        for item in items if isinstance(items, list) else []:
            _rename(item, rest, new)
        return
    if not isinstance(value, dict) or head not in value:
        return
    if rest:
        _rename(value[head], rest, new)
    else:
        value[new] = value.pop(head)


def compare_tables(before: Path, after: Path, paths: list[tuple[str, str]] | None = None
                   ) -> list[tuple[str, bool, str]]:
    """(name, same, note) for every Parquet file under either run directory (BEFORE's strings mapped by ``paths``)."""
    out = []
    for name in sorted(_parquets(before) | _parquets(after)):
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            out.append((name, False, "only in " + ("AFTER" if not a.exists() else "BEFORE")))
            continue
        fa, fb = _replace_frame(pl.read_parquet(a), paths or []), pl.read_parquet(b)
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


def compare_summary(before: Path, after: Path, paths: list[tuple[str, str]] | None = None,
                    renames: bool = False) -> tuple[bool, list[str]]:
    """Whether report/summary.json says the same in both (ignoring :data:`IGNORED`), and the differences."""
    a, b = before / "report" / "summary.json", after / "report" / "summary.json"
    if not a.exists() and not b.exists():
        return True, ["no summary.json in either"]
    if not a.exists() or not b.exists():
        return False, ["summary.json only in " + ("AFTER" if not a.exists() else "BEFORE")]
    found: list[str] = []
    old, new = _replace(json.loads(a.read_text()), paths or []), json.loads(b.read_text())
    if renames:
        for parts, name in documented_renames():
            _rename(old, parts, name)
        for side in (old, new):
            side.pop("summary_version", None)
    _diff(old, new, "", found)
    return not found, found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Whether two run directories hold the same results.")
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--path", action="append", default=[], metavar="OLD=NEW",
                        help="replace OLD by NEW in BEFORE's strings first (repeatable)")
    parser.add_argument("--summary-renames", action="store_true",
                        help="apply docs/report.md's documented summary renames to BEFORE's summary")
    args = parser.parse_args(argv)
    if any("=" not in p for p in args.path):
        parser.error("--path takes OLD=NEW")
    paths = [tuple(p.split("=", 1)) for p in args.path]
    for root in (args.before, args.after):
        if not root.is_dir():
            print(f"{root}: not a folder", file=sys.stderr)
            return 2
    ok = True
    for name, same, note in compare_tables(args.before, args.after, paths):
        ok &= same
        print(f"{'SAME' if same else 'DIFF'}  {name}: {note}")
    same, found = compare_summary(args.before, args.after, paths, args.summary_renames)
    ok &= same
    print(f"{'SAME' if same else 'DIFF'}  report/summary.json" + ("" if same else f": {len(found)} difference(s)"))
    for line in found[:50]:
        print(f"      {line}")
    print("identical" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
