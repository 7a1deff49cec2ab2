"""Line coverage of x: what every language shares (the copies of the counts), and C and C++'s kit (a
``gcc --coverage`` build of x, gcov run in the build sandbox).

Every language (:class:`calib.executors.native.language.Coverage`): each input's record carries a copy of
that input's counts (hex ``"cov"``); the host keeps every copy (:func:`copies_of`) and writes them,
unread, into a fresh directory of its own (:func:`write_copies`) for the language's report command.

How one C or C++ measurement goes (docs/native-executors.md, "Validity and line coverage"):

1. x (not the candidates) is built a second time, its own translation unit at ``-O0 --coverage`` and the
   harness with ``-DCALIB_COVERAGE`` (after its input libgcov writes the counts to the ``.gcda`` file);
2. that build runs on the input states x is judged on, one process per input, in the run sandbox as any
   run (no writable host directory): libgcov writes ``function.gcda`` into the process's own bounded
   ``/tmp`` (``GCOV_PREFIX``) and the input's record carries a copy (hex);
3. gcov reads the ``.gcno`` with each copy **inside the build sandbox** (:func:`gcov_argv`; the copies come
   from a process running untrusted code) and prints one JSON report per copy on stdout;
4. the host reads only what it needs of the reports, defensively (:func:`read_gcov`): the lines of x's own
   function in its unit (``function.c``/``function.cpp``), found by x's name and the line span where the
   harness placed x (:func:`x_span`), a line counting as reached when any copy reached it. Anything
   missing or malformed gives a reason, never an exception.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from calib.executors.native.language import COUNTS_BYTES, HARNESS_ROOT, Coverage, Tools, split_build
from calib.executors.native.types import LineCoverage, Signature

__all__ = ["GCOV_OUTPUT_BYTES", "PLACEHOLDER", "REPORT_BYTES", "LineCoverage", "copies_of", "copy_of", "gcov_argv",
           "gcov_coverage", "gcov_env", "line_coverage", "locate_gcov", "read_gcov", "read_gcov_each", "write_copies",
           "x_span"]

#: The most report output read back; a longer report makes coverage unavailable for the sample.
REPORT_BYTES = GCOV_OUTPUT_BYTES = 8 << 20
PLACEHOLDER = "/*@CALIB_FUNCTION@*/"

# Inside the build sandbox: for each process's copy of the counts (p0, p1, ...; a directory without one
# stands for no process), the .gcno and the copy side by side in the scratch directory, then gcov's JSON
# report of the function's own unit on stdout (relative sources only: not the system headers).
_GCOV = r"""set -e
for d in "$2"/p*; do
  w="$5/${d##*/}"
  mkdir "$w"
  cp "$1/$3.gcno" "$w/"
  if [ -f "$d/$3.gcda" ]; then cp "$d/$3.gcda" "$w/"; fi
  (cd "$w" && "$4" --json-format --stdout --relative-only "$3.gcda")
done
"""


def locate_gcov(compiler: str | None) -> str | None:
    """gcov matching ``compiler`` (its resolved path, e.g. ``x86_64-linux-gnu-gcc-12`` gives
    ``x86_64-linux-gnu-gcov-12``), else ``gcov``, looked up on ``PATH``; None when absent."""
    names = []
    if compiler:
        base = os.path.basename(compiler)
        for driver in ("g++", "gcc"):
            if driver in base:
                names.append(base.replace(driver, "gcov"))
                break
    for name in (*names, "gcov"):
        found = shutil.which(name)
        if found:
            return os.path.realpath(found)
    return None


def gcov_env(build: str, prefix: str) -> tuple[tuple[str, str], ...]:
    """The run's environment for the coverage build at ``build`` (the path the process sees): libgcov
    writes ``<build>/function.gcda`` as ``<prefix>/function.gcda``, where the harness reads it back."""
    strip = len(PurePosixPath(build).parts) - 1
    return (("GCOV_PREFIX", prefix), ("GCOV_PREFIX_STRIP", str(strip)))


def copy_of(event: dict[str, Any]) -> bytes | None:
    """The copy of the counts one record carries (hex ``"cov"`` of at most :data:`COUNTS_BYTES`), or None."""
    text = event.get("cov")
    if isinstance(text, str) and len(text) <= 2 * COUNTS_BYTES:
        try:
            return bytes.fromhex(text)
        except ValueError:
            return None
    return None


def copies_of(events: list[dict[str, Any]]) -> list[bytes]:
    """Every copy of the counts among a process's records (:func:`copy_of`); anything else is skipped."""
    return [data for data in map(copy_of, events) if data is not None]


def write_copies(directory: str, copies: list[bytes], name: str) -> None:
    """Each copy as ``<directory>/p<kkkk>/<name>`` (``p0000``, ``p0001``, ...: all new, in copy order when
    globbed; ``p0000`` empty when there is no copy)."""
    os.mkdir(directory, 0o755)
    for k, data in enumerate(copies or [None]):
        folder = os.path.join(directory, f"p{k:04d}")  # in copy order when globbed
        os.mkdir(folder, 0o755)
        if data is not None:
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(data)


def gcov_argv(tools: Tools, build: str, gcda: str, unit: str, scratch: str) -> list[str]:
    """The gcov command (build profile; paths as the process sees them): ``build`` holds the ``.gcno``,
    ``gcda`` the copies (:func:`write_copies`), ``scratch`` is writable."""
    return [tools.exe["sh"], "-c", _GCOV, "calib-gcov", build, gcda, PurePosixPath(unit).stem, tools.exe["gcov"],
            scratch]


def x_span(language: str, unit: str, prepare: Callable[[str, Signature], str], function: str,
           sig: Signature) -> tuple[int, int]:
    """The first and last line of ``unit`` (``function.c``/``function.cpp``) holding x's source (as the
    harness template places it: the placeholder's line, then x's lines)."""
    template = (HARNESS_ROOT / language / unit).read_text(encoding="utf-8")
    first = template.split(PLACEHOLDER)[0].count("\n") + 1
    return first, first + prepare(function, sig).count("\n")


def gcov_coverage(language: str, package: str, unit: str, cc: str, kinds: str, libs: str, flags: list[str],
                  prepare: Callable[[str, Signature], str]) -> Coverage:
    """The C or C++ kit: x's unit at ``-O0 --coverage`` (:func:`split_build`), gcov in the build sandbox."""
    ext = unit.rsplit(".", 1)[1]
    stem = PurePosixPath(unit).stem

    def read(raw: bytes, function: str, sig: Signature) -> LineCoverage | str:
        return read_gcov(raw, unit, sig.name, x_span(language, unit, prepare, function, sig))

    def per_copy(raw: bytes, function: str, sig: Signature) -> tuple[frozenset[int], list[frozenset[int]]] | str:
        return read_gcov_each(raw, unit, sig.name, x_span(language, unit, prepare, function, sig))

    return Coverage(
        build_argv=lambda tools, build: split_build(tools, build, cc, ext, kinds, libs, flags, coverage=True),
        report_argv=lambda tools, build, copies, scratch: gcov_argv(tools, build, copies, unit, scratch),
        read=read, per_copy=per_copy, count_name=f"{stem}.gcda",
        missing=lambda tools: "" if "gcov" in tools.exe else f"gcov is not installed (apt-get install {package})",
        run_env=gcov_env)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _base_name(entry: dict[str, Any]) -> str:
    """A function's name without parameters or scope (``ns::f(int)`` gives ``f``)."""
    name = entry.get("demangled_name")
    if not isinstance(name, str):
        name = entry.get("name")
    if not isinstance(name, str):
        return ""
    # an ABI tag (``label[abi:cxx11](int)``: a function returning std::string) is not part of the name
    return re.sub(r"\[abi:[^\]]*\]", "", name.split("(", 1)[0]).rsplit("::", 1)[-1].strip()


def read_gcov_each(raw: bytes, unit: str, name: str, span: tuple[int, int]
                   ) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    """From gcov's JSON reports ``raw`` (one per copy, in copy order), x's executable lines and the lines
    each copy reached, as x's lines (1 = x's first line), counting only the function named ``name`` that
    starts within ``span`` (lines of ``unit``); or why they cannot be read."""
    if len(raw) >= GCOV_OUTPUT_BYTES:
        return f"gcov's report is over {GCOV_OUTPUT_BYTES} bytes"
    reports = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("files"), list):
            reports.append(doc)
    if not reports:
        return "no JSON report from gcov"
    executable: set[int] = set()
    each = []
    for report in reports:
        got = _lines(report, unit, name, span)
        if isinstance(got, str):
            return got
        executable |= got[0]
        each.append(frozenset(n - span[0] + 1 for n in got[1]))
    return frozenset(n - span[0] + 1 for n in executable), each


def line_coverage(executable: frozenset[int], executed: frozenset[int]) -> LineCoverage:
    """The :class:`LineCoverage` of x's ``executable`` lines of which ``executed`` were reached."""
    reached = executed & executable
    return LineCoverage(len(reached) / len(executable) if executable else 0.0, len(executable), len(reached),
                        tuple(sorted(executable - reached)))


def read_gcov(raw: bytes, unit: str, name: str, span: tuple[int, int]) -> LineCoverage | str:
    """x's line coverage from gcov's JSON report ``raw``, counting only the lines of the function named
    ``name`` that starts within ``span`` (lines of ``unit``); or why it cannot be read."""
    got = read_gcov_each(raw, unit, name, span)
    if isinstance(got, str):
        return got
    return line_coverage(got[0], frozenset().union(*got[1]))


def _lines(report: dict[str, Any], unit: str, name: str, span: tuple[int, int]) -> tuple[set[int], set[int]] | str:
    """x's executable lines and those reached, in one report; or what is wrong with it."""
    entry = next((f for f in report["files"] if isinstance(f, dict) and f.get("file") == unit), None)
    if entry is None or not isinstance(entry.get("functions"), list) or not isinstance(entry.get("lines"), list):
        return f"gcov's report has no functions and lines for {unit}"
    first, last = span
    spans = []
    for fn in entry["functions"]:
        if not isinstance(fn, dict) or _base_name(fn) != name:
            continue
        start, end = _int(fn.get("start_line")), _int(fn.get("end_line"))
        if start is not None and end is not None and first <= start <= end <= last:
            spans.append((start, end))
    if not spans:
        return f"gcov's report has no function {name} in lines {first}-{last} of {unit}"
    start, end = min(s for s, _ in spans), max(e for _, e in spans)  # x and any lambda inside it
    executable: set[int] = set()
    executed: set[int] = set()
    for item in entry["lines"]:
        number = _int(item.get("line_number")) if isinstance(item, dict) else None
        count = _int(item.get("count")) if isinstance(item, dict) else None
        if number is None or count is None or count < 0:
            return "malformed line record in gcov's report"
        if start <= number <= end:
            executable.add(number)
            if count > 0:
                executed.add(number)
    if not executable:
        return f"gcov's report lists no executable line of {name}"
    return executable, executed
