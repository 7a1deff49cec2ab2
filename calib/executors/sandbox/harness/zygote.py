"""The fork server: an interpreter inside one bubblewrap sandbox that forks a fresh child for every batch.

Host side: :mod:`calib.executors.sandbox.forkserver`. Started by the sandbox's fork-server boot lines, with
the harness and its imports loaded once, it serves one batch at a time over a ``SOCK_SEQPACKET``
control socket:

- the host sends ``run`` with three descriptors: the read end of the job's pipe and the write ends of
  the stdout and stderr pipes, all made by the host. The server forks; the child moves them to 0, 1
  and 2, closes every other descriptor (the control socket too), starts its own session, mounts a
  fresh ``/work`` and ``/tmp`` of its own (:meth:`Kernel.fresh`), enters ``/work``, sets the batch's
  rlimits, loads its first seccomp program on top of the server's (:func:`seccomp.program`,
  ``staged``), and only then runs :func:`runner.main`, which reads the job from fd 0 as a fresh
  process would and, before any code under test runs, has the child load its own program
  (:class:`Lock`: :func:`seccomp.program` with its pid: no new processes, no signals to any process
  but itself); an exploring job that replays x itself forks first (:mod:`.handover`), and each of
  its two processes loads its own;
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
_PR_CAPBSET_DROP = 24
_CLONE_NEWUSER, _CLONE_NEWNS = 0x10000000, 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
_TOPS = ("/work", "/tmp")
#: A batch's ``/tmp`` and ``/work`` when none is given: bytes and inodes of each tmpfs.
TMPFS = (64 << 20, 8192)


class Kernel:
    """The system calls the fork server and its children make through ctypes, bound once: ctypes then
    leaves ``sys.modules`` (code under test that imports it loads it afresh, and the harness's audit
    hook refuses that). Making one makes this process undumpable and dying with its parent."""

    def __init__(self) -> None:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        self._prctl.restype = ctypes.c_int
        self._unshare, self._mount, self._capset = libc.unshare, libc.mount, libc.capset
        self._mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        self._errno = ctypes.get_errno
        self._buffer, self._address = ctypes.create_string_buffer, ctypes.addressof

        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        # struct __user_cap_header_struct (version 3) and two struct __user_cap_data_struct, all zero
        self._fprog = Fprog
        self._cap_header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        self._cap_data = (ctypes.c_uint32 * 6)()
        self.prctl(_PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")
        # bubblewrap's --die-with-parent, again: the kernel clears it when the uid changes (as root,
        # drop_privileges), and this process, the sandbox's pid 1, must die with bubblewrap, so with calib
        self.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "prctl(PR_SET_PDEATHSIG)")
        for name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
            del sys.modules[name]

    def _fail(self, what: str) -> OSError:
        code = self._errno()
        return OSError(code, f"{what}: {os.strerror(code)}")

    def prctl(self, option: int, value: int, what: str) -> int:
        result = self._prctl(option, value, None, 0, 0)
        if result != 0:
            raise self._fail(what)
        return result

    def load(self, program: bytes) -> None:
        """Load the seccomp ``program`` on top of those loaded (no new privileges from here on)."""
        buffer = self._buffer(program, len(program))
        fprog = self._fprog(len(program) // 8, self._address(buffer))
        self.prctl(_PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")
        if self._prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._address(fprog), 0, 0) != 0:
            raise self._fail("prctl(PR_SET_SECCOMP)")

    def fresh(self, tmpfs: tuple[int, int], keep: tuple[str, ...], *, required: bool) -> bool:
        """Give this process ``/work`` and ``/tmp`` of its own: new, empty tmpfs of ``tmpfs`` (bytes,
        inodes) each, in a mount namespace of its own (in a user namespace of its own, whose only user
        is this process's), with the read-only import paths ``keep`` in them bound again; then drop
        every capability that namespace gave. Inode numbers start afresh, nothing an earlier batch made
        is there, and the inode count is bounded (bubblewrap's own tmpfs cannot be).

        Returns False, changing nothing, where the kernel refuses the namespaces or the first mount
        (and ``required`` is false: a sandbox of one batch has fresh tmpfs from bubblewrap anyway);
        raises where it cannot finish once it began, or cannot drop the capabilities."""
        uid, gid = os.getuid(), os.getgid()
        if self._unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            if required:
                raise self._fail("unshare(CLONE_NEWUSER | CLONE_NEWNS)")
            return False
        try:
            done = self._mount_fresh(uid, gid, tmpfs, keep, required=required)
        finally:
            self._drop_capabilities()
        return done

    def _mount_fresh(self, uid: int, gid: int, tmpfs: tuple[int, int], keep: tuple[str, ...], *,
                     required: bool) -> bool:
        # this process is not dumpable, so /proc/self is root's: dumpable only while it writes its maps
        self.prctl(_PR_SET_DUMPABLE, 1, "prctl(PR_SET_DUMPABLE)")
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as file:
                    file.write(text)
        finally:
            self.prctl(_PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")
        if self._mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise self._fail("mount(/, MS_PRIVATE)")
        held = {path: os.open(path, os.O_PATH) for path in keep}  # the import paths, before they are covered
        options = f"size={tmpfs[0]},nr_inodes={tmpfs[1]},mode=755".encode()
        for i, top in enumerate(_TOPS):
            if self._mount(b"tmpfs", top.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
                if i == 0 and not required:
                    for fd in held.values():
                        os.close(fd)
                    return False
                raise self._fail(f"mount(tmpfs, {top})")
        for path, fd in held.items():
            self._bind_again(path, fd)
        return True

    def _bind_again(self, path: str, fd: int) -> None:
        """Bind the read-only import path held open as ``fd`` at ``path`` in the new tmpfs."""
        parts = path.strip("/").split("/")
        for i in range(2, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if not os.path.isdir(parent):
                os.mkdir(parent, 0o755)
                os.chmod(parent, 0o755)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.mkdir(path, 0o755)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        source = f"/proc/self/fd/{fd}".encode()
        if self._mount(source, path.encode(), None, _MS_BIND | _MS_REC, None) != 0:
            raise self._fail(f"mount(bind, {path})")
        os.close(fd)
        if not os.statvfs(path).f_flag & os.ST_RDONLY:  # a bind copies the read-only flag of its source
            raise OSError(f"import path {path} is writable once bound again")

    def _drop_capabilities(self) -> None:
        """Empty the bounding set and every capability set, and check that none is left."""
        cap = 0
        while self._prctl(_PR_CAPBSET_DROP, cap, None, 0, 0) == 0:
            cap += 1
        if self._capset(self._cap_header, self._cap_data) != 0:
            raise self._fail("capset")
        with open("/proc/self/status", "rb") as status:
            fields = dict(line.split(b":", 1) for line in status.read().splitlines() if b":" in line)
        if any(int(fields.get(name, b"1"), 16) for name in (b"CapPrm", b"CapEff", b"CapAmb")):
            raise OSError("capabilities are left after capset")


def _become_batch(kernel: Kernel, rlimits: tuple[tuple[int, int, int], ...], tops: tuple[tuple[int, int],
                  tuple[str, ...]], *, required: bool) -> None:
    """What every Python batch's process does before its job, in a fork server's child and in a sandbox
    of one batch alike: fresh ``/work`` and ``/tmp`` (:meth:`Kernel.fresh`), enter ``/work``, set the
    rlimits, load the child's first seccomp program (``staged``: the child's own program but for
    forks and the rules naming its pid, which :class:`Lock` adds before any code under test runs)."""
    kernel.fresh(*tops, required=required)
    os.chdir("/work")
    set_limits(rlimits)
    _load(kernel, seccomp.program(staged=True))


def _load(kernel: Kernel, program: bytes | None) -> None:
    if program is None:
        raise _SeccompError("no seccomp program for this machine")
    try:
        kernel.load(program)
    except OSError as exc:
        raise _SeccompError(str(exc)) from exc


class _SeccompError(OSError):
    """The child could not load its seccomp program."""


# the real ones: a batch's env.freeze() makes os.getpid() say 2 (and os.getppid() 1) before it locks
_getpid, _getppid = os.getpid, os.getppid


class Lock:
    """Given to :func:`.runner.main`, which calls it in each process of the batch before any code under
    test runs: the child's seccomp program (no new processes, signals and limits for itself only), stacked
    on the staged one. A process that cannot load it ends there (:data:`SECCOMP_FAILED`)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def __call__(self) -> None:
        try:
            _load(self._kernel, seccomp.program(pid=_getpid()))
        except BaseException:  # noqa: BLE001 - nothing of the job's code has run
            _print_exception()
            os._exit(SECCOMP_FAILED)

    def die_with_parent(self, parent: int) -> None:
        """A forked batch process (x's replay, :mod:`.handover`) ends when its parent does."""
        try:
            self._kernel.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "prctl(PR_SET_PDEATHSIG)")
        except OSError:
            os._exit(CHILD_FAILED)
        if _getppid() != parent:  # the parent ended before the signal was set
            os._exit(0)


def _child(fds: list[int], started: int, rlimits: tuple[tuple[int, int, int], ...], kernel: Kernel,
           tops: tuple[tuple[int, int], tuple[str, ...]]) -> None:
    """In the forked child: become a fresh batch process, say so on ``started``, then run the job.
    Never returns."""
    code = CHILD_FAILED
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        started = os.dup2(started, 3)
        os.closerange(4, 1 << 16)
        _become_batch(kernel, rlimits, tops, required=True)
        # the server learns that the job is about to start on a pipe no code under test ever holds
        os.write(started, b"1")
        os.close(started)
    except BaseException as exc:  # noqa: BLE001 - the reason goes to the batch's stderr, nothing of the job ran
        _print_exception()
        os._exit(SECCOMP_FAILED if isinstance(exc, _SeccompError) else code)
    os._exit(_run_job(Lock(kernel)))


def _run_job(lock: Lock) -> int:
    """Run the job as ``python -c`` with the harness's boot lines would; the exit status."""
    from .runner import main  # noqa: PLC0415 - loaded already (the server imported it)

    code = 1
    try:
        main(lock)
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


def _fork(fds: list[int], rlimits: tuple[tuple[int, int, int], ...], kernel: Kernel,
          tops: tuple[tuple[int, int], tuple[str, ...]]) -> tuple[int, int]:
    """Fork the batch's child; its pid and the read end of the pipe it writes once set up."""
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(fds, started_w, rlimits, kernel, tops)
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
    while True:  # a process the child forked (x's replay, killed with it) comes to pid 1, this server: reaped
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, gone


def _self_test(kernel: Kernel, tops: tuple[tuple[int, int], tuple[str, ...]]) -> str:
    """Fork one child that makes its fresh tmpfs, loads its program and tries to fork: '' if it got
    that far and the fork failed as it must."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 4
            kernel.fresh(*tops, required=True)
            code = 5
            staged, program = seccomp.program(staged=True), seccomp.program(pid=os.getpid())
            if staged is not None and program is not None:
                kernel.load(staged)  # as a child does: the staged program, then its own (Lock)
                kernel.load(program)
                try:
                    os.fork()  # the grandchild, if there is one, exits at once with status 3
                    code = 3
                except PermissionError:
                    code = 0
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return {0: "", 4: "a child could not mount fresh /tmp and /work of its own (the kernel refuses user or mount "
               "namespaces to the sandbox's user)",
            5: "a child could not load its seccomp program"}.get(
        code, f"a child could still fork after loading its seccomp program (exit {code})")


#: Standard-library modules a fork server imports once, for its children to inherit: those that real file
#: contexts import most (``benchmarks/executor.py``'s sample: a batch's first build spent 4 of its 12 ms
#: on average importing them). Only modules whose import reads nothing that varies (no clock, no
#: environment, no threads started, no native library loaded through ctypes): a child inherits the
#: module exactly as a fresh import in it would have made it.
PRELOAD = ("string", "urllib.parse", "ipaddress", "binascii", "fnmatch", "base64", "heapq", "ntpath", "pathlib",
           "shutil", "locale", "gettext", "calendar", "traceback", "html", "html.entities", "pprint", "numbers",
           "unicodedata", "decimal", "email.utils", "email.message", "email.parser", "hashlib", "typing",
           "dataclasses", "enum", "inspect", "contextlib", "codecs", "struct", "collections", "zlib", "glob",
           "quopri",
           # next most imported (a fifth of the batches on benchmarks/executor.py's sample import ssl: 3 ms)
           "ssl", "importlib.util", "contextvars", "pkgutil", "tempfile", "configparser", "uuid",
           # what every batch imports: the hash of pinned code (:func:`.canon.sha256`) and the module whose
           # process start the policy replaces (:func:`.env.install_policy`); extension modules, each a dlopen
           "_sha256", "_posixsubprocess")


def _preload() -> None:
    import importlib  # noqa: PLC0415

    for name in PRELOAD:
        before = None if "threading" in sys.modules else set(sys.modules)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a module this Python lacks is imported (or not) by the child
            continue
        if before is not None and "threading" in sys.modules:
            # on this Python the module imports threading, which binds the clock at import (``_time``):
            # forgotten, so that a child imports them itself, under its frozen clock
            for new in set(sys.modules) - before:
                del sys.modules[new]


def serve(control_fd: int, rlimits: tuple[tuple[int, int, int], ...], keep: tuple[str, ...] = (),
          tmpfs: tuple[int, int] = TMPFS) -> None:
    """Serve batches on ``control_fd`` until the host closes it (``keep``: read-only mount points in
    ``/work`` and ``/tmp`` that each child binds again in its fresh tmpfs of ``tmpfs`` bytes and inodes)."""
    sock = socket.socket(fileno=control_fd)
    tops = (tmpfs, keep)
    try:
        kernel = Kernel()
        from . import cmplog, reuse, runner, synth, testcases  # noqa: F401, PLC0415 - every mode's modules, once

        _preload()

        modes = {top: stat.S_IMODE(os.stat(top).st_mode) for top in _TOPS}
        problem = _self_test(kernel, tops)
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
        pid, started = _fork(fds, rlimits, kernel, tops)
        code, cpu, gone = _wait(sock, pid)
        ran = _started(started)
        clean = _wipe(modes, keep)  # children write in tmpfs of their own: this one stays empty
        if gone:
            return
        sock.send(f"exit {code} {cpu:.4f} {'ok' if clean else 'retire'} {'job' if ran else 'setup'}".encode())
        if not clean:
            return


def oneshot(rlimits: tuple[tuple[int, int, int], ...], keep: tuple[str, ...] = (),
            tmpfs: tuple[int, int] = TMPFS) -> None:
    """A sandbox of one batch: this process, its pid 1 (not dumpable), forks the batch, which sets itself
    up as a fork server's child does (:func:`_become_batch`; where the kernel refuses it a fresh tmpfs
    of its own, it keeps bubblewrap's, new too but with no inode bound) and runs the job on the
    descriptors 0-2 it inherits. Exits as the batch did (``128 + N`` if signal N killed it)."""
    try:
        kernel = Kernel()
        pid = os.fork()
    except BaseException:  # noqa: BLE001 - nothing of the job ran
        _print_exception()
        os._exit(CHILD_FAILED)
    if pid == 0:
        try:
            _become_batch(kernel, rlimits, (tmpfs, keep), required=False)
        except BaseException as exc:  # noqa: BLE001
            _print_exception()
            os._exit(SECCOMP_FAILED if isinstance(exc, _SeccompError) else CHILD_FAILED)
        os._exit(_run_job(Lock(kernel)))
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


def execute(rlimits: tuple[tuple[int, int, int], ...], argv: list[str], *, filtered: bool,
            tmpfs: tuple[int, int] | None = None, each: bool = False) -> None:
    """As :func:`oneshot` for a native program: pid 1 forks a child that mounts fresh ``/tmp`` and
    ``/work`` of ``tmpfs`` bytes and inodes (where the kernel lets it: the inode bound), sets the
    rlimits, loads the batch's seccomp program when ``filtered`` (the run profile; a compiler's build
    profile has neither), and executes ``argv``. Exits as the child did. ``each``: one such child per
    input of the job on stdin (:mod:`.each`)."""
    try:
        kernel = Kernel()
    except BaseException:  # noqa: BLE001 - nothing ran
        _print_exception()
        os._exit(CHILD_FAILED)

    def setup() -> None:
        if tmpfs is not None:
            kernel.fresh(tmpfs, (), required=False)
            os.chdir("/work")
        set_limits(rlimits)
        if filtered:
            program = seccomp.program()
            if program is None:
                raise OSError("no seccomp program for this machine")
            kernel.load(program)

    if each:
        from .each import run_each  # noqa: PLC0415

        run_each(argv, setup)
    try:
        pid = os.fork()
    except BaseException:  # noqa: BLE001 - nothing ran
        _print_exception()
        os._exit(CHILD_FAILED)
    if pid == 0:
        try:
            setup()
            os.execv(argv[0], argv)
        except BaseException:  # noqa: BLE001
            _print_exception()
        os._exit(CHILD_FAILED)
    _exit_with(pid)
