"""Per-language toolchains of the native executors: where the compiler is, how to build and run.

Every path handed to a sandbox is the host's real path (``os.path.realpath``): ``/etc`` is not
mounted inside, so the ``/etc/alternatives`` links behind ``java``, ``javac`` and ``cc`` would dangle.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from calib.executors._native_c import c_glue, parse_c, prepare_c
from calib.executors._native_types import Signature

__all__ = ["HARNESS_ROOT", "LANGUAGES", "Language", "Tools", "java_etc", "rust_sysroot", "which_real"]

HARNESS_ROOT = Path(__file__).resolve().parents[2] / "executors" / "harness"


@dataclass(frozen=True)
class Tools:
    """The located toolchain: executables by role, extra read-only mounts, binds and environments."""

    exe: dict[str, str]
    ro: tuple[str, ...] = ()
    build_binds: tuple[tuple[str, str, bool], ...] = ()
    build_env: tuple[tuple[str, str], ...] = ()
    run_env: tuple[tuple[str, str], ...] = ()


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
    build_memory: int = 2 << 30
    run_overhead: int = 0  # bytes of address space a run gets on top of ``memory_mb``
    startup: float = 2.0  # seconds a run may take to start before its first input

    def sources(self, function: str, sig: Signature) -> dict[str, str]:
        """Every file of the harness directory by the name it is built under, placeholders filled: the
        harness itself is ``source_name``; C and C++ also have the function's own translation unit
        (``function.c``/``function.cpp``) and the header both include."""
        body, glue = self.prepare(function, sig), self.glue(sig)
        out = {}
        for path in sorted((HARNESS_ROOT / self.name).iterdir()):
            name = self.source_name if path.stem == "harness" else path.name
            text = path.read_text(encoding="utf-8")
            out[name] = text.replace("/*@CALIB_FUNCTION@*/", body).replace("/*@CALIB_CALL@*/", glue)
        return out

    def find_tools(self) -> Tools | None:
        return self.locate()


def which_real(name: str) -> str | None:
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


# --- C and C++ -----------------------------------------------------------------------------------------

def _locate_gcc(driver: str) -> Callable[[], Tools | None]:
    def locate() -> Tools | None:
        exe = {"cc": which_real(driver), "sh": which_real("sh"), "nm": which_real("nm"),
               "objcopy": which_real("objcopy")}
        return Tools(exe) if all(exe.values()) else None  # type: ignore[arg-type]
    return locate


# Two translation units: the function (with its glue) and the harness. The global symbols the function's
# object defines, but calib_call, are made local before the link, so a `main`, `malloc` or `fwrite` of
# the function's own cannot replace the harness's (C++: weak ones, i.e. inline and template code, stay
# global; they are merged by the linker, and the standard headers are read before the function's macros).
SPLIT_BUILD = r"""set -e
cd "$1"; cc="$2"; shift 2
"$cc" "$@" -c function.{ext} -o function.o
nm -g --defined-only --format=posix function.o | grep -E '^[^ ]+ [{kinds}] ' | cut -d' ' -f1 \
  | grep -vx calib_call > local.syms || true
objcopy --localize-symbols=local.syms function.o
"$cc" "$@" -c main.{ext} -o harness.o
"$cc" function.o harness.o -o prog {libs}
"""


def split_build(tools: Tools, build: str, cc: str, ext: str, kinds: str, libs: str, flags: list[str]) -> list[str]:
    """The build command of a two-unit language (C, C++): a fixed shell script, its arguments apart."""
    script = SPLIT_BUILD.format(ext=ext, kinds=kinds, libs=libs)
    return [tools.exe["sh"], "-c", script, "calib-build", build, tools.exe[cc], *flags]


def _c_build(tools: Tools, build: str) -> list[str]:
    return split_build(tools, build, "cc", "c", "TDBRGSVW", "-lm", ["-std=gnu11", "-O1", "-fwrapv", "-w"])


def _native_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    return [f"{build}/prog"]


LANGUAGES: dict[str, Language] = {
    "c": Language("c", "gcc", "gcc", "main.c", parse_c, c_glue, _locate_gcc("gcc"), _c_build, _native_run,
                  prepare=prepare_c),
}


def _register_optional() -> None:
    """Languages whose glue lives in their own modules (imported lazily to keep import cheap)."""
    from calib.executors import _native_more  # noqa: PLC0415

    LANGUAGES.update(_native_more.languages())


def java_etc() -> tuple[str, ...]:
    """``/etc/java-*`` directories (the JDK's ``conf`` links there on Debian)."""
    return tuple(sorted(os.path.realpath(p) for p in glob.glob("/etc/java-*") if os.path.isdir(p)))


def rust_sysroot(rustc: str) -> str | None:
    try:
        out = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out.stdout.strip()) or None


_register_optional()
