"""bubblewrap: the process sandbox every untrusted execution runs in (DESIGN.md, "Execution semantics").

Each batch is a fresh ``bwrap`` process with: no network and no other namespaces shared (user, PID,
IPC, UTS, cgroup, network), no capabilities, a read-only view of the system (``/usr``, the Python
installation, the harness, and any import paths the user names) and nothing else of the host — no home
directories, no run directory, no project; a private ``/tmp`` and working directory ``/work`` (tmpfs of
bounded size); a cleared environment with ``PYTHONHASHSEED=0``. Limits: CPU time, address space, file
size and process count (rlimits), a wall-clock timeout (the whole process group is killed), and a cap
on the bytes read back. Inside, the harness adds an audit-hook policy (no process starts, no ctypes
library loading).

``RLIMIT_NPROC`` is not enforced for root (the kernel exempts uid 0 even inside a user namespace);
there the audit-hook policy and the PID namespace (everything dies with the batch) are what stop a
fork bomb.

Without bubblewrap, :class:`Sandbox` refuses to run unless ``unsafe=True`` (``--unsafe-no-sandbox``):
then code runs as a plain child process with the same rlimits, and a warning says so on every start.
"""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from calib._exceptions import CalibError

__all__ = ["HARNESS_DIR", "Limits", "Sandbox", "SandboxRun", "SandboxUnavailable", "base_interpreter"]

HARNESS_DIR = Path(__file__).resolve().parent / "_harness"
_INSIDE_HARNESS = "/calib_harness"
_BOOT = ("import sys; sys.path.insert(0, {root!r}); from _harness.runner import main; main()")


class SandboxUnavailable(CalibError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed batch."""

    cpu_seconds: int = 60
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 64
    tmpfs_bytes: int = 64 << 20
    output_bytes: int = 32 << 20


@dataclass(frozen=True)
class SandboxRun:
    """What came back from one batch."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_exceeded: bool
    seconds: float

    @property
    def died(self) -> str | None:
        """Why the process ended early (``timeout``, ``output_limit``, ``signal SIGSEGV`` ...), else None."""
        if self.timed_out:
            return "timeout"
        if self.output_exceeded:
            return "output_limit"
        if self.returncode is not None and self.returncode < 0:
            try:
                return f"signal {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"signal {-self.returncode}"
        if self.returncode:
            return f"exit {self.returncode}"
        return None


def base_interpreter() -> str:
    """The real interpreter (not a venv or pyenv shim): its start-up is what every batch pays."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str, disable_userns: bool) -> tuple[bool, str]:
    argv = [bwrap, *_namespace_args(disable_userns), *_system_binds(), "--ro-bind", sys.base_prefix,
            sys.base_prefix, base_interpreter(), "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.decode("utf-8", "replace").strip()


def _namespace_args(disable_userns: bool) -> list[str]:
    args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", "65534", "--gid", "65534"]
    return args + (["--disable-userns"] if disable_userns else [])


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + ["--proc", "/proc", "--dev", "/dev"]


class Sandbox:
    """Runs the harness in bubblewrap (or, with ``unsafe=True`` and no bubblewrap, without it)."""

    def __init__(self, *, limits: Limits | None = None, unsafe: bool = False, bwrap: str | None = None,
                 read_only: tuple[str, ...] = ()) -> None:
        self.limits = limits or Limits()
        self.read_only = tuple(os.path.realpath(p) for p in read_only)
        found = bwrap or shutil.which("bwrap")
        self.bwrap: str | None = None
        self.disable_userns = False
        why = "bwrap is not installed (apt-get install bubblewrap)"
        if found:
            ok, why = _probe(found, True)
            if ok:
                self.bwrap, self.disable_userns = found, True
            else:
                ok, why = _probe(found, False)
                self.bwrap = found if ok else None
        if self.bwrap is None and not unsafe:
            raise SandboxUnavailable(
                f"cannot execute untrusted code: bubblewrap does not work here ({why or 'unknown error'}); "
                "install it (apt-get install bubblewrap) and allow unprivileged user namespaces, or pass "
                "--unsafe-no-sandbox to run generated code with no isolation (only on a throw-away machine)")
        self.unsafe = self.bwrap is None

    @property
    def isolated(self) -> bool:
        return not self.unsafe

    def command(self) -> list[str]:
        """The argv of one batch (the harness reads its job on stdin)."""
        python = base_interpreter()
        if self.unsafe:
            return [python, "-I", "-S", "-B", "-c", _BOOT.format(root=str(HARNESS_DIR.parent))]
        args = [self.bwrap or "bwrap", *_namespace_args(self.disable_userns), *_system_binds()]
        for path in dict.fromkeys((os.path.realpath(sys.base_prefix), *self.read_only)):
            args += ["--ro-bind", path, path]
        args += ["--ro-bind", str(HARNESS_DIR), f"{_INSIDE_HARNESS}/_harness",
                 "--size", str(self.limits.tmpfs_bytes), "--tmpfs", "/tmp",
                 "--size", str(self.limits.tmpfs_bytes), "--tmpfs", "/work", "--chdir", "/work",
                 "--clearenv", "--setenv", "PYTHONHASHSEED", "0", "--setenv", "PATH", "/usr/bin:/bin",
                 "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/work", "--setenv", "TMPDIR", "/tmp",
                 "--setenv", "PYTHONIOENCODING", "utf-8"]
        return args + [python, "-I", "-S", "-B", "-c", _BOOT.format(root=_INSIDE_HARNESS)]

    def _limit(self) -> None:  # runs in the child between fork and exec
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim.memory_bytes, lim.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_bytes, lim.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.getuid() != 0:
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes, lim.processes))

    async def run(self, job: bytes, *, wall_seconds: float) -> SandboxRun:
        """Run one batch with ``job`` on stdin; kills the whole process group at ``wall_seconds``."""
        workdir = None
        env = None
        if self.unsafe:
            warnings.warn("calib: running untrusted code WITHOUT a sandbox (--unsafe-no-sandbox)",
                          RuntimeWarning, stacklevel=2)
            workdir = tempfile.mkdtemp(prefix="calib-unsafe-")
            os.mkdir(os.path.join(workdir, "work"))
            env = {"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir,
                   "CALIB_WORKDIR": os.path.join(workdir, "work"), "CALIB_CAPTURE": os.path.join(workdir, "fd")}
        start = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *self.command(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, preexec_fn=self._limit, start_new_session=True, cwd=workdir,
            env=env)
        out, err = bytearray(), bytearray()
        exceeded = timed_out = False

        async def pump(stream: asyncio.StreamReader, sink: bytearray, cap: int) -> None:
            nonlocal exceeded
            while chunk := await stream.read(1 << 16):
                if len(sink) + len(chunk) > cap:
                    sink.extend(chunk[: cap - len(sink)])
                    if sink is out:
                        exceeded = True
                        _kill(proc)
                    continue
                sink.extend(chunk)

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(job)
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass

        assert proc.stdout is not None and proc.stderr is not None
        tasks = asyncio.gather(feed(), pump(proc.stdout, out, self.limits.output_bytes),
                               pump(proc.stderr, err, 1 << 16), proc.wait())
        try:
            await asyncio.wait_for(asyncio.shield(tasks), wall_seconds)
        except asyncio.TimeoutError:
            timed_out = True
            _kill(proc)
            await tasks
        finally:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        return SandboxRun(returncode=proc.returncode, stdout=bytes(out), stderr=bytes(err), timed_out=timed_out,
                          output_exceeded=exceeded, seconds=time.monotonic() - start)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
