"""What every native language is: a :class:`Language` record (parse, glue, locate the toolchain, build, run).

Each language's module (:mod:`.c`, :mod:`.cpp`, :mod:`.java`, :mod:`.rust`, :mod:`.go`) defines its
``LANGUAGE``; :mod:`.languages` collects them. Every path handed to a sandbox is the host's real path
(``os.path.realpath``): ``/etc`` is not mounted inside, so the ``/etc/alternatives`` links behind ``java``,
``javac`` and ``cc`` would dangle. The harness templates are package data under ``harness/<language>/``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib.executors.native.types import LineCoverage, Signature

__all__ = ["COUNTS_BYTES", "HARNESS_ROOT", "Coverage", "Language", "Tools", "Warm", "native_run", "split_build",
           "which_real"]

#: The harness templates, one folder per language (package data).
HARNESS_ROOT = Path(__file__).resolve().parent / "harness"


@dataclass(frozen=True)
class Tools:
    """The located toolchain: executables by role, extra read-only mounts, binds and environments."""

    exe: dict[str, str]
    ro: tuple[str, ...] = ()
    build_binds: tuple[tuple[str, str, bool], ...] = ()
    build_env: tuple[tuple[str, str], ...] = ()
    run_env: tuple[tuple[str, str], ...] = ()
    build_args: tuple[str, ...] = ()  # compiler arguments a build adds (from :attr:`Language.prepare_build`)


@dataclass(frozen=True)
class Warm:
    """A recipe for a language's shared build directory (:mod:`.warm`)."""

    key: Callable[[Tools], str]  # what the directory depends on: the toolchain, flags, harness source
    files: Callable[[], dict[str, str]]  # files written into it first (calib's own harness sources)
    argv: Callable[[Tools, str], list[str]]  # fills the directory (its path as the build sees it)


@dataclass(frozen=True)
class Coverage:
    """How one language measures x's line coverage (docs/native-executors.md, "Validity and line coverage").

    x is built a second time with ``build_argv`` (build profile, into its own directory) and run on the
    states x is judged on, in the run sandbox as any run, with ``run_env(build, tmp)`` added to its
    environment (``build``: the build directory, ``tmp``: a private writable directory, both as the
    process sees them). After each input the harness puts a copy of that input's counts (at most
    :data:`COUNTS_BYTES`, hex) in the input's record as ``"cov"``; the host keeps every copy and writes
    them, unread, as ``<copies>/p<k>/<count_name>``. ``report_argv(tools, build, copies, scratch)`` then
    runs in the *build* sandbox (the copies come from a process running untrusted code) and prints a
    report on stdout, which ``read(report, x's source, signature)`` turns into x's own
    :class:`LineCoverage`, or the reason it cannot (never an exception). ``missing(tools)`` is "" when
    the analysis tools are there, else why not with the remedy: the sample's reason is then
    ``coverage_unavailable: <that>``."""

    build_argv: Callable[[Tools, str], list[str]]
    report_argv: Callable[[Tools, str, str, str], list[str]]
    read: Callable[[bytes, str, Signature], LineCoverage | str]
    count_name: str
    missing: Callable[[Tools], str]
    run_env: Callable[[str, str], tuple[tuple[str, str], ...]] = lambda build, tmp: ()
    #: Optional: from the same report, x's executable lines and, per copy in copy order, the lines it
    #: reached (x's lines, 1 = its first). With it, x's coverage build also runs on the whole pool and the
    #: chosen inputs are those that reach the most of x (docs/native-executors.md, "Choosing inputs").
    per_copy: Callable[[bytes, str, Signature], tuple[frozenset[int], list[frozenset[int]]] | str] | None = None


#: The largest copy of one input's counts a harness sends (bytes, before hex); a longer one is dropped.
COUNTS_BYTES = 1 << 20


@dataclass(frozen=True)
class Language:
    """How one language is parsed, glued into its harness, built and run."""

    name: str
    compiler: str
    package: str
    source_name: str
    parse: Callable[[str], Signature]
    glue: Callable[[Signature], str]
    locate: Callable[[], Tools | None]
    build_argv: Callable[[Tools, str], list[str]]
    run_argv: Callable[[Tools, str, int], list[str]]
    prepare: Callable[[str, Signature], str] = lambda source, sig: source
    #: How x's line coverage is measured; None: not measured (the sample's coverage is NaN, with a warning)
    coverage: Coverage | None = None
    #: One process per input (sandbox/harness/each.py); False where the harness isolates inputs itself
    #: (Java: a class loader of its own per input)
    each: bool = True
    #: x parsed with its file's context (the rest of the file: types, helpers, imports), where the language
    #: uses it; None: x alone (:meth:`signature`)
    parse_in: Callable[[str, str], Signature] | None = None
    #: What of the file's context goes into the build, at the template's ``/*@CALIB_CONTEXT@*/`` (types the
    #: function uses, helpers, stand-ins for what cannot be built here); by default nothing
    context: Callable[[str, Signature], str] = lambda context, sig: ""
    #: What every build of the language can reuse, made once (:mod:`.warm`); None: nothing
    warm: Warm | None = None
    #: ``(sandbox, tools, signature, slots)``: what the builds of one signature need, made before them (Rust: the
    #: external crates x uses, :mod:`.rust_crates`), and the tools to build with (binds and build_args added),
    #: or why they cannot be (the sample is then ``unsupported: <that>``); None: nothing
    prepare_build: Callable[[Any, Tools, Signature, Any], Awaitable[Tools | str]] | None = None

    def signature(self, source: str, context: str = "") -> Signature:
        """x's :class:`Signature`, with its file's ``context`` where the language reads it."""
        return self.parse_in(source, context) if self.parse_in is not None else self.parse(source)
    build_memory: int = 2 << 30
    run_overhead: int = 0  # bytes of address space a run gets on top of ``memory_mb``
    startup: float = 2.0  # seconds a run may take to start before its first input

    def sources(self, function: str, sig: Signature, context: str = "") -> dict[str, str]:
        """Every file of the harness directory by the name it is built under, placeholders filled: the
        harness itself is ``source_name``; C and C++ also have the function's own translation unit
        (``function.c``/``function.cpp``) and the header both include. ``context``: x's file, of which
        :attr:`context` chooses what is built (the same for x and every candidate)."""
        body, glue = self.prepare(function, sig), self.glue(sig)
        around = self.context(context, sig) if context else ""
        out = {}
        for path in sorted((HARNESS_ROOT / self.name).iterdir()):
            name = self.source_name if path.stem == "harness" else path.name
            text = path.read_text(encoding="utf-8")
            out[name] = text.replace("/*@CALIB_CONTEXT@*/", around).replace("/*@CALIB_FUNCTION@*/", body) \
                .replace("/*@CALIB_CALL@*/", glue)
        return out

    def find_tools(self) -> Tools | None:
        return self.locate()


def which_real(name: str) -> str | None:
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


# Two translation units: the function (with its glue) and the harness. The global symbols the function's
# object defines, but calib_call, are made local before the link, so a `main`, `malloc` or `fwrite` of
# the function's own cannot replace the harness's (C++: weak ones, i.e. inline and template code, stay
# global; they are merged by the linker, and the standard headers are read before the function's macros).
# With the language's shared build directory ($CALIB_WARM, calib/executors/native/warm.py): the precompiled
# headers of the function's unit (pch/ or pch-cov/) and the harness's object, compiled once.
SPLIT_BUILD = r"""set -e
cd "$1"; cc="$2"; shift 2
pch=""
if [ -n "${{CALIB_WARM:-}}" ] && [ -d "$CALIB_WARM/pch{suffix}" ]; then pch="-I$CALIB_WARM/pch{suffix}"; fi
"$cc" "$@" {fflags} $pch -c function.{ext} -o function.o
nm -g --defined-only --format=posix function.o | grep -E '^[^ ]+ [{kinds}] ' | cut -d' ' -f1 \
  | grep -vx calib_call > local.syms || true
if [ -s local.syms ]; then objcopy --localize-symbols=local.syms function.o; fi  # objcopy 2.40 fails on none
if [ -n "${{CALIB_WARM:-}}" ] && [ -f "$CALIB_WARM/harness{suffix}.o" ]; then
  cp "$CALIB_WARM/harness{suffix}.o" harness.o
else
  "$cc" "$@" {hflags} -c main.{ext} -o harness.o
fi
extra=""  # the system libraries of the headers x's unit includes (docs/native-executors.md, "File context")
while read -r header flags; do
  if grep -q "^[[:space:]]*#[[:space:]]*include[[:space:]]*<$header" function.{ext}; then extra="$extra $flags"; fi
done <<'LIBS'
{headers}
LIBS
"$cc" function.o harness.o -o prog {libs} $extra
"""
#: A system header (or header folder) and the libraries a program including it links with; the header
#: must be installed for x to compile (a missing one makes the sample ``unsupported: external header``).
SYSTEM_LIBRARIES = (("zlib.h", "-lz"), ("openssl/", "-lssl -lcrypto"), ("sqlite3.h", "-lsqlite3"),
                    ("bzlib.h", "-lbz2"), ("lzma.h", "-llzma"), ("expat.h", "-lexpat"), ("uuid/uuid.h", "-luuid"),
                    ("readline/readline.h", "-lreadline"), ("ncurses.h", "-lncurses"), ("curses.h", "-lncurses"),
                    ("pthread.h", "-lpthread"), ("gmp.h", "-lgmp"), ("crypt.h", "-lcrypt"))


def split_build(tools: Tools, build: str, cc: str, ext: str, kinds: str, libs: str, flags: list[str], *,
                coverage: bool = False) -> list[str]:
    """The build command of a two-unit language (C, C++): a fixed shell script, its arguments apart.
    ``coverage``: x's coverage build (the function's unit at ``-O0 --coverage``, the harness writing the
    counts after each input, libgcov linked in)."""
    extra = {"fflags": "-O0 --coverage", "hflags": "-DCALIB_COVERAGE", "libs": f"{libs} --coverage",
             "suffix": "-cov"} if coverage else {"fflags": "", "hflags": "", "libs": libs, "suffix": ""}
    headers = "\n".join(f"{header} {flags}" for header, flags in SYSTEM_LIBRARIES)
    script = SPLIT_BUILD.format(ext=ext, kinds=kinds, headers=headers, **extra)
    return [tools.exe["sh"], "-c", script, "calib-build", build, tools.exe[cc], *flags]


def native_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    """The run command of a language compiled to a native program: the program itself."""
    return [f"{build}/prog"]
