"""Recording stand-ins for names and modules the sandbox cannot resolve (runs inside the sandbox).

A stand-in takes the place of an unimportable module (``requests``), a name the file context does not
define, or ``self`` when the context class cannot be built. Every *call* to a stand-in (and every item
or attribute it is given) is appended to the call log, which is part of the output state (docs/architecture.md,
"Execution semantics": "ordered log of calls to mocked dependencies"); a call returns the configured
default, by default another stand-in named after the call so that ``requests.get(url).json()["x"]``
keeps working and stays visible in the log.

Stdlib only: this module is imported by the harness inside the sandbox.
"""

from __future__ import annotations

import builtins
import re
import sys

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: The class name appears in error messages ("… 'CalibStandIn' …") and marks them as scaffolding failures.
STANDIN_CLASS_NAME = "CalibStandIn"


_STANDIN_DEFAULT = object()


class CallLog:
    """The ordered log of calls to stand-ins for one input state."""

    def __init__(self) -> None:
        self.entries: list[list[Any]] = []
        self.overflow: list[list[Any]] = []  # entries past ``limit``
        self.canon = repr  # replaced by the harness with canon.canonical
        self.limit = 1000
        self.ops = 0  # stand-in operations this input (calls, arithmetic, attribute reads ...)
        self.budget = OPS_BUDGET
        self.default: Any = _STANDIN_DEFAULT
        self.trying = 0  # x's ``try`` bodies (with handlers) now running: see RAISE_IN_TRY
        self.try_calls = 0  # stand-in calls made while one ran, this input
        self.handed = 0  # stand-in calls given a plain value as first argument, this input (see ECHO)
        self.called = 0  # stand-in calls, this input
        self.nth = 0  # the ``nthK`` mode: K (see Nth)
        self.items = 0
        self.truthy = True
        self.agree = False
        self.mixed: int | None = None
        self.forced: dict[str, int] = {}  # a mixed mode's draws set by the search (``mixedN~ID:V``, see Mixed)
        self.drawn: dict[str, tuple[int, int]] = {}  # this input's draws: key -> (n, value), the first DRAWN
        self.answered: dict[str, str] = {}  # mixed modes: a stand-in a call answered (its name) -> that call's draw
        self.wants: dict[str, set[int]] = {}  # a call's draw -> the shaped answers fitting x's use of its answer
        self.counts: dict[str, int] = {}
        self.seen: set[str] = set()
        self.fresh = REPEAT_FROM
        self.passed: list[tuple[str, Any]] = []  # (call:position, function) handed to stand-in calls
        self.held: dict[tuple[int, str], Any] = {}  # class attributes reached through a withheld base, this input
        self.last: dict[str, tuple[int, str, Any]] = {}  # mixed modes, per name: (log length, asked, answer)

    def record(self, kind: str, name: str, *payload: Any) -> None:
        self.ops += 1
        if self.ops > self.budget:
            raise StandInLoop(f"{STANDIN_CLASS_NAME} {name}: more than {self.budget} stand-in operations in one input")
        # functions handed to a stand-in: x's own are called after x (returned.probe_passed)
        if kind == "call" and len(payload) == 2 and len(self.passed) < MAX_PASSED_KEPT:
            for pos, arg in [*enumerate(payload[0]), *payload[1].items()]:
                if type(arg) is _FUNCTION and not any(arg is f for _, f in self.passed):
                    self.passed.append((f"{name}:{pos}", arg))
        entry = [kind, name, *[self.canon(p) for p in payload]]
        if self.ops > REPEAT_FROM:  # a long log that only repeats itself: the code turns on stand-ins
            key = repr(entry)
            if key not in self.seen:
                self.seen.add(key)
                self.fresh = self.ops
            elif self.ops - self.fresh > REPEAT_LIMIT:
                raise StandInLoop(f"{STANDIN_CLASS_NAME} {name}: {REPEAT_LIMIT} stand-in operations repeating the log")
        # past the limit the entries are kept aside (at most ``budget``): the output state shows their
        # number and digest, so two logs that differ only there still differ
        (self.entries if len(self.entries) < self.limit else self.overflow).append(entry)

    def reset(self, default: Any = _STANDIN_DEFAULT, items: int = 0) -> None:
        self.entries = []
        self.overflow = []
        self.passed = []
        self.held = {}
        self.last = {}
        self.ops = 0
        self.seen: set[str] = set()  # log entries past REPEAT_FROM operations (keys: their repr)
        self.fresh = REPEAT_FROM  # the operation that last added an entry not in ``seen``
        # the ``mixedK`` modes: what each call returns, and how each stand-in behaves, is drawn per name
        self.mixed = default.variant if isinstance(default, Mixed) else None
        self.forced = default.forced if isinstance(default, Mixed) else {}
        self.drawn = {}
        self.answered = {}
        self.wants = {}
        self.counts = {}
        self.nth = default.k if isinstance(default, Nth) else 0
        if self.mixed is not None or self.nth:
            default = _STANDIN_DEFAULT
        self.called = 0
        self.default = default
        self.trying = self.try_calls = self.handed = 0
        self.items = items  # how many items iterating a stand-in yields (the ``items`` mode: 2)
        self.truthy = default is not False  # the ``false`` mode: stand-ins are falsy
        self.agree = default is True  # the ``true`` mode: comparisons with stand-ins hold

    def draw(self, key: str, n: int, spread: bool = False, more: int = 0) -> int:
        """A number in ``range(n)`` fixed by the mixed variant and ``key`` (:func:`fnv1a`), unless the mode sets
        that draw (:class:`Mixed`: then in ``range(n + more)``, ``more`` answers a variant never draws); recorded
        in :attr:`drawn` (with the range ``n``).

        FNV's low bits follow only the characters' low bits (``h % 2`` is their parity, the same for 'str'
        and 'int' in every variant); ``spread`` mixes all bits down first (murmur3's finaliser). The older
        draws (truth values, lengths, returns) keep the plain hash, so their inputs replay as before."""
        h = fnv1a(f"{self.mixed}:{key}")
        if spread:
            h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
            h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
            h ^= h >> 16
        value = h % n
        if self.forced and (forced := self.forced.get(draw_id(key))) is not None:
            value = forced % (n + more)
        if len(self.drawn) < DRAWN and key not in self.drawn:
            self.drawn[key] = (n, value)
        return value

    def used(self, name: str, fits: tuple[int, ...]) -> None:
        """x used the stand-in ``name`` as data those shaped answers are (:data:`_FITS`): where a call answered it
        (mixed modes), the search may set that call's draw to one of them (:attr:`wants`)."""
        if (of := self.answered.get(name)) is not None:
            self.wants.setdefault(of, set()).update(fits)

    def mixed_return(self, name: str, asked: str, args: tuple[Any, ...] = ()) -> Any:
        """What the k-th call of the stand-in ``name`` returns in a mixed mode, given what it was asked
        (``asked``: its logged arguments): a mocked dependency answers according to the question. Half
        the calls with several arguments that would return a stand-in hand them back instead, as a tuple
        (``start, end = cls.range_check(start, end)``: a checker that passes them through), so what x
        does next turns on its own input. (Not a call with one: ``pre, post = split(number)`` could not
        unpack ``number``.) Nothing here depends on how x uses the answer: a candidate that stores it
        before unpacking it gets the same one."""
        k = self.counts[name] = self.counts.get(name, 0) + 1
        key = f"{name}{asked}#{k}"
        owner, _, method = name.rpartition(".")  # ``d.items()`` of ``d = yaml.load(f)``: dicts would fit that answer
        if (fits := _FITS.get(method)) is not None:
            self.used(owner, fits)
        drawn = self.draw(key, len(_MIXED_RETURNS), more=len(_SHAPED_RETURNS))
        if drawn >= len(_MIXED_RETURNS):
            return _SHAPED_RETURNS[drawn - len(_MIXED_RETURNS)]()
        choice = _MIXED_RETURNS[drawn]
        if choice is _STANDIN_DEFAULT:
            if len(args) > 1 and self.draw(key + "?echo", 2, spread=True) == 0:
                return args
            typed = _TYPED_RETURNS.get(method)
            if typed is not None and self.draw(key + "?typed", 2, spread=True) == 0:
                return typed  # ``key.encode(...).decode("utf-8")``
            self.answered[name + "()"] = key
            return CalibStandIn(name + "()")
        if choice is RAISE:
            raise FAILURE[0](f"{STANDIN_CLASS_NAME} {name} {FAILED}: this call fails)")
        return list(choice) if isinstance(choice, list) else choice


#: ``LOG.default = RAISE``: every call to a stand-in raises (an input state where dependencies fail).
RAISE = object()
#: ``LOG.default = RAISE_IN_TRY`` (mode ``raise_in_try``): a call to a stand-in raises while x runs the body of
#: one of its ``try`` statements that has handlers (``LOG.trying``, kept by x's probes: :mod:`.probes`),
#: and otherwise returns a stand-in: ``try: field.deserialize(v) except ValidationError:`` reaches its
#: handler without ``is_collection(value)`` before it failing too. The search tries it on an input whose
#: run called a stand-in there (``LOG.try_calls``; :func:`.synth.search`).
RAISE_IN_TRY = object()
#: ``LOG.default = RAISE_OTHER_IN_TRY`` (mode ``raise_other_in_try``): as :data:`RAISE_IN_TRY`, the call raising
#: :class:`CalibStandInFailure`, which no withheld name stands for: ``except mutagen.id3.ID3NoHeaderError:`` (that
#: is :class:`CalibStandInError` itself) lets it through to the ``except Exception as err:`` after it. The search
#: tries it after ``raise_in_try`` where x has such a broad handler after another (:func:`.hints.broad_after`).
RAISE_OTHER_IN_TRY = object()
#: ``LOG.default = ECHO`` (mode ``echo``): a call to a stand-in returns its first argument, as the many helpers
#: that clean, convert or check a value and hand it back do (``number = clean(number, ' -').strip()`` in a
#: withheld ``stdnum.util``, ``to_text(s)``, ``ensure_list(v)``), so what x does next turns on its own input;
#: a call without arguments returns a stand-in.
ECHO = object()


def enter_try(step: int) -> None:
    """x entered (1) or left (-1) the body of a ``try`` with handlers (:func:`.probes.mark_tries`)."""
    LOG.trying += step


#: Stand-in operations one input may make. A loop that only turns on stand-ins (``pos += 1`` on a
#: stand-in index that always reads as 0) never ends by itself; this ends it in a fraction of the
#: ``input_timeout`` it would otherwise hold a worker for (the input is invalid either way).
OPS_BUDGET = 10_000
#: Past ``REPEAT_FROM`` operations, ``REPEAT_LIMIT`` operations in a row that add no log entry not seen
#: since (arithmetic adds none) end the input the same way, sooner: ``while True: line = fp.readline()``
#: on a stand-in ``fp`` repeats the same entries; a loop over the input's own data (``dep.send(i)``) does not.
#: Counted from the first operation (1,000 before issue 24's eighteenth round: such a loop then ran 2,000
#: operations, and tomllib's ``parse_key`` spent 97 % of its search in them; docs/executors.md, "Measured").
REPEAT_FROM = 0
REPEAT_LIMIT = 1_000
MAX_PASSED_KEPT = 32
#: The longest name a stand-in reached from another one gets (:func:`_child`).
MAX_NAME = 400
#: The longest text a stand-in is added to that still gives a text (:meth:`CalibStandIn.__add__`).
MAX_TEXT = 4096


class StandInLoop(BaseException):
    """Raised by every stand-in operation past :data:`OPS_BUDGET` in one input (not an ``Exception``:
    ``except Exception`` in the code does not swallow it)."""


class CalibStandInError(OSError, ValueError, KeyError, TypeError, RuntimeError, ArithmeticError):
    """What a failing stand-in raises: caught by the handlers real dependency failures would reach. An
    attribute it lacks is a stand-in, as the withheld exception class's would be: ``except
    ValidationError as error: error.messages``. Keyword arguments are taken as attributes: ``raise
    ValidationError(errors, valid_data=result)`` with the class withheld."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args)
        for key, value in kwargs.items():
            if not key.startswith("__"):
                setattr(self, key, value)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return CalibStandIn(f"{type(self).__name__}.{attr}")


#: In the message of a failure the input state asked for (a stand-in in mode ``raise``): :func:`asked_to_fail`.
FAILED = "failed (input state"


def asked_to_fail(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure the input state asked a stand-in for, not one of a stand-in misused."""
    return type(exc) in (CalibStandInError, FAILURE[0], CalibStandInFailure) and FAILED in str(exc)


class CalibStandInFailure(Exception):
    """What a failing stand-in call raises in the mode ``raise_other_in_try``: a failure of none of the classes
    x's handlers name (:data:`RAISE_OTHER_IN_TRY`)."""


#: The class a failing stand-in call raises (``FAILURE[0]``): :class:`CalibStandInError`, or one also derived from the
#: exception classes of x's file that x's handlers catch (:func:`fail_as`).
FAILURE: list[type] = [CalibStandInError]
_FAILURES: dict[tuple[type, ...], type] = {}
#: Builtin exceptions a dependency's call may raise that :class:`CalibStandInError` is not already (its bases are
#: ``OSError``, ``ValueError``, ``KeyError``, ``TypeError``, ``RuntimeError``, ``ArithmeticError``), and that combine
#: with it: x's ``except IndexError:`` around a withheld parser's calls (ofxparse's ``OfxParser.parseInvstmtrs``;
#: :func:`handled`). Not ``MemoryError`` nor ``RecursionError``, which the harness reads as the input's own failure.
BUILTIN_FAILURES = frozenset({
    "IndexError", "OverflowError", "ZeroDivisionError", "FloatingPointError", "EOFError", "NotImplementedError",
    "UnicodeError", "TimeoutError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "ConnectionAbortedError", "BrokenPipeError", "FileNotFoundError", "FileExistsError", "PermissionError",
    "IsADirectoryError", "NotADirectoryError", "InterruptedError", "BlockingIOError"})


def handled(name: str, ns: dict[str, Any]) -> Any:
    """The class x's ``except name:`` catches, as the module ``ns`` binds it, or the builtin one (of
    :data:`BUILTIN_FAILURES`) where the module does not bind the name (None otherwise)."""
    if name in ns:
        return ns[name]
    return getattr(builtins, name, None) if name in BUILTIN_FAILURES else None


def fail_as(classes: list[Any]) -> None:
    """Make failing stand-in calls raise an instance of the exception classes in ``classes`` (those of x's ``except``
    clauses that x's file defines, and the builtin ones of :data:`BUILTIN_FAILURES`) besides
    :class:`CalibStandInError`: ``try: validator.validate(settings) except ValidationError as e:`` reaches its
    handler (dynaconf's ``OrValidator.validate``). A class that cannot be combined (its layout or metaclass
    conflicts) is left out."""
    wanted = tuple(dict.fromkeys(cls for cls in classes if isinstance(cls, type) and issubclass(cls, Exception)
                                 and not issubclass(CalibStandInError, cls) and not is_standin(cls)))
    made = _FAILURES.get(wanted)
    if made is None:  # once per module build (called before every input)
        bases: list[type] = []
        for cls in wanted:
            try:
                type("CalibStandInError", (CalibStandInError, *bases, cls), {})
            except Exception:  # noqa: BLE001 - a layout, MRO or metaclass conflict
                continue
            bases.append(cls)
        made = type("CalibStandInError", (CalibStandInError, *bases), {}) if bases else CalibStandInError
        if len(_FAILURES) >= 64:  # a module built afresh for each input makes new classes each time
            _FAILURES.clear()
        _FAILURES[wanted] = made
    FAILURE[0] = made


class CalibStandInWarning(CalibStandInError, UserWarning):
    """A warning category of a withheld module (``warn(msg, TqdmExperimentalWarning)``): a warning class,
    and otherwise :class:`CalibStandInError`."""


LOG = CallLog()


class Mixed:
    """``LOG.reset(Mixed(k))``: the ``mixedK`` stand-in mode (see :func:`.calls.standin_default`), with the draws
    the mode names set: ``mixedK~ID:V~...`` answers V (mod the draw's range) wherever the draw whose key has the
    :func:`draw_id` ID is made, whatever K draws there. The search sets them one at a time (:func:`forcing`), so a
    branch that needs two stand-ins' answers to agree is reached from an input that had one of them right."""

    def __init__(self, variant: int, forced: dict[str, int] | None = None) -> None:
        self.variant = variant
        self.forced = forced or {}

    @classmethod
    def parse(cls, mode: str) -> Mixed:
        head, *parts = mode[5:].split("~")
        return cls(int(head), {i: int(v) for i, _, v in (part.partition(":") for part in parts)})


#: The draws of a mixed mode an input records (:attr:`CallLog.drawn`), and the most a mode sets (:func:`forcing`)
DRAWN, FORCED = 64, 8


def fnv1a(text: str) -> int:
    """The 32-bit FNV-1a hash of ``text``: no hash seed (the same in every process), no import."""
    h = 2166136261
    for ch in text:
        h = ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
    return h


def draw_id(key: str) -> str:
    """The name of a mixed mode's draw in a ``mixedK~ID:V`` mode: FNV-1a of its key, 8 hex digits."""
    return f"{fnv1a(key):08x}"


def forcing(mode: str, key: str, value: int) -> str:
    """``mode`` (a mixed one) with the draw ``key`` set to ``value``: the oldest set draw dropped past FORCED."""
    head, *parts = mode.split("~")
    ident = draw_id(key)
    parts = [p for p in parts if not p.startswith(ident)][-(FORCED - 1):]
    return "~".join([head, *parts, f"{ident}:{value}"])


#: What a stand-in is as an integer in a mixed mode (drawn per name): 1 most often, then 0 and 2.
_MIXED_INTS = (1, 1, 0, 2)


class Nth:
    """``LOG.default`` for the mode ``nthK``: the K-th call of a stand-in in the input returns ``True``, every other
    call ``False``. A chain of checks a withheld dependency answers (pylatexenc's ``node_to_text`` asks
    ``node.isNodeType(...)`` for each of eight node classes in turn) reaches its K-th branch; the search asks
    for these modes on an input whose run called stand-ins twice or more (:func:`.synth.search`)."""

    def __init__(self, k: int) -> None:
        self.k = k


def is_nth(mode: object) -> bool:
    """``nthK`` (K = 1, 2, ...): the K-th stand-in call returns True, the others False (:class:`Nth`)."""
    return isinstance(mode, str) and mode.startswith("nth") and mode[3:].isdigit() and int(mode[3:]) > 0


def is_mixed(mode: object) -> bool:
    """``mixedN`` (N = 1, 2, ...): each call of a stand-in returns what a draw fixed by N, the stand-in's
    name, its plain arguments and the call's rank picks (:data:`_MIXED_RETURNS`); each stand-in's
    truth value, length and comparisons with plain values are drawn the same way. ``mixedN~ID:V``: with the
    draw ID set to V (:class:`Mixed`; at most FORCED, V of one or two digits)."""
    if not isinstance(mode, str) or not mode.startswith("mixed"):
        return False
    head, *parts = mode[5:].split("~")
    return head.isdigit() and int(head) > 0 and len(parts) <= FORCED and all(
        len(p) in (10, 11) and p[8] == ":" and p[9:].isdigit() and all(c in "0123456789abcdef" for c in p[:8])
        for p in parts)


#: What a call returns in a mixed mode, drawn per stand-in name and per call: mostly another stand-in
#: (``RAISE`` last: the items of an unpacked stand-in are drawn from the others)
_MIXED_RETURNS: tuple[Any, ...] = (_STANDIN_DEFAULT, _STANDIN_DEFAULT, _STANDIN_DEFAULT, _STANDIN_DEFAULT, None, False,
                                   True, 0, 1, "", [], RAISE)


#: What a call may also return in a mixed mode, only where the mode sets its draw (a variant never draws them): data a
#: dependency hands back for x to take apart (``d = yaml.load(f)`` and ``for old, new in d.items(): old.split(".")``),
#: made afresh per answer
_SHAPED_RETURNS: tuple[Any, ...] = (
    lambda: "a.b", lambda: "a b\nc=d", lambda: {"a.b": "c.d"}, lambda: {"name": "a", "value": 1},
    lambda: {"a": [1, 2]}, lambda: {"a": {"b": 1}}, lambda: ["a", "b"], lambda: [1, 2, 3], lambda: [("a", 1), ("b", 2)],
    lambda: b"ab")
SHAPED_FROM = len(_MIXED_RETURNS)  # a set draw of a call's answer at or past this is a shaped answer
RAISE_DRAW = len(_MIXED_RETURNS) - 1  # the draw of a call's answer that makes the call fail (``RAISE``)
_SHAPED_KINDS = {"str": (0, 1), "dict": (2, 3, 4, 5), "list": (6, 7, 8), "bytes": (9,)}
#: The shaped answers a method x calls on a call's stand-in answer asks for (:attr:`CallLog.wants`)
_FITS: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("split", "rsplit", "strip", "lstrip", "rstrip", "startswith", "endswith", "lower", "upper",
                     "replace", "partition", "rpartition", "find", "splitlines", "format", "isdigit"),
                    _SHAPED_KINDS["str"]),
    **dict.fromkeys(("items", "keys", "values", "get", "setdefault", "update"), _SHAPED_KINDS["dict"]),
    **dict.fromkeys(("append", "extend", "index", "count", "sort", "insert", "remove"), _SHAPED_KINDS["list"]),
    **dict.fromkeys(("decode", "hex"), _SHAPED_KINDS["bytes"])}


#: What a stand-in's conversion method answers (``decode``, ``encode``, ``hexdigest`` ...), where it would answer
#: another stand-in: its callers hand the result on to builtins (``file.write``, ``bytes.fromhex``) rather than call it
#: further. A withheld key's ``.encode(encoder=...)`` gives bytes, and their ``.decode("utf-8")`` a text. (Not a
#: text method's answer, ``strip``, ``split`` ...: ``result["info"].split("(")[1]`` of a stand-in input flows on
#: as stand-ins, which ``int()`` reads as a number, where ``["a", "b"]`` ended every run.)
_TYPED_RETURNS: dict[str, Any] = {"decode": "text", "isoformat": "2024-01-31T00:00:00", "strftime": "2024-01-31",
                                  "hexdigest": "0123abcd", "encode": b"bytes", "digest": b"\x01\x02"}


#: Compatibility names of builtin types (six, ``compat`` modules): a withheld one is the type it names, as an
#: ``isinstance`` hint (:func:`.globalrefs.type_aliases`) and as a base class (``class V(compat.unicode_type)``).
COMPAT_TYPES = {"string_types": ["str"], "text_type": ["str"], "binary_type": ["bytes"], "integer_types": ["int"],
                "unicode": ["str"], "basestring": ["str"], "long": ["int"], "unicode_type": ["str"],
                "bytes_type": ["bytes"], "str_type": ["str"], "numeric_types": ["int", "float"]}

_EXCEPTION_NAME = re.compile(r"^([A-Z]\w*(Error|Exception|Warning|Exit|Interrupt|Timeout|Failure)|error)$")
_EXCEPTION_ENDINGS = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Timeout", "Failure", "error")


#: Capitalised names the module raises or catches (``raise NonExistentKey(key)``, ``except Invalid:``), set by
#: the scaffold: withheld, they are exception classes too, whatever they end with.
RAISED: set[str] = set()


def standin_for(name: str) -> Any:
    """A stand-in for ``name``; names of exception classes (``requests.HTTPError``, or a name the module raises
    or catches, :data:`RAISED`) get :class:`CalibStandInError` itself, so ``except``/``raise`` on them work and
    failing stand-ins are caught."""
    if not name.endswith(_EXCEPTION_ENDINGS):  # first: a name grown by a loop (``n<op><op>...``) is long
        if RAISED and name[name.rfind(".") + 1:] in RAISED:
            return CalibStandInError
        return CalibStandIn(name)
    last = name[name.rfind(".") + 1:]
    if _EXCEPTION_NAME.match(last):
        return CalibStandInWarning if last.endswith("Warning") else CalibStandInError
    return CalibStandIn(name)


def _count() -> None:
    """One stand-in operation that adds no log entry (arithmetic, a new attribute): past :data:`OPS_BUDGET`
    of them in an input, or :data:`REPEAT_LIMIT` since the log last grew, the input ends (``standin_loop``)."""
    LOG.ops += 1
    if LOG.ops > LOG.budget:
        raise StandInLoop(f"{STANDIN_CLASS_NAME}: more than {LOG.budget} stand-in operations in one input")
    if LOG.ops - LOG.fresh > REPEAT_LIMIT:
        raise StandInLoop(f"{STANDIN_CLASS_NAME}: {REPEAT_LIMIT} stand-in operations repeating the log")


def _child(parent: CalibStandIn, suffix: str) -> Any:
    name = object.__getattribute__(parent, "_calib_name") + suffix
    if len(name) > MAX_NAME:  # a loop walking a stand-in (``t = t.parent``): its middle goes, so each step
        # costs the same (the name grew with every step, and with it the cost of every operation on it)
        name = name[:MAX_NAME // 2] + "…" + name[-(MAX_NAME // 2):]
    return standin_for(name)


class CalibStandIn:
    """An object that accepts every operation, logs calls, and names itself after how it was reached."""

    __slots__ = ("_calib_name", "_calib_attrs", "_calib_script")

    def __init__(self, name: Any, script: Any = None, *rest: Any, **kwargs: Any) -> None:
        if type(name) is str and not rest and not kwargs:  # ``CalibStandIn(name[, script])``: every maker's call
            object.__setattr__(self, "_calib_name", name)
            object.__setattr__(self, "_calib_attrs", {})
            # what its calls return, in order (an input value ``StandIn('peek', ['a', '0'])``); then the mode's default
            object.__setattr__(self, "_calib_script", list(script) if script is not None else None)
            return
        # ``HtmlInlineProcessor.__init__(self, pattern)`` in a class whose base could not be imported reaches
        # the stand-in's own ``__init__`` with an object of the code's: a logged call of the dependency's
        # constructor. It once made ``self`` the stand-in's name, and the next call's log entry took the batch
        # down. (A ``None`` passed second is not told from none passed: ``Base.__init__(self, None)`` logs
        # ``[self]``.)
        _explicit(self, "__init__", (name, *([] if script is None else [script]), *rest), kwargs)

    def __copy__(self) -> CalibStandIn:
        # ``copy.copy``/``deepcopy`` of a dependency's object: another stand-in of the same name (rebuilt
        # from its slots, copy's default, it failed on its own ``__setattr__``)
        get = object.__getattribute__
        twin = CalibStandIn(get(self, "_calib_name"), get(self, "_calib_script"))
        get(twin, "_calib_attrs").update(get(self, "_calib_attrs"))
        return twin

    def __deepcopy__(self, memo: Any) -> CalibStandIn:
        return self.__copy__()

    # --- reaching further -------------------------------------------------------------------------
    # Each special method below called with more arguments than Python gives it is the code calling the
    # withheld class's method by name on an object of its own (``base.Filter.__iter__(self)``,
    # ``Base.__setattr__(self, name, value)``): a logged call, answered as other calls are (:func:`_explicit`).
    def __getattr__(self, attr: str, *args: Any) -> Any:
        if args:
            return _explicit(self, "__getattr__", (attr, *args))
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        attrs = object.__getattribute__(self, "_calib_attrs")
        if attr not in attrs:
            # counted like a call that logs nothing: ``while cur: cur = cur.next`` walks a new stand-in each
            # step, each truthy, and ran until the input's timeout (two of them ended kconfiglib's searches)
            _count()
            attrs[attr] = _child(self, "." + attr)
        return attrs[attr]

    def __setattr__(self, attr: str, value: Any, *args: Any) -> None:
        if args:  # ``Base.__setattr__(self, name, value)``: the object gets the attribute too
            _explicit(self, "__setattr__", (attr, value, *args))
            try:
                object.__setattr__(attr, value, args[0])
            except Exception:  # noqa: BLE001, S110 - not settable there: the call is logged, as a stand-in's is
                pass
            return
        LOG.record("setattr", object.__getattribute__(self, "_calib_name") + "." + attr, value)
        object.__getattribute__(self, "_calib_attrs")[attr] = value

    def __delattr__(self, attr: str) -> None:
        LOG.record("delattr", object.__getattribute__(self, "_calib_name") + "." + attr)
        object.__getattribute__(self, "_calib_attrs").pop(attr, None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = object.__getattribute__(self, "_calib_name")
        LOG.record("call", name, list(args), kwargs)
        # A stand-in used as a decorator hands the function or class back unchanged: ``@app.route("/")``
        # must not turn the decorated definition into a stand-in. The call is still logged, since
        # ``bus.subscribe(handler)`` inside x is behaviour (module-level decorators run before the log
        # is reset for the call, so they never reach an output state).
        if len(args) == 1 and not kwargs and isinstance(args[0], _DECORATABLE) and not _examined(args[0]):
            if name.rsplit(".", 1)[-1] == "wraps" and isinstance(args[0], _FUNCTION):
                # ``@wraps(func)`` (funcy's, six's, boltons' re-export): a decorator factory, not a
                # decorator; as ``functools.wraps`` it hands back the wrapper it is applied to
                import functools  # noqa: PLC0415 - loaded by the harness's own imports

                return functools.wraps(args[0])
            return args[0]
        script = object.__getattribute__(self, "_calib_script")
        if args and type(args[0]) in _HANDED:
            LOG.handed += 1
        if LOG.mixed is not None:
            return _mixed_call(name, script, args, kwargs)
        LOG.called += 1
        if script:
            value = script.pop(0)
            return list(value) if isinstance(value, list) else value
        if LOG.nth:  # ``if node.isNodeType(Chars): ... if node.isNodeType(Group): ...``: the K-th call holds
            return LOG.called == LOG.nth
        if LOG.trying > 0:
            LOG.try_calls += 1
        if LOG.default is RAISE or LOG.default is RAISE_IN_TRY and LOG.trying > 0:
            raise FAILURE[0](f"{STANDIN_CLASS_NAME} {name} {FAILED}: dependencies fail)")
        if LOG.default is RAISE_OTHER_IN_TRY and LOG.trying > 0:
            raise CalibStandInFailure(f"{STANDIN_CLASS_NAME} {name} {FAILED}: dependencies fail)")
        if LOG.default is RAISE_IN_TRY or LOG.default is RAISE_OTHER_IN_TRY or LOG.default is ECHO and not args:
            return CalibStandIn(name + "()")
        if LOG.default is ECHO:
            return args[0]
        if LOG.default is not _STANDIN_DEFAULT:
            return LOG.default
        last = name.rpartition(".")[2]
        if last in _TYPED_RETURNS:  # ``priv_key.encode(encoder=...).decode("utf-8")`` written to a file: a text
            return _TYPED_RETURNS[last]
        return CalibStandIn(name + "()")

    def __getitem__(self, key: Any, *args: Any) -> Any:
        if args:
            return _explicit(self, "__getitem__", (key, *args))
        LOG.record("getitem", name := object.__getattribute__(self, "_calib_name"), key)
        if LOG.answered:  # ``d["key"]``, ``d[0]`` of a call's answer ``d``: a mapping, a list
            LOG.used(name, _SHAPED_KINDS["dict" if isinstance(key, str) else "list"])
        return _child(self, "[]")

    def __setitem__(self, key: Any, value: Any, *args: Any) -> None:
        if args:
            _explicit(self, "__setitem__", (key, value, *args))
            return
        LOG.record("setitem", object.__getattribute__(self, "_calib_name"), key, value)

    def __delitem__(self, key: Any, *args: Any) -> None:
        if args:
            _explicit(self, "__delitem__", (key, *args))
            return
        LOG.record("delitem", object.__getattribute__(self, "_calib_name"), key)

    def __instancecheck__(self, obj: Any) -> bool:
        # ``isinstance(x, unresolvable.Type)``: a stand-in reached through it, or an instance of a class
        # built on it, is one; anything else is one as the input's stand-in mode says (:func:`_is_kind`)
        return _is_kind(object.__getattribute__(self, "_calib_name"), obj, type(obj))

    def __subclasscheck__(self, cls: Any) -> bool:
        return _is_kind(object.__getattribute__(self, "_calib_name"), cls, cls if isinstance(cls, type) else None)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # ``class Foo(unresolvable.Base):`` gets a base class of the same name that stands in for it
        # (with a metaclass of its own unless another base brings one: ``class A(withheld.B, abc.ABC)``);
        # ``class vWeekday(compat.unicode_type)``: the builtin type that compatibility name means
        name = object.__getattribute__(self, "_calib_name")
        kinds = COMPAT_TYPES.get(name.rsplit(".", 1)[-1], ())
        if len(kinds) == 1:
            return (getattr(builtins, kinds[0]),)
        own = all(type(b) in (type, _WithheldBase) for b in bases if isinstance(b, type))
        return (base_class(name, own),)

    # --- behaving like an empty, truthy value --------------------------------------------------------
    def __iter__(self, *args: Any) -> Any:
        if args:
            return iter(_explicit(self, "__iter__", args))
        name = object.__getattribute__(self, "_calib_name")
        # ``a, b, c = dependency()`` unpacks exactly as many items as the code asks for
        width = _unpack_width(sys._getframe(1))
        if width is not None and LOG.mixed is not None and name.endswith(")"):  # a call's answer (``start, end =
            # parse(text)``: ``end`` None in some inputs); an input's stand-in keeps its stand-in items
            return iter([_unpacked_item(f"{name}[{i}]") for i in range(width)])
        if LOG.answered and width is None:  # ``for v in d``
            LOG.used(name, _SHAPED_KINDS["list"])
        return iter([CalibStandIn(f"{name}[{i}]") for i in range(len(self) if width is None else width)])

    def __len__(self, *args: Any) -> int:
        if args:
            return len(_explicit(self, "__len__", args))
        if LOG.mixed is not None:
            return LOG.draw(object.__getattribute__(self, "_calib_name") + "?len", 4)
        return LOG.items

    def __bool__(self) -> bool:
        if LOG.mixed is not None:  # falsy for some names: ``if auth:`` and ``if not resp:`` both run
            return LOG.draw(object.__getattribute__(self, "_calib_name") + "?bool", 3) != 0
        return LOG.truthy  # the ``false`` mode makes stand-ins falsy too (``if not self._sock:``)

    def __contains__(self, item: Any, *args: Any) -> bool:
        if args:
            return args[0] in _explicit(self, "__contains__", (item, *args))
        if LOG.mixed is not None:
            return _holds(self, "in", item)
        return False

    def __int__(self) -> int:
        return self.__index__()

    def __float__(self) -> float:
        return 0.0

    def __index__(self) -> int:
        # in a mixed mode a number drawn per name, mostly not 0: a withheld constant used as a month or a
        # size (``date(year, JAN, 1)``) must hold one the code accepts in some inputs
        if LOG.mixed is not None:
            return _MIXED_INTS[LOG.draw(object.__getattribute__(self, "_calib_name") + "?int", len(_MIXED_INTS), True)]
        return 0

    def __trunc__(self) -> int:  # ``math.trunc(equinox.get_date()[2])``: no float fallback, unlike floor and ceil
        return self.__index__()

    __floor__ = __ceil__ = __trunc__

    def __str__(self, *args: Any) -> str:
        if args:
            return str(_explicit(self, "__str__", args))
        return "<" + object.__getattribute__(self, "_calib_name") + ">"

    __repr__ = __str__

    def __fspath__(self) -> str:  # ``os.path.join(withheld.DATA_DIR, name)``: a path named after it
        return str(self)

    def __format__(self, spec: str) -> str:
        return str(self)

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, "_calib_name"))

    # Comparisons: equal only to itself; in the ``true`` mode every comparison holds, so that
    # ``if resp.status_code == 200:`` and ``if size > LIMIT:`` can take their branches.
    # In a mixed mode a comparison with a plain value holds for some (name, value) pairs, not others.
    def __eq__(self, other: Any) -> bool:
        if LOG.mixed is not None and self is not other:
            return _holds(self, "==", other)
        return self is other or LOG.agree

    def __ne__(self, other: Any) -> bool:
        if LOG.mixed is not None and self is not other:
            return not _holds(self, "==", other)
        return self is not other and not LOG.agree

    def __lt__(self, other: Any) -> bool:
        if LOG.mixed is not None:
            return _holds(self, "<", other)
        return LOG.agree

    def __gt__(self, other: Any) -> bool:
        if LOG.mixed is not None:
            return _holds(self, ">", other)
        return LOG.agree

    __le__ = __lt__
    __ge__ = __gt__

    def __enter__(self) -> CalibStandIn:
        return _child(self, ".__enter__()")

    def __exit__(self, *exc: Any) -> bool:
        return False

    async def __aenter__(self) -> CalibStandIn:
        return _child(self, ".__aenter__()")

    async def __aexit__(self, *exc: Any) -> bool:
        return False

    def __await__(self) -> Any:
        return iter(())

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration

    def _arith(self: CalibStandIn, *other: Any) -> CalibStandIn:
        # counted like a call: ``while src[pos] in chars: pos += 1`` on a stand-in ``pos`` (always read as
        # 0) logs nothing, and would otherwise run until the input's timeout
        _count()
        # one ``<op>`` however many: a loop's running total (``n<op><op>...``) grew its name, and so the
        # cost of every operation on it, with each step (netaddr's IPSet.__contains__ timed out)
        name = object.__getattribute__(self, "_calib_name")
        return standin_for(name if name.endswith("<op>") else name + "<op>")

    def __add__(self, other: Any) -> Any:
        # ``withheld.OPENTAG + "|"``: what a text is added to is a text (named after the stand-in), so
        # commonmark's module-level ``re.compile("^(?:" + OPENTAG + "|" + CLOSETAG + ")")`` builds. A
        # text that would pass MAX_TEXT is a loop growing it (``name = part[-1] + name`` while a stand-in
        # ``part`` never ends): a stand-in then, as any other operand, so each step costs the same
        if type(other) is str and len(other) <= MAX_TEXT:
            self._arith()
            return str(self) + other
        return self._arith(other)

    def __radd__(self, other: Any) -> Any:
        if type(other) is str and len(other) <= MAX_TEXT:
            self._arith()
            return other + str(self)
        return self._arith(other)

    __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _arith
    __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _arith
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __matmul__ = __rmatmul__ = _arith
    __neg__ = __pos__ = __abs__ = __invert__ = __round__ = _arith

    def _divmod(self: CalibStandIn, *other: Any) -> tuple[Any, Any]:  # ``days, secs = divmod(total, 86400)``
        return self._arith(), _child(self, "<op>")

    __divmod__ = __rdivmod__ = _divmod


def _mixed_call(name: str, script: list[Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a call of the stand-in ``name`` returns in a mixed mode: the next scripted answer, else a
    drawn one (:meth:`CallLog.mixed_return`). For half the names (drawn per name) a query asked again
    at once, with the same arguments and no other entry of the call log in between, gets the same answer:
    a token stream's ``tokens.current()``, checked at four sites before ``tokens.move()``, stays ``'--'``
    at all four (else each call takes the next answer, as outside the mixed modes)."""
    asked = ",".join(repr(a)[:40] if type(a) in _PLAIN else type(a).__name__ for a in (*args, *kwargs.values()))
    logged = len(LOG.entries) + len(LOG.overflow)  # this call's entry included: "in between" is what the log shows
    last = LOG.last.get(name)
    if last is not None and last[0] == logged - 1 and last[1] == asked and LOG.draw(name + "?same", 2) == 0:
        value = last[2]
    elif script:
        value = script.pop(0)
    else:  # plain arguments by value, the rest by type
        value = LOG.mixed_return(name, f"({asked})", args)
    LOG.last[name] = (logged, asked, value)
    return list(value) if isinstance(value, list) else value


def _unpacked_item(name: str) -> Any:
    """An item of a stand-in unpacked in a mixed mode (``a, b = dep(x)``): drawn per name like a call's
    answer (a stand-in, None, False, True, 0, 1, "", []; never an exception), so ``if end is None:`` after
    ``start, end = parse(text)`` goes both ways; the same whether x unpacks at once or keeps the answer."""
    value = _MIXED_RETURNS[LOG.draw(name, len(_MIXED_RETURNS) - 1, spread=True)]
    return CalibStandIn(name) if value is _STANDIN_DEFAULT else list(value) if isinstance(value, list) else value


_FUNCTION = type(lambda: None)


def _examined(value: Any) -> bool:
    """While x runs, a class x did not define (``type(other)``, a class of its module) handed alone to a
    stand-in is being examined, not decorated (``if is_upcast_type(type(other)): return NotImplemented``):
    the call answers as any other does (the input's stand-in mode), so x's branch turns on the mode rather
    than on a class that is always true. A class statement in x makes a class whose qualified name has
    ``<locals>``, and one at module level runs before x: both are still handed back."""
    return StandInFinder.active and isinstance(value, type) and "<locals>" not in getattr(value, "__qualname__", "")
_DECORATABLE = (type, _FUNCTION, staticmethod, classmethod, property)
_PLAIN = (int, float, str, bytes, bool, type(None))
_HANDED = frozenset({int, float, str, bytes, list, tuple, dict, set})  # values the ``echo`` mode hands back


def _is_kind(kind: str, obj: Any, cls: type | None) -> bool:
    """Whether ``obj`` (of class ``cls``) counts as an instance, or ``cls`` as a subclass, of the stand-in
    type ``kind`` (``isinstance(s, six.string_types)``, ``issubclass(c, withheld.Base)``).

    Always for a stand-in reached through ``kind`` and for a class built on it; otherwise as the mode
    says, so that the search reaches both branches of a type check: the ``true`` mode says yes to
    everything, a mixed mode draws per (``kind``, the object's class or stand-in name), the other modes
    say no, as before (a yes there too won no function more on the tuning sample and lost one whose
    search then spent its runs on the other branch)."""
    if is_standin(obj):
        of = object.__getattribute__(obj, "_calib_name")
        if of.startswith(kind):
            return True
    else:
        for k in getattr(cls, "__mro__", ()):
            if k.__dict__.get("_calib_base") == kind:
                return True
        of = cls.__name__ if cls is not None else type(obj).__name__
    if LOG.mixed is not None:
        return LOG.draw(f"{kind}?isa:{of}", 2, spread=True) == 0
    return LOG.agree


def _holds(standin: CalibStandIn, op: str, other: Any) -> bool:
    """Whether ``standin <op> other`` holds in a mixed mode: drawn per name, operator and plain value or
    other stand-in's name (one time in three for ``==``, half the time for the others: ``if token.type
    == self.NL_type``, ``if exclude.last < target.first`` both go either way), or a short list of plain
    values (:data:`_SHORT`); never against other objects."""
    name = object.__getattribute__(standin, "_calib_name")
    if is_standin(other):
        a, b = name, object.__getattribute__(other, "_calib_name")
        if op == "==" and a > b or op == ">":  # ``a == b`` and ``b == a`` agree; so do ``a < b`` and ``b > a``
            a, b = b, a
        return LOG.draw(f"{a}{'<' if op == '>' else op}{b}", 3 if op == "==" else 2, spread=True) == 0
    if type(other) not in _PLAIN and not (type(other) in (list, tuple) and len(other) <= _SHORT
                                          and all(type(v) in _PLAIN for v in other)):
        return False
    return LOG.draw(f"{name}{op}{other!r:.40}", 3 if op == "==" else 2) == 0


#: A list or tuple of at most this many plain values compares like a plain value in the mixed modes:
#: ``if function.argument_types() not in (["STRING"], ["IDENT"]):`` goes either way.
_SHORT = 4


#: ``UNPACK_SEQUENCE``/``UNPACK_EX`` opcodes of this interpreter (filled on first use).
_UNPACK: dict[str, int] = {}


def _unpack_width(frame: Any) -> int | None:
    """The number of items the instruction running in ``frame`` unpacks (``a, b = v``: 2; ``a, *b, c = v``: 2),
    or None when that instruction is not an unpacking (``for v in ...``, ``list(v)``)."""
    if not _UNPACK:
        import opcode  # noqa: PLC0415 - small, and loaded only when code iterates a stand-in

        _UNPACK.update(seq=opcode.opmap["UNPACK_SEQUENCE"], ex=opcode.opmap["UNPACK_EX"],
                       extended=opcode.opmap["EXTENDED_ARG"])
    try:
        code, at = frame.f_code.co_code, frame.f_lasti
        op, arg = code[at], code[at + 1]
        if at >= 2 and code[at - 2] == _UNPACK["extended"]:  # ``a, *b, c``: the count after the star
            arg |= code[at - 1] << 8
    except (AttributeError, IndexError, TypeError):
        return None
    if op == _UNPACK["seq"]:
        return arg
    if op == _UNPACK["ex"]:
        return (arg & 0xFF) + (arg >> 8)
    return None


#: Where the attributes the module reaches through ``super().name`` come from (set by the scaffold
#: before the module runs; read when a class with a stand-in base is first made): a class whose base
#: is a stand-in finds them on that base.
SUPER_SOURCE: list[Any] = [None, None]  # [a function giving the names, the names once asked]


def super_names() -> set[str]:
    if SUPER_SOURCE[1] is None:
        SUPER_SOURCE[1] = SUPER_SOURCE[0]() if SUPER_SOURCE[0] is not None else set()
    return SUPER_SOURCE[1]


class _WithheldBase(type):
    """The metaclass of :func:`base_class`: while x runs, an attribute its classes lack is one the withheld
    base would have, a stand-in named after the base (``cls.range_check(start, end)``, a classmethod of
    the base, is a logged call of ``withheld.Base.range_check``; ``cls.LIMIT`` a stand-in), the same one
    for the whole input. Outside x (building self, the output state) the class has only what it has."""

    def __getattr__(cls, attr: str) -> Any:
        if not StandInFinder.active or attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        key = (id(cls), attr)
        if key not in LOG.held:
            base = next(k.__dict__["_calib_base"] for k in cls.__mro__ if "_calib_base" in k.__dict__)
            LOG.held[key] = standin_for(f"{base}.{attr}")
        return LOG.held[key]


def base_class(name: str, own_meta: bool = True) -> type:
    """A base class standing in for the unresolvable base ``name`` (``class Foo(withheld.Base):``).

    Its constructor accepts any arguments, and ``super().__init__(...)`` or ``super().method(...)``
    called from x are logged as calls of ``name.__init__``/``name.method`` (calls to a mocked
    dependency); attributes the base would have set (``self._extra``, ``cls.build_time``) read as
    stand-ins (on the class through :class:`_WithheldBase`, unless ``own_meta`` is false)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        LOG.record("call", name + ".__init__", list(args), kwargs)

    def __getattr__(self: Any, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        cache = type(self)._calib_attrs
        key = (id(self), attr)
        if key not in cache:
            cache[key] = standin_for("self." + attr)
        return cache[key]

    # Its items: what the withheld base holds (``key in self``, ``self[key]``, ``for k in self`` in a class
    # on a withheld mapping whose own ``__getitem__``/``__iter__`` stand after x), a stand-in's (which keeps
    # nothing between these operations: a new one each time)
    def items(self: Any) -> Any:
        return CalibStandIn("self")

    def __contains__(self: Any, item: Any) -> bool:
        if type(self).__getitem__ is not __getitem__:  # the class's own: a mapping's membership
            try:
                self[item]
            except (KeyError, IndexError):
                return False
            return True
        if type(self).__iter__ is not __iter__:  # the class's own iteration
            return any(item is each or item == each for each in self)
        return item in items(self)

    def __iter__(self: Any) -> Any:
        return iter(items(self))

    def __getitem__(self: Any, key: Any) -> Any:
        return items(self)[key]

    def __setitem__(self: Any, key: Any, value: Any) -> None:
        items(self)[key] = value

    def __delitem__(self: Any, key: Any) -> None:
        del items(self)[key]

    ns: dict[str, Any] = {"__module__": "calib_standin", "__init__": __init__, "__getattr__": __getattr__,
                          "__contains__": __contains__, "__iter__": __iter__, "__getitem__": __getitem__,
                          "__setitem__": __setitem__, "__delitem__": __delitem__,
                          "_calib_attrs": {}, "_calib_base": name}
    for attr in sorted(super_names()):
        if attr not in ns and not hasattr(object, attr):
            ns[attr] = _forward(f"{name}.{attr}")
    return (_WithheldBase if own_meta else type)(name.rsplit(".", 1)[-1] or "Base", (), ns)


def _forward(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return CalibStandIn(name)(*args, **kwargs)

    return method


def _explicit(standin: CalibStandIn, method: str, args: tuple[Any, ...], kwargs: Any = None) -> CalibStandIn:
    """``Base.__iter__(self)`` with ``Base`` a stand-in: a logged call of ``Base.__iter__``; its answer a
    stand-in named after the call (whose iteration, length or text the caller then gets)."""
    name = object.__getattribute__(standin, "_calib_name") + "." + method
    LOG.record("call", name, list(args), kwargs or {})
    return CalibStandIn(name + "()")


def is_standin(value: Any) -> bool:
    return type(value) is CalibStandIn


def standin_name(value: CalibStandIn) -> str:
    return object.__getattribute__(value, "_calib_name")


def standin_script(value: CalibStandIn) -> list[Any] | None:
    """What the stand-in's calls return, in order (None: the mode decides)."""
    return object.__getattribute__(value, "_calib_script")


# --- imports inside x ---------------------------------------------------------------------------------

#: The package relative imports resolve against when x's module has none (``from .models import X``).
FAKE_PACKAGE = "calib_scaffold_pkg"


class StandInModule(type(re)):  # types.ModuleType, without importing types for it
    """A module that cannot be imported, as a stand-in: its attributes are stand-ins named after it."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        name = self.__name__
        if name == FAKE_PACKAGE or name.startswith(FAKE_PACKAGE + "."):
            name = name[len(FAKE_PACKAGE) + 1:] or "."
        return standin_for(f"{name}.{attr}")


def _imported_by_the_scaffold() -> bool:
    """Whether the import statement being served is x's own (its frame runs scaffold code), not one
    inside a library module: those probe optional modules on purpose (``subprocess`` imports
    ``msvcrt`` to tell Windows apart) and must keep getting ``ImportError``."""
    import sys  # noqa: PLC0415

    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith("<calib")


#: Standard-library modules of Python 2 only: Python 3 answers ``ImportError``, which code that runs on
#: both catches (``try: import cPickle as pickle`` / ``except ImportError: import pickle``), so they are
#: never stand-ins.
PYTHON2_MODULES = frozenset({
    "cPickle", "cStringIO", "StringIO", "urllib2", "urlparse", "ConfigParser", "Queue", "__builtin__", "httplib",
    "HTMLParser", "htmlentitydefs", "cookielib", "Cookie", "thread", "dummy_thread", "commands", "md5", "sha",
    "sets", "exceptions", "copy_reg", "anydbm", "dbhash", "whichdb", "repr", "Tkinter", "tkMessageBox",
    "SocketServer", "SimpleHTTPServer", "BaseHTTPServer", "CGIHTTPServer", "xmlrpclib", "UserDict", "UserList",
    "UserString", "robotparser", "dircache", "popen2", "mimetools", "rfc822", "imputil"})


class StandInFinder:
    """Last on ``sys.meta_path``, active only while x runs: an ``import`` statement in x's body for a
    module that is not there (a withheld package, a relative import of the project) gets a stand-in
    module instead of ``ImportError``, as the same import at the top of the file does (not a module of
    Python 2 only: :data:`PYTHON2_MODULES`). In the mode ``raise_in_try``, inside the body of one of x's
    ``try`` statements with handlers, it gets ``ImportError`` (``try: import yaml`` / ``except ImportError:``),
    and such an import asks the search for that mode as a stand-in call there does. The modules made while
    x runs leave ``sys.modules`` after each input (:meth:`forget`): the next input imports afresh."""

    active = False
    made: list[str] = []  # the modules made while x ran, this input

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        if name != FAKE_PACKAGE and not (cls.active and _imported_by_the_scaffold()) \
                or name.partition(".")[0] in PYTHON2_MODULES:
            return None
        if cls.active and LOG.trying > 0:
            LOG.try_calls += 1
            if LOG.default is RAISE_IN_TRY:
                return None  # the import system raises ModuleNotFoundError
        import importlib.machinery  # noqa: PLC0415 - loaded already by the import system

        return importlib.machinery.ModuleSpec(name, cls, is_package=True)

    @classmethod
    def create_module(cls, spec: Any) -> Any:
        module = StandInModule(spec.name)
        module.__path__ = []  # a package: submodules import too
        if cls.active:
            cls.made.append(spec.name)
        return module

    @classmethod
    def forget(cls) -> None:
        """Take the stand-in modules made while x ran out of ``sys.modules`` (each input imports them afresh)."""
        import sys  # noqa: PLC0415

        for name in cls.made:
            if type(sys.modules.get(name)) is StandInModule:
                del sys.modules[name]
        cls.made.clear()

    @staticmethod
    def exec_module(module: Any) -> None:
        return None
