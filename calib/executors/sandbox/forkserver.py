"""Fork servers: long-lived sandboxes that fork a fresh process for each batch (host side).

A batch used to be a fresh ``bwrap`` + ``python`` process that imported the harness: about 25 ms of
CPU before any code ran. A fork server is one such sandbox whose interpreter has the harness loaded
and forks a child per batch instead (:mod:`calib.executors.sandbox.harness.zygote`, which also says what the
child does before the job runs). What a batch sees is what it saw in its own sandbox: a new process
(its own rlimits, its CPU clock from zero, seccomp: no new processes), an empty ``/work`` and ``/tmp``,
the job on fd 0, the channel on fd 1. What differs: its pid, and that signals to any other process
fail with ``ESRCH``.

The job and the outputs never pass through the server: the host makes three pipes per batch, sends
the child's ends over the control socket (``SCM_RIGHTS``) and writes and reads the other ends itself.
So the server holds nothing of a batch that the next child could find in the memory it inherits.
:class:`calib.executors.sandbox.Sandbox` keeps the servers, one per concurrent batch, and falls back
to a sandbox per batch if a server cannot start.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

from calib.executors.sandbox.harness.zygote import KILL, READY, RUN
from calib.executors.sandbox.types import SandboxRun

__all__ = ["MAX_RUNS", "ChildSetupError", "ForkServer", "ForkServerError"]

#: Batches one server runs before it is replaced (a fresh sandbox now and then costs ~60 ms).
MAX_RUNS = 500
_START_SECONDS = 30.0
_KILL_SECONDS = 10.0  # how long a killed child may take to be reported before the server is dropped
_STDERR_CAP = 1 << 16


#: How long the host leaves a running batch's output pipe unread after reading it (:class:`_Sink`).
PACE_SECONDS = 0.005
#: The size asked for a batch's output pipe (Linux's ``F_SETPIPE_SZ``; the default is 64 KiB).
PIPE_BYTES = 1 << 20
_READS = 32  # reads of 64 KiB at most per wake-up (the pipe's 1 MiB and its end)


def _enlarge(fd: int) -> None:
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:
        pass  # over /proc/sys/fs/pipe-max-size, or the user's pipe memory: the default size


class ForkServerError(OSError):
    """A fork server could not start, or broke before its batch began."""


class ChildSetupError(ForkServerError):
    """A fork server's child ended before its job started (it could not load its seccomp program ...)."""


class _Sink:
    """Reads one pipe into a buffer up to a cap (then calls ``over`` once and discards the rest).

    With ``pace`` (seconds), after each read the pipe is left alone that long: a batch writes an event
    per input it tries, and a wake-up of the host per event cost more host CPU than the batch's
    writing did. What the batch writes meanwhile waits in the pipe (enlarged to :data:`PIPE_BYTES`);
    :meth:`drain` reads the rest at once when the batch has ended."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, cap: int, over: Callable[[], None] | None,
                 pace: float = 0.0) -> None:
        self.loop, self.fd, self.cap, self.over, self.pace = loop, fd, cap, over, pace
        self.data = bytearray()
        self.exceeded = False
        self.eof = loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._read)

    def _read(self) -> None:
        for _ in range(_READS):  # bounded: a batch that floods its pipe cannot hold the event loop here
            if self.fd < 0:
                return
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                return
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.data.extend(chunk[:max(room, 0)])
                if not self.exceeded and self.over is not None:
                    self.over()
                self.exceeded = True
                continue
            self.data.extend(chunk)
        if self.pace and self.fd >= 0 and self._timer is None:
            self.loop.remove_reader(self.fd)
            self._timer = self.loop.call_later(self.pace, self._resume)

    def _resume(self) -> None:
        self._timer = None
        if self.fd >= 0:
            self.loop.add_reader(self.fd, self._read)

    def drain(self) -> None:
        """The writer has ended: read what is in the pipe now (the end comes later if another process
        still holds the pipe)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            if self.fd >= 0:
                self.loop.add_reader(self.fd, self._read)
        pace, self.pace = self.pace, 0.0
        self._read()
        self.pace = pace if self.fd >= 0 else 0.0

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        elif self.fd >= 0:
            self.loop.remove_reader(self.fd)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if not self.eof.done():
            self.eof.set_result(None)


class _Feed:
    """Writes the job into the child's stdin pipe without blocking, then closes it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, data: bytes) -> None:
        self.loop, self.fd, self.view = loop, fd, memoryview(data)
        os.set_blocking(fd, False)
        loop.add_writer(fd, self._write)

    def _write(self) -> None:
        try:
            while self.view:
                self.view = self.view[os.write(self.fd, self.view[: 1 << 16]):]
        except BlockingIOError:
            return
        except OSError:
            pass  # the child is gone (its exit says why)
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_writer(self.fd)
            os.close(self.fd)
            self.fd = -1


class ForkServer:
    """One fork server: a ``bwrap`` process tree and the host's end of its control socket."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, errlog: int) -> None:
        self.proc = proc
        self.sock = sock
        self._errlog = errlog  # the read end of the server's stderr until it is ready, then -1
        self.runs = 0
        self.broken = False

    @property
    def usable(self) -> bool:
        return not self.broken and self.runs < MAX_RUNS and self.proc.poll() is None

    @classmethod
    async def start(cls, command: Callable[[int, int | None], list[str]], seccomp: bytes | None) -> ForkServer:
        """Start a server: ``command(control_fd, seccomp_fd)`` is its argv (bubblewrap and the boot lines)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the server's stderr: a pipe (never a host file the sandbox could write), read only if it fails
        errlog, err_w = os.pipe()
        seccomp_fd = None
        try:
            fds = [theirs.fileno()]
            if seccomp is not None:
                seccomp_fd, write_end = os.pipe()
                try:
                    os.write(write_end, seccomp)  # a few hundred bytes: fits the pipe's buffer
                finally:
                    os.close(write_end)
                fds.append(seccomp_fd)
            # bubblewrap gets no environment either (nothing of the host's may reach the sandbox)
            proc = subprocess.Popen(command(theirs.fileno(), seccomp_fd), stdin=subprocess.DEVNULL,  # noqa: S603
                                    stdout=subprocess.DEVNULL, stderr=err_w, start_new_session=True, env={},
                                    pass_fds=tuple(fds))
        except BaseException:
            ours.close()
            os.close(errlog)
            raise
        finally:
            os.close(err_w)
            theirs.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        server = cls(proc, ours, errlog)
        ours.setblocking(False)
        try:
            message = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(ours, 4096), _START_SECONDS)
        except BaseException:
            server.close()
            raise
        if message != READY:
            why = message.decode("utf-8", "replace").removeprefix("error ").strip()
            server.close(keep_stderr=True)
            why = why or server._stderr_tail()
            server._close_stderr()
            raise ForkServerError(f"the fork server did not start: {why or 'no reason given'}")
        server._close_stderr()
        return server

    def _stderr_tail(self) -> str:
        """The end of what the (stopped) server wrote on its stderr."""
        data = b""
        try:
            os.set_blocking(self._errlog, False)
            while chunk := os.read(self._errlog, 1 << 16):
                data = (data + chunk)[-2000:]
        except OSError:
            pass
        return data.decode("utf-8", "replace").strip()

    def _close_stderr(self) -> None:
        if self._errlog >= 0:
            os.close(self._errlog)
            self._errlog = -1

    def _kill_child(self) -> None:
        try:
            self.sock.send(KILL)
        except OSError:
            self.broken = True

    async def run(self, job: bytes, *, wall_seconds: float, output_cap: int) -> SandboxRun:
        """Run one batch: ``job`` on its stdin, killed ``wall_seconds`` from now. Raises
        :class:`ForkServerError` if the server could not take the batch or the child could not set
        itself up (either way nothing of the job ran)."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr (the child's ends: 0, 1, 1)
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        try:
            socket.send_fds(self.sock, [RUN], theirs)
        except OSError as exc:
            self.broken = True
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise ForkServerError(f"the fork server is gone: {exc}") from exc
        for fd in theirs:
            os.close(fd)
        self.runs += 1
        feed = _Feed(loop, pipes[0][1], job)
        _enlarge(pipes[1][0])
        out = _Sink(loop, pipes[1][0], output_cap, self._kill_child, pace=PACE_SECONDS)
        err = _Sink(loop, pipes[2][0], _STDERR_CAP, None)
        timed_out = setup_failed = False
        code: int | None = None
        cpu: float | None = None
        try:
            try:
                message = await asyncio.wait_for(loop.sock_recv(self.sock, 256), wall_seconds)
            except asyncio.TimeoutError:
                timed_out = True
                self._kill_child()
                try:
                    message = await asyncio.wait_for(loop.sock_recv(self.sock, 256), _KILL_SECONDS)
                except asyncio.TimeoutError:
                    message = b""
            parts = message.split()
            if len(parts) == 5 and parts[0] == b"exit":
                code, cpu = int(parts[1]), float(parts[2])
                self.broken = self.broken or parts[3] != b"ok"
                setup_failed = parts[4] != b"job" and not timed_out  # not killed by the host first
            else:  # the server died: the kernel killed the child with the sandbox's PID namespace
                self.broken = True
                code = -signal.SIGKILL
            out.drain()
            err.drain()
            try:  # the child is gone, so its pipes are at their end: what is in them is all there is
                await asyncio.wait_for(asyncio.gather(out.eof, err.eof), _KILL_SECONDS)
            except asyncio.TimeoutError:
                self.broken = True
            if setup_failed:  # nothing of the batch ran: the host runs it another way
                self.broken = True
                lines = err.data.decode("utf-8", "replace").strip().splitlines() or ["no reason given"]
                raise ChildSetupError(f"a batch could not set itself up in its fork server (exit {code}): "
                                      f"{lines[-1][:300]}")  # the exception's line of the traceback
        except ForkServerError:
            raise
        except BaseException:  # cancelled (or worse): the server's state is unknown, it goes
            self.broken = True
            self._kill_child()
            raise
        finally:
            feed.close()
            out.close()
            err.close()
        return SandboxRun(returncode=code, stdout=bytes(out.data), stderr=bytes(err.data), timed_out=timed_out,
                          output_exceeded=out.exceeded, seconds=time.monotonic() - started, cpu_seconds=cpu)

    def close(self, *, keep_stderr: bool = False) -> None:
        """Kill the server's sandbox (and any child in it) and wait for it."""
        self.broken = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()
        if not keep_stderr:
            self._close_stderr()
