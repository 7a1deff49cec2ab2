"""The ambient state the harness controls (runs inside the sandbox; stdlib only).

- A policy (a PEP 578 audit hook, which code cannot remove) that refuses to start processes, load
  native libraries through ctypes or re-import ``_posixsubprocess``: one layer under bubblewrap's
  namespaces and rlimits, so a fork bomb fails fast instead of waiting for the wall clock.
- A frozen clock (``time.time``, ``datetime.now`` …; ``time.sleep`` returns at once and advances it)
  and seeded randomness (``random``, ``os.urandom``, hence ``uuid4`` and ``secrets``), reset per input.
- The private working directory and ``/tmp``, reset per input (:mod:`.workdir`).
- Captured stdout/stderr, capped, both at the Python level and at the file-descriptor level; what a
  cap cuts off is kept as a digest (two outputs that differ only past the cap still differ).
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import random
import sys
import time
from _weakref import ref as _weak
from functools import partial

from . import canon

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

FROZEN_EPOCH = 1_704_164_645.0  # 2024-01-02T03:04:05Z
PID = 2  # what os.getpid() says (see freeze())
MAX_CAPTURE = 64 * 1024


class SandboxDenied(PermissionError):
    """The calib sandbox refused an operation (starting a process, loading a native library)."""


_DENIED_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "os.setuid", "os.setgid",
})
_DENIED_IMPORTS = frozenset({"_posixsubprocess"})


def _make_hook(events: frozenset[str], imports: frozenset[str]) -> Any:
    # The sets live in the closure, not in module globals that code could rebind, and the hook is
    # armed from the moment it is installed (no flag to clear).
    def _audit(event: str, args: tuple[Any, ...]) -> None:
        if event in events:
            raise SandboxDenied(f"calib sandbox: {event} is not allowed")
        # an extension module loaded under another package name ("x._posixsubprocess") still runs
        # PyInit_<last component>: check that component
        if event == "import" and args and isinstance(args[0], str) and args[0].rpartition(".")[2] in imports:
            raise SandboxDenied(f"calib sandbox: importing {args[0]} is not allowed")

    return _audit


def install_policy() -> None:
    """Install the audit hook (armed from now on; it cannot be removed).

    The hook runs in the same interpreter as the code under test, so it is a convenience — a process
    start or a ctypes load fails at once with a clear :class:`SandboxDenied` — and not the boundary:
    the sandbox's seccomp filter is what makes a new process impossible.
    """
    try:
        import _posixsubprocess  # noqa: PLC0415 - import now, then deny re-imports and fork_exec

        def _denied(*args: Any, **kwargs: Any) -> None:
            raise SandboxDenied("calib sandbox: starting processes is not allowed")

        _posixsubprocess.fork_exec = _denied  # type: ignore[attr-defined]
    except ImportError:
        pass
    sys.addaudithook(_make_hook(_DENIED_EVENTS, _DENIED_IMPORTS))


# --- frozen clock and seeded randomness -------------------------------------------------------------

_clock = {"now": FROZEN_EPOCH, "mono": 1000.0}
_rng = random.Random(0)


def _time() -> float:
    return _clock["now"]


def _scaled(which: str, factor: int | None) -> Any:
    return _clock[which] if factor is None else int(_clock[which] * factor)


def _at_now(real: Any, secs: float | None = None) -> Any:
    return real(_clock["now"] if secs is None else secs)


def _urandom(n: int) -> bytes:
    return _rng.randbytes(n)


_real_seed = random.Random.seed


def _seeded(self: random.Random, a: Any = None, version: int = 2) -> None:
    """``Random.seed`` with no seed draws one from the harness's seeded generator (reset per input)."""
    if a is None:
        a = _rng.getrandbits(64)
    _real_seed(self, a, version)


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    _clock["now"] += seconds
    _clock["mono"] += seconds


class _AsReal(type):
    """The frozen clock's classes answer ``isinstance`` and ``issubclass`` as the ``datetime`` class each stands for
    (its first base). A plain ``date`` (``date.max``, what ``datetime.date()`` and C arithmetic return) is then a
    ``datetime.date`` in the sandbox as it is outside, and ``datetime.datetime`` a subclass of ``datetime.date``:
    dbf's module-level ``Date.max = Date(datetime.date.max)`` raised a TypeError otherwise."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, cls.__mro__[1])


class FrozenDateTime(_dt.datetime, metaclass=_AsReal):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return cls.fromtimestamp(_clock["now"], tz if tz is not None else _dt.timezone.utc).replace(
            tzinfo=tz)

    @classmethod
    def utcnow(cls) -> Any:
        return cls.fromtimestamp(_clock["now"], _dt.timezone.utc).replace(tzinfo=None)

    @classmethod
    def today(cls) -> Any:
        return cls.now()


class FrozenDate(_dt.date, metaclass=_AsReal):
    @classmethod
    def today(cls) -> Any:
        return cls.fromtimestamp(_clock["now"])


FrozenDateTime.__name__ = FrozenDateTime.__qualname__ = "datetime"
FrozenDate.__name__ = FrozenDate.__qualname__ = "date"
FrozenDateTime.__module__ = FrozenDate.__module__ = "datetime"


def _kill(real: Any, own: int, pid: int, signum: int) -> None:
    real(own if pid == PID else pid, signum)


def _frozen_stat(real: Any) -> Any:
    def stat(*args: Any, **kwargs: Any) -> os.stat_result:
        result = real(*args, **kwargs)
        seconds = int(_clock["now"])
        values = list(result)
        values[7:10] = [seconds, seconds, seconds]
        extra = {f"st_{k}time": float(seconds) for k in "amc"}
        extra.update({f"st_{k}time_ns": seconds * 10**9 for k in "amc"})
        extra.update({k: getattr(result, k) for k in ("st_blksize", "st_blocks", "st_rdev") if hasattr(result, k)})
        return os.stat_result(values, extra)

    return stat


real_getpid = os.getpid  # the real one, bound before freeze()


def forked() -> None:
    """In a process forked after :func:`freeze` (x's replay, :mod:`.handover`): ``os.kill(os.getpid(), ...)``
    signals this process, not the one it was forked from."""
    if isinstance(os.kill, partial) and os.kill.func is _kill:
        os.kill = partial(_kill, os.kill.args[0], real_getpid())


def freeze() -> None:
    """Patch the clock and the entropy sources once, before any scaffolding runs.

    File times are the kernel's, so ``os.stat``/``lstat``/``fstat`` report the frozen clock's time for
    every file: code that dates what it reads (``ZipFile.write``, caches keyed by mtime) would otherwise
    give a different output in each run."""
    os.stat = partial(_frozen_stat(os.stat))
    os.lstat = partial(_frozen_stat(os.lstat))
    os.fstat = partial(_frozen_stat(os.fstat))
    # partial objects, not functions: code that keeps one as a class attribute (``clock = time.time``)
    # calls it as ``self.clock()``, and a function there would bind as a method and get ``self``
    time.time = partial(_time)
    time.time_ns = partial(_scaled, "now", 10**9)
    time.monotonic = partial(_scaled, "mono", None)
    time.monotonic_ns = partial(_scaled, "mono", 10**9)
    time.perf_counter = partial(_scaled, "mono", None)
    time.perf_counter_ns = partial(_scaled, "mono", 10**9)
    time.sleep = partial(_sleep)
    time.localtime = partial(_at_now, time.localtime)
    time.gmtime = partial(_at_now, time.gmtime)
    time.ctime = partial(_at_now, time.ctime)
    _dt.datetime = FrozenDateTime  # type: ignore[misc]
    _dt.date = FrozenDate  # type: ignore[misc]
    os.urandom = partial(_urandom)
    # A batch in a sandbox of its own ran as pid 2 (bubblewrap's init is 1); a fork server's child gets
    # a new pid every time, which must not reach output states (log records, temporary names)
    os.kill = partial(_kill, os.kill, os.getpid())
    os.getpid = partial(int, PID)
    os.getppid = partial(int, 1)
    # Random() and seed() without a seed take the system's entropy in C, not through os.urandom: a
    # generator the code makes for itself would draw differently in every run
    random.Random.seed = _seeded  # type: ignore[method-assign]
    # the module's ``random.seed`` was bound to the shared generator at import, before the patch above
    random.seed = partial(_seeded, random._inst)  # type: ignore[attr-defined]
    random._urandom = os.urandom  # type: ignore[attr-defined]
    # cProfile's clock, read in C: the frozen one too, so that a profile x prints (monty's ``prof_main``) has the
    # same times in every run; and its functions in one order (the C profiler lists them by their addresses, the
    # order ties of a sort by time keep), so that it lists them the same way in every process
    import _lsprof  # noqa: PLC0415 - a builtin module; ``cProfile.Profile`` subclasses its Profiler when imported

    class Profiler(_lsprof.Profiler):  # type: ignore[misc,name-defined]
        def __init__(self, timer: Any = None, timeunit: float = 0.0, subcalls: bool = True,
                     builtins: bool = True) -> None:
            super().__init__(timer or time.perf_counter, timeunit, subcalls, builtins)

        def getstats(self) -> list[Any]:
            entries = sorted(super().getstats(), key=_profiled)
            return [type(e)((*e[:5], sorted(e.calls, key=_profiled) if e.calls else e.calls)) for e in entries]

    _lsprof.Profiler = Profiler


def _profiled(entry: Any) -> tuple[str, int, str]:
    """A profiled function's place, as ``cProfile``'s ``label`` gives it: a builtin's text, else file, line, name."""
    code = entry.code
    return ("~", 0, code) if isinstance(code, str) else (code.co_filename, code.co_firstlineno, code.co_name)


#: What ``id()`` returns to the code under test: objects numbered in the order the code first asks,
#: from a base that looks like an address. Real addresses differ from process to process, so an id the
#: code passes on (``memo.get(id(obj))``, a key, a log line) would make x's replay differ from x. Each
#: object asked about is held (weakly where it can be): an object made where a dead one was (at the same
#: address, as the process's allocator decides) is another object, with a number of its own (igor's
#: ``Field.__repr__`` shows ``id(self)``, and its ``self`` took the number of a freed one in one process only).
ID_BASE = 0x7F0000000000
_ids: dict[int, tuple[int, Any, Any]] = {}  # by address: (number, a weak reference or None, the object or None)
_real_id = id


def _stable_id(obj: object) -> int:
    real = _real_id(obj)
    held = _ids.get(real)
    if held is not None and (held[2] if held[1] is None else held[1]()) is obj:
        return held[0]
    number = ID_BASE + 16 * len(_numbered)
    try:
        _ids[real] = (number, _weak(obj), None)
    except TypeError:  # no weak reference to a list, a dict, a tuple: held until the next input
        _ids[real] = (number, None, obj)
    _numbered.append(number)
    return number


_numbered: list[int] = []  # the numbers given this input


stable_id = partial(_stable_id)


def reset(seed: int) -> None:
    """Per input: the clock back to its frozen start, every random source reseeded, ids renumbered."""
    _clock["now"], _clock["mono"] = FROZEN_EPOCH, 1000.0
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:  # its folder, which ``gettempdir()`` finds once per process by writing a file of a
        if tempfile.tempdir is None:  # random name (a draw, an inode): set, so that no input's names depend on it
            tempfile.tempdir = next((os.environ[k] for k in ("TMPDIR", "TEMP", "TMP") if os.environ.get(k)), "/tmp")
        tempfile._name_sequence = None  # type: ignore[attr-defined] - its names' generator: again, from ``_rng``
    random.seed(seed)
    _rng.seed(seed + 1)
    _ids.clear()
    _numbered.clear()


# --- captured output --------------------------------------------------------------------------------


class Capture(io.TextIOBase):
    """A text stream that keeps the first ``MAX_CAPTURE`` characters, and counts and digests the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.rest: Any = None  # the digest of what comes past the cap
        self._buffer: _CaptureBuffer | None = None  # (:attr:`buffer`, made when first asked for)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = max(MAX_CAPTURE - self.size, 0)
        if room:
            self.parts.append(text[:room])
        if len(text) > room:
            if self.rest is None:
                self.rest = canon.sha256()
            self.rest.update(text[room:].encode("utf-8", "surrogatepass"))
        self.size += len(text)
        return len(text)

    @property
    def encoding(self) -> str:
        return "utf-8"

    @property
    def buffer(self) -> _CaptureBuffer:
        """The binary stream beneath, as ``sys.stdout.buffer`` is (one per capture): the bytes written to it are kept
        with the text, decoded as UTF-8 (other bytes written as ``\\xff``: they stay distinct)."""
        if self._buffer is None:
            self._buffer = _CaptureBuffer(self)
        return self._buffer

    def detach(self) -> _CaptureBuffer:
        """``sys.stdout = sys.stdout.detach()`` (dkim's ``dkimsign``): the binary stream, as a ``TextIOWrapper``'s."""
        return self.buffer

    def value(self) -> str:
        text = "".join(self.parts)
        if self.size <= MAX_CAPTURE:
            return text
        return text + f"<... {self.size - MAX_CAPTURE} more characters, sha256 {self.rest.hexdigest()}>"


class _CaptureBuffer(io.RawIOBase):
    """The binary side of a :class:`Capture`: what is written to it goes to the capture."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        held = bytes(data)  # (a ``str`` raises, as a binary stream's write does)
        self.capture.write(held.decode("utf-8", "backslashreplace"))
        return len(held)


class FdCapture:
    """Redirects file descriptors 1 and 2 to a file; :meth:`take` returns what was written since."""

    def __init__(self, path: str) -> None:
        import fcntl  # noqa: PLC0415

        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 210)  # out of reach of open(3) and friends
        os.close(fd)
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)

    def take(self) -> str:
        try:
            size = os.lseek(self.fd, 0, os.SEEK_END)
            if size == 0:  # nothing written (most inputs): the file is empty and the offset at 0 already
                return ""
            os.lseek(self.fd, 0, os.SEEK_SET)
            data = os.read(self.fd, min(size, MAX_CAPTURE))
            rest = None
            if size > MAX_CAPTURE:  # at most RLIMIT_FSIZE (16 MiB): digested, not kept
                rest = canon.sha256()
                while chunk := os.read(self.fd, 1 << 20):
                    rest.update(chunk)
            os.ftruncate(self.fd, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if rest is not None:
            text += f"<... {size - MAX_CAPTURE} more bytes, sha256 {rest.hexdigest()}>"
        return text
