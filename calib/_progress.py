"""Progress as plain lines, for when no terminal shows progress bars (``nohup``, CI, a pipe).

:class:`LineProgress` takes the calls calib makes on a rich ``Progress`` (``add_task``, ``update``,
``advance``, ``tasks``) and prints one line per task whenever a task starts or finishes, and in
between at most every ``interval`` seconds: ``LABEL: DONE/TOTAL (P%), RATE/s, eta H:MM:SS``. A
background thread repeats the line of every unfinished task once ``interval`` seconds pass without
one, so a stage stuck on one long step still shows it is alive. A task without a total (a whole stage:
``LABEL: running, H:MM:SS elapsed``) prints when it starts and then only when no other line has been
printed for ``interval`` seconds; :meth:`LineProgress.stop_task` ends it without a line.

The interval is ``$CALIB_PROGRESS_SECONDS`` (default :data:`DEFAULT_INTERVAL`); ``0`` prints a line
at every update (tests use it). :func:`use_lines` says whether a command should print lines rather
than draw bars: when its stderr is not a terminal.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from calib._exceptions import InvalidParameterError

__all__ = ["DEFAULT_INTERVAL", "LineProgress", "interval_from_env", "use_lines"]

#: Seconds between two lines of one task when nothing else prints one (at most).
DEFAULT_INTERVAL = 20.0
_ENV = "CALIB_PROGRESS_SECONDS"


def interval_from_env() -> float:
    """``$CALIB_PROGRESS_SECONDS`` as a number of seconds >= 0 (default :data:`DEFAULT_INTERVAL`)."""
    raw = os.environ.get(_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise InvalidParameterError(f"{_ENV}={raw!r}: expected a number of seconds >= 0 (e.g. 30)")
    return value


def use_lines(stream: TextIO | None = None) -> bool:
    """Whether progress on ``stream`` (default stderr) should be lines: it is not a terminal."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return not (isatty is not None and isatty())


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass
class _Task:
    description: str
    total: float | None
    started: float
    completed: float = 0.0
    resumed: float = 0.0  # work found done (a resumed run's chunks): not part of the rate
    last_line: float = field(default=-float("inf"))
    finished: bool = False
    fields: dict[str, Any] = field(default_factory=dict)


class LineProgress:
    """Progress lines on ``stream`` (default stderr), one task per long piece of work.

    Parameters
    ----------
    interval
        Seconds between two lines of one task (``None``: :func:`interval_from_env`; ``0``: every update).
    stream
        Where lines go.
    clock
        The time source (``time.monotonic``); rates and ETAs are computed from it.
    prefix
        Put before every line (e.g. ``"calib study: "``).
    """

    def __init__(self, *, interval: float | None = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, prefix: str = "") -> None:
        self.interval = interval_from_env() if interval is None else float(interval)
        self.stream = stream
        self.clock = clock
        self.prefix = prefix
        self.tasks: list[_Task] = []
        self._last_any = clock()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- rich.progress.Progress's calls -------------------------------------------------------------
    def __enter__(self) -> LineProgress:
        if self.interval > 0:
            self._thread = threading.Thread(target=self._heartbeat, name="calib-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> int:
        """Start a task (prints its first line); returns its id."""
        with self._lock:
            self.tasks.append(_Task(description, total, self.clock(), fields=fields))
            task = len(self.tasks) - 1
            self._print(task)
            return task

    def update(self, task: int, *, completed: float | None = None, total: float | None = None,
               advance: float | None = None, resumed: float | None = None, **fields: Any) -> None:
        """Set a task's count (or ``advance`` it) and total; prints when due or when it finishes.

        ``resumed`` counts work found already done (also passed as ``advance``): left out of the rate.
        """
        with self._lock:
            state = self.tasks[task]
            if resumed is not None:
                state.resumed += resumed
            if total is not None:
                state.total = total
            if completed is not None:
                state.completed = completed
            if advance is not None:
                state.completed += advance
            state.fields.update(fields)
            done = state.total is not None and state.completed >= state.total
            if done and not state.finished:
                state.finished = True
                self._print(task)
            elif not done and self.clock() - state.last_line >= self.interval:
                self._print(task)

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def stop_task(self, task: int) -> None:
        """End a task without printing (its work reports its own end)."""
        with self._lock:
            self.tasks[task].finished = True

    # -- lines ----------------------------------------------------------------------------------------
    def line(self, task: int) -> str:
        """The task's progress line (without the prefix)."""
        state = self.tasks[task]
        now = self.clock()
        elapsed = now - state.started
        if state.total is None:
            return f"{state.description}: running, {_clock(elapsed)} elapsed"
        text = f"{state.description}: {state.completed:.0f}/{state.total:.0f}"
        if state.finished:
            return f"{text} done in {_clock(elapsed)}"
        if state.total:
            text += f" ({100 * state.completed / state.total:.0f}%)"
        rate = (state.completed - state.resumed) / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            text += f", {rate:.0f}/s" if rate >= 100 else f", {rate:.3g}/s"
            if state.total is not None:
                text += f", eta {_clock((state.total - state.completed) / rate)}"
        return f"{text}, {_clock(elapsed)} elapsed"

    def note(self, text: str) -> None:
        """Print one line as it is (with the prefix)."""
        with self._lock:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(f"{self.prefix}{text}\n")
            stream.flush()
            self._last_any = self.clock()

    def _print(self, task: int) -> None:
        self.note(self.line(task))
        self.tasks[task].last_line = self.clock()

    def tick(self) -> None:
        """Print the lines that are due now (the background thread calls it every ``interval`` seconds)."""
        with self._lock:
            for task, state in enumerate(self.tasks):
                since = self._last_any if state.total is None else state.last_line
                if not state.finished and self.clock() - since >= self.interval:
                    self._print(task)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()
