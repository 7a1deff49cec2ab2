"""Run a program's assert tests in the sandbox: the pass/fail verdict behind pass@k.

One call is one sandboxed process (:class:`calib.executors.sandbox.Sandbox`, bubblewrap with seccomp and
rlimits; forked by one of its fork servers unless they are off): the harness's ``tests`` mode
(``calib/executors/sandbox/harness/testcases.py``) runs the task's setup and the program as a fresh module,
then each test in order under a per-test alarm, and reports one line per test on a private channel the
program's own output cannot reach. Whatever the program does — a syntax error, an exception, an endless
loop, printing, forking, killing its own process — is a result (:class:`TestRun`), never an exception of
this module.

Statuses (:attr:`TestRun.status`):

- ``ok`` — the harness ran every test; :attr:`TestRun.passed` says which passed.
- ``syntax`` — the program does not compile; every test failed with error ``"syntax"``.
- ``setup_error`` — the task's setup code failed to compile or raised.
- ``program_error`` — running the program's top level raised (the exception type is in ``message``).
- ``timeout`` — the program's top level (or setup) ran past ``timeout`` seconds.
- ``died`` — the process ended before reporting every test (a crash, ``os._exit``, a signal, the
  wall clock, the output limit, or a test that caught every time-out so the harness ended the process);
  the tests without a result failed with error ``"died: <reason>"``.
- ``error`` — the harness answered something unreadable (a bug of calib, or a program that wrote
  to the harness's private channel).

The JSON lines on the channel can be forged by a program that goes looking for the channel's
descriptor: a sandbox run protects the host, not the verdict, from deliberately hostile code.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.executors.sandbox import Sandbox, SandboxRun

__all__ = ["STATUSES", "TestJob", "TestRun", "job_bytes", "parse_run", "run_many", "run_tests"]

STATUSES = ("ok", "syntax", "setup_error", "program_error", "timeout", "died", "error")
_STARTUP_SECONDS = 10.0  # the wall clock's allowance for starting the interpreter and the harness


@dataclass(frozen=True)
class TestRun:
    """The outcome of one program on its tests.

    Attributes
    ----------
    passed
        One entry per test, in order: did it run to the end without raising.
    errors
        ``None`` for a passed test, else why it failed: ``"AssertionError"``, another exception type
        (``"ZeroDivisionError"``, ``"SandboxDenied"``, ``"candidate.MyError"`` for the program's own
        classes), ``"timeout"``, the program-level status (``"syntax"``, ``"setup_error"``,
        ``"program_error"``, ``"timeout"``) or ``"died: <reason>"``.
    status
        One of :data:`STATUSES` (see the module docstring).
    message
        A one-line explanation for any status but ``ok`` (empty for ``ok``).
    seconds
        Wall-clock seconds of the sandboxed process, start to end.
    messages
        Per test, the exception's message (shortened), empty for a passed test.
    all_passed
        Every test passed (and there was at least one).
    """

    __test__ = False  # not a pytest test class, whatever its name says

    passed: tuple[bool, ...]
    errors: tuple[str | None, ...]
    status: str
    message: str
    seconds: float
    messages: tuple[str, ...] = ()
    all_passed: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all_passed", bool(self.passed) and all(self.passed) and self.status == "ok")

    @property
    def n_passed(self) -> int:
        """How many tests passed."""
        return sum(self.passed)


@dataclass(frozen=True)
class TestJob:
    """One program with the tests to run it on (the unit of :func:`run_many`)."""

    __test__ = False

    program: str
    tests: tuple[str, ...]
    setup: str = ""
    timeout: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", _tests(self.tests))
        _check(self.program, self.setup, self.timeout)


def _tests(tests: Sequence[str]) -> tuple[str, ...]:
    if isinstance(tests, str):
        raise InvalidParameterError("tests must be a sequence of test statements, not one string; "
                                    "wrap it in a list: [\"assert f(1) == 2\"]")
    out = tuple(tests)
    if not out:
        raise InvalidParameterError("tests is empty; give at least one test statement")
    bad = [i for i, t in enumerate(out) if not isinstance(t, str)]
    if bad:
        raise InvalidParameterError(f"tests[{bad[0]}] is {type(out[bad[0]]).__name__}; every test must be a str")
    return out


def _check(program: str, setup: str, timeout: float) -> None:
    if not isinstance(program, str):
        raise InvalidParameterError(f"program must be a str of Python source; got {type(program).__name__}")
    if not isinstance(setup, str):
        raise InvalidParameterError(f"setup must be a str of Python source; got {type(setup).__name__}")
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise InvalidParameterError(f"timeout must be a positive number of seconds per test; got {timeout!r}")


def job_bytes(program: str, tests: Sequence[str], *, setup: str = "", timeout: float = 5.0) -> bytes:
    """The harness job (one JSON line) for ``program`` and ``tests``."""
    job = {"mode": "tests", "program": program, "setup": setup, "tests": list(tests), "timeout": float(timeout)}
    return (json.dumps(job) + "\n").encode("utf-8")


async def run_tests(sandbox: Sandbox, program: str, tests: Sequence[str], *, setup: str = "",
                    timeout: float = 5.0, wall_seconds: float | None = None) -> TestRun:
    """Run ``program`` and then each of ``tests`` in one sandboxed process.

    Parameters
    ----------
    sandbox
        The sandbox to run in (its :class:`~calib.executors.sandbox.Limits` bound CPU, memory, files,
        output).
    program
        Python source of the candidate (a generation, or a task's reference solution).
    tests
        Test statements (``assert f(3) == 7``), run in order, each in a copy of the program's namespace.
    setup
        Source run before the program in the same namespace (a task's imports).
    timeout
        Seconds each test (and the program's own top level) may run before it counts as ``timeout``.
    wall_seconds
        The whole process's wall clock; default ``timeout × (len(tests) + 2) + 10``. Past it the process
        is killed and the tests without a result fail with ``"died: timeout"``.

    Returns
    -------
    TestRun
        Never raises for what the program does; raises :class:`~calib.InvalidParameterError` for bad
        arguments and lets the sandbox's own start-up errors through.
    """
    tests = _tests(tests)
    _check(program, setup, timeout)
    if wall_seconds is None:
        wall_seconds = timeout * (len(tests) + 2) + _STARTUP_SECONDS
    elif not (isinstance(wall_seconds, (int, float)) and math.isfinite(wall_seconds) and wall_seconds > 0):
        raise InvalidParameterError(f"wall_seconds must be a positive number of seconds; got {wall_seconds!r}")
    run = await sandbox.run(job_bytes(program, tests, setup=setup, timeout=timeout), wall_seconds=wall_seconds)
    return parse_run(run, len(tests))


async def run_many(sandbox: Sandbox, jobs: Sequence[TestJob], *, concurrency: int,
                   wall_seconds: float | None = None) -> list[TestRun]:
    """Run several programs, at most ``concurrency`` sandboxed processes at a time; results in job order.

    ``jobs`` are :class:`TestJob` s; ``wall_seconds`` applies to each process as in :func:`run_tests`.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidParameterError(f"concurrency must be an integer >= 1; got {concurrency!r}")
    jobs = list(jobs)
    for i, job in enumerate(jobs):
        if not isinstance(job, TestJob):
            raise InvalidParameterError(f"jobs[{i}] is {type(job).__name__}; give TestJob(program, tests, ...)")
    gate = asyncio.Semaphore(concurrency)

    async def one(job: TestJob) -> TestRun:
        async with gate:
            return await run_tests(sandbox, job.program, job.tests, setup=job.setup, timeout=job.timeout,
                                   wall_seconds=wall_seconds)

    async with asyncio.TaskGroup() as group:  # one failure (of calib, not of a program) cancels the rest
        tasks = [group.create_task(one(job)) for job in jobs]
    return [task.result() for task in tasks]


def parse_run(run: SandboxRun, n_tests: int) -> TestRun:
    """Read the harness's JSON lines from a finished ``tests`` batch into a :class:`TestRun`."""
    results: dict[int, tuple[bool, str | None, str]] = {}
    started: int | None = None
    program: dict[str, Any] | None = None
    done = False
    abandoned: int | None = None
    garbled = 0
    stderr = " ".join(run.stderr.decode("utf-8", "replace").split())[-200:]
    tail = f"; stderr: {stderr}" if stderr else ""
    lines = run.stdout.decode("utf-8", "replace").split("\n")
    lines.pop()  # "" after the last newline, or a line cut short when the process was killed mid-write
    for line in lines:
        try:
            event = json.loads(line)
            kind = event["event"]
            if kind == "test":
                index = int(event["index"])
                error = event.get("error")
                passed = event.get("passed") is True and error is None
                results[index] = (passed, None if passed else str(error or "failed"), str(event.get("message") or ""))
            elif kind == "start":
                started = int(event["index"])
            elif kind == "program":
                if event.get("status") not in STATUSES:
                    raise ValueError(event.get("status"))
                program = event
            elif kind == "abandoned":
                abandoned = int(event["index"])
            elif kind == "done":
                done = True
        except (ValueError, KeyError, TypeError):
            garbled += 1
    if program is not None and not garbled:
        status = str(program["status"])
        message = f"{program.get('error', '')} in {program.get('message', '')}"
        return _fill({}, n_tests, status, status, message, run.seconds)
    if garbled or any(not 0 <= i < n_tests for i in results) or (done and len(results) != n_tests):
        return _fill(_clip(results, n_tests), n_tests, "error", "error",
                     f"the harness's report was unreadable ({garbled} bad lines, {len(results)} of {n_tests} "
                     "results)" + tail, run.seconds)
    if done:
        return _fill(results, n_tests, None, "ok", "", run.seconds)
    if abandoned is not None and run.died is None:
        reason = f"test {abandoned} could not be stopped"
    else:
        reason = run.died or f"exit {run.returncode} before reporting every test"
    where = f" during test {started}" if started is not None and started not in results else ""
    message = f"the process died ({reason}){where}" + tail
    return _fill(results, n_tests, f"died: {reason}", "died", message, run.seconds)


def _clip(results: dict[int, tuple[bool, str | None, str]], n: int) -> dict[int, tuple[bool, str | None, str]]:
    return {i: r for i, r in results.items() if 0 <= i < n}


def _fill(results: dict[int, tuple[bool, str | None, str]], n: int, missing: str | None, status: str,
          message: str, seconds: float) -> TestRun:
    rows = [results.get(i, (False, missing or "missing", "")) for i in range(n)]
    return TestRun(passed=tuple(r[0] for r in rows), errors=tuple(r[1] for r in rows), status=status,
                   message=message, seconds=seconds, messages=tuple(r[2] for r in rows))
