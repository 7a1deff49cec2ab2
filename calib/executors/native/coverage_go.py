"""x's line coverage for Go: ``go tool cover`` source instrumentation, read back in the build sandbox.

Go 1.19 (Debian bookworm's golang-go) has no ``go build -cover``; ``go tool cover`` (every Go version)
rewrites a file with a counter per block of statements. How one measurement goes (docs/native-executors.md,
"Go"):

1. x's coverage build (:data:`GO_COVERAGE`'s ``build_argv``, build sandbox): ``go tool cover -mode=count
   -var=calibCover`` instruments ``function.go`` (x and what it needs of its file, :func:`.go.prepare_go`)
   into ``cov/function.go``; that copy is built with the harness and ``cover.go``, whose ``calibCounts``
   gives the harness a copy of ``calibCover.Count``; calib's report program ``report.go`` is built
   alone next to it;
2. that build runs on the input states x is judged on (one process per input, run sandbox); after its
   input the harness adds the counters (little-endian uint32s, hex) to the record as ``"cov"``;
3. the report program runs in the build sandbox on every copy (:func:`report_argv`): it reads the block
   table from ``cov/function.go`` and the statements of each function of ``function.go`` (``go/ast``)
   and prints, per function, the lines on which a statement starts inside a block, and whether one ran;
4. :func:`read_go_report` keeps x's own function (by name and receiver, where the template put x's source)
   and turns it into a :class:`LineCoverage`, or a reason (never an exception).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import subprocess
from typing import Any

from calib.executors.native.coverage import PLACEHOLDER, REPORT_BYTES, LineCoverage, line_coverage
from calib.executors.native.language import HARNESS_ROOT, Coverage, Tools
from calib.executors.native.types import Signature
from calib.executors.native.warm import Warm, digest

__all__ = ["COUNT_NAME", "GO_COVERAGE", "cover_build", "locate_cover", "read_go_each", "read_go_report",
           "report_argv", "x_lines", "GO_WARM", "go_version"]

#: The file name of each copy of the counters the host writes for the report.
COUNT_NAME = "cover.counts"

# Build sandbox, in x's coverage build directory: the cover tool's copy of function.go in cov/ with the
# harness and cover.go (the counters), built as prog; the report program built alone, alongside.
_BUILD = r"""set -e
cd "$1"
mkdir cov
cp main.go cover.go cov/
if [ -n "${CALIB_WARM:-}" ] && [ -x "$CALIB_WARM/report" ]; then
  cp "$CALIB_WARM/report" report & report=$!
else
  "$2" build -o report report.go & report=$!
fi
"$3" -mode=count -var=calibCover -o cov/function.go function.go
"$2" build -o prog cov/main.go cov/function.go cov/cover.go
wait "$report"
"""


def locate_cover(go: str) -> str | None:
    """The cover tool of the Go installation whose ``go`` is at ``go`` (resolved path: ``<GOROOT>/bin/go``
    gives ``<GOROOT>/pkg/tool/<os>_<arch>/cover``), or None."""
    root = os.path.dirname(os.path.dirname(go))
    found = sorted(glob.glob(os.path.join(root, "pkg", "tool", "*", "cover")))
    return os.path.realpath(found[0]) if found else None


def cover_build(tools: Tools, build: str) -> list[str]:
    """x's coverage build (build profile; ``build`` as the process sees it)."""
    return [tools.exe["sh"], "-c", _BUILD, "calib-go-cover", build, tools.exe["go"], tools.exe["cover"]]


def report_argv(tools: Tools, build: str, copies: str, scratch: str) -> list[str]:
    """The report command (build profile): calib's report program from x's coverage build."""
    return [f"{build}/report", build, copies]


def x_lines(function: str) -> tuple[int, int]:
    """The first and last line of ``function.go`` holding x's source: the template's placeholder line holds
    the imports, x starts on the next (:func:`calib.executors.native.go.prepare_go`)."""
    template = (HARNESS_ROOT / "go" / "function.go").read_text(encoding="utf-8")
    first = template.split(PLACEHOLDER)[0].count("\n") + 2
    return first, first + function.count("\n")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_go_each(raw: bytes, name: str, recv: str, span: tuple[int, int]
                 ) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    """From the report program's output ``raw``: the executable lines of the function ``name`` (a method of
    ``recv``; "" for a function) declared within ``span`` (lines of ``function.go``) and, per copy in copy
    order, those it reached, as x's lines (1 = x's first); or why they cannot be read."""
    label = f"{recv}.{name}" if recv else name
    if len(raw) >= REPORT_BYTES:
        return f"the coverage report is over {REPORT_BYTES} bytes"
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return "the coverage report is not JSON"
    if not isinstance(doc, dict) or not isinstance(doc.get("funcs"), list):
        return "the coverage report has no list of functions"
    first, last = span
    entries = []
    for entry in doc["funcs"]:
        if not isinstance(entry, dict) or entry.get("name") != name or entry.get("recv") != recv:
            continue
        start, end = _int(entry.get("start")), _int(entry.get("end"))
        if start is not None and end is not None and first <= start <= end <= last:
            entries.append(entry)
    if len(entries) != 1:
        return f"the coverage report has no function {label} in lines {first}-{last} of function.go"
    lines, reached = entries[0].get("lines"), entries[0].get("reached")
    if not isinstance(lines, list) or not isinstance(reached, list) or not all(isinstance(r, list) for r in reached):
        return "malformed line record in the coverage report"
    executable = {_int(n) for n in lines}
    if None in executable or not all(first <= n <= last for n in executable if n is not None):
        return "malformed line record in the coverage report"
    parts = []
    for part in reached:
        got = {_int(n) for n in part}
        if not got <= executable:
            return "malformed line record in the coverage report"
        parts.append(frozenset(n - first + 1 for n in got if n is not None))
    if not executable:
        return f"the coverage report lists no executable line of {label}"
    return frozenset(n - first + 1 for n in executable if n is not None), parts


def read_go_report(raw: bytes, name: str, recv: str, span: tuple[int, int]) -> LineCoverage | str:
    """x's line coverage from the report program's output (:func:`read_go_each`): a line is executed when
    any copy reached it."""
    got = read_go_each(raw, name, recv, span)
    if isinstance(got, str):
        return got
    return line_coverage(got[0], frozenset().union(*got[1]))


def _linkname(function: str, sig: Signature) -> str:
    if any("//go:linkname" in text for text in [function, *(d.text for d in getattr(sig, "decls", ()))]):
        return "x's file uses //go:linkname, through which it could write its own coverage counters"
    return ""


def _read(raw: bytes, function: str, sig: Signature) -> LineCoverage | str:
    return _linkname(function, sig) or read_go_report(raw, sig.name, getattr(sig, "recv", ""), x_lines(function))


def _per_copy(raw: bytes, function: str, sig: Signature) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    return _linkname(function, sig) or read_go_each(raw, sig.name, getattr(sig, "recv", ""), x_lines(function))


def _missing(tools: Tools) -> str:
    if "cover" not in tools.exe:
        return "go tool cover is not installed (apt-get install golang-go)"
    return "" if "sh" in tools.exe else "sh is not installed (apt-get install dash)"


#: The Go kit (:class:`calib.executors.native.language.Coverage`).
GO_COVERAGE = Coverage(build_argv=cover_build, report_argv=report_argv, read=_read, per_copy=_per_copy,
                       count_name=COUNT_NAME, missing=_missing)


# The shared build directory (calib/executors/native/warm.py): the report program, built once; x's coverage
# build copies it (and builds it itself when there is none).
_WARM = r"""set -e
cd "$1"
"$2" build -o report report.go
"""


def _report_source() -> dict[str, str]:
    return {"report.go": (HARNESS_ROOT / "go" / "report.go").read_text(encoding="utf-8")}


@functools.cache
def go_version(go: str) -> str:
    """What ``go version`` prints (``go version go1.19.8 linux/amd64``), or "" when it cannot run."""
    try:
        done = subprocess.run([go, "version"], capture_output=True, text=True, timeout=30, check=False,
                              env={**os.environ, "GOTOOLCHAIN": "local"})
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


#: The Go recipe for the shared build directory: the report program.
GO_WARM = Warm(key=lambda tools: digest(tools.exe["go"], go_version(tools.exe["go"]), *_report_source().values()),
               files=_report_source,
               argv=lambda tools, where: [tools.exe["sh"], "-c", _WARM, "calib-go-warm", where, tools.exe["go"]])
