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

    def template(self) -> str:
        return (HARNESS_ROOT / self.name / f"harness.{self.source_name.rsplit('.', 1)[1]}").read_text(encoding="utf-8")

    def find_tools(self) -> Tools | None:
        return self.locate()


def which_real(name: str) -> str | None:
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


# --- C and C++ -----------------------------------------------------------------------------------------

def _locate_gcc(driver: str) -> Callable[[], Tools | None]:
    def locate() -> Tools | None:
        exe = which_real(driver)
        return Tools({"cc": exe}) if exe else None
    return locate


def _c_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["cc"], "-std=gnu11", "-O1", "-fwrapv", "-w", "-o", f"{build}/prog", f"{build}/main.c", "-lm"]


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
