"""Value pools for the input search (runs inside the sandbox; stdlib only).

Pools come from the hints (:mod:`.hints`): types from annotations, defaults and body usage, else from
the parameter's name (``n``/``count``/``*_id`` → int, ``path``/``filename`` → a file in the working
directory, ``items``/plural names → list, ``is_*``/``flag`` → bool, ...), each seeded with the literals
mined from the body and the module, then a few values of other shapes; :meth:`Pools.fresh` draws new
values beyond them, :meth:`Pools.observe` adds the operands x compared against. Also here: the
pseudo-parameters an input state varies besides the arguments (``self.`` attributes, constructor
arguments ``init.``, the random seed, the stand-in mode).
"""

from __future__ import annotations

import random

from . import astnodes, cmplog, funcs, globalrefs, inputs, mutators
from .astnodes import examples
from .calls import DEFAULT_NAME, literal_aliases, sentinel_defaults
from .hints import Hints, Param, analyse, broad_after, type_of
from .inputs import DIR_PREFIX, ENV_PREFIX, FILE_PREFIX, STDIN
from .names import walk
from .returned import closure_params
from .standins import CalibStandIn, is_mixed, is_nth
from .trees import last_class
from .typenames import clock_values
from .values import Global, New, Obj, Stream

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

NAME_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    # (exact names, suffixes/prefixes marker, type)
    (("n", "i", "j", "k", "m", "count", "num", "size", "length", "index", "idx", "depth", "level", "limit",
      "width", "height", "offset", "start", "stop", "end", "step", "year", "month", "day", "port", "age",
      "timeout", "retries", "number", "total", "pos", "position", "line", "lineno", "col", "max", "min"),
     ("_id", "_count", "_size", "_len", "_num", "_index", "_idx", "num_", "n_", "max_", "min_"), "int"),
    (("path", "filename", "fname", "file", "filepath", "file_path", "dirname", "directory", "dir", "folder"),
     ("_path", "_file", "_filename", "_dir"), "path"),
    (("name", "text", "s", "string", "key", "prefix", "suffix", "msg", "message", "word", "url", "label",
      "title", "line", "sep", "delimiter", "pattern", "fmt", "format", "encoding", "mode", "value", "char",
      "c", "token", "code", "query", "description", "content", "data_str", "email", "host", "method"),
     ("_name", "_str", "_text", "_key", "_url", "_prefix", "_suffix", "_type", "_mode", "_msg"), "str"),
    (("flag", "verbose", "strict", "force", "recursive", "enabled", "debug", "quiet", "reverse", "inplace"),
     ("is_", "has_", "use_", "enable_", "allow_", "should_", "include_", "skip_", "ignore_"), "bool"),
    (("items", "values", "lst", "seq", "sequence", "array", "arr", "nums", "numbers", "elements", "args",
      "lines", "words", "rows", "parts", "xs", "names", "keys", "data", "tokens", "entries", "records"),
     ("_list", "_items", "_values", "_ids", "_names"), "list"),
    (("d", "mapping", "dct", "dictionary", "config", "options", "opts", "params", "kwargs", "headers",
      "settings", "attrs", "meta", "metadata", "context", "ctx", "env", "kw"), ("_dict", "_map", "_config"), "dict"),
    (("x", "y", "z", "a", "b", "val", "amount", "price", "rate", "ratio", "weight", "score", "factor",
      "alpha", "beta", "t", "dt", "scale", "percent", "threshold", "tol"), ("_rate", "_ratio", "_score"), "float"),
    (("callback", "func", "fn", "f", "handler", "hook", "cb", "predicate", "key_func"),
     ("_callback", "_func", "_fn"), "callable"),
    (("date", "start_date", "end_date", "birthday"), ("_date",), "date"),
    (("datetime", "when", "moment"), ("_datetime",), "datetime"),
    (("timedelta",), ("_timedelta",), "timedelta"),
)

SELF_PREFIX = "self."
PROBE_PREFIX = "probe:"  # the i-th argument of a returned closure's first probe call
INIT_PREFIX = "init."
SEED = "<seed>"
STANDINS = "<standins>"


class _Modes(tuple):  # type: ignore[type-arg]
    """The stand-in modes of an input state; ``mode in STANDIN_MODES`` also holds for every ``mixedN`` and ``nthK``."""

    def __contains__(self, mode: object) -> bool:
        return tuple.__contains__(self, mode) or is_mixed(mode) or is_nth(mode)


STANDIN_MODES = _Modes(("standin", "items", "none", "raise", "zero", "empty_str", "empty_list", "true", "false",
                        "mixed1", "mixed2", "mixed3", "mixed4", "mixed5", "mixed6", "echo", "raise_in_try",
                        "raise_other_in_try"))
ASKED_MODES = ("raise_in_try", "raise_other_in_try", "echo")  # modes the search asks for, never drawn
_RANDOM_NAMES = ("random", "uuid", "secrets", "shuffle", "randint", "choice", "urandom")
FRESH_MIXED = 15  # the first mixed variant :meth:`Pools.fresh` may draw (past the listed ones)
#: The builtin types whose values a ``*args`` pool holds as items when x checks its items against them.
_ITEM_TYPES = frozenset({"dict", "list", "str", "int", "float", "bytes", "bool", "set", "tuple"})
#: The types of a constructor's first parameter an instance of a file's class is built from (:meth:`Pools._built`)
_BUILT_FROM = ("date", "datetime", "time", "timedelta", "str", "int", "float", "bytes", "list", "dict")
KEEP = CalibStandIn("<keep>")  # a marker only: never reaches the function
DEFAULT = CalibStandIn(DEFAULT_NAME)  # as an argument: left out, its default applies (calls.DEFAULT_NAME)
_ARITHMETIC = frozenset(("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift",
                         "rshift", "and", "xor", "or"))
TWIN = CalibStandIn("<twin>")  # a marker only: the argument is a copy of the input's own self (synth.search)

BASE_INTS = [0, 1, 2, -1, 3, 5, 10, 42, 100, -7, 7, 255]
BASE_FLOATS = [0.0, 1.5, -2.25, 3.0, 0.1, 100.0, 0.001, -1.0]
#: Floats drawn last: the ones ``repr`` writes with an exponent, and those only ``math.isinf``/``isnan`` or
#: ``value != value`` tell apart (yaml's ``represent_float`` writes ``.inf``, ``.nan`` and ``1.0e+20``).
EDGE_FLOATS = [float("inf"), float("-inf"), float("nan"), 1e20, 1e-07]
BASE_STRINGS = ["", "a", "abc", "Hello World", "hello_world", "a,b,c", "  padded  ", "123", "x.txt", "A-B c"]


FALLBACKS: tuple[tuple[str, list[Any]], ...] = (
    ("str", ["abc", "Hello World"]), ("list", [["a", "b", "c"], [3, 1, 2]]), ("int", [2, 10]),
    ("dict", [{"a": 1, "b": "x"}]), ("none", [None]), ("float", [0.5]), ("bool", [True]),
    ("tuple", [(1, "a")]), ("bytes", [b"abc"]), ("object", [CalibStandIn("arg")]),
)


def varies_seed(source: str, hints: Hints) -> bool:
    """Vary the random seed between inputs for functions with nothing else to vary or that use randomness."""
    return not hints.params and not hints.self_params or any(name in source for name in _RANDOM_NAMES)


def name_type(name: str) -> str | None:
    """The type a parameter's name suggests (:data:`NAME_RULES`), remembered: the search asks for every run."""
    if name not in _NAME_TYPES:
        _NAME_TYPES[name] = _name_type(name)
    return _NAME_TYPES[name]


_NAME_TYPES: dict[str, str | None] = {}


def _name_type(name: str) -> str | None:
    lower = name.lower()
    base = lower.rstrip("0123456789")  # ``text1``, ``s2``, ``path_2``: as ``text``, ``s``, ``path`` (not ``__dict__``)
    for word in (lower, base.rstrip("_")) if base and base != lower else (lower,):
        for exact, affixes, kind in NAME_RULES:
            if word in exact or any(word.endswith(a) if a.startswith("_") else word.startswith(a) for a in affixes):
                return kind
    if lower.endswith("s") and len(lower) > 3:
        return "list"
    return None


class Pools:
    """Candidate values per parameter, most plausible first."""

    walk_runs = 0  # the runs of the search's walk through the pools (set by synth.search; benchmarks/executor.py)

    def __init__(self, hints: Hints, rng: random.Random, *, vary_seed: bool = False,
                 vary_standins: bool = False, init: list[Param] | None = None, owner: str | None = None) -> None:
        self.hints = hints
        self.rng = rng
        sentinels = sentinel_defaults(hints.node)  # x's own parameters only (not the constructor's)
        self.sentinels = {id(p) for p in hints.params if p.name in sentinels}
        self.literals = literal_aliases(hints.tree) if hints.params else {}
        self._bytes_literals: list[bytes] | None = None  # x's bytes literals (:meth:`_streams`)
        self._made: dict[str, list[New]] = {}  # instances of the file's classes built from their constructor (_built)
        defaults = [p.default for p in hints.params if isinstance(p.default, str) and inputs.looks_like_file(p.default)]
        self.files = list(dict.fromkeys(hints.files + defaults + ["input.txt", "data.json"]))
        self.params: dict[str, Param] = {p.name: p for p in hints.params}
        astnodes.hint(hints)  # an AST visitor's node parameter
        funcs.hint(hints)  # a function x inspects (``inspect.signature(operation)``)
        names = [p.name for p in hints.params]  # module-level objects x compares inputs with (.globalrefs)
        globalrefs.alias_hints(hints, hints.tree, first := globalrefs.self_name(hints.node, names))
        globalrefs.class_hints(hints)
        refs = globalrefs.mine(hints.node, hints.tree, names, first, hints.plain_globals)
        self.answers = globalrefs.answers(refs)
        self.params.update({SELF_PREFIX + p.name: p for p in hints.self_params})
        self.by_param: dict[str, list[Any]] = {p.name: self._pool(p) for p in hints.params}
        # self.attr the method reads vary like parameters; KEEP leaves the constructed instance's value; an
        # attribute x compares a parameter with also holds that very argument early (``node is self.head_node``)
        same = globalrefs.identities(hints.node, names, first)
        for p in hints.self_params:
            pool = self.by_param[SELF_PREFIX + p.name] = [KEEP, *self._pool(p)]
            pool[2:2] = same.get(p.name, [])
        # self built by its constructor: the constructor's arguments are inputs too
        self.owner = owner if init is not None else None
        self.init_names: list[str] = []
        for p in init or []:
            self.params[INIT_PREFIX + p.name] = p
            self.by_param[INIT_PREFIX + p.name] = self._pool(p)
            self.init_names.append(INIT_PREFIX + p.name)
        if owner and (init is not None or hints.self_params) and (calls := mutators.pool(self, owner)):
            self.by_param[SELF_PREFIX + mutators.CALLS] = [KEEP, *calls]  # the class's own mutators build self
        globalrefs.extend(self.by_param, refs, {p.name: p.kind for p in hints.params}, SELF_PREFIX)
        # ``other`` of a method (``__eq__``, ``__cmp__``, ``merge``), or a parameter of x's own class: a
        # copy of self early (equal first; the search then varies self's attributes one by one)
        self.twin_of = owner
        x_name = getattr(hints.node, "name", "")
        reflected = x_name[:3] == "__r" and x_name[3:-2] in _ARITHMETIC  # ``__rsub__``: other is not of x's class
        for p in hints.params if owner is not None and not reflected else ():
            if p.kind in ("positional", "keyword") and (p.name == "other" or owner in p.classes):
                self.by_param[p.name].insert(min(1, len(self.by_param[p.name])), TWIN)
        # the arguments of a closure x returns, which probe calls pass (input state key ``probe``)
        closure = closure_params(hints.node) if hints.node is not None else []
        self.probe_names = [f"{PROBE_PREFIX}{i}" for i in range(len(closure))]
        for name, p in zip(self.probe_names, closure):
            self.params[name], self.by_param[name] = p, self._pool(p)
        self.uses = self._ambient(hints)  # environment variables, stdin, files and folders x reads
        if vary_seed:  # the random seed is part of the input state (docs/architecture.md); vary it where it matters
            self.by_param[SEED] = list(range(12))
        if vary_standins:  # so is the behaviour of mocked dependencies: what their calls return, or raise
            # (not ``raise_in_try``, ``raise_other_in_try`` and ``echo``: the search asks for them where a run called
            # a stand-in in a try body, or handed one a value of x's: :func:`.synth.search`)
            self.by_param[STANDINS] = [m for m in STANDIN_MODES if m not in ASKED_MODES]
        self.broad_after = broad_after(hints.node)  # x's try statements: a broad handler after another
        self.pairs: list[tuple[str, Any, Any]] = []

    def _ambient(self, h: Hints) -> inputs.Uses:
        """Pseudo-parameters for what x reads besides its arguments (:mod:`.inputs`): each environment
        variable, stdin, each literal file (and, for a path parameter, the candidate files of the format
        x parses), each listed folder and the command line (:func:`.ambient.argv_pool`)."""
        uses = inputs.scan(h.node, h.tree, set(self.params)) if h.node is not None else inputs.Uses()
        names = {*uses.env, *uses.files, *uses.dirs, *(k for path in uses.keys for k in path), *uses.ini, *uses.tested,
                 *(k for keys in uses.ini.values() for k in keys)}  # names, not values
        self.uses, self.values = uses, [s for s in h.strings if s not in names]
        for name in uses.env:
            self.by_param[ENV_PREFIX + name] = inputs.env_pool(self.values, h.ints, self.files)
        if uses.stdin:
            self.by_param[STDIN] = inputs.stdin_pool(uses, self.values, h.ints)
        files = list(uses.files)
        if uses.formats and self.path_typed():  # ``load(path)`` that parses what it opens
            suffixes = {"json": (".json",), "ini": (".ini", ".cfg", ".conf"), "csv": (".csv",), "pairs": (".txt",)}
            files += [f for f in self.files if f not in files and f.lower().endswith(
                tuple(x for kind in uses.formats for x in suffixes.get(kind, ())))][:2]
        for name in files[:inputs.MAX_FILES]:
            self.by_param[FILE_PREFIX + name] = [*(self.content(name, v) for v in range(4)), None]
        for folder, ext in uses.dirs.items():
            self.by_param[DIR_PREFIX + folder] = [inputs.folder(ext, v, self.content) for v in range(3)] + [None]
        self.argv_files: set[str] = set()  # file names on the command line the search writes (synth.ambient)
        if uses.argv:
            from . import ambient  # noqa: PLC0415 - the command line's pools live with its state
            self.by_param[inputs.ARGV] = pool = ambient.argv_pool(uses, self.values, h.ints, self.rng)
            self.argv_files = {a for argv in pool for a in argv if inputs.looks_like_file(a) and a != ambient.ABSENT}
        self.ambient = any(n.startswith((ENV_PREFIX, FILE_PREFIX, DIR_PREFIX, STDIN, inputs.ARGV))
                           for n in self.by_param)
        return uses

    def content(self, name: str, variant: int, rng: random.Random | None = None) -> str:
        """A file for ``name`` in the shape x parses it (:func:`.inputs.content`)."""
        return inputs.content(name, self.uses, variant, self.values, self.hints.ints, rng)

    def path_typed(self) -> bool:
        """Whether a parameter is a file name or a path (then the search writes files for it)."""
        described = [*self.hints.params, *self.hints.self_params, *(self.params[n] for n in self.init_names)]
        return any("path" in p.types or "pathobj" in p.types or name_type(p.name) == "path" for p in described)

    def observe(self, values: list[Any]) -> None:
        """Add operands x compared against (:mod:`.cmplog`) to the literals and to the pools of
        parameters of their type, so the next inputs can make those comparisons go the other way."""
        self.pairs = cmplog.take_pairs()  # the last run's operand pairs (synth.replacements uses them)
        h = self.hints
        for value in values:
            kind, known = {int: ("int", h.ints), float: ("float", h.floats), str: ("str", h.strings)}.get(
                type(value), (None, None))
            if kind is None or known is None or value in known or len(known) >= 120:
                continue
            known.append(value)
            for name, p in self.params.items():
                pool = self.by_param.get(name)
                if pool is not None and kind in self._types(p) and len(pool) < 150:
                    pool.append(value)
            if kind != "float":  # an environment variable or stdin holds it as text
                for name in self.uses.env:
                    if len(pool := self.by_param[ENV_PREFIX + name]) < 150:
                        pool.append(str(value))
                if self.uses.stdin and len(pool := self.by_param[STDIN]) < 150:
                    pool.append(f"{value}\n")

    @property
    def names(self) -> list[str]:
        return list(self.by_param)

    def _types(self, p: Param) -> list[str]:
        types = [t for t in p.types if t not in ("any",)]
        if not types or types == ["none"]:
            guess = name_type(p.name)
            types = ([guess] if guess else ["int", "str", "list"]) + types
        return types

    def fresh(self, name: str) -> Any:
        """A new value beyond the pool, of a hinted shape: pools run out, and a single-parameter
        function needs more than a few dozen distinct inputs for the search to find its branches."""
        p = self.params.get(name)
        if name == STANDINS and self.rng.random() < 0.5:  # the mixed modes are as many as needed
            return f"mixed{self.rng.randint(FRESH_MIXED, 99999)}"
        if name == STDIN:
            return inputs.stdin_fresh(self.rng, self.uses, self.values, self.hints.ints)
        if name.startswith(ENV_PREFIX) and self.rng.random() < 0.5:
            return self._random("str", None, 0)
        if name.startswith(FILE_PREFIX) and self.rng.random() < 0.5:
            return self.content(name[len(FILE_PREFIX):], 0, self.rng)
        if p is None or p.kind not in ("positional", "keyword", "attribute"):
            return self.rng.choice(self.by_param[name])
        kind = self.rng.choice([t for t in self._types(p) if t != "none"] or ["int"])
        return self._random(kind, p, 0)

    def _random(self, kind: str, p: Param | None, depth: int) -> Any:
        rng, h = self.rng, self.hints
        if kind == "int":
            base = rng.choice(h.ints or [0])
            return rng.choice([rng.randint(-10, 300), base + rng.randint(-3, 3), rng.choice(BASE_INTS)])
        if kind == "float":
            return round(rng.choice([rng.uniform(-100, 100), rng.choice(h.floats or [0.0]) + rng.uniform(-2, 2)]), 3)
        if kind in ("str", "bytes", "path"):
            words = (h.strings or []) + BASE_STRINGS[1:]
            pick = rng.random()
            if pick < 0.3:
                text = rng.choice(words) + rng.choice(["", " ", ".", "-", "_", "/", ",", ":", "="]) + rng.choice(words)
            elif pick < 0.5:
                text = "".join(rng.choice("abcXYZ019 _-.,:/=?*") for _ in range(rng.randint(0, 12)))
            elif pick < 0.6 and h.strings:
                text = rng.choice(["name", "file", "x", "The "]) + rng.choice(h.strings)
            elif pick < 0.75 and h.strings:  # mined pieces around a word: "(" + "abc" + ")", "#" + "x" + "="
                short = [w for w in h.strings if len(w) <= 3] or h.strings
                text = rng.choice(short) + rng.choice(BASE_STRINGS[1:4]) + rng.choice(short)
            else:
                text = rng.choice(words)
                text = rng.choice([text.upper(), text.lower(), text.strip(), text * 2, text[::-1]])
            return text.encode() if kind == "bytes" else text
        if kind == "pathobj":
            return rng.choice(self._values("pathobj", p)) if p else rng.choice(self.files)
        if kind == "stream":  # a file holding a fresh text or bytes, or one of the pool's
            fresh = self._random(rng.choice(["str", "bytes"]), None, depth + 1)
            return Stream(fresh * rng.randint(1, 4)) if rng.random() < 0.5 else rng.choice(self._streams())
        if kind == "callable" and p is not None:
            return self._scripted(p.name, p.result) if rng.random() < 0.7 else CalibStandIn(p.name)
        if kind in ("list", "tuple", "set") and depth < 2:
            element = next((e for e in (p.element if p else []) if e), rng.choice(["int", "str"]))
            if element.startswith("tuple"):
                width = int(element[5:] or 2)
                items = [tuple(self._random(rng.choice(["int", "str"]), None, depth + 1) for _ in range(width))
                         for _ in range(rng.randint(0, 5))]
            else:
                items = [self._random(element if element in ("int", "str", "float") else "int", None, depth + 1)
                         for _ in range(rng.randint(0, 6))]
            if kind == "set":
                return set(items) if all(isinstance(i, int | str | float | tuple) for i in items) else items
            return tuple(items) if kind == "tuple" else items
        if kind == "dict" and depth < 2:
            keys = (p.keys if p else []) or [s for s in h.strings if s.isidentifier()][:4] or ["a", "b"]
            chosen = [k for k in keys if rng.random() < 0.7]
            return {k: self._random(rng.choice(["int", "str", "bool"]), None, depth + 1) for k in chosen}
        if kind == "bool":
            return rng.random() < 0.5
        if kind in ("date", "datetime", "time", "timedelta"):
            return clock_values(kind, [], rng)[0]
        pool = self.by_param.get(p.name, []) if p else []
        return rng.choice(pool) if pool else rng.randint(0, 5)

    def _pool(self, p: Param) -> list[Any]:
        types = self._types(p)
        if p.kind == "vararg":  # also some of iterables: ``nth_product(index, *args)`` maps tuple over them
            lists = [tuple(v[:3]) for v in self._values("list", p) if isinstance(v, list)][:6]
            # ``for arg in args: if isinstance(arg, dict):``: then one or two items of each type checked
            typed = [(New(e[6:]),) if e.startswith("class:") else tuple(self._values(e, p.item or p)[:width])
                     for e in p.element if e.startswith("class:") or e in _ITEM_TYPES for width in (1, 2)]
            return [(), *lists[:3], ([1, 2], [3, 4, 5]), ("ab", "cde"), ([0, 1],) * 3, *lists[3:], *typed]
        if p.kind == "kwarg":
            return [{}, *[v for v in self._values("dict", p) if isinstance(v, dict) and all(
                isinstance(k, str) and k.isidentifier() for k in v)][:6]]
        per_type = [self._values(t, p) for t in types]
        pool: list[Any] = [p.default] if p.has_default else []
        if id(p) in self.sentinels:
            pool.append(DEFAULT)  # left out: its default (``acc=EMPTY``, ``key=keys.hashkey``) applies
        pool += self._instances(p) + p.equals
        for i in range(max(len(v) for v in per_type)):  # interleave the types
            for values in per_type:
                if i < len(values):
                    pool.append(values[i])
        # Hints can be wrong (a name is not a type): a few values of the other common shapes come last,
        # so the search can still find what runs when every hinted value raises at the first line.
        if "callable" not in types:
            for kind, values in FALLBACKS:
                if kind not in types:
                    pool.extend(values)
        return pool

    def _instances(self, p: Param) -> list[Any]:
        """Instances of the module's own classes the parameter is checked against or annotated with: in
        a list (or tuple) first when the annotation is one of them (``value: List[Item]``); the values
        of a ``Literal[...]`` alias of the module (``TimeFrameLiteral = Literal["now", "second"]``)."""
        out: list[Any] = []
        container = next((t for t in p.types if t in ("list", "tuple", "set")), None)
        for rank, cls in enumerate(p.classes[:6]):
            literals = self.literals.get(cls)
            if literals is not None:
                out += literals
                continue
            width = globalrefs.tuple_width(self.hints.tree, cls)  # a namedtuple's fields: all of them given
            shaped = [New(cls, *[None] * width), New(cls, *range(1, width + 1))] if width else []
            if rank >= 2:  # ``type(p) is DateTuple`` ... ``is IntervalTuple``: a chain of checks
                out += shaped or [New(cls), New(cls, "abc")]
                continue
            # instances built from what the constructor takes in place of the last fixed shapes (as many values)
            fixed = [New(cls, {"a": 1, "b": 2}), New(cls, [1, 2, 3]), New(cls, "abc"), New(cls, 3)]
            made = [*shaped, New(cls), *(self._built(cls) + fixed)[:len(fixed)]]
            if container is not None:  # not a set: instances need not be hashable
                wrap = tuple if container == "tuple" else list
                out += [wrap(made[:1]), wrap(made[1:3]), wrap(made[:4])]
            out += made
        return out

    def _built(self, cls: str) -> list[New]:
        """Instances of the file's class ``cls`` made from what its constructor's first parameter takes, one of each
        plain type its body says (dbf's ``Date(year)`` takes a ``datetime.date``, a text or a ``Date``, where
        ``Date(3)`` raises and ``Date()`` is the null date, which no ``if other:`` passes); once per class."""
        if cls not in self._made:
            node = last_class(self.hints.tree, cls) if self.hints.tree is not None else None
            made = [s for s in getattr(node, "body", ()) if type(s).__name__ == "FunctionDef"
                    and s.name in ("__init__", "__new__")]
            params = analyse(made[0], skip_first=True).params if made else []
            first = next((q for q in params if q.kind == "positional"), None)
            kinds = [t for t in first.types if t in _BUILT_FROM][:3] if first is not None else []
            self._made[cls] = [New(cls, self._values(t, first)[0]) for t in kinds]
        return self._made[cls]

    def _values(self, kind: str, p: Param) -> list[Any]:
        h, rng = self.hints, self.rng
        if kind == "int":
            return _merge(h.ints, BASE_INTS)
        if kind == "float":
            return _merge(h.floats, BASE_FLOATS + [float(i) for i in h.ints[:6]] + EDGE_FLOATS)
        if kind == "bool":
            return [True, False]
        if kind == "str":
            texts = _merge(h.strings, BASE_STRINGS)
            if p is not None and p.seps:  # ``bits = params.split(";")``: texts with parts, of the file's words
                words = [t for t in h.strings if t.isidentifier()][:3] + ["a", "b", "c"]
                texts[1:1] = [t for sep in p.seps[:2] for t in (f"a{sep}b", f"{words[0]}{sep}{words[1]}",
                                                                 f"{words[1]}{sep}{words[2]}{sep}{words[0]}")]
            return texts
        if kind == "bytes":
            return [b"abc", b"", b"\x00\xff", b"Hello World"] + [s.encode() for s in h.strings[:4]]
        if kind == "stream":  # ``fileobj.read(8)``: open files (in memory) holding bytes or text
            return self._streams()
        if kind == "function":  # ``inspect.getdoc(operation)``: functions of several signatures and docstrings
            return funcs.examples()
        if kind == "source":  # ``ast.parse(function_source)``: Python source texts
            return funcs.sources()
        if kind == "type":  # ``type_.__dataclass_fields__``, ``get_origin(tp)``: classes and type hints
            return funcs.types()
        if kind.startswith("ast:"):  # ``visit_With(self, node)``: With nodes
            return examples(kind[4:])
        if kind in ("date", "datetime", "time", "timedelta"):  # ``isinstance(day, date)``, ``day.weekday()``
            return clock_values(kind, [i for i in h.ints if 1900 <= i <= 2100])
        if kind == "none":
            return [None]
        if kind == "class":  # ``isinstance(value, schema)``: builtin classes, then the file's (.globalrefs); first
            # the classes ``issubclass(p, Base)`` asks for, Base and the file's subclasses of it
            bases = [*p.bases[:2], *globalrefs.subclasses(self.hints.tree, p.bases[:2])[:2]] if p.bases else []
            return [Global(n) for n in dict.fromkeys((*bases, *globalrefs.BUILTIN_CLASSES, *p.classes[:2]))]
        if kind == "slice":  # ``isinstance(idx, slice)`` in a ``__getitem__``
            return [slice(0, 2), slice(1, None), slice(None, None, -1), slice(-2, None), slice(0, 10, 2)]
        if kind == "path":
            return self.files + ["missing.txt"]
        if kind == "pathobj":  # imported only here: a pathlib path is rare, and pathlib costs 2 ms a batch
            from pathlib import Path  # noqa: PLC0415

            return [Path("."), *(Path(f) for f in self.files[:3]), Path("missing.txt"), Path("folder")]
        if kind == "callable":  # a stand-in; then ones whose calls return mined values (``self.peek()``)
            return [CalibStandIn(p.name), *(self._scripted(p.name, p.result) for _ in range(5))]
        if kind in ("list", "tuple", "set"):
            element = next((e for e in p.element if e.startswith("tuple")), (p.element or [""])[0])
            seqs = self._sequences(element)
            if p.item is not None and p.item.attrs and not element.startswith(("class:", "tuple", "unpack")):
                objs = self._values("object", p.item)  # ``for t in terminals: t.name``: objects with those first
                seqs = [objs[:1], [objs[0], objs[-1]], objs[-3:], *seqs]
            elif p.item is not None and p.item.keys and not element.startswith(("class:", "tuple", "unpack")):
                maps = self._mappings(p.item)[:3]  # ``for row in rows: row["name"]``: records (dicts) with those keys
                seqs = [maps[:1], maps[:2], [maps[-1], maps[0], maps[1 % len(maps)]], *seqs]
            elif not p.element and p.item is not None and p.item.types and not p.item.parts:
                values = self._pool(p.item)  # ``for line in message.headers: line.split(":", 1)``: texts
                seqs = [values[:1], values[:3], values[1:4], *seqs]
            elif element.startswith("unpack") and p.item is not None and len(p.item.parts) == int(element[6:]):
                by_part = [self._pool(part) for part in p.item.parts]  # ``helper(*pair)``: as the callee's params
                seqs = [[pool[(i * (j + 1)) % len(pool)] for j, pool in enumerate(by_part)] for i in range(8)] + seqs
            elif p.item is not None and p.item.annotated:  # ``List[Tuple[int, Optional[Item]]]``: each position
                by_part = [self._optional(part) for part in p.item.parts]  # typed by its own annotation
                rows = [tuple(pool[i % len(pool)] for pool in by_part) for i in range(6)]
                seqs = [rows[:1], rows[:2], rows[2:5], rows[3:6], *seqs]
            elif p.item is not None and any(part.attrs for part in p.item.parts):  # ``for k, v in p: k.key``
                by_part = [self._pool(part) for part in p.item.parts]
                rows = [tuple(pool[(i * (j + 1)) % len(pool)] for j, pool in enumerate(by_part)) for i in range(6)]
                seqs = [rows[:1], rows[:2], rows[2:5], rows[3:6], *seqs]
            if p.item is not None and p.item.classes and not element.startswith(("class:", "tuple", "unpack")):
                made = [v for v in self._instances(p.item) if isinstance(v, New)][:3]  # ``root = doc.children[0]``,
                seqs = [made[:1], made[:2], *seqs] if made else seqs  # ``isinstance(root, Division)``: instances first
            if kind == "tuple":
                return [tuple(s) for s in seqs]
            if kind == "set":
                return [set(s) for s in seqs if all(isinstance(x, int | str | float) for x in s)]
            return seqs
        if kind == "dict":
            return self._mappings(p)
        if kind == "object":  # attributes it calls are stand-ins; or the whole object is one
            objs = [Obj(**{a: (self._scripted(f"{p.name}.{a}", getattr(p.children.get(a), "result", None)) if i
                               else CalibStandIn(f"{p.name}.{a}"))
                           if a in p.called else self._member(p, a, i) for a in p.attrs}) for i in range(6)]
            # ``hasattr(dt.tzinfo, "zone")``: objects without each attribute asked about, early
            lacking = [Obj(**{k: v for k, v in vars(objs[0]).items() if k != a}) for a in p.optional[:3]]
            return [objs[0], *lacking, CalibStandIn(p.name), *objs[1:]]
        return [rng.choice(BASE_INTS)]

    def _optional(self, p: Param) -> list[Any]:
        """The pool of ``p``, with ``None`` second where its annotation allows it (``Optional[Item]``)."""
        pool = self._pool(p)
        if "none" in p.types:
            pool = [v for v in pool if v is not None]
            pool[1:1] = [None]
        return pool

    def _streams(self) -> list[Stream]:
        """Open files for a parameter x reads or writes as one (``fileobj.read(8)``, ``out.write(text)``): bytes whose
        every position differs (a comparison on what x read finds where it came from: :mod:`.redqueen`), led by x's
        own bytes literals (``b"APETAGEX"``); lines of text, of x's words and in the shape of a configuration file;
        and empty ones. Bytes first where x writes bytes literals, else text."""
        h = self.hints
        literals = self._bytes_literals
        if literals is None:  # x's bytes literals in x's order (once: fresh values ask again and again)
            found = [n for n in walk(h.node) if type(getattr(n, "value", None)) is bytes] if h.node is not None else []
            found.sort(key=lambda n: (n.lineno, n.col_offset))
            literals = self._bytes_literals = [n.value for n in found][:4]
        numbered = bytes(range(1, 65))
        binary = [Stream(b"".join(literals) + numbered[:32]), Stream(numbered), Stream(b"")][0 if literals else 1:]
        words = [w for w in h.strings if "\n" not in w][:4]
        text = [Stream(file_content("input.txt")), Stream("".join(f"{w}\n" for w in words) or "a\nb\n"),
                Stream(file_content("input.ini")), Stream("")]
        return [*binary, *text] if literals else [*text, *binary]

    def _scripted(self, name: str, result: Param | None = None) -> CalibStandIn:
        """A stand-in whose calls return one to three values mined from the body, of the types the use of
        the answer says (``result``) if any (then what the mode says): ``ch = self.peek()`` followed by
        ``if ch in "-_":`` needs the dependency to answer ``"-"``."""
        h, rng = self.hints, self.rng
        plain: list[Any] = [v for v in h.strings if len(v) <= 12][:10] + h.ints[:8] + [None, "", 0, 1, True, False]
        if result is not None and (typed := [v for v in plain if type_of(v) in result.types]):
            plain = typed + [None] * ("none" in result.types)
        script = [rng.choice(plain) for _ in range(rng.choice((1, 1, 2, 3)))]
        if self.answers and rng.random() < 0.25:  # ``data = stream.char(); data is EOF``: Global('EOF')
            script[0] = rng.choice(self.answers)
        return CalibStandIn(name, script)

    def _sequences(self, element: str) -> list[list[Any]]:
        ints = _merge(self.hints.ints, [3, 1, 2, 5, 0, -4])
        strings = _merge(self.hints.strings, ["a", "b", "c", "hello", ""])
        if element == "unhashable":  # ``except TypeError`` around ``v in seen``: lists among the items
            return [[], [[1], [2], [1]], [1, [2], 1], [[1, 2]], [[3], [3]], ints[:3], [strings[0], [ints[0]]]]
        if element.startswith("class:"):  # ``for v in p: if isinstance(v, Line)``: items of the file's class
            made = [New(element[6:]), New(element[6:], "abc")]
            return [[], made[:1], made, [made[0], ints[0]], [strings[0], made[1]], made * 2]
        if element.startswith("unpack"):  # ``ltext, lnum = lpair``: each value exactly that wide, texts and numbers
            width, mixed = int(element[6:]), [v for pair in zip(strings, ints) for v in pair]
            return [[mixed[(i + j) % len(mixed)] for j in range(width)] for i in range(8)]
        if element.startswith("tuple"):
            width = int(element[5:] or 2)
            rows = [tuple(ints[(i + j) % len(ints)] for j in range(width)) for i in range(8)]
            return [[], rows[:1], rows[:3], rows[2:6], [rows[0]] * 2, rows[:8]]
        if element == "str":
            base = strings
        elif element == "float":
            base = [1.5, -0.5, 2.0, 0.0]
        else:
            base = ints
        return [[], base[:1], base[:3], list(reversed(base[:4])), base[:2] * 2, base[1:6],
                [self.rng.choice(base) for _ in range(5)], base[:8]]

    def _mappings(self, p: Param) -> list[dict[Any, Any]]:
        keys = p.keys or [s for s in self.hints.strings if s.isidentifier()][:4]
        values = _merge(self.hints.ints, [1, 2, 0])
        out: list[dict[Any, Any]] = []
        if keys:
            out.append({k: self._attr_value(k, i) for i, k in enumerate(keys)})
            out.append({k: values[i % len(values)] for i, k in enumerate(keys)})
            out.append({k: "x" for k in keys[: max(1, len(keys) - 1)]})
            if p.item is not None and (p.item.types or p.item.attrs):  # ``tokens = info[month]``: values
                pool = self._pool(p.item)  # as the body uses them (lists of texts for ``for t in tokens``)
                out += [{k: pool[(i + j) % len(pool)] for i, k in enumerate(keys)} for j in (0, 1)]
        out += [{}, {"a": 1, "b": 2}, {"key": "value"}, {"x": [1, 2], "y": None}]
        return out

    def _member(self, p: Param, attr: str, i: int) -> Any:
        """The i-th value of attribute ``attr`` of an object parameter: from what the body does with
        ``p.attr`` when it says (``for part in item.content`` → a list), else from the name."""
        child = p.children.get(attr)
        if child is not None and child.classes and child.attrs and i in (2, 4):  # ``item = node.item``, then
            # ``item.type`` and ``isinstance(item, Choice)``: not only instances of the class (the first values
            # of its pool), objects with the attributes read too; 2 and 4 (:func:`.globalrefs.extend` sets the
            # odd ones' attribute to a name x compares it with), built as the first and third of its objects
            return [v for v in self._values("object", child) if type(v) is Obj][i - 2]
        if child is not None and (child.types or child.attrs or child.keys):
            pool = self._pool(child)
            return pool[i % len(pool)]
        return self._attr_value(attr, i)

    def _attr_value(self, name: str, i: int) -> Any:
        kind = name_type(name) or "int"
        pool = {"int": BASE_INTS, "str": BASE_STRINGS[1:], "float": BASE_FLOATS, "bool": [True, False],
                "list": [[1, 2], [], ["a"]], "dict": [{"a": 1}, {}], "path": self.files,
                "callable": [CalibStandIn(name)]}.get(kind, BASE_INTS)
        return pool[i % len(pool)]


def _merge(first: list[Any], second: list[Any]) -> list[Any]:
    out = list(first[:12])
    for v in second:
        if v not in out:
            out.append(v)
    return out + first[12:]


def file_content(name: str) -> str:
    lower = name.lower()
    if lower.endswith(".json"):
        return '{"name": "example", "values": [1, 2, 3], "enabled": true}\n'
    if lower.endswith(".csv"):
        return "id,name,value\n1,alpha,10\n2,beta,20\n"
    if lower.endswith((".ini", ".cfg", ".conf")):
        return "[section]\nkey = value\nnumber = 3\n"
    if lower.endswith((".yaml", ".yml")):
        return "name: example\nvalues:\n  - 1\n  - 2\n"
    return "first line\nsecond line\nthird line\n"
