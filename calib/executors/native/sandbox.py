"""The two bubblewrap profiles of the native executors: *build* (a compiler) and *run* (the program).

Both are composed from the pieces of :mod:`calib.executors.sandbox` (``namespace_args``: every
namespace unshared but, as root, the user namespace; no capabilities once the first lines have become
uid/gid nobody (host uid 65534 as root: writable binds are handed to it first); ``--die-with-parent``,
``--new-session``;
``system_binds``: ``/usr`` and the library directories read-only, a fresh ``/proc`` and ``/dev``) plus
a private ``/tmp`` and ``/work`` (bounded tmpfs), a read-only root and ``/dev``, and a cleared
environment. The first process inside (the sandbox's pid 1 unless calib is root) is the base Python
interpreter (read-only): it becomes nobody, makes itself non-dumpable and forks the process that sets
the rlimits and then ``execv``s the compiler or program (:func:`zygote.execute`), so limits hold before
any toolchain code runs, and nothing in the sandbox can reach it.

- *build*: no seccomp filter (compilers start processes: gcc runs cc1, as and ld; rustc runs the
  linker; go build runs compile and link; with the fork server's program, which allows that, a Java
  stack overflow in the run timed out instead: not investigated), so this profile relies on the
  namespaces and on running as nobody without capabilities. What it can reach: the system read-only, the toolchain's own
  directory read-only (the Rust sysroot), and ONE writable directory, the host temp directory holding
  this variant's source and receiving the binary (bound at ``/build``); for Go also the build cache
  (``/gocache``, see docs). No network, no host home, no project, no run directory. Compilers only read
  the source; no code of the candidate runs here (cgo, annotation processors and build scripts are off
  or absent).
- *run*: the same, and the process loads the batch's program of :func:`calib.executors.sandbox.seccomp_filter`
  (no new processes, threads allowed) before it executes the program; ``/build`` read-only, and the
  executor's limits.

Without bubblewrap and with ``unsafe_no_sandbox`` both run as plain child processes with the same
rlimits (the Python sandbox warns the same way).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from calib.executors.sandbox import Sandbox, SandboxRun, base_interpreter
from calib.executors.sandbox.bwrap import (
    HARNESS_DIR,
    INSIDE_HARNESS,
    TOPS,
    load_harness,
    namespace_args,
    parents,
    system_binds,
)
from calib.executors.sandbox.harness import NOBODY, seccomp

__all__ = ["Profile", "RunResult", "build", "inside", "run_lines"]

# The first lines without a sandbox: the rlimits (never raising a hard limit the host holds lower), exec.
_BOOT = """import os, sys
{load_harness}
from _harness import set_limits
{run}
"""
_EXEC = "set_limits({limits})\nos.execv(sys.argv[1], sys.argv[1:])"
_EACH = "from _harness.each import run_each\nrun_each(sys.argv[1:], lambda: set_limits({limits}))"
# In a sandbox: nobody with no capabilities, then this interpreter stays the sandbox's pid 1 (not
# dumpable; bubblewrap runs with --as-pid-1) and forks the process that sets the rlimits, loads the
# seccomp program (run profile) and executes the compiler or program.
_SANDBOX_BOOT = """import sys
sys.path.insert(0, {root!r})
from _harness import drop_privileges
drop_privileges()
from _harness.zygote import execute
execute({limits}, sys.argv[1:], filtered={filtered!r}, tmpfs={tmpfs!r}, each={each!r})
"""


@dataclass(frozen=True)
class Profile:
    """Limits and mounts of one sandboxed process."""

    memory_bytes: int
    cpu_seconds: int
    tmpfs_bytes: int = 64 << 20
    tmpfs_inodes: int = 8192  # the run profile's fresh tmpfs (zygote.Kernel.fresh); the build profile has none
    file_bytes: int = 64 << 20
    open_files: int = 256
    seccomp: bool = True
    ro: tuple[str, ...] = ()  # host paths bound read-only at the same path
    binds: tuple[tuple[str, str, bool], ...] = ()  # (host, inside, writable)
    env: tuple[tuple[str, str], ...] = ()
    each: bool = False  # run profile: one process per input of the job (harness/each.py)

    def rlimits(self) -> list[tuple[int, int, int]]:
        out = [(resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1),
               (resource.RLIMIT_AS, self.memory_bytes, self.memory_bytes),
               (resource.RLIMIT_FSIZE, self.file_bytes, self.file_bytes),
               (resource.RLIMIT_CORE, 0, 0),
               (resource.RLIMIT_NOFILE, self.open_files, self.open_files)]
        if os.getuid() != 0:
            out.append((resource.RLIMIT_NPROC, 256, 256))
        return out


def _argv(sb: Sandbox, profile: Profile, inner: Sequence[str], seccomp_fd: int | None) -> list[str]:
    if sb.unsafe:
        run = (_EACH if profile.each else _EXEC).format(limits=repr(profile.rlimits()))
        boot = _BOOT.format(run=run, load_harness=load_harness())
        return [base_interpreter(), "-I", "-S", "-c", boot, *inner]
    tmpfs = (profile.tmpfs_bytes, profile.tmpfs_inodes) if profile.seccomp else None
    boot = _SANDBOX_BOOT.format(limits=repr(profile.rlimits()), root=INSIDE_HARNESS, filtered=profile.seccomp,
                                tmpfs=tmpfs, each=profile.each)
    # the run profile's process makes a user namespace of its own for its fresh tmpfs (zygote.execute)
    disable_userns = sb.disable_userns and not profile.seccomp
    args = [sb.bwrap or "bwrap", *namespace_args(disable_userns, pid1=True), *system_binds()]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    ro = list(dict.fromkeys((os.path.realpath(sys.base_prefix), *profile.ro)))
    args += parents(*ro, *(inside for _, inside, _ in profile.binds), f"{INSIDE_HARNESS}/_harness")
    for path in ro:
        args += ["--ro-bind", path, path]
    args += ["--ro-bind", str(HARNESS_DIR), f"{INSIDE_HARNESS}/_harness"]
    for host, inside, writable in profile.binds:
        args += ["--bind" if writable else "--ro-bind", host, inside]
    for top, size in zip(TOPS, (profile.tmpfs_bytes, 64 << 20), strict=True):
        args += ["--size", str(size), "--tmpfs", top]
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work", "--clearenv",
             "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/work",
             "--setenv", "TMPDIR", "/tmp"]
    for key, value in profile.env:
        args += ["--setenv", key, value]
    return args + [base_interpreter(), "-I", "-S", "-c", boot, *inner]


def inside(sb: Sandbox, host: str, mount: str) -> str:
    """Where a bound host directory appears to the process (the host path itself without a sandbox)."""
    return host if sb.unsafe else mount


async def _spawn(sb: Sandbox, profile: Profile, inner: Sequence[str], *, limit: int = 1 << 22
                 ) -> asyncio.subprocess.Process:
    env: dict[str, str] = {}
    if sb.unsafe:
        warnings.warn("calib: running untrusted code WITHOUT a sandbox (--unsafe-no-sandbox)", RuntimeWarning,
                      stacklevel=3)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        for key, value in profile.env:  # a mount point named in the environment is the host path here
            env[key] = next((host for host, mount, _ in profile.binds if value == mount), value)
    # run profile: bubblewrap loads the fork server's program (pid 1 forks), the child adds the batch's
    program = seccomp.program(forks=True, mounts=True) if (profile.seccomp and not sb.unsafe) else None
    if not sb.unsafe and os.geteuid() == 0:
        for host, _inside, writable in profile.binds:
            if writable:
                _hand_over(host)
    seccomp_fd = None
    try:
        if program is not None:
            seccomp_fd, write_end = os.pipe()
            try:
                os.write(write_end, program)
            finally:
                os.close(write_end)
        return await asyncio.create_subprocess_exec(
            *_argv(sb, profile, inner, seccomp_fd), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env, limit=limit,
            pass_fds=() if seccomp_fd is None else (seccomp_fd,))
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)


def _hand_over(path: str) -> None:
    """Give a writable bind's host directory (and, once, what is in it) to host uid 65534, the sandbox's
    user when calib is root."""
    if os.lstat(path).st_uid == NOBODY:
        return
    for top, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(top, name), NOBODY, NOBODY)
        os.lchown(top, NOBODY, NOBODY)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def build(sb: Sandbox, profile: Profile, inner: Sequence[str], *, wall_seconds: float,
                keep: int = 65536) -> SandboxRun:
    """Run a compiler (or gcov) in the build profile; the last ``keep`` bytes of its stdout and stderr
    come back (a stdout of ``keep`` bytes may have been longer)."""
    started = time.monotonic()
    proc = await _spawn(sb, profile, inner)
    timed_out = False
    try:
        out, err = await asyncio.wait_for(proc.communicate(b""), wall_seconds)
    except asyncio.TimeoutError:
        timed_out = True
        _kill(proc)
        out, err = await proc.communicate()
    except BaseException:
        _kill(proc)
        await proc.wait()
        raise
    return SandboxRun(returncode=proc.returncode, stdout=out[-keep:], stderr=err[-keep:], timed_out=timed_out,
                      output_exceeded=False, seconds=time.monotonic() - started, wrapped=not sb.unsafe)


@dataclass(frozen=True)
class RunResult:
    """The harness lines a run printed (JSON objects only) and, if it ended early, why."""

    lines: tuple[dict[str, Any], ...]
    died: str | None
    stderr: str


async def run_lines(sb: Sandbox, profile: Profile, inner: Sequence[str], job: Any, *, first_seconds: float,
                    line_seconds: float, output_bytes: int = 32 << 20) -> RunResult:
    """Run the program in the run profile with ``job`` (JSON) on stdin, reading one JSON line per input.

    The whole process group is killed when the first line takes longer than ``first_seconds`` (start-up
    plus one input) or any later one longer than ``line_seconds``: that input then ``timeout``s."""
    proc = await _spawn(sb, profile, inner)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    err = bytearray()

    async def feed() -> None:
        try:
            proc.stdin.write(json.dumps(job).encode())  # type: ignore[union-attr]
            await proc.stdin.drain()  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def drain() -> None:
        while chunk := await proc.stderr.read(1 << 16):  # type: ignore[union-attr]
            if len(err) < 1 << 16:
                err.extend(chunk[: (1 << 16) - len(err)])

    tasks = [asyncio.ensure_future(feed()), asyncio.ensure_future(drain())]
    lines: list[dict[str, Any]] = []
    died: str | None = None
    total = 0
    try:
        while True:
            try:
                raw = await asyncio.wait_for(proc.stdout.readline(), first_seconds if not lines else line_seconds)
            except asyncio.TimeoutError:
                died = "timeout"
                break
            except ValueError:  # a line over the stream limit
                died = "output_limit"
                break
            if not raw:
                break
            total += len(raw)
            if total > output_bytes:
                died = "output_limit"
                break
            try:
                event = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                lines.append(event)
    finally:
        if died is not None or not proc.stdout.at_eof():
            _kill(proc)
        await proc.wait()
        _kill(proc)  # anything the program left in its session
        await asyncio.gather(*tasks, return_exceptions=True)
    if died is None:
        died = SandboxRun(returncode=proc.returncode, stdout=b"", stderr=b"", timed_out=False, output_exceeded=False,
                          seconds=0.0, wrapped=not sb.unsafe).died
    return RunResult(tuple(lines), died, err.decode("utf-8", "replace"))
