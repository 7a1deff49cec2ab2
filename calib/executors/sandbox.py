"""bubblewrap: the process sandbox every untrusted execution runs in (DESIGN.md, "Execution semantics").

Each batch is a fresh ``bwrap`` process with: no network and no other namespaces shared (PID, IPC, UTS,
cgroup, network; and user, unless calib is root: then no user namespace, and the first lines switch to
host uid 65534, :func:`calib.executors._harness.drop_privileges`), no capabilities, calib's own
non-dumpable interpreter as pid 1 (``--as-pid-1``; it forks the batch, :func:`zygote.oneshot`), a
read-only view of the system (``/usr``, the Python installation, the harness, and any import paths the
user names) and nothing else of the host — no home directories, no run directory, no project; a private
``/tmp`` and working directory ``/work`` (tmpfs of bounded size and inode count, new for every batch:
:meth:`calib.executors._harness.zygote.Kernel.fresh`); a cleared environment with
``PYTHONHASHSEED=0``. Limits: CPU time, address space, file size, open files and process count (rlimits,
set by the batch's process before it reads its job), a wall-clock timeout (the whole process group
is killed), and a cap on the bytes read back. The root and ``/dev`` are read-only (both are unbounded
tmpfs otherwise), and bubblewrap itself runs with an empty environment.

A seccomp filter (x86-64 and aarch64) makes new processes impossible: ``fork``, ``vfork`` and a
``clone`` without ``CLONE_THREAD`` fail with ``EPERM`` (threads still work; ``clone3`` says ``ENOSYS``
so that the C library falls back to ``clone``), as do a few kernel interfaces no function needs
(``ptrace``, ``mount``, ``unshare``, ``bpf``, ``io_uring`` ...) or that would hold memory outside the
address-space limit (``memfd_create``, System V shared memory and message queues, inotify, growing a
socket's buffers; the open-files limit bounds how many), or that would leave state for a later batch
(extended attributes) or make the kernel signal another process (``F_SETOWN``, ``O_ASYNC`` ...;
:mod:`calib.executors._harness.seccomp`). The filter is what stops a fork bomb: as root no per-batch
``RLIMIT_NPROC`` is set (host uid 65534 is every batch's), and the harness's audit-hook policy (no
process starts, no ctypes library loading) runs in the same interpreter as the code, so it is a
convenience — a clear ``sandbox_denied`` — not a boundary.

Without bubblewrap, :class:`Sandbox` refuses to run unless ``unsafe=True`` (``--unsafe-no-sandbox``):
then code runs as a plain child process with the same rlimits, and a warning says so on every start.

By default :meth:`Sandbox.run` does not start a sandbox per batch: it hands the batch to a fork server
(:mod:`calib.executors.forkserver`), a long-lived sandbox as above whose interpreter has the harness
loaded and forks a fresh child per batch; the child sets the rlimits and loads a stricter seccomp
program of its own before the job runs. Without fork servers (``fork_server=False``,
``CALIB_FORK_SERVER=0``, or where one cannot start) each batch is a sandbox of its own.
:meth:`Sandbox.start` always starts one, with the first part of its job, and leaves its stdin open;
:meth:`Batch.finish` sends the rest (the executor starts replays while x is still explored when it
has no fork servers).
"""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

from calib._exceptions import CalibError
from calib.executors._harness import seccomp as _seccomp

__all__ = ["HARNESS_DIR", "Batch", "Limits", "Sandbox", "SandboxRun", "SandboxUnavailable", "base_interpreter",
           "seccomp_filter"]

HARNESS_DIR = Path(__file__).resolve().parent / "_harness"
_INSIDE_HARNESS = "/calib_harness"
# Not -I: isolated mode implies -E, which would ignore PYTHONHASHSEED=0 and give every batch its own
# string-hash order (set iteration would then differ between x's two runs). The environment is
# cleared anyway; -P keeps the working directory off sys.path, -s/-S keep site-packages out.
_PYTHON_FLAGS = ("-P", "-s", "-S", "-B")
# The first lines of a batch without a sandbox (``unsafe``): the rlimits (set here rather than between
# fork and exec, so that spawning needs no Python in the forked child and can use vfork: forking the
# host, a large process, cost milliseconds per batch), then the harness with the garbage collector off
# while it starts (its imports allocate much and free little; runner.main() turns it on before any code
# under test runs).
_BOOT = """import gc
gc.disable()
import sys
sys.path.insert(0, {root!r})
from _harness import set_limits
set_limits({limits})
del gc, set_limits
from _harness.runner import main
main()
"""
# A sandboxed batch's first lines: drop to nobody (before anything else), then a one-batch fork server
# that forks the batch. Not as root it is the sandbox's pid 1 (bubblewrap runs with --as-pid-1: its own
# init would be dumpable and run as the code's user); as root bubblewrap's init, host root, is.
_BATCH_BOOT = """import sys
sys.path.insert(0, {root!r})
from _harness import drop_privileges
drop_privileges()
import gc
gc.disable()
del gc, drop_privileges
from _harness.zygote import oneshot
oneshot({limits}, {keep!r}, {tmpfs!r})
"""
# A fork server's first lines: nobody, no rlimits of its own beyond no core files (each child sets the
# batch's), the collector off while the harness loads (the server freezes what it loaded), the server.
_SERVER_BOOT = """import sys
sys.path.insert(0, {root!r})
from _harness import drop_privileges
drop_privileges()
import gc
gc.disable()
import resource
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
del gc, resource, drop_privileges
from _harness.zygote import serve
serve({control_fd}, {limits}, {keep!r}, {tmpfs!r})
"""
_TOPS = ("/tmp", "/work")  # the sandbox's own writable directories (bounded tmpfs)
#: Set to 0 to start a sandbox per batch instead of forking batches from a fork server.
FORK_SERVER_ENV = "CALIB_FORK_SERVER"
_MAX_IDLE_SERVERS = 16


class SandboxUnavailable(CalibError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed batch."""

    cpu_seconds: int = 60
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 64
    open_files: int = 256
    tmpfs_bytes: int = 64 << 20
    tmpfs_inodes: int = 8192
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
    wrapped: bool = False  # run by bwrap, which exits with 128 + N when its child dies of signal N
    cpu_seconds: float | None = None  # the batch process's CPU time (known when a fork server ran it)

    @property
    def died(self) -> str | None:
        """Why the process ended early (``timeout``, ``output_limit``, ``signal SIGSEGV`` ...), else None."""
        if self.timed_out:
            return "timeout"
        if self.output_exceeded:
            return "output_limit"
        signum = None
        if self.returncode is not None and self.returncode < 0:
            signum = -self.returncode
        elif self.wrapped and self.returncode is not None and 128 < self.returncode < 128 + 65:
            signum = self.returncode - 128
        if signum is not None:
            try:
                return f"signal {signal.Signals(signum).name}"
            except ValueError:
                return f"signal {signum}"
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


def _namespace_args(disable_userns: bool, *, pid1: bool = False) -> list[str]:
    """bubblewrap's namespace and privilege options; ``pid1``: the command is the sandbox's pid 1 when
    calib is not root (bubblewrap's init would run as the code's user, dumpable).

    Not root: a user namespace where the sandbox's user, ``nobody``, is the host user. Root: no user
    namespace (it would map ``nobody`` to host root, and ``/proc/sys`` would be writable); bubblewrap
    keeps only ``CAP_CHOWN``, ``CAP_SETUID`` and ``CAP_SETGID`` for the sandbox's first lines, which give
    ``/tmp`` and ``/work`` to nobody and switch to host uid 65534, which clears them
    (:func:`calib.executors._harness.drop_privileges`)."""
    if os.geteuid() == 0:
        args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--cap-add", "CAP_CHOWN",
                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", "65534", "--gid", "65534"] + (["--disable-userns"] if disable_userns else [])
    # as root bubblewrap's own init stays host root: out of the code's reach, and it dies with bubblewrap
    # (the kernel clears a parent-death signal when the uid changes, as it does for the command as root)
    return args + (["--as-pid-1"] if pid1 and os.geteuid() != 0 else [])


def _parents(*paths: str) -> list[str]:
    """``--dir`` (mode 0755) for every directory above the mount points ``paths`` that bubblewrap would
    otherwise create with its source's mode (``/root`` 0700 above a Python under ``/root/.pyenv``: not
    searchable by nobody), skipping those inside ``/usr`` and the like."""
    args: list[str] = []
    system = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
    seen = {"/"}
    for path in paths:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if parent in seen or any(parent == top or parent.startswith(top + "/") for top in system):
                continue
            seen.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def _check_readable(path: str) -> None:
    """Refuse an import path that nobody (host uid 65534, the sandbox's user when calib is root) cannot
    list: its modules would be silently missing in the sandbox."""
    st = os.stat(path)
    if st.st_uid != 65534 and st.st_mode & 0o005 != 0o005:
        raise CalibError(f"import path {path!r} is not readable in the sandbox: calib runs as root, so sandboxed "
                         f"code runs as uid 65534, and the directory is mode {stat.S_IMODE(st.st_mode):o} (owner "
                         f"uid {st.st_uid}); make it world-readable (chmod -R o+rX {path}) or run calib as a "
                         "normal user")


def _under_tops(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in _TOPS)


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + ["--proc", "/proc", "--dev", "/dev"]


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The classic-BPF program bubblewrap loads (``--seccomp``) for a batch, or None on an architecture
    not listed (:func:`calib.executors._harness.seccomp.program`)."""
    return _seccomp.program(machine)


class Sandbox:
    """Runs the harness in bubblewrap (or, with ``unsafe=True`` and no bubblewrap, without it)."""

    def __init__(self, *, limits: Limits | None = None, unsafe: bool = False, bwrap: str | None = None,
                 read_only: tuple[str, ...] = (), fork_server: bool | None = None) -> None:
        self.limits = limits or Limits()
        self.read_only = tuple(os.path.realpath(p) for p in read_only)
        _compile_harness()
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
                + ("as root calib runs bubblewrap without a user namespace, which needs CAP_SYS_ADMIN (a "
                   "privileged container): grant it or run calib as a normal user" if os.geteuid() == 0 else
                   "install it (apt-get install bubblewrap) and allow unprivileged user namespaces")
                + ", or pass --unsafe-no-sandbox to run generated code with no isolation (only on a throw-away "
                "machine)")
        self.unsafe = self.bwrap is None
        if not self.unsafe and os.geteuid() == 0:
            for path in self.read_only:
                _check_readable(path)
        self._seccomp = seccomp_filter()
        if fork_server is None:
            fork_server = os.environ.get(FORK_SERVER_ENV, "1").strip() != "0"
        # a fork server needs the filter (its children load their own) and pidfd_open (to wait on them)
        self.forks = bool(fork_server and not self.unsafe and self._seccomp is not None
                          and hasattr(os, "pidfd_open"))
        self._idle: list[ForkServer] = []
        weakref.finalize(self, _close_servers, self._idle)

    @property
    def isolated(self) -> bool:
        return not self.unsafe

    def _rlimits(self) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) for each rlimit of a batch, applied by its process before the job: a
        hard limit the host already holds lower is kept (lowered, never raised)."""
        lim = self.limits
        out = [(resource.RLIMIT_CPU, lim.cpu_seconds, lim.cpu_seconds + 1),
               (resource.RLIMIT_AS, lim.memory_bytes, lim.memory_bytes),
               (resource.RLIMIT_FSIZE, lim.file_bytes, lim.file_bytes),
               (resource.RLIMIT_CORE, 0, 0),
               (resource.RLIMIT_NOFILE, lim.open_files, lim.open_files)]
        # not as root: nobody is the host user, whose own processes count. As root: host uid 65534, which
        # every concurrent batch shares, so no per-batch count (the seccomp filter stops new processes)
        if os.getuid() != 0:
            out.append((resource.RLIMIT_NPROC, lim.processes, lim.processes))
        return out

    def _boot(self, root: str) -> str:
        """The first lines of a batch run without a sandbox (``unsafe``)."""
        return _BOOT.format(limits=repr(tuple(self._rlimits())), root=root)

    def command(self, seccomp_fd: int | None = None, *, control_fd: int | None = None) -> list[str]:
        """The argv of one batch (the harness reads its job on stdin; the seccomp program on ``seccomp_fd``),
        or with ``control_fd`` of a fork server (:mod:`calib.executors.forkserver`) on that socket."""
        python = base_interpreter()
        limits = repr(tuple(self._rlimits()))
        if self.unsafe:
            return [python, *_PYTHON_FLAGS, "-c", self._boot(str(HARNESS_DIR.parent))]
        # import paths inside /tmp or /work are bound after those tmpfs, or they would hide them
        late = tuple(p for p in self.read_only if _under_tops(p))
        early = [p for p in dict.fromkeys((os.path.realpath(sys.base_prefix), *self.read_only)) if p not in late]
        tmpfs = (self.limits.tmpfs_bytes, self.limits.tmpfs_inodes)
        boot = (_BATCH_BOOT.format(root=_INSIDE_HARNESS, limits=limits, keep=late, tmpfs=tmpfs) if control_fd is None
                else _SERVER_BOOT.format(root=_INSIDE_HARNESS, control_fd=control_fd, limits=limits, keep=late,
                                         tmpfs=tmpfs))
        # each batch makes a user namespace of its own for its fresh tmpfs (zygote.Kernel.fresh): not
        # --disable-userns; the batch's seccomp program refuses unshare and clone's namespace flags
        args = [self.bwrap or "bwrap", *_namespace_args(False, pid1=True), *_system_binds()]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += _parents(*early, f"{_INSIDE_HARNESS}/_harness")
        for path in early:
            args += ["--ro-bind", path, path]
        args += ["--ro-bind", str(HARNESS_DIR), f"{_INSIDE_HARNESS}/_harness"]
        for top in _TOPS:  # nobody's (host uid 65534 when calib is root: the first lines chown them)
            args += ["--size", str(self.limits.tmpfs_bytes), "--tmpfs", top]
        args += _parents(*late)
        for path in late:
            args += ["--ro-bind", path, path]
        # the root and /dev are unbounded tmpfs: read-only, or code fills the host's memory
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work",
                 "--clearenv", "--setenv", "PYTHONHASHSEED", "0", "--setenv", "PATH", "/usr/bin:/bin",
                 "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/work", "--setenv", "TMPDIR", "/tmp",
                 "--setenv", "PYTHONIOENCODING", "utf-8"]
        return args + [python, *_PYTHON_FLAGS, "-c", boot]

    async def run(self, job: bytes, *, wall_seconds: float) -> SandboxRun:
        """Run one batch with ``job`` on stdin, killed at ``wall_seconds``: forked by an idle fork server
        (one is started when none is idle), else in a sandbox of its own (:meth:`start`)."""
        server = await self._server() if self.forks else None
        if server is not None:
            try:
                return await server.run(job, wall_seconds=wall_seconds, output_cap=self.limits.output_bytes)
            except ChildSetupError as exc:  # nothing of the job ran: it runs in a sandbox of its own, as
                self._stop_forking(str(exc))  # every later batch does
            except ForkServerError:  # the server broke before the batch began: it runs the other way
                pass
            finally:
                self._give_back(server)
        batch = await self.start(job)
        return await batch.finish(None, wall_seconds=wall_seconds)

    async def _server(self) -> ForkServer | None:
        """An idle fork server, or a new one; None (and no more fork servers) if one cannot start."""
        while self._idle:
            server = self._idle.pop()
            if server.usable:
                return server
            server.close()
        try:
            return await ForkServer.start(lambda control, seccomp: self.command(seccomp, control_fd=control),
                                          _seccomp.program(forks=True, mounts=True))
        except (OSError, asyncio.TimeoutError) as exc:
            self._stop_forking(str(exc) or type(exc).__name__)
            return None

    def _give_back(self, server: ForkServer) -> None:
        if server.usable and self.forks and len(self._idle) < _MAX_IDLE_SERVERS:
            self._idle.append(server)
        else:
            server.close()

    def _stop_forking(self, why: str) -> None:
        if self.forks:
            warnings.warn(f"calib: fork servers are unavailable here ({why}); each batch starts its own sandbox",
                          RuntimeWarning, stacklevel=4)
        self.forks = False
        _close_servers(self._idle)

    def close(self) -> None:
        """Stop the idle fork servers. A server still running a batch joins the idle ones when it ends,
        and later batches start servers as they need them; all stop when the sandbox is garbage-collected
        (and with calib: bubblewrap's ``--die-with-parent``)."""
        _close_servers(self._idle)

    @property
    def server_pids(self) -> tuple[int, ...]:
        """The ``bwrap`` processes of the idle fork servers (for tests that count processes)."""
        return tuple(s.proc.pid for s in self._idle)

    async def start(self, job: bytes) -> Batch:
        """Start one batch and give it ``job``, keeping its stdin open for :meth:`Batch.finish`.

        The process is the batch's own (one batch, one fresh process, as with :meth:`run`); starting it
        early only lets its interpreter start while the host is still busy. The caller must
        :meth:`Batch.finish` or :meth:`Batch.cancel` it."""
        workdir = None
        # bwrap itself gets no environment either: nothing of the host's (API keys and the like) may
        # reach the sandbox, whatever bubblewrap passes on
        env: dict[str, str] | None = {}
        if self.unsafe:
            warnings.warn("calib: running untrusted code WITHOUT a sandbox (--unsafe-no-sandbox)",
                          RuntimeWarning, stacklevel=3)
            workdir = tempfile.mkdtemp(prefix="calib-unsafe-")
            os.mkdir(os.path.join(workdir, "work"))
            env = {"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir,
                   "CALIB_WORKDIR": os.path.join(workdir, "work"), "CALIB_CAPTURE": os.path.join(workdir, "fd")}
        # the sandbox's pid 1 forks the batch, which loads its own program (:func:`zygote.oneshot`)
        program = None if self.unsafe else _seccomp.program(forks=True, mounts=True)
        seccomp_fd = None
        started = time.monotonic()
        try:
            if program is not None:
                seccomp_fd, write_end = os.pipe()  # a few hundred bytes: fits the pipe's buffer
                try:
                    os.write(write_end, program)
                finally:
                    os.close(write_end)
            # no preexec_fn (the rlimits are the batch's first lines): the child is spawned with vfork
            proc = await asyncio.create_subprocess_exec(
                *self.command(seccomp_fd), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, cwd=workdir, env=env,
                pass_fds=() if seccomp_fd is None else (seccomp_fd,))
        except BaseException:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        return Batch(proc, job, output_cap=self.limits.output_bytes, started=started, workdir=workdir,
                     wrapped=not self.unsafe)


class Batch:
    """One started batch: a sandboxed process with its job (or the first part of it) on stdin."""

    def __init__(self, proc: asyncio.subprocess.Process, job: bytes, *, output_cap: int, started: float,
                 workdir: str | None, wrapped: bool) -> None:
        self.proc = proc
        self.started = started
        self.workdir = workdir
        self.wrapped = wrapped
        self.exceeded = False
        self.done = False
        self._out, self._err = bytearray(), bytearray()
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._feed = asyncio.ensure_future(self._write(job, close=False))
        self._pumps = asyncio.gather(self._pump(proc.stdout, self._out, output_cap),
                                     self._pump(proc.stderr, self._err, 1 << 16))

    async def _pump(self, stream: asyncio.StreamReader, sink: bytearray, cap: int) -> None:
        while chunk := await stream.read(1 << 16):
            if len(sink) + len(chunk) > cap:
                sink.extend(chunk[: cap - len(sink)])
                if sink is self._out:
                    self.exceeded = True
                    _kill(self.proc)
                continue
            sink.extend(chunk)

    async def _write(self, data: bytes, *, close: bool) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            if data:
                stdin.write(data)
                await stdin.drain()
            if close:
                stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process is gone (its output says why)

    async def finish(self, rest: bytes | None, *, wall_seconds: float) -> SandboxRun:
        """Send the rest of the job (if any) and end stdin, then wait for the batch to end, killing the
        whole process group ``wall_seconds`` from now."""
        if self.done:
            raise RuntimeError("this batch has already finished")

        async def feed() -> None:
            await self._feed
            await self._write(rest or b"", close=True)

        tasks = asyncio.gather(feed(), self._pumps, self.proc.wait())
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(tasks), wall_seconds)
        except asyncio.TimeoutError:
            timed_out = True
            _kill(self.proc)
            await tasks
        except BaseException:  # cancelled: the batch goes with the caller
            _kill(self.proc)
            await asyncio.shield(tasks)
            raise
        finally:
            self._cleanup()
        return SandboxRun(returncode=self.proc.returncode, stdout=bytes(self._out), stderr=bytes(self._err),
                          timed_out=timed_out, output_exceeded=self.exceeded,
                          seconds=time.monotonic() - self.started, wrapped=self.wrapped)

    async def cancel(self) -> None:
        """Kill the batch (if it still runs) and wait until it is gone."""
        if self.done:
            return
        _kill(self.proc)
        try:
            await asyncio.shield(asyncio.gather(self._feed, self._pumps, self.proc.wait()))
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        self.done = True
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def _compile_harness() -> None:
    """Byte-compile the harness once on the host: batches run with ``-B`` on a read-only mount, so
    without cached ``.pyc`` files every batch would compile it again (about 15 ms each)."""
    import compileall  # noqa: PLC0415

    try:
        compileall.compile_dir(str(HARNESS_DIR), quiet=2, maxlevels=0)
    except OSError:
        pass  # a read-only installation: its installer compiled it (or every batch pays)


def _close_servers(servers: list[ForkServer]) -> None:
    while servers:
        servers.pop().close()


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


from calib.executors.forkserver import ChildSetupError, ForkServer, ForkServerError  # noqa: E402 - it uses SandboxRun
