"""The harness: runs one function on its input states inside the sandbox and reports output states.

Started inside bubblewrap as ``python -P -s -S -B -c`` with the sandbox's boot lines (the rlimits, then
``runner.main()``). Reads one job (JSON) on stdin and writes JSON lines on a private copy of the
original stdout (:class:`.batch.Channel`); the code under test gets file descriptors 1 and 2 redirected to a
capture file, so nothing it prints can corrupt the channel. Each event carries the job's ``nonce``, and
is encoded and written with functions bound before any code under test ran (replacing ``json.dumps``,
``os.write`` or ``sys.stdout`` changes nothing). This is not a boundary: code in the same interpreter
can find the channel and the nonce; what the host relies on instead is in docs/executors.md ("Output
states", *What a batch can forge*).

Modes: ``explore`` (x only: choose input states by a coverage-guided search, or run the given ones,
and report the chosen states with their output states and the lines each covered) and ``replay`` (any
variant: run the given input states in order). Before each input the harness writes a ``start`` line,
so if the process dies (a crash, the wall clock) the host knows which input did it and restarts the
batch after it. State is reset between inputs: a fresh module namespace built from the scaffold (the
search's own runs restore one build instead, :mod:`.reuse`; what it reports ran on fresh builds), a
fresh working directory, environment variables and stdin, the clock and the random seed.

The job is one JSON line; with ``"wait": true`` a second line follows later (``inputs``, ``skip``): the
first lets the harness start, import and parse the scaffold while the host is still choosing the input
states. No code under test runs before the second line, and the process still runs one batch only.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import types
from functools import partial
from time import process_time as _cpu  # bound before env.freeze(): the batch's phases (its ``done`` event)

from . import ambient, callees, canon, compat, env, fixups, handover, hints, scaffold, standins
from .batch import THREADS_EXIT, Channel, drop_class_attributes, explore, replay  # noqa: F401 - THREADS_EXIT: for the host
from .calls import (
    DEFAULT_NAME,
    by_position,
    drain,
    make_instance,
    standin_default,
    statement_lines,
)
from .placeholders import alias, globals_in, materialize
from .probes import NAME as PROBE
from .probes import TRY, Probes
from .returned import probe, probe_passed
from .standins import LOG, STANDIN_CLASS_NAME, CalibStandIn, is_standin, standin_name
from .values import New, Obj, decode
from .workdir import files_written, own_workdir, prepare_workdir, tidy_tmp

_PLAIN = (int, float, str, bytes)  # module-level values the comparison recorder notes itself (enum members too)
#: Types whose values no call can change (exact types: a subclass may carry attributes)
_IMMUTABLE = frozenset((int, float, complex, str, bytes, bool, type(None)))
#: ``before`` of arguments that are all of :data:`_IMMUTABLE`: the call cannot change them (nothing to compare)
_UNCHANGEABLE = "<unchangeable>"
TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

WORKDIR = "/work"


#: How long the threads an input started may take to finish once it has returned (each, at most four).
THREAD_GRACE = 0.05


def workdir() -> str:
    """``/work`` in bubblewrap; a temporary folder named by the host without it (``--unsafe-no-sandbox``)."""
    return os.environ.get("CALIB_WORKDIR", WORKDIR)


class _Timeout(BaseException):
    """The per-input time limit (a BaseException so that ``except Exception`` in the code cannot eat it)."""


#: After the input's time is up the alarm repeats at this interval: code that catches the first
#: ``_Timeout`` (``except BaseException``, a finalizer) gets another, and the input counts as timed out.
ALARM_REPEAT = 0.05
_alarm = {"armed": False, "fired": False}


def _on_alarm(signum: int, frame: Any) -> None:
    if _alarm["armed"]:  # not once the input is over: the harness's own code is never interrupted
        _alarm["fired"] = True
        raise _Timeout()


def _renumber_threads() -> None:
    """Thread names count up per process (``Thread-5 (_read_response)`` in a traceback x's threads print):
    numbered from 1 again for each input, as in a fresh process."""
    threading = sys.modules.get("threading")
    if threading is not None and callable(getattr(threading, "_counter", None)):
        import itertools  # noqa: PLC0415 - loaded already (the harness's imports use it)

        threading._counter = itertools.count(1).__next__


def _threads() -> set[Any]:
    """The live threads (none when the code never imported ``threading``)."""
    threading = sys.modules.get("threading")
    return set(threading.enumerate()) if threading is not None else set()


def _stray_threads(before: set[Any]) -> bool:
    """Whether threads started since ``before`` still run after a short grace to finish."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    stray = [t for t in threading.enumerate() if t not in before and t is not threading.main_thread()]
    for thread in stray[:4]:
        thread.join(THREAD_GRACE)
    return any(t.is_alive() for t in stray)


class Runner:
    """One function variant in its scaffold, ready to run input states."""

    def __init__(self, job: dict[str, Any], channel: Any) -> None:
        self.job = job
        self.channel = channel
        self.seed = int(job.get("seed", 0))
        self.timeout = float(job.get("input_timeout", 2.0))
        self.workdir = workdir()
        self.sandboxed = not os.environ.get("CALIB_WORKDIR")
        self.placed = scaffold.place(job.get("context", ""), job["function"], trim=job.get("trim") is True)
        self.module = scaffold.Module(self.placed, module_name=job.get("module_name") or "calib_scaffold",
                                      bare=bool(job.get("bare")), fix_ups=job.get("fixups") is not False)
        self.module.extra_globals["id"] = env.stable_id  # the module's id(): see env.ID_BASE
        node = self.placed.node
        self.first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        self.last = node.end_lineno or node.lineno
        self.executable, self.owner = statement_lines(self.placed)
        self.params = hints.analyse(node, skip_first=self.placed.kind in ("method", "classmethod", "property"))
        callees.add_callees(self.params, self.placed)  # ``self`` attributes x's own methods read
        callees.add_guards(self.params, self.placed)  # and the file's decorators of x, before x runs
        callees.add_forwarded(self.params, self.placed)  # what the file's callees do with x's parameters
        # the constructor's parameters (None: self is not built by its constructor)
        self.init = callees.constructor(self.placed, self.params) if self.placed.kind in ("method", "property") and \
            node.name not in INITIALISERS else None
        self.init_fields = [p.name for p in self.init or []]
        self.positional = [p.name for p in self.params.params if p.kind == "positional"]
        self.cls_reads = callees.class_reads(self.placed)  # ``cls.name`` a class method reads
        self.guarded = fixups.guarded_reads(node)  # ``self.attr`` x expects may be missing: not pre-filled
        self.handlers = fixups.handlers(node), (node.name, range(self.first, self.last + 1), scaffold.FILENAME)
        self.caught = fixups.caught(node)  # what x's handlers catch: failing stand-ins raise the file's of them
        # x's statements reached (by first line), filled by the probes compiled into x (.probes); x has
        # started when one is there
        self.lines: set[int] = set()
        self.seen: frozenset[int] | None = None  # the lines when the call ended (not those observing ran)
        self.calling = False  # x was called (the lines before are the build's)
        self.module.extra_globals[PROBE] = self.lines.add
        self.module.extra_globals[TRY] = standins.enter_try
        self.module.rewrite = Probes(self.placed.tree, node).rewrite
        self.poisoned = False  # an input left threads running: this process runs no further input
        self.reuse: Any = None  # while searching: one build for all runs (:class:`.reuse.Reuse`)
        scratch = os.environ.get("CALIB_CAPTURE", "/tmp/.calib_fd")
        self.capture = env.FdCapture(scratch)
        self.null = high_fd(os.open(os.devnull, os.O_RDONLY))
        self.ambient = ambient.Ambient(scratch + "_stdin")  # the input's environment variables and stdin

    def covered(self) -> frozenset[int]:
        """x's statements (by first line) the last input reached."""
        lines = self.lines if self.seen is None else self.seen
        return frozenset(self.owner[line] for line in lines if line in self.owner)

    def emit(self, event: dict[str, Any]) -> None:
        self.channel.emit(event)

    # --- one input ---------------------------------------------------------------------------------
    def run(self, state: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """Run one input state; returns (status, reason, canonical output state).

        Everything the input costs is under its timer: the call, observing the output state (a
        ``__repr__`` of the code's own objects can loop), and then collecting the input's garbage, so
        that a finalizer (``__del__``, a weakref callback) that loops is this input's timeout and not
        the next input's. An output state that cannot be observed whole (a bound of
        :mod:`.canon` hit, an exception while observing) makes the input ``unobservable``: invalid
        for x, a non-match for a candidate, never equal to anything."""
        files = _as_walked(self.workdir, state.get("files") or {})
        # descriptors 0-2 back in place: code may close them (``open(2)`` for a file name of 2 or of True
        # closes descriptor 2 with the file), and the next inputs would write nowhere or reopen them
        os.dup2(self.null, 0)
        os.dup2(self.capture.fd, 1)
        os.dup2(self.capture.fd, 2)
        prepare_workdir(self.workdir, files)
        if self.sandboxed:  # (run by the host without a sandbox, ``/tmp`` is the machine's: left alone)
            tidy_tmp()
        env.reset(int(state.get("seed", self.seed)))
        _renumber_threads()
        self.ambient.reset()
        LOG.reset()
        canon.CAPS.clear()
        self.lines.clear()
        self.seen, self.calling = None, False
        self.capture.take()
        out: dict[str, Any] = {}
        status, reason = "ok", ""
        real_out, real_err = sys.stdout, sys.stderr
        _alarm["armed"], _alarm["fired"] = True, False
        signal.setitimer(signal.ITIMER_REAL, self.timeout, ALARM_REPEAT)
        # The alarm may land in any handler below: one outer handler takes it wherever it lands.
        try:
            try:
                status, reason = self._execute(state, out, files)
            finally:
                sys.stdout, sys.stderr = real_out, real_err
            gc.collect()  # the input's garbage (its locals are gone with _execute's frame)
        except _Timeout:
            sys.settrace(None)
            status, reason = "invalid", "timeout"
            out.setdefault("outcome", "timeout")
        except BaseException as exc:  # noqa: BLE001 - an observation that failed; keep what we have
            out["unobservable"] = type(exc).__name__
            status, reason = "invalid", "unobservable"
        finally:
            _alarm["armed"] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = real_out, real_err
        if _alarm["fired"] and reason != "timeout":  # the code caught the alarm and went on
            status, reason = "invalid", "timeout"
            out.setdefault("outcome", "timeout")
        elif canon.CAPS and status != "invalid":  # what was observed is incomplete (and can be huge): dropped
            status, reason = "invalid", "unobservable"
            out = {"unobservable": ",".join(canon.CAPS)}
        return status, reason, out

    def _execute(self, state: dict[str, Any], out: dict[str, Any], files: dict[str, str]) -> tuple[str, str]:
        """Build, call and observe (in ``out``); the status and reason."""
        status, reason = "ok", ""
        stdout, stderr = env.Capture(), env.Capture()
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        instance: Any = None
        before = self_before = None
        returned, value, probes, passed = False, None, None, []
        threads_before = _threads()
        real = sys.stdout, sys.stderr
        try:
            sys.stdout, sys.stderr = stdout, stderr
            self.ambient.apply(state)  # before the module is built: its top level may read them too
            ns = self.module.build() if self.reuse is None else self.reuse.build(stdout, stderr)
            standins.fail_as([standins.handled(name, ns) for name in self.caught])
            # self and the arguments are built in the input's stand-in mode too (``isinstance(v, Null)``)
            mode = standin_default(state.get("standins")), 2 if state.get("standins") == "items" else 0
            LOG.reset(*mode)
            call, instance = self._target(ns, state)
            args, kwargs = self._arguments(state, ns)
            if instance is not None and "Arg(" in str(state.get("self", "")):  # ``node is self.head_node``
                alias(instance, state["self"], self.positional, args, kwargs)
            texts = state.get("probe") or []  # a returned closure's first arguments (returned.closure_params)
            given = [materialize(decode(text), ns) for text in texts]
            before = _UNCHANGEABLE if all(type(v) in _IMMUTABLE for v in (*args, *kwargs.values())) \
                else canon.dumps(canon.canonical([args, kwargs]))
            self_before = canon.dumps(canon.canonical(instance)) if instance is not None else None
            LOG.reset(*mode)  # what building them did with stand-ins is not x's
            self.lines.clear()  # nor the lines building them ran (a constructor calling x)
            self.calling = True
            standins.StandInFinder.active = True
            lines = (self.first, self.placed.node.lineno, self.last)
            try:
                try:
                    value = call(*args, **kwargs)
                    value = drain(value)
                    probes = probe(value, lines, given, texts)  # a closure x made
                except Exception:
                    passed = probe_passed(lines)  # functions x handed to stand-ins: also when x raised
                    raise
                passed = probe_passed(lines)
            finally:
                sys.settrace(None)  # a trace function the code set
                self.seen = frozenset(self.lines)
                standins.StandInFinder.active = False
                standins.StandInFinder.forget()
            returned = True
        except _Timeout:
            raise
        except BaseException as exc:  # noqa: BLE001 - every exception is an observation
            sys.settrace(None)
            out["exception"] = canon._qualname(type(exc))
            status, reason = self._classify(exc)
        finally:
            sys.stdout, sys.stderr = real
        if returned:  # observed apart from the call: a value that cannot be observed is not an exception of x's
            out["return"] = canon.canonical(value)
        if probes is not None or passed:
            out["probes"] = [*(probes or []), *passed]
        self._observe(out, args, kwargs, before, instance, self_before, stdout, stderr, files)
        if _stray_threads(threads_before):
            # threads of the code's (a pool's workers, a watcher) still run after it returned: the
            # output state is not final, and they would act on during the next inputs
            self.poisoned = True
            status, reason = "invalid", "threads"
            out["outcome"] = "threads"
        return status, reason

    def _observe(self, out: dict[str, Any], args: list[Any], kwargs: dict[str, Any], before: str | None,
                 instance: Any, self_before: str | None, stdout: env.Capture, stderr: env.Capture,
                 files: dict[str, str]) -> None:
        out["calls"] = LOG.entries
        if LOG.overflow:  # past the log's limit: their number and digest
            rest = canon.digest(canon.dumps(LOG.overflow).encode("utf-8", "surrogatepass"))
            out["calls"] = [*LOG.entries, ["truncated", len(LOG.overflow), rest]]
        # Mutable arguments and self enter the output state when the call changed them: their
        # unchanged state is the input itself and would make every input a "distinct output".
        if before is not _UNCHANGEABLE:
            after = canon.canonical([args, kwargs])
            if before is not None and canon.dumps(after) != before:
                out["args"] = after
        if instance is not None:
            self_after = canon.canonical(instance)
            if canon.dumps(self_after) != self_before:
                out["self"] = self_after
        out["stdout"] = canon.scrub(stdout.value())
        out["stderr"] = canon.scrub(stderr.value())
        fd_text = self.capture.take()
        if fd_text:
            out["fd_output"] = canon.scrub(fd_text)
        out["files"] = files_written(self.workdir, files)
        changed = self.ambient.changes()
        if changed:  # os.environ as the code left it: the names it set, changed or deleted
            out["env"] = changed

    def _classify(self, exc: BaseException) -> tuple[str, str]:
        context, hops = exc.__context__, 0
        while context is not None and hops < 20:  # e.g. ``except stand_in:`` turned the alarm into a TypeError
            if isinstance(context, _Timeout):
                return "invalid", "timeout"
            context, hops = context.__context__, hops + 1
        if isinstance(exc, standins.StandInLoop):
            return "invalid", "standin_loop"
        if isinstance(exc, MemoryError):
            return "invalid", "memory"
        if isinstance(exc, RecursionError):
            return "invalid", "recursion"
        if isinstance(exc, env.SandboxDenied):
            return "invalid", "sandbox_denied"
        if not (self.calling and self.lines):  # x's first statement never ran
            return "invalid", "call_failed"
        if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
            return "invalid", "missing_name"
        if isinstance(exc, ImportError):
            return "invalid", "import"
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001
            message = ""
        if type(exc) is standins.CalibStandInError and _raised_by_code(exc):
            return "raised", ""  # ``raise ValidationError(errors)``, the class withheld: x's own, not a misuse
        if STANDIN_CLASS_NAME in message and not (standins.asked_to_fail(exc)
                                                  and fixups.passed_on(exc, self.lines, *self.handlers)):
            return "invalid", "standin"
        return "raised", ""

    def _target(self, ns: dict[str, Any], state: dict[str, Any]) -> tuple[Any, Any]:
        placed = self.placed
        if not placed.classes:
            target = ns[placed.node.name]
            if target is None and placed.node.decorator_list:  # a decorator that registered x and returned None
                target = self.module.undecorated(ns)
            elif isinstance(target, classmethod | staticmethod):  # ``@classmethod def from_json(cls, path)`` at
                target = target.__func__  # module level, made a class's method later: cls is an argument
            return target, None
        owner: Any = ns[placed.classes[0]]
        for name in placed.classes[1:]:
            owner = getattr(owner, name)
        if not isinstance(owner, type) and type(owner).__name__ == placed.classes[-1]:
            owner = type(owner)  # ``@singleton class VarInt:``: the module name is the class's one instance
        name = placed.node.name
        if name.startswith("__") and not name.endswith("__") and isinstance(owner, type):
            name = f"_{owner.__name__.lstrip('_')}{name}"  # private name mangling
        raw = owner.__dict__.get(name) if isinstance(owner, type) else None
        if raw is None:
            raise scaffold.ScaffoldError(f"{placed.qualname} was not defined")
        if placed.kind == "method" and not placed.node.decorator_list and isinstance(raw, types.FunctionType) \
                and not scaffold._defined_by(raw, placed.node):  # x in a branch its class did not take
            raw = self.module.undecorated(ns)  # (``if PY2: def represent_str`` beside the other one): x itself
        if isinstance(raw, staticmethod):
            if placed.kind == "classmethod":  # ``__new__``: static, and its first argument is the class
                return partial(raw.__func__, owner), None
            return raw.__func__, None
        if isinstance(raw, classmethod):
            # a class method defined after x (``cls._get_frames``): a stand-in (a class on a withheld base
            # answers such reads itself, named after the base, while x runs)
            withheld = any("_calib_base" in vars(k) for k in owner.__mro__)
            for attr in () if withheld else self.cls_reads:
                if not hasattr(owner, attr):
                    try:
                        setattr(owner, attr, CalibStandIn("cls." + attr))
                    except Exception:  # noqa: BLE001, S110 - a class that refuses: the read fails, as before
                        pass
            return raw.__get__(None, owner), None
        spec = decode(state["self"]) if state.get("self") else None
        reads = [p.name for p in self.params.self_params]
        if placed.node.name in INITIALISERS:  # x initialises self: it gets an instance not yet initialised
            try:
                instance = owner.__new__(owner)
            except Exception:  # noqa: BLE001
                instance = None
            if instance is not None and isinstance(raw, types.FunctionType):
                return types.MethodType(raw, instance), instance
        if isinstance(spec, New):  # built by its constructor with the input's arguments
            args = [materialize(a, ns) for a in spec.args]
            attrs = globals_in(dict(spec.attrs), ns)  # ``self.subcon is GreedyBytes``: Global('GreedyBytes')
            try:
                instance = owner(*args)
            except Exception:  # noqa: BLE001 - the constructor refused them: a bare instance, and the
                instance = None  # arguments of annotated fields become those attributes
                if self.init_fields:
                    attrs = {**dict(zip(self.init_fields, args)), **attrs}
            instance = make_instance(owner, Obj(**attrs), reads, instance, self.guarded)
        else:
            instance = make_instance(owner, globals_in(spec, ns), reads, skip=self.guarded)
        if isinstance(raw, property):
            # x is its getter, or (``@field_names.setter``) its setter or deleter: called with the input's value
            accessor = {"setter": raw.fset, "deleter": raw.fdel}.get(placed.accessor or "")
            if accessor is not None:
                return types.MethodType(accessor, instance), instance
            return (lambda: raw.fget(instance)), instance  # type: ignore[misc]
        if isinstance(raw, types.FunctionType):
            return types.MethodType(raw, instance), instance
        if _computed(raw):  # x runs when the attribute is read: read while x is observed, not here
            return (lambda: raw.__get__(instance, owner)), instance
        if placed.node.decorator_list and hasattr(type(raw), "__get__") and not is_standin(raw):
            return self._read(raw, instance, owner), instance
        return raw.__get__(instance, owner), instance

    def _read(self, raw: Any, instance: Any, owner: type) -> Any:
        """x held by a descriptor of another name (dbf's ``@LazyAttr def index(yo)``, ``@MutableDefault def
        _field_types()``: each runs x when the attribute is read): the attribute read while x is observed, and what
        the read gave is x's value when x ran in it, else what x is called as (a decorator's bound wrapper).
        Before, the read ran x before its lines counted, and then the harness called x's value: every input
        ``call_failed``."""
        def read(*args: Any, **kwargs: Any) -> Any:
            value = raw.__get__(instance, owner)
            return value if self.lines else value(*args, **kwargs)
        return read

    def _arguments(self, state: dict[str, Any], ns: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        given = {name: materialize(decode(src), ns) for name, src in (state.get("args") or {}).items()}
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        names = [p.name for p in self.params.params]
        if any(name not in names for name in given):
            given = by_position(self.params.params, given)
        gap = False  # an argument left out (its default applies): later positional ones go by keyword
        for p in self.params.params:
            value = given.pop(p.name, DEFAULT)
            if value is DEFAULT or is_standin(value) and standin_name(value) == DEFAULT_NAME:
                gap = gap or p.kind == "positional"
                continue
            if p.kind == "positional" and not gap:
                args.append(value)
            elif p.kind == "vararg":
                args.extend(value)
            elif p.kind == "kwarg":
                kwargs.update(value)
            else:
                kwargs[p.name] = value
        kwargs.update(given)  # names x does not have: the call fails the way Python says
        return args, kwargs


INITIALISERS = ("__init__", "__post_init__")


def _computed(raw: Any) -> bool:
    """Whether x is the function of a descriptor that computes an attribute when it is read: functools'
    ``cached_property`` and the many classes like it (bottle's and werkzeug's ``cached_property``, pyramid's
    ``reify``, ``lazy_property``). Reading it in :meth:`_target` ran x's body before its lines were
    counted, and then called what x returned (bottle's ``SimpleTemplate.code`` and cssselect2's
    ``ElementWrapper.lang``: coverage 0.00 with ten valid inputs)."""
    name = type(raw).__name__.lower()
    return hasattr(type(raw), "__get__") and ("property" in name or name in ("reify", "lazy", "lazy_attribute"))
DEFAULT = object()  # an argument the input state leaves out
HIGH_FD = 200  # the harness's own descriptors sit here, out of reach of open(3), os.write(4, ...)


def _as_walked(root: str, files: dict[str, str]) -> dict[str, str]:
    """The input's file names as a walk of the folder spells them: ``sub//a.txt`` and ``sub/./a.txt`` are written as
    ``sub/a.txt``, and the output state would otherwise show each such file deleted and another one written (a
    name outside the folder, never written, is kept as given)."""
    out = {}
    for name, content in files.items():
        path = os.path.normpath(os.path.join(root, name))
        inside = path.startswith(root + os.sep)
        out[os.path.relpath(path, root) + ("/" if name.endswith("/") else "") if inside else name] = content
    return out


def _raised_by_code(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a statement of the scaffold (x's ``raise``), not inside the harness."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == scaffold.FILENAME


def high_fd(fd: int) -> int:
    """Move a descriptor to the first free number >= HIGH_FD (below the sandbox's RLIMIT_NOFILE)."""
    import fcntl  # noqa: PLC0415

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    os.close(fd)
    return moved


def _read_part(source: Any) -> dict[str, Any]:
    part = json.loads(source.readline() or b"{}")
    if not isinstance(part, dict):
        raise ValueError("a job part is not a JSON object")
    return part


def main(lock: Any = None) -> None:
    """Run one job (started by the sandbox's boot line, with the garbage collector off until the code
    under test is about to run: the harness's own start-up allocates much and frees little).

    ``lock()`` loads the batch process's own seccomp program (:class:`.zygote.Lock`; none without a
    sandbox): called before any code under test runs, once the job is read; with ``then_replay`` in an
    exploring job, in both processes once the analysed batch has forked x's replay (:mod:`.handover`)."""
    began = _cpu()
    lock = lock or handover.NoLock()
    channel_fd = high_fd(os.dup(1))
    source = os.fdopen(high_fd(os.dup(0)), "rb")  # the job; fd 0 itself is the code's: it reads nothing
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    job = _read_part(source)
    then_replay = job.get("mode") == "explore" and job.get("then_replay") is True and not job.get("wait")
    if not then_replay:
        lock()
    nonce = job.pop("nonce", None)
    channel = Channel(channel_fd, nonce if isinstance(nonce, str) else None)
    if not own_workdir(workdir()):  # never empty a folder that is not the sandbox's (or the host's temp one)
        channel.emit({"event": "error", "reason": "setup", "message": f"{workdir()} is not the sandbox's working "
                      "directory (a tmpfs mount) and CALIB_WORKDIR is not set: the harness runs only in the sandbox"})
        os._exit(2)
    if job.get("mode") == "tests":  # a program and its assert tests (calib/probes/testrun.py)
        from . import testcases  # noqa: PLC0415

        testcases.main(job, channel, source)
        return
    if job.get("mode") == "explore" and job.get("inputs") is None:
        from . import cmplog, synth  # noqa: F401, PLC0415 - the search reads the real clock: import before freeze()
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    os.makedirs(workdir(), exist_ok=True)
    sys.path.extend(job.get("import_paths", []))
    sys.setrecursionlimit(int(job.get("recursion_limit", 1000)))
    signal.signal(signal.SIGALRM, _on_alarm)
    # "Exception ignored in __del__" reports come whenever the collector runs, not when the code does:
    # they would make outputs depend on the batch's history
    sys.unraisablehook = lambda unraisable: None
    env.freeze()
    LOG.canon = canon.canonical
    sys.meta_path += [compat.CompatFinder, standins.StandInFinder]  # ``six`` where none is installed, then stand-ins
    try:
        runner = Runner(job, channel)  # parses and analyses the scaffold; runs none of its code
    except (scaffold.ScaffoldError, SyntaxError, ValueError) as exc:
        channel.emit({"event": "error", "reason": "unparsable", "message": str(exc)})
        return
    analysed = _cpu()
    if job.get("wait"):  # the rest of the job (the input states) comes once the host knows it
        rest = _read_part(source)
        if not rest:
            return  # the host needed no batch after all
        job.update(rest)
    source.close()
    if then_replay:  # compiled once, before the fork: x's replay builds from the same code objects
        runner.module.precompile()
    handing: Any = handover.fork(lock, high_fd, [runner.workdir, *(["/tmp"] if runner.sandboxed else [])]) \
        if then_replay else None
    if isinstance(handing, dict):  # x's replay (a fresh process: nothing of the code has run in it)
        job.update(mode="replay", handed_over=True, inputs=handing["inputs"], skip=handing["skip"])
        handing = None
        began = analysed = _cpu()  # its analysis was the parent's (this process's CPU starts at the fork)
    # What exists now (the harness, its imports and their garbage, the parsed scaffold) is never scanned
    # by the collector: the collection after the first build below looks only at what that build made
    # (the code's garbage, whose finalizers run there as before), and the one before each input only at
    # what the inputs created (a full one cost ~1 ms per input, and 2-8 ms here before the build).
    gc.freeze()
    gc.enable()
    env.install_policy()
    try:
        ns = runner.module.build()  # also fills module.warnings: which statements became stand-ins
    except BaseException:  # noqa: BLE001 - reported per input
        ns = {}
    drop_class_attributes(runner, runner.params, ns)  # in every mode: explore and replay build self alike
    if job["mode"] == "explore":  # what the search reads of the first build (a replay reads none of it)
        runner.params.plain_globals = frozenset(k for k, v in ns.items() if v is None or isinstance(v, _PLAIN))
        runner.params.bound_standins = any(is_standin(v) or type(v) is standins.StandInModule for v in ns.values())
    gc.collect()
    gc.freeze()
    built = _cpu()
    if job["mode"] == "explore":
        chosen = explore(runner, job)
        if handing is not None:
            handing.send(chosen)
    else:
        replay(runner, job)
    user, system = os.times()[:2]
    # for benchmarks/executor.py: the CPU of the batch's phases, in ms (what came before ``main`` is not in them)
    phases = {"analysis": analysed - began, "first_build": built - analysed, "inputs": _cpu() - built}
    runner.emit({"event": "done", "cpu_s": round(user + system, 4),
                 "phases_ms": {k: round(v * 1000, 2) for k, v in phases.items()},
                 **({"handed_over": True} if job.get("handed_over") else {})})
    # Nothing of the code's runs after its last input: no atexit handlers, no finalizers at interpreter
    # exit (they ran outside every input's timer, and could write after "done")
    os._exit(0)
