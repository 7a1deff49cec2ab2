"""The Rust, Java, Go and C++ entries of :data:`calib.executors._native_langs.LANGUAGES`."""

from __future__ import annotations

import os
import shutil

from calib.executors._native_cpp import cpp_glue, parse_cpp
from calib.executors._native_go import go_glue, parse_go
from calib.executors._native_java import java_glue, parse_java
from calib.executors._native_langs import Language, Tools, java_etc, rust_sysroot, split_build, which_real
from calib.executors._native_rust import parse_rust, rust_glue

__all__ = ["languages"]


def _locate_rust() -> Tools | None:
    # the rustup proxy (not resolved: it dispatches on its name) only to find the sysroot's real rustc
    rustc = shutil.which("rustc") or shutil.which("rustc", path=os.path.expanduser("~/.cargo/bin"))
    cc = which_real("cc")
    if not rustc or not cc:
        return None
    sysroot = rust_sysroot(rustc)
    if sysroot is None:
        return None
    return Tools({"rustc": os.path.join(sysroot, "bin", "rustc"), "cc": cc}, ro=(sysroot,))


def _rust_build(tools: Tools, build: str) -> list[str]:
    # debug build: overflow checks on (an overflow panics, as in `cargo run`), quick to compile
    return [tools.exe["rustc"], "--edition", "2021", "-C", "opt-level=1", "-C", "overflow-checks=on",
            "-C", f"linker={tools.exe['cc']}", "-C", "debuginfo=0", "-A", "warnings", "-o", f"{build}/prog",
            f"{build}/main.rs"]


def _native_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    return [f"{build}/prog"]


_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=32m",
        "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=128m", "-XX:-UsePerfData",
        "-XX:ActiveProcessorCount=1")


def _locate_java() -> Tools | None:
    java, javac = which_real("java"), which_real("javac")
    if not java or not javac:
        return None
    env = (("MALLOC_ARENA_MAX", "2"),)
    return Tools({"java": java, "javac": javac}, ro=java_etc(), build_env=env, run_env=env)


def _java_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["javac"], "-J-Xmx384m", *(f"-J{flag}" for flag in _JVM if "Tiered" not in flag), "-proc:none",
            "-nowarn", "-encoding", "UTF-8", "-d", build, f"{build}/Main.java"]


def _java_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    return [tools.exe["java"], f"-Xmx{memory_mb}m", "-Xss16m", *_JVM, "-cp", build, "Main"]


def go_cache() -> str:
    """The host directory of Go's build cache (the standard library is compiled into it once)."""
    path = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "calib", "go-build")
    os.makedirs(path, exist_ok=True)
    return path


def _locate_go() -> Tools | None:
    go = which_real("go")
    if not go:
        return None
    env = (("GOCACHE", "/gocache"), ("GOPATH", "/tmp/gopath"), ("HOME", "/tmp"), ("CGO_ENABLED", "0"),
           ("GOPROXY", "off"), ("GOFLAGS", "-mod=mod"), ("GO111MODULE", "off"), ("GOTOOLCHAIN", "local"))
    return Tools({"go": go}, build_binds=((go_cache(), "/gocache", True),), build_env=env)


def _go_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["go"], "build", "-o", f"{build}/prog", f"{build}/main.go"]


def _locate_gxx() -> Tools | None:
    exe = {"cxx": which_real("g++"), "sh": which_real("sh"), "nm": which_real("nm"), "objcopy": which_real("objcopy")}
    return Tools(exe) if all(exe.values()) else None  # type: ignore[arg-type]


def _cpp_build(tools: Tools, build: str) -> list[str]:
    # strong symbols only: weak ones (inline functions, template instances) are shared COMDAT code
    return split_build(tools, build, "cxx", "cpp", "TDBRGS", "", ["-std=gnu++17", "-O1", "-fwrapv", "-w"])


def languages() -> dict[str, Language]:
    return {
        "rust": Language("rust", "rustc", "rustc (or rustup)", "main.rs", parse_rust, rust_glue, _locate_rust,
                         _rust_build, _native_run, build_memory=8 << 30),
        "java": Language("java", "javac", "openjdk-17-jdk-headless", "Main.java", parse_java, java_glue,
                         _locate_java, _java_build, _java_run, build_memory=4 << 30, run_overhead=2 << 30,
                         startup=10.0),
        "cpp": Language("cpp", "g++", "g++", "main.cpp", parse_cpp, cpp_glue, _locate_gxx, _cpp_build, _native_run,
                        build_memory=4 << 30),
        "go": Language("go", "go", "golang-go", "main.go", parse_go, go_glue, _locate_go, _go_build, _native_run,
                       build_memory=4 << 30, run_overhead=256 << 20),
    }
