"""Object states built by the class's own methods (runs inside the sandbox; stdlib only).

A method of a class often does nothing interesting on a freshly constructed instance: a cache's
``__getitem__`` needs items put in by its ``__setitem__``, a multi-dict's ``sortedvalues`` items
added by ``add``, a proxy socket's ``bind`` a proxy set by ``set_proxy``. So the input state of a
method may also list calls of the class's own mutators (methods defined in the file before x that
assign attributes of ``self`` x reads, or store items into ``self``), made on the instance after its
constructor and before the input's own ``self`` attributes are set: ``New('TTLCache', 10, 60,
__calls__=[['__setitem__', 'a', 1], ['__setitem__', 'b', 2]])``. The calls are values of the input
state (literals, stand-ins), so the replay rebuilds the same object; a call that raises is skipped
(it still changed what it changed before raising, the same way in every run).
"""

from __future__ import annotations

import ast

from .standins import CalibStandIn, is_standin, standin_name
from .values import New

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: The key of the calls in ``New(...)``/``Obj(...)``: no attribute of a real object has this name.
CALLS = "__calls__"
MAX_METHODS = 4  # mutators used, best first
MAX_CALLS = 8  # calls one input state may list (a longer list is cut, also when a user wrote it)
POOL = 12  # lists of calls in the pool, besides "no calls" (the last one: a call repeated, :func:`pool`)
MAX_VALUES = 8  # values per mutator parameter
#: Methods of containers and of the language's collections that change their object.
_MUTATING = frozenset({"append", "add", "extend", "insert", "update", "setdefault", "appendleft", "extendleft",
                       "push", "put", "__setitem__", "heappush", "add_row", "register"})
_PREFIXES = ("add", "append", "set", "put", "push", "insert", "update", "register", "extend", "feed", "load",
             "parse", "write", "store", "__setitem__")
_DECORATED = frozenset({"property", "staticmethod", "classmethod", "setter", "getter", "deleter",
                        "cached_property", "abstractmethod", "contextmanager"})
ITEMS = "[]"  # in a method's writes: it stores items into self (``self[k] = v``, ``dict.__setitem__(self, ...)``)


_NAMES: dict[type, frozenset[str]] = {}


def mangle(owner: type, name: str) -> str:
    """``self.__links`` in the class body of ``TTLCache`` is the attribute ``_TTLCache__links`` — when the
    class's code says so (a class the scaffold rebuilt from its functions may use the name as written)."""
    if name[:2] != "__" or name[-2:] == "__" or not isinstance(owner, type):
        return name
    mangled = f"_{owner.__name__.lstrip('_')}{name}"
    if owner not in _NAMES:
        if len(_NAMES) > 64:
            _NAMES.clear()
        todo = [getattr(f, "__code__", None) for f in vars(owner).values()]
        todo += [getattr(getattr(f, "__func__", f), "__code__", None) for f in vars(owner).values()]
        names: set[str] = set()
        while todo:
            code = todo.pop()
            if code is not None and hasattr(code, "co_names"):
                names.update(code.co_names)
                todo += [c for c in code.co_consts if hasattr(c, "co_names")]
        _NAMES[owner] = frozenset(names)
    return mangled if mangled in _NAMES[owner] else name


def apply(instance: Any, calls: Any) -> Any:
    """Make the calls ``[[method, arg, ...], ...]`` on ``instance``, in order (a call that fails is
    skipped); returns ``instance``."""
    if not isinstance(calls, list | tuple):
        return instance
    for call in list(calls)[:MAX_CALLS]:
        if not (isinstance(call, list | tuple) and call and isinstance(call[0], str)):
            continue
        try:
            getattr(instance, mangle(type(instance), call[0]))(*call[1:])
        except Exception:  # noqa: BLE001, S112 - the class refused this call: the object stays as it is
            continue
    return instance


def file_classes(tree: Any, owner: str) -> list[Any]:
    """The class statement named ``owner`` and those of its bases the file defines (by name, nearest first)."""
    found: dict[str, Any] = {}
    todo = list(tree.body)
    while todo:  # class statements, also nested in classes and blocks (not inside functions)
        node = todo.pop(0)
        if isinstance(node, ast.ClassDef):
            found[node.name] = node  # the last definition of a name is the one that runs
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += [c for f in ("body", "orelse", "finalbody", "handlers") for c in getattr(node, f, ())
                     if isinstance(c, ast.stmt | ast.excepthandler)]
    out: list[Any] = []
    todo = [owner]
    while todo and len(out) < 8:
        node = found.get(todo.pop(0))
        if node is None or node in out:
            continue
        out.append(node)
        todo += [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                 if isinstance(b, ast.Name | ast.Attribute)]
    return out


def _decorated(method: Any) -> bool:
    return any((d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")) in _DECORATED
               for d in method.decorator_list)


def _generator(method: Any) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(method))


def _effects(method: Any) -> tuple[set[str], set[str], set[str]]:
    """(attributes of self the method writes, or ITEMS; attributes it reads; methods of self it calls)."""
    args = method.args.args
    me = args[0].arg if args else ""
    writes: set[str] = set()
    reads: set[str] = set()
    calls: set[str] = set()

    def selfattr(node: Any) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
            return node.attr
        return None

    if method.name in _MUTATING:  # a container's own protocol: ``__setitem__``, ``add``, ``append``
        writes.add(ITEMS)
    for node in ast.walk(method):
        attr = selfattr(node)
        if attr is not None:
            (writes if isinstance(node.ctx, ast.Store | ast.Del) else reads).add(attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            inner = selfattr(node.value)
            if inner is not None:
                writes.add(inner)
            elif isinstance(node.value, ast.Name) and node.value.id == me:
                writes.add(ITEMS)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target, name = node.func.value, node.func.attr
            inner = selfattr(target)
            if inner is not None and name in _MUTATING:
                writes.add(inner)
            elif isinstance(target, ast.Name) and target.id == me:
                calls.add(name)
                if name in _MUTATING:
                    writes.add(ITEMS)
            elif name in _MUTATING and (  # dict.__setitem__(self, k, v), super().setdefault(k, [])
                    isinstance(target, ast.Call) and getattr(target.func, "id", "") == "super"
                    or node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == me):
                writes.add(ITEMS)
    return writes, reads, calls


def _whole(node: Any) -> bool:
    """Whether x uses ``self`` as a whole (``self[k]``, ``for n in self``, ``len(self)``, ``f(self, k)``,
    ``super()``), not only its attributes: then items stored into self matter."""
    args = node.args.args
    me = args[0].arg if args else ""
    attribute_of = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return any(isinstance(n, ast.Name) and n.id == me and id(n) not in attribute_of and isinstance(n.ctx, ast.Load)
               or isinstance(n, ast.Call) and getattr(n.func, "id", "") == "super" for n in ast.walk(node))


def find(tree: Any, owner: str, x: Any) -> list[Any]:
    """The mutators of ``owner`` that matter to x, best first: methods defined in the file (x's context)
    that write attributes of self that x (or a method x calls) reads, or, when x uses self as a whole,
    store items into self; not x, not properties, static or class methods, nor methods without
    parameters (``clear``)."""
    methods: dict[str, Any] = {}
    for cls in file_classes(tree, owner):
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name not in methods:
                methods[stmt.name] = stmt
    memo: dict[str, tuple[set[str], set[str], set[str]]] = {}

    def effects(name: str, depth: int = 0) -> tuple[set[str], set[str], set[str]]:
        """A method's effects; one that calls a mutator of self mutates too (``add`` calls ``self._insert``)."""
        if name not in memo:
            memo[name] = found = _effects(methods[name])
            if depth < 2:  # not through a context manager's ``with self.context():`` (it undoes what it does)
                for called in found[2] - {name}:
                    if called in methods and not _decorated(methods[called]):
                        found[0].update(effects(called, depth + 1)[0])
        return memo[name]

    _, reads, called = _effects(x)
    for name in called & set(methods):  # what x's helpers read, x reads
        reads |= effects(name)[1]
    if _whole(x):
        reads.add(ITEMS)
    scored = []
    for i, (name, method) in enumerate(methods.items()):
        args = method.args
        if (name in (x.name, "__init__", "__new__", "__post_init__") or _decorated(method)
                or name.startswith("__") and name != "__setitem__" or len(args.args) < 2 and not args.vararg):
            continue
        hits = effects(name)[0] & reads
        if hits and (x.name in effects(name)[2] or _generator(method)):
            continue  # it runs x itself (the state would be x's own doing); a generator: calling it runs nothing
        score = 2 * len(hits) + (1 if hits and name.lstrip("_").startswith(_PREFIXES) else 0)
        if score:
            scored.append((-score, i, method))
    return [m for _, _, m in sorted(scored, key=lambda s: s[:2])[:MAX_METHODS]]


#: Built-in containers a class of the file may derive from, and the method that stores an item in each.
_CONTAINERS = {"list": "append", "UserList": "append", "deque": "append", "dict": "__setitem__",
               "OrderedDict": "__setitem__", "UserDict": "__setitem__", "defaultdict": "__setitem__",
               "Counter": "__setitem__", "set": "add"}


def container_mutator(tree: Any, owner: str, methods: list[Any]) -> str | None:
    """The method that stores an item into ``owner`` when it derives (itself or through a base the file
    defines) from a built-in container: ``append``, ``__setitem__`` or ``add``; None when it does not, or
    when a mutator of the file's already stores items (:func:`find`)."""
    if any(ITEMS in _effects(m)[0] for m in methods):
        return None
    for cls in file_classes(tree, owner):
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if name in _CONTAINERS:
                return _CONTAINERS[name]
    return None


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _plain(value: Any) -> bool:
    """A value a call may take: no placeholder that needs the module (``New``), no ``<default>``."""
    if isinstance(value, New) or is_standin(value) and standin_name(value) == "<default>":
        return False
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return True


def pool(pools: Any, owner: str) -> list[Any]:
    """Lists of calls of the mutators of ``owner`` (:func:`find`) for x (``pools.hints.node``), arguments
    from the value pools (a parameter named like one of x's draws from x's pool: ``__setitem__(key,
    value)`` stores the keys ``__getitem__(key)`` looks up); [] when no mutator matters to x, or x
    initialises self."""
    from . import hints  # noqa: PLC0415

    x, tree = pools.hints.node, pools.hints.tree
    if x is None or tree is None or x.name in ("__init__", "__new__", "__post_init__"):
        return []
    methods = find(tree, owner, x)
    builtin = container_mutator(tree, owner, methods) if _whole(x) else None
    if not methods and builtin is None:
        return []
    first = next((p.name for p in pools.hints.params if p.kind == "positional"), None)
    signatures = []
    if builtin is not None:  # the items of a list, dict or set x's class derives from: its own method stores them
        items = [*pools.hints.strings[:4], *pools.hints.ints[:2], "abc", 1, CalibStandIn("item")]
        items = list({repr(v): v for v in items if _plain(v)}.values())[:MAX_VALUES]
        keys = [v for v in (pools.by_param.get(first, []) if first else []) if _plain(v) and _hashable(v)]
        keys = (keys or items)[:MAX_VALUES]
        signatures.append((builtin, [keys, items] if builtin == "__setitem__" else [items]))
    for method in methods:
        params = hints.analyse(method, skip_first=True).params
        positional = [p for p in params if p.kind == "positional"]
        required = max(0, len(positional) - len(method.args.defaults))  # a default need not be a literal
        # the required parameters and up to two with defaults; ``*args`` (a method that hands its
        # arguments on: ``setdefault(*args)``) takes one value, of x's first parameter's pool
        chosen = positional[:max(required, 2)] + [p for p in params if p.kind == "vararg"][:1]
        values = []
        for i, p in enumerate(chosen[:4]):
            name = first if p.kind == "vararg" and first else p.name
            given = pools.by_param.get(name) if name in pools.params else None
            drawn = [v for v in (given or pools._pool(p)) if _plain(v) and not (i >= required and v == p.default)]
            values.append(drawn[:MAX_VALUES] or [None])
        signatures.append((method.name, values))
    out: list[Any] = []
    for j in range(POOL):
        calls = []
        for c in range(1 + j % 3):  # one, two or three calls
            name, values = signatures[(j // 3 + c) % len(signatures)]
            calls.append([name, *(v[(j // 3 + c + k) % len(v)] for k, v in enumerate(values))])
        out.append(calls)
    # the best mutator's call made three times with the same arguments, in place of the last list (the pool keeps its
    # length: a longer one changed the course of searches it did not help): what it does when the name or key is
    # there already (``add_tag('abc')`` again turns that node into a list of two, then appends to it; the other
    # lists never repeat a call)
    name, values = signatures[0]
    again = [name, *(v[0] for v in values)]
    out[-1] = [again, list(again), list(again)]
    return out
