"""Extraction over the running interpreter's standard library: functions kept, dropped by reason, speed.

Run: ``python benchmarks/extract.py [--min-lines 10] [--max-lines 50]``. The files are those of
:func:`calib.organism.corpus.stdlib_files` (tests and generated files left out); each is read as bytes
and cut with :func:`calib.data.extract.extract_document`, duplicates dropped across files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from calib.data.extract import Deduplicator, extract_document
from calib.organism.corpus import stdlib_files, stdlib_root


def main() -> None:
    """Print one JSON object with the counts and the throughput."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-lines", type=int, default=10)
    parser.add_argument("--max-lines", type=int, default=50)
    args = parser.parse_args()
    root = stdlib_root()
    files = stdlib_files(root)
    dedup = Deduplicator()
    kept, dropped, candidates = 0, Counter(), 0
    started = time.perf_counter()
    for path in files:
        result = extract_document(path.read_bytes(), language="python", source=str(path),
                                  path=path.relative_to(root).as_posix(), min_lines=args.min_lines,
                                  max_lines=args.max_lines, deduplicator=dedup)
        kept += len(result.functions)
        dropped.update(result.dropped)
    seconds = time.perf_counter() - started
    candidates = kept + sum(n for reason, n in dropped.items() if reason in ("too_short", "too_long", "duplicate"))
    print(json.dumps({
        "python": sys.version.split()[0],
        "root": str(root),
        "files": len(files),
        "functions_seen": candidates,
        "kept": kept,
        "dropped": dict(sorted(dropped.items())),
        "seconds": round(seconds, 2),
        "files_per_s": round(len(files) / seconds, 1),
        "functions_per_s": round(candidates / seconds, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
