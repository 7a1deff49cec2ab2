"""A native program run once per input: no state of one input (globals, statics, the heap, open files,
``/tmp``) reaches the next (docs/native-executors.md, "One process per input").

The native executors hand a sandbox one job, ``[key, args_1, ..., args_n]`` on stdin. With ``each`` the
sandbox's first process (pid 1 inside bubblewrap; the boot interpreter without a sandbox) reads the job
and, for input ``k``, forks a child that sets itself up (:func:`run_each`'s ``setup``: fresh ``/tmp`` and
``/work``, the rlimits, the seccomp program) and executes the program with ``[key, args_k]`` on its stdin.
The child's lines are passed on in order, each record's input index ``i`` (0: the child had one input)
rewritten to ``k``, so the host reads the same stream as from one process running every input.

When a child ends without the record of its input (a crash, an exit, the CPU limit), this process
stops there and exits as the child did: the host gives that input the death and starts the rest again in
a new sandbox, exactly as when one process ran every input. A wall-clock time-out is the host's: it kills
the whole sandbox. This process parses a child's lines (Python's json: memory-safe, bounded depth) but
never trusts them; the host validates every record with its key as before.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

#: The largest job read from stdin (the host's job of a batch is far smaller).
MAX_JOB = 64 << 20
#: A child's exit status when this process's own code failed in it before the program started.
CHILD_FAILED = 88


def _rewrite(line: bytes, index: int) -> bytes:
    """``line`` with a record's ``"i": 0`` made ``"i": index``; any other line as it is."""
    if index == 0 or b'"i"' not in line:
        return line
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(event, dict) or event.get("i") != 0 or isinstance(event.get("i"), bool):
        return line
    event["i"] = index
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except OSError:  # the reader is gone (EPIPE)
            return False
    return True


def _one(argv: list[str], setup: Callable[[], None], job: bytes, index: int) -> tuple[int, bool]:
    """Run the program on one input's job; (its wait status, whether it answered that input)."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(r_in, 0)
            os.dup2(w_out, 1)
            for fd in (r_in, w_in, r_out, w_out):
                os.close(fd)
            setup()
            os.execv(argv[0], argv)
        except BaseException:  # noqa: BLE001 - reported on stderr, nothing of the input ran
            import traceback  # noqa: PLC0415

            traceback.print_exc()
        os._exit(CHILD_FAILED)
    os.close(r_in)
    os.close(w_out)
    _write_all(w_in, job)  # the harnesses read their whole stdin before the first input
    os.close(w_in)
    answered, pending = False, b""
    while chunk := os.read(r_out, 1 << 16):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            out = _rewrite(line + b"\n", index)
            answered = answered or (b'"i"' in out and _answers(out, index))
            if not _write_all(1, out):
                break
    if pending:
        _write_all(1, _rewrite(pending, index))
    os.close(r_out)
    _, status = os.waitpid(pid, 0)
    return status, answered


def _answers(line: bytes, index: int) -> bool:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(event, dict) and event.get("i") == index and not isinstance(event.get("i"), bool)


def run_each(argv: list[str], setup: Callable[[], None]) -> None:
    """Run ``argv`` once per input of the job on stdin (module docstring); exits, never returns."""
    try:
        raw = os.read(0, MAX_JOB + 1)
        while len(raw) <= MAX_JOB and (more := os.read(0, 1 << 20)):
            raw += more
        job = json.loads(raw) if len(raw) <= MAX_JOB else None
    except (OSError, ValueError, RecursionError):
        job = None
    if not isinstance(job, list) or not job:
        print("calib: malformed job for a per-input run", file=sys.stderr)
        os._exit(CHILD_FAILED)
    key = json.dumps(job[0])
    for k, args in enumerate(job[1:]):
        status, answered = _one(argv, setup, f"[{key},{json.dumps(args)}]".encode(), k)
        if not answered:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code or 0)
    os._exit(0)
