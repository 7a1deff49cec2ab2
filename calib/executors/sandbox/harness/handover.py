"""x's replay in x's own explore batch (job key ``then_replay``; inside the sandbox, stdlib only).

A comparison replays x on the states its search chose in a fresh process, to see that x gives the same
output states there as while it was explored (docs/executors.md, "Output states"). That fresh process
used to be a batch of its own: a start, the same analysis of the same scaffold, a first build. With
``then_replay`` the exploring batch makes it itself: once the scaffold is analysed, and before any of
its code has run, the batch forks. The child (:func:`fork`) loads its own seccomp program, waits for
the chosen states on a pipe, then runs as a ``replay`` job would: a fresh build, the states in order,
a ``start`` and a ``result`` event for each, on the batch's channel. The parent loads its program,
searches, reports its ``explore`` event, hands the states over (:meth:`Handover.send`) and waits for
the child before it ends.

Nothing of a candidate runs here: each candidate is replayed in a batch of its own, as before. What
x's exploring process could do to x's replay (write other states into the pipe, end early) x could
already do by forging its own ``explore`` event (docs/executors.md, *What a batch can forge*). The
child dies with its parent (``PR_SET_PDEATHSIG``): a batch the host kills leaves no process behind.
Where the fork is refused (a sandbox whose program forbids it, a process limit) the batch explores
alone and the host replays x in a batch of its own, as it does for every input the child did not report.
"""

from __future__ import annotations

import json
import os

from . import canon, env, workdir

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    class Lock(Protocol):
        """What :func:`.runner.main` is given to lock a batch process (:class:`.zygote.Lock`)."""

        def __call__(self) -> None: ...

        def die_with_parent(self, parent: int) -> None: ...

# bound now: code under test that replaces them reaches neither the pipe nor the wait
_write, _read, _close, _waitpid, _exit = os.write, os.read, os.close, os.waitpid, os._exit


class NoLock:
    """A batch without a sandbox (``--unsafe-no-sandbox``): no seccomp program to load, no ``prctl``
    (the child still ends when the pipe closes before the states came)."""

    def __call__(self) -> None:
        """Nothing to load."""

    def die_with_parent(self, parent: int) -> None:
        """Nothing to set."""


class Handover:
    """The parent's end: the pipe's write end and the child's pid."""

    def __init__(self, fd: int, pid: int) -> None:
        self.fd, self.pid = fd, pid

    def send(self, chosen: list[Any]) -> None:
        """Hand the chosen records' states to the child (it replays the valid ones) and wait for it."""
        part = {"inputs": [r.state for r in chosen], "skip": [i for i, r in enumerate(chosen) if not r.valid]}
        try:
            view = memoryview(canon.encode_event(part).encode("utf-8", "surrogatepass"))
            while view:
                view = view[_write(self.fd, view):]
        except OSError:  # the child is gone: the host replays what it did not report
            pass
        finally:
            _close(self.fd)
        try:
            _waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _listing(tops: list[str]) -> dict[str, set[str]]:
    kept = {}
    for top in tops:
        try:
            kept[top] = set(os.listdir(top))
        except OSError:
            continue
    return kept


def _restore(kept: dict[str, set[str]]) -> None:
    """Remove from each folder what it did not hold at the fork: what x's search left in ``/work`` and ``/tmp``
    (a temporary name depends on the names taken, :func:`.workdir.tidy_tmp`, which counts what ``/tmp`` holds at
    the first input as the batch's own)."""
    for top, names in kept.items():
        try:
            now = os.listdir(top)
        except OSError:
            continue
        for name in now:
            if name not in names:
                workdir.remove(os.path.join(top, name))


def fork(lock: Lock, high: Callable[[int], int], tops: list[str]) -> Handover | dict[str, Any] | None:
    """Fork the replaying child. In the parent: its :class:`Handover` (None where the fork was refused);
    in the child, once the parent sent them: the job's replay part (``inputs``, ``skip``), with the folders
    ``tops`` back as they were at the fork. Both processes are locked (``lock()``) when this returns; a child
    whose parent sent nothing ends here. ``high`` moves a descriptor among the harness's own
    (:func:`.runner.high_fd`): ``open(4)`` in x is no pipe."""
    kept = _listing(tops)
    try:
        pipe = os.pipe()
        read_end, write_end = high(pipe[0]), high(pipe[1])
    except OSError:
        lock()
        return None
    parent = env.real_getpid()  # not os.getpid(): env.freeze() made it say 2 before the fork
    try:
        pid = os.fork()
    except OSError:
        _close(read_end)
        _close(write_end)
        lock()
        return None
    if pid:
        _close(read_end)
        lock()
        return Handover(write_end, pid)
    _close(write_end)
    lock()
    lock.die_with_parent(parent)
    env.forked()
    chunks = []
    while chunk := _read(read_end, 1 << 16):
        chunks.append(chunk)
    _close(read_end)
    try:
        part = json.loads(b"".join(chunks) or b"null")
    except ValueError:
        part = None
    if not (isinstance(part, dict) and isinstance(part.get("inputs"), list) and isinstance(part.get("skip"), list)):
        _exit(0)  # the parent ended before its search did, or sent nothing usable: nothing to replay
    _restore(kept)
    return part
