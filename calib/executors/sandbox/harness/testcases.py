"""The ``tests`` mode of the harness: run a program, then its assert tests, one by one (stdlib only).

Dispatched by :func:`runner.main` for a job ``{"mode": "tests", "program", "setup", "tests",
"timeout"}``, after the runner has moved the job and the output channel to private descriptors. The
code runs as a fresh module named ``candidate`` (so an ``if __name__ == "__main__":`` demo block does
not run): ``setup`` first (the task's imports), then ``program``, then each test ``exec``-ed in a
shallow copy of the module's namespace, so that names a test binds do not leak into the next one
(state the program keeps in its own globals does, as in a single script). Every step runs under the
per-test alarm (``timeout`` seconds, re-fired every :data:`REFIRE` seconds in case the code swallows
the first one; after :data:`GIVE_UP` swallowed alarms the step is reported as timed out, followed by
``{"event": "abandoned", "index": i}`` for a test, and the process ends).

On the channel, one JSON line each: ``{"event": "program", "status": ..., "error": ..., "message": ...}``
when the program cannot run (``syntax``, ``setup_error``, ``program_error``, ``timeout``); then for
every test ``{"event": "start", "index": i}`` and ``{"event": "test", "index": i, "passed": bool,
"error": None | "AssertionError" | "<ExcType>" | "timeout", "message": str}``; finally ``{"event":
"done"}``. The code's ``print`` output goes to a discarded buffer and its writes to descriptors 1 and 2
to the capture file, never to the channel (calib/probes/testrun.py reads these lines).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import types

from . import env

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MODULE_NAME = "candidate"
MAX_MESSAGE = 300
REFIRE = 0.1  # seconds between repeated alarms once a step is over its time
GIVE_UP = 4  # alarms the code may catch before the process gives up on it


class _Timeout(BaseException):
    """The per-step time limit (a BaseException so that ``except Exception`` in the code cannot eat it)."""


def _name(exc: BaseException) -> str:
    kind = type(exc)
    module = getattr(kind, "__module__", "builtins")
    if module in ("builtins", "_harness.env", "env"):
        return kind.__qualname__
    return f"{module}.{kind.__qualname__}"


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException as inner:  # noqa: BLE001 - a broken __str__ of the code's own exception
        if isinstance(inner, _Timeout):
            raise
        text = "<unprintable>"
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _timed_out(exc: BaseException) -> bool:
    """The alarm turned into another exception (``except: raise ValueError``) still is a timeout."""
    seen, hops = exc, 0
    while seen is not None and hops < 20:
        if isinstance(seen, _Timeout):
            return True
        seen, hops = seen.__context__, hops + 1
    return False


def _guarded(step: Any, timeout: float) -> tuple[str | None, str]:
    """Run ``step()`` under the alarm; ``(None, "")`` when it returns, else ``(error, message)``.

    The alarm stays armed while the exception is described (its ``__str__`` is the code's own), and an
    alarm that lands in these handlers is caught by the outer one."""
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout, REFIRE)
        try:
            step()
            return None, ""
        except _Timeout:
            return "timeout", f"took longer than {timeout:g} s"
        except BaseException as exc:  # noqa: BLE001 - every exception of the code is a result
            if _timed_out(exc):
                return "timeout", f"took longer than {timeout:g} s"
            return _name(exc), _message(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return "timeout", f"took longer than {timeout:g} s"


class _Tests:
    def __init__(self, job: dict[str, Any], channel: Any) -> None:
        self.channel = channel
        self.program = str(job.get("program", ""))
        self.setup = str(job.get("setup", ""))
        self.tests = [str(t) for t in job.get("tests", [])]
        self.timeout = float(job.get("timeout", 5.0))
        self.capture = env.FdCapture(os.environ.get("CALIB_CAPTURE", "/tmp/.calib_fd"))
        self.real_out, self.real_err = sys.stdout, sys.stderr
        self.fired = 0
        self.where: str | int = "setup"  # the step running: "setup", "program" or a test's index

    def alarm(self, signum: int, frame: Any) -> None:
        """The SIGALRM handler: the step is over its time. When the code has caught the time-out
        :data:`GIVE_UP` times (``while True: try: ... except BaseException: pass``) no exception can end
        the step: report it as timed out and end the process (the host fails the tests not run)."""
        self.fired += 1
        if self.fired > GIVE_UP:
            signal.setitimer(signal.ITIMER_REAL, 0)
            message = f"took longer than {self.timeout:g} s and caught every time-out; the process was ended"
            if isinstance(self.where, int):
                self.emit({"event": "test", "index": self.where, "passed": False, "error": "timeout",
                           "message": message})
                self.emit({"event": "abandoned", "index": self.where})
            else:
                self.emit({"event": "program", "status": "timeout", "error": "timeout",
                           "message": f"{self.where}: {message}"})
            os._exit(0)
        raise _Timeout()

    def emit(self, event: dict[str, Any]) -> None:
        self.channel.write(json.dumps(event, separators=(",", ":")) + "\n")
        self.channel.flush()

    def step(self, code: Any, namespace: dict[str, Any]) -> tuple[str | None, str]:
        sys.stdout, sys.stderr = env.Capture(), env.Capture()  # the code's print(): read by no one
        signal.signal(signal.SIGALRM, self.alarm)  # again: an earlier step may have replaced the handler
        self.fired = 0
        try:
            return _guarded(lambda: exec(code, namespace), self.timeout)  # noqa: S102 - the sandbox's job
        finally:
            sys.stdout, sys.stderr = self.real_out, self.real_err
            self.capture.take()  # empties the descriptor-level capture file (it counts towards RLIMIT_FSIZE)

    def load(self) -> dict[str, Any] | None:
        """Compile and run setup and program; ``None`` (after reporting why) when they cannot run."""
        compiled = []
        for what, text, status in (("setup", self.setup, "setup_error"), ("program", self.program, "syntax")):
            try:
                compiled.append(compile(text, f"<{what}>", "exec", dont_inherit=True))
            except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
                where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
                message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
                self.emit({"event": "program", "status": status, "error": type(exc).__name__,
                           "message": f"{what}: {where}{message}"[:MAX_MESSAGE]})
                return None
        module = types.ModuleType(MODULE_NAME)
        sys.modules[MODULE_NAME] = module  # dataclasses, pickle and typing look modules up by name
        namespace = module.__dict__
        for (what, status), code in zip((("setup", "setup_error"), ("program", "program_error")), compiled):
            self.where = what
            error, message = self.step(code, namespace)
            if error is not None:
                self.emit({"event": "program", "status": "timeout" if error == "timeout" else status,
                           "error": error, "message": f"{what}: {message}"[:MAX_MESSAGE]})
                return None
        return namespace

    def run(self) -> None:
        namespace = self.load()
        if namespace is None:
            return
        for index, test in enumerate(self.tests):
            self.where = index
            self.emit({"event": "start", "index": index})
            try:
                code = compile(test, f"<test {index}>", "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                self.emit({"event": "test", "index": index, "passed": False, "error": "SyntaxError",
                           "message": f"the test itself does not compile: {_message(exc)}"})
                continue
            error, message = self.step(code, dict(namespace))
            self.emit({"event": "test", "index": index, "passed": error is None, "error": error,
                       "message": message})


def main(job: dict[str, Any], channel: Any, source: Any) -> None:
    """Run a ``tests`` job (called by :func:`runner.main` with the job read and the channel private)."""
    source.close()  # the job is read whole: nothing the code could read on that descriptor
    workdir = os.environ.get("CALIB_WORKDIR", "/work")
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    sys.unraisablehook = lambda unraisable: None
    tests = _Tests(job, channel)
    env.freeze()
    env.reset(int(job.get("seed", 0)))
    gc.collect()
    gc.freeze()
    gc.enable()  # the sandbox's boot lines turned the collector off while the harness started
    env.install_policy()
    tests.run()
    user, system = os.times()[:2]
    tests.emit({"event": "done", "cpu_s": round(user + system, 4)})
