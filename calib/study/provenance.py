"""The run's provenance record: what a reader needs to reproduce a study run (``manifest.json``, key ``provenance``).

:func:`collect` writes, each time the runner saves the manifest:

- ``calib``: the version and, where calib runs from a git checkout, the commit and whether the checkout
  had uncommitted changes to tracked files (``dirty``);
- ``python`` and ``platform``: the interpreter and system calib ran on;
- ``packages``: the installed version of every dependency calib declares (its extras but ``dev``);
- ``servers``: per server of the spec that this run started, what it reported about itself (model,
  revision, dtype, server version, ...; :func:`calib.servers.base.server_record`); servers a resumed run
  did not start keep the record of the run that did;
- ``executor``: for the kinds that run code, the sandbox's interpreter, ``bwrap --version``, the
  ``PYTHONHASHSEED`` the sandbox sets, and the compilers of the native languages the samples are in;
- ``seeds``: every seed of the spec by its dotted key, plus the sandbox's ``PYTHONHASHSEED``.

Every block keeps the pattern of a server record: a value that could not be learnt is null, and
``missing`` says why (``sources`` says where the others came from). Nothing here can make a study
fail: a probe that fails is recorded as missing with its error.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

from calib._version import __version__

__all__ = ["calib_source", "collect", "executor_record", "package_versions", "spec_seeds"]

#: Study kinds whose stages run code in the sandbox.
_EXECUTING_KINDS = ("functional", "probes")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_DEV_EXTRA = re.compile(r"""extra\s*==\s*["']dev["']""")


def _first_line(argv: list[str]) -> str:
    """The first non-empty line a command prints (stdout, else stderr); raises OSError/CalledProcessError."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    if not lines:
        raise OSError(f"{argv[0]} printed nothing")
    return lines[0]


def _guard(what: str, fn: Callable[[], tuple[Any, str]]) -> tuple[Any, str]:
    """``fn()``, or ``(None, reason)`` when it raises: no probe of the environment may fail a study."""
    try:
        return fn()
    except (OSError, subprocess.SubprocessError, ValueError, RuntimeError) as exc:
        return None, f"{what} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def _block(facts: dict[str, tuple[Any, str]], **extra: Any) -> dict[str, Any]:
    """Values with ``sources`` (where each came from) and ``missing`` (why each null one is null)."""
    out: dict[str, Any] = {}
    sources: dict[str, str] = {}
    missing: dict[str, str] = {}
    for key, (value, note) in facts.items():
        out[key] = value
        (missing if value is None else sources)[key] = note
    return {**out, **extra, "sources": sources, "missing": missing}


# --- calib and packages ---------------------------------------------------------------------------
def calib_source() -> dict[str, Any]:
    """calib's version, and its commit where the package is a git checkout (never failing when not)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()

    def commit() -> tuple[Any, str]:
        if not (root / ".git").exists():
            return None, "calib is not run from a git checkout (an installed package): its version identifies it"
        if shutil.which("git") is None:
            return None, "calib runs from a git checkout but git is not installed"
        if Path(git("rev-parse", "--show-toplevel")).resolve() != root:
            return None, f"{root} is not the top of the git checkout it lies in"
        return git("rev-parse", "HEAD"), "git rev-parse HEAD"

    head, note = _guard("git", commit)
    dirty: tuple[Any, str] = (None, "no commit")
    if head is not None:
        dirty = _guard("git status", lambda: (bool(git("status", "--porcelain", "--untracked-files=no")),
                                              "git status --porcelain --untracked-files=no"))
    return _block({"version": (__version__, "importlib.metadata"), "commit": (head, note), "dirty": dirty},
                  root=str(root))


def package_versions() -> dict[str, Any]:
    """The installed version of each dependency calib declares (extras included, ``dev`` left out)."""
    names: list[str] = []
    for line in requires("calib") or []:
        match = _REQUIREMENT.match(line)
        if match and not _DEV_EXTRA.search(line) and match.group(1) not in names:
            names.append(match.group(1))
    facts: dict[str, tuple[Any, str]] = {}
    for name in sorted(names, key=str.lower):
        try:
            facts[name] = (version(name), "importlib.metadata")
        except PackageNotFoundError:
            facts[name] = (None, "not installed (an optional extra)")
    block = _block(facts)
    return {"versions": {k: block[k] for k in facts}, "missing": block["missing"]}


# --- executor ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _toolchain(language: str) -> dict[str, Any]:
    """``--version`` first lines of a native language's tools (cached: javac starts a JVM)."""
    from calib.executors.native import LANGUAGES

    lang = LANGUAGES.get(language)
    if lang is None:
        return {"missing": f"calib has no native executor for {language!r}"}
    tools = lang.find_tools()
    if tools is None:
        return {"missing": f"{lang.compiler} is not installed (install {lang.package})"}
    out: dict[str, Any] = {}
    for role, exe in sorted(tools.exe.items()):
        if role == "sh":  # the POSIX shell the build runs: it has no version to ask for
            continue
        argv = [exe, "version"] if Path(exe).name == "go" else [exe, "--version"]
        out[role], why = _guard(f"{exe} --version", lambda argv=argv: (_first_line(argv), ""))
        if out[role] is None:
            out.setdefault("missing_tools", {})[role] = why
        out.setdefault("paths", {})[role] = exe
    return out


@functools.lru_cache(maxsize=2)
def _sandbox_facts() -> dict[str, tuple[Any, str]]:
    """The sandbox's interpreter version, bwrap's version and the PYTHONHASHSEED of its command line."""
    from calib.executors.sandbox import Sandbox, base_interpreter

    python = base_interpreter()
    facts: dict[str, tuple[Any, str]] = {"python_executable": (python, "the interpreter the sandbox starts")}
    facts["python"] = _guard("the sandbox interpreter", lambda: (
        _first_line([python, "-S", "-c", "import platform; print(platform.python_version())"]),
        f"{python} -S -c 'print(platform.python_version())'"))
    sandbox = Sandbox(unsafe=True, fork_server=False)  # unsafe: record, never refuse, where bwrap cannot run
    if sandbox.bwrap is None:
        why = "bubblewrap is not installed or cannot run here: code ran unsandboxed (unsafe_no_sandbox)"
        facts["bwrap"] = (None, why)
        facts["pythonhashseed"] = (None, why)
        return facts
    facts["bwrap"] = _guard("bwrap --version", lambda: (_first_line([sandbox.bwrap, "--version"]),
                                                        f"{sandbox.bwrap} --version"))
    argv = sandbox.command()
    seeds = [argv[i + 2] for i in range(len(argv) - 2) if argv[i] == "--setenv" and argv[i + 1] == "PYTHONHASHSEED"]
    facts["pythonhashseed"] = ((seeds[-1], "the sandbox's command line (--setenv PYTHONHASHSEED)") if seeds else
                               (None, "the sandbox's command line sets no PYTHONHASHSEED"))
    return facts


def _languages(spec: Any, run: Any) -> list[str]:
    """The languages the run's samples are in (the spec's data.language before the samples table exists)."""
    if run is not None and run.has_table("samples"):
        import polars as pl

        column = pl.read_parquet(run.table_path("samples"), columns=["language"])["language"]
        found = sorted(set(column.drop_nulls().to_list()))
        if found:
            return found
    return [getattr(getattr(spec, "data", None), "language", "python") or "python"]


def executor_record(spec: Any, run: Any = None) -> dict[str, Any] | None:
    """The sandbox and toolchains of a study kind that runs code; None for the kinds that run none."""
    if spec.study.kind not in _EXECUTING_KINDS:
        return None
    try:
        facts = dict(_sandbox_facts())
    except Exception as exc:  # noqa: BLE001 - an unexpected failure of the probe is recorded, never raised
        why = f"probing the sandbox failed: {type(exc).__name__}: {exc}"
        facts = {k: (None, why) for k in ("python", "bwrap", "pythonhashseed")}
    languages = _languages(spec, run) if spec.study.kind == "functional" else ["python"]
    native = {lang: _toolchain(lang) for lang in languages if lang != "python"}
    return _block(facts, languages=languages, toolchains=native)


# --- seeds ----------------------------------------------------------------------------------------
def spec_seeds(data: Any, prefix: str = "") -> dict[str, Any]:
    """Every seed of a spec (keys ``seed`` or ``*_seed`` at any depth), by dotted key."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}{key}"
            if (key == "seed" or str(key).endswith("_seed")) and not isinstance(value, dict | list):
                out[path] = value
            else:
                out.update(spec_seeds(value, path + "."))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(spec_seeds(value, f"{prefix}{i}."))
    return out


# --- the record -------------------------------------------------------------------------------------
def _servers(resources: Any, previous: dict[str, Any]) -> dict[str, Any]:
    out = dict(previous)
    started = getattr(resources, "started_servers", None)
    for name, server in (started() if started is not None else {}).items():
        describe = getattr(server, "provenance", None)
        if describe is None:
            out[name] = {"kind": getattr(server, "kind", None), "sources": {},
                         "missing": {"all": "this server kind keeps no provenance record"}}
            continue
        try:
            out[name] = describe()
        except Exception as exc:  # noqa: BLE001 - a third-party kind's bug must not fail the study
            out[name] = {"kind": getattr(server, "kind", None), "sources": {},
                         "missing": {"all": f"provenance() failed: {type(exc).__name__}: {exc}"}}
    return out


def collect(spec: Any, resources: Any, run: Any = None, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The provenance record of this run (``previous``: the manifest's record, whose servers are kept).

    Never raises: an unexpected failure keeps ``previous`` and says why under ``error``.
    """
    previous = previous if isinstance(previous, dict) else {}
    try:
        return _collect(spec, resources, run, previous)
    except Exception as exc:  # noqa: BLE001 - the record must not fail the study it describes
        return {**previous, "error": f"collecting provenance failed: {type(exc).__name__}: {exc}"}


def _collect(spec: Any, resources: Any, run: Any, previous: dict[str, Any]) -> dict[str, Any]:
    executor = executor_record(spec, run)
    seeds = spec_seeds(spec.public())
    if executor is not None and executor.get("pythonhashseed") is not None:
        seeds["sandbox.PYTHONHASHSEED"] = executor["pythonhashseed"]
    return {
        "calib": calib_source(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": platform.platform(),
        "packages": package_versions(),
        "servers": _servers(resources, previous.get("servers") or {}),
        "executor": executor,
        "executor_missing": None if executor is not None else f"the {spec.study.kind} study runs no code",
        "seeds": seeds,
    }
