"""The fork server: an interpreter inside one bubblewrap sandbox that forks a fresh child for every batch.

Host side: :mod:`calib.executors.forkserver`. Started by the sandbox's fork-server boot lines, with
the harness and its imports loaded once, it serves one batch at a time over a ``SOCK_SEQPACKET``
control socket:

- the host sends ``run`` with three descriptors: the read end of the job's pipe and the write ends of
  the stdout and stderr pipes, all made by the host. The server forks; the child moves them to 0, 1
  and 2, closes every other descriptor (the control socket too), starts its own session, enters
  ``/work``, sets the batch's rlimits, loads its own seccomp program on top of the server's
  (:func:`seccomp.program` with its pid: no new processes, no signals to any process but itself),
  and only then runs :func:`runner.main`, which reads the job from fd 0 as a fresh process would;
- the host may send ``k`` (the wall clock, the output cap): the server kills the child;
- when the child has ended the server empties ``/work`` and ``/tmp`` and answers
  ``exit STATUS CPU_SECONDS ok|retire job|setup`` (``retire``: it could not clean up and stops;
  ``setup``: the child ended before its job started, having written nothing on a pipe of the server's
  that it closes before any code under test runs).

Not as root the server is the sandbox's pid 1 (bubblewrap runs with ``--as-pid-1``): there is no
bubblewrap init, running as the code's user, for a child to reach; as root that init is host root.
Before it says ``ready`` it points its stderr at ``/dev/null`` (the host reads that pipe only when a
server fails to start). :func:`oneshot` is the same for a sandbox of one batch: pid 1 forks the batch,
which sets itself up as a server's child does.

The server never reads a job, an output or anything else the host sends a child: those bytes go
through pipes between the host and the child only, so nothing of one batch is in the memory the next
child inherits. The server is not dumpable (``PR_SET_DUMPABLE`` 0): a child, running as the same user,
cannot read its memory or descriptors through ``/proc``. If a child cannot set itself up (load its
seccomp program, above all) it exits before any code under test runs (:data:`SECCOMP_FAILED`,
:data:`CHILD_FAILED`), the server answers ``setup``, and the host stops using fork servers.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import stat
import sys

from . import seccomp, set_limits

READY = b"ready"
RUN = b"run"
KILL = b"k"
#: A child's exit status when it could not load its seccomp program (nothing of the job ran).
SECCOMP_FAILED = 87
#: A child's exit status when the fork server's own code failed in it before the job started.
CHILD_FAILED = 88
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 1, 4, 38, 22, 2
_TOPS = ("/work", "/tmp")


def _prctl_setup() -> object:
    """Make this process undumpable and dying with its parent, and return a function that loads a
    seccomp program, built with ctypes; ctypes then leaves ``sys.modules`` (code under test that
    imports it loads it afresh, and the harness's audit hook refuses that)."""
    import ctypes  # noqa: PLC0415

    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    if prctl(_PR_SET_DUMPABLE, 0, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")
    # bubblewrap's --die-with-parent, again: the kernel clears it when the uid changes (as root,
    # drop_privileges), and this process, the sandbox's pid 1, must die with bubblewrap, so with calib
    if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")

    def load(program: bytes) -> None:
        buffer = ctypes.create_string_buffer(program, len(program))
        fprog = Fprog(len(program) // 8, ctypes.addressof(buffer))
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    for name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]
    return load


def _child(fds: list[int], started: int, rlimits: tuple[tuple[int, int, int], ...], load: object) -> None:
    """In the forked child: become a fresh batch process, say so on ``started``, then run the job.
    Never returns."""
    code = CHILD_FAILED
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        started = os.dup2(started, 3)
        os.closerange(4, 1 << 16)
        os.chdir("/work")
        set_limits(rlimits)
        code = SECCOMP_FAILED
        program = seccomp.program(pid=os.getpid())
        if program is None:
            raise OSError("no seccomp program for this machine")
        load(program)  # type: ignore[operator]
        # the server learns that the job is about to start on a pipe no code under test ever holds
        os.write(started, b"1")
        os.close(started)
    except BaseException:  # noqa: BLE001 - the reason goes to the batch's stderr, nothing of the job ran
        _print_exception()
        os._exit(code)
    os._exit(_run_job())


def _run_job() -> int:
    """Run the job as ``python -c`` with the harness's boot lines would; the exit status."""
    from .runner import main  # noqa: PLC0415 - loaded already (the server imported it)

    code = 1
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends ``python -c``
        _print_exception()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001, S110 - the code under test may have replaced or closed them
            pass
    return code


def _print_exception() -> None:
    try:
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001, S110 - stderr is the code's to break
        pass


def _remove(path: str) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)
        with os.scandir(path) as entries:
            names = [e.path for e in entries]
        for name in names:
            _remove(name)
        os.rmdir(path)
    else:
        os.unlink(path)


def _empty(path: str, keep: frozenset[str], above: frozenset[str]) -> None:
    """Remove everything in ``path`` but the mount points ``keep`` (emptying the directories ``above`` them)."""
    with os.scandir(path) as entries:
        names = [e.path for e in entries]
    for name in names:
        if name in keep:
            continue
        if name in above:
            if stat.S_IMODE(os.lstat(name).st_mode) != 0o755:
                os.chmod(name, 0o755)
            _empty(name, keep, above)
        else:
            _remove(name)


def _wipe(modes: dict[str, int], keep: tuple[str, ...] = ()) -> bool:
    """Empty ``/work`` and ``/tmp`` (and give them back their modes) but for the read-only import
    paths ``keep`` mounted in them; False if that failed."""
    above = frozenset("/".join(p.split("/")[:i]) for p in keep for i in range(2, p.count("/") + 1))
    try:
        for top, mode in modes.items():
            if stat.S_IMODE(os.stat(top).st_mode) != mode:  # as root they are root's: no chmod
                os.chmod(top, mode)
            _empty(top, frozenset(keep), above)
        return True
    except (OSError, RecursionError):
        return False


def _fork(fds: list[int], rlimits: tuple[tuple[int, int, int], ...], load: object) -> tuple[int, int]:
    """Fork the batch's child; its pid and the read end of the pipe it writes once set up."""
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(fds, started_w, rlimits, load)
    for fd in (*fds, started_w):
        os.close(fd)
    return pid, started_r


def _started(fd: int) -> bool:
    """Whether the ended child got as far as its job (it wrote one byte before the harness started)."""
    try:
        os.set_blocking(fd, False)
        return os.read(fd, 1) == b"1"
    except OSError:
        return False
    finally:
        os.close(fd)


def _wait(sock: socket.socket, pid: int) -> tuple[int, float, bool]:
    """Wait for the child (killing it on ``k``); its exit code, CPU seconds, and whether the host is gone."""
    pidfd = os.pidfd_open(pid)
    gone = False
    try:
        while True:
            ready = select.select([sock, pidfd], [], [])[0]
            if pidfd in ready:
                break
            message, fds, _flags, _addr = socket.recv_fds(sock, 64, 4)
            for fd in fds:  # nothing is sent with descriptors while a child runs
                os.close(fd)
            if message == KILL or not message:
                gone = gone or not message
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        os.close(pidfd)
    _pid, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, gone


def _self_test(load: object) -> str:
    """Fork one child that loads its program and tries to fork: '' if that failed as it must."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            program = seccomp.program(pid=os.getpid())
            if program is not None:
                load(program)  # type: ignore[operator]
                try:
                    os.fork()  # the grandchild, if there is one, exits at once with status 3
                    code = 3
                except PermissionError:
                    code = 0
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "" if code == 0 else f"a child could still fork after loading its seccomp program (exit {code})"


def serve(control_fd: int, rlimits: tuple[tuple[int, int, int], ...], keep: tuple[str, ...] = ()) -> None:
    """Serve batches on ``control_fd`` until the host closes it (``keep``: read-only mount points in
    ``/work`` and ``/tmp`` that the wipe leaves)."""
    sock = socket.socket(fileno=control_fd)
    try:
        load = _prctl_setup()
        from . import cmplog, runner, synth, testcases  # noqa: F401, PLC0415 - every mode's modules, once

        modes = {top: stat.S_IMODE(os.stat(top).st_mode) for top in _TOPS}
        problem = _self_test(load)
    except Exception as exc:  # noqa: BLE001 - reported to the host, which then runs batches without a server
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        sock.send(b"error " + problem.encode("utf-8", "replace")[:1000])
        return
    gc.collect()
    gc.freeze()  # children do not copy the server's pages by collecting them
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the host stops reading the server's stderr once it is ready
        os.dup2(devnull, fd)
    os.close(devnull)
    sock.send(READY)
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 64, 4)
        if not message:
            return
        if message != RUN or len(fds) != 3:  # a late ``k`` for a child that had ended: nothing to do
            for fd in fds:
                os.close(fd)
            continue
        pid, started = _fork(fds, rlimits, load)
        code, cpu, gone = _wait(sock, pid)
        ran = _started(started)
        clean = _wipe(modes, keep)
        if gone:
            return
        sock.send(f"exit {code} {cpu:.4f} {'ok' if clean else 'retire'} {'job' if ran else 'setup'}".encode())
        if not clean:
            return


def oneshot(rlimits: tuple[tuple[int, int, int], ...]) -> None:
    """A sandbox of one batch: this process, its pid 1 (not dumpable), forks the batch, which sets its
    rlimits and loads a child's seccomp program (as a fork server's child does) and runs the job on the
    descriptors 0-2 it inherits. Exits as the batch did (``128 + N`` if signal N killed it)."""
    try:
        load = _prctl_setup()
        pid = os.fork()
    except BaseException:  # noqa: BLE001 - nothing of the job ran
        _print_exception()
        os._exit(CHILD_FAILED)
    if pid == 0:
        code = CHILD_FAILED
        try:
            os.chdir("/work")
            set_limits(rlimits)
            code = SECCOMP_FAILED
            program = seccomp.program(pid=os.getpid())
            if program is None:
                raise OSError("no seccomp program for this machine")
            load(program)  # type: ignore[operator]
        except BaseException:  # noqa: BLE001
            _print_exception()
            os._exit(code)
        os._exit(_run_job())
    _exit_with(pid)


def _exit_with(pid: int) -> None:
    """In pid 1: let go of the job's pipes, reap every process until ``pid`` ends, exit as it did."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the job's pipes are the batch's alone
        os.dup2(devnull, fd)
    os.close(devnull)
    while True:  # orphans (a compiler's) come to pid 1
        ended, status = os.wait()
        if ended == pid:
            break
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def execute(rlimits: tuple[tuple[int, int, int], ...], argv: list[str], *, filtered: bool) -> None:
    """As :func:`oneshot` for a native program: pid 1 forks a child that sets the rlimits, loads the
    batch's seccomp program when ``filtered`` (the run profile; a compiler's build profile has none),
    and executes ``argv``. Exits as the child did."""
    try:
        load = _prctl_setup()
        pid = os.fork()
    except BaseException:  # noqa: BLE001 - nothing ran
        _print_exception()
        os._exit(CHILD_FAILED)
    if pid == 0:
        try:
            set_limits(rlimits)
            if filtered:
                program = seccomp.program()
                if program is None:
                    raise OSError("no seccomp program for this machine")
                load(program)  # type: ignore[operator]
            os.execv(argv[0], argv)
        except BaseException:  # noqa: BLE001
            _print_exception()
        os._exit(CHILD_FAILED)
    _exit_with(pid)
