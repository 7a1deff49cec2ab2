"""Running batches: :class:`Sandbox` (one bubblewrap sandbox per batch, or a fork server's child) and
:class:`Batch` (a started batch whose job is finished later). See :mod:`calib.executors.sandbox`."""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import warnings
import weakref

from calib.executors.sandbox.bwrap import (
    BATCH_BOOT,
    BOOT,
    HARNESS_DIR,
    INSIDE_HARNESS,
    PYTHON_FLAGS,
    SERVER_BOOT,
    TOPS,
    check_readable,
    load_harness,
    namespace_args,
    parents,
    probe,
    seccomp_filter,
    system_binds,
    under_tops,
)
from calib.executors.sandbox.forkserver import ChildSetupError, ForkServer, ForkServerError
from calib.executors.sandbox.harness import seccomp as _seccomp
from calib.executors.sandbox.types import Limits, SandboxRun, SandboxUnavailable, base_interpreter

__all__ = ["FORK_SERVER_ENV", "Batch", "Sandbox"]

#: Set to 0 to start a sandbox per batch instead of forking batches from a fork server.
FORK_SERVER_ENV = "CALIB_FORK_SERVER"
_MAX_IDLE_SERVERS = 16


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
            ok, why = probe(found, True)
            if ok:
                self.bwrap, self.disable_userns = found, True
            else:
                ok, why = probe(found, False)
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
                check_readable(path)
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

    def _boot(self) -> str:
        """The first lines of a batch run without a sandbox (``unsafe``)."""
        return BOOT.format(limits=repr(tuple(self._rlimits())), load_harness=load_harness())

    def command(self, seccomp_fd: int | None = None, *, control_fd: int | None = None) -> list[str]:
        """The argv of one batch (the harness reads its job on stdin; the seccomp program on ``seccomp_fd``),
        or with ``control_fd`` of a fork server (:mod:`calib.executors.sandbox.forkserver`) on that socket."""
        python = base_interpreter()
        limits = repr(tuple(self._rlimits()))
        if self.unsafe:
            return [python, *PYTHON_FLAGS, "-c", self._boot()]
        # import paths inside /tmp or /work are bound after those tmpfs, or they would hide them
        late = tuple(p for p in self.read_only if under_tops(p))
        early = [p for p in dict.fromkeys((os.path.realpath(sys.base_prefix), *self.read_only)) if p not in late]
        tmpfs = (self.limits.tmpfs_bytes, self.limits.tmpfs_inodes)
        boot = (BATCH_BOOT.format(root=INSIDE_HARNESS, limits=limits, keep=late, tmpfs=tmpfs) if control_fd is None
                else SERVER_BOOT.format(root=INSIDE_HARNESS, control_fd=control_fd, limits=limits, keep=late,
                                         tmpfs=tmpfs))
        # each batch makes a user namespace of its own for its fresh tmpfs (zygote.Kernel.fresh): not
        # --disable-userns; the batch's seccomp program refuses unshare and clone's namespace flags
        args = [self.bwrap or "bwrap", *namespace_args(False, pid1=True), *system_binds()]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += parents(*early, f"{INSIDE_HARNESS}/_harness")
        for path in early:
            args += ["--ro-bind", path, path]
        args += ["--ro-bind", str(HARNESS_DIR), f"{INSIDE_HARNESS}/_harness"]
        for top in TOPS:  # nobody's (host uid 65534 when calib is root: the first lines chown them)
            args += ["--size", str(self.limits.tmpfs_bytes), "--tmpfs", top]
        args += parents(*late)
        for path in late:
            args += ["--ro-bind", path, path]
        # the root and /dev are unbounded tmpfs: read-only, or code fills the host's memory
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/work",
                 "--clearenv", "--setenv", "PYTHONHASHSEED", "0", "--setenv", "PATH", "/usr/bin:/bin",
                 "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/work", "--setenv", "TMPDIR", "/tmp",
                 "--setenv", "PYTHONIOENCODING", "utf-8"]
        return args + [python, *PYTHON_FLAGS, "-c", boot]

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
