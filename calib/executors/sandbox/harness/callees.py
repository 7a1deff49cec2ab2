"""``self`` attributes x reaches through its class's own methods (runs inside the sandbox; stdlib only).

x's body names only what it reads itself: ``m = self.match(reMain)`` reads nothing of ``self`` but the
method, while ``match`` reads ``self.subject`` and ``self.pos``, and every branch of x after it turns on
them. The methods of x's class (and of its bases in the file) that x calls, and the properties it reads,
are described as x's own body is (:func:`.hints.analyse`): the ``self`` attributes they use become
parameters of the input's ``self`` with the hints their use gives, and their literals join x's.
Only what the file context shows before x is there: a method defined after x is a stand-in.
"""

from __future__ import annotations

import ast

from . import globalrefs, hints
from .mutators import file_classes
from .trees import last_class

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: Methods and properties described per x, the first ones x reaches (by their first use in x).
MAX_CALLEES = 6


def class_reads(placed: Any) -> list[str]:
    """Attributes a class method reads of its class (``cls._get_frames(frame)``, in its first parameter's
    name): those the class lacks when x runs (defined after x in the file) start as stand-ins."""
    node = placed.node
    if placed.kind != "classmethod" or not node.args.args:
        return []
    me = node.args.args[0].arg
    return sorted({sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                   and isinstance(sub.ctx, ast.Load) and isinstance(sub.value, ast.Name) and sub.value.id == me
                   and not (sub.attr.startswith("__") and sub.attr.endswith("__"))})


def add_callees(info: hints.Hints, placed: Any) -> None:
    """Extend ``info.self_params`` (and its literals) with what x's callees on ``self`` use."""
    node = placed.node
    if not placed.classes or placed.kind not in ("method", "property") or not node.args.args:
        return
    me = node.args.args[0].arg
    methods = _methods(placed)
    if not methods:
        return
    reached: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == me \
                and sub.attr in methods and sub.attr != node.name and sub.attr not in reached:
            reached.append(sub.attr)
    reached += [name for name in protocol(node, me) if name in methods and name != node.name and name not in reached]
    for name in reached[:MAX_CALLEES]:
        callee = methods[name]
        if callee.args.args:
            hints.describe(callee, {}, info, callee.args.args[0].arg)
            if (kept := _returned(callee)) is not None:
                _alias(info, name, kept)


#: The special methods Python calls when code uses an object as a whole, by the use.
_ITERATED = ("__iter__", "__next__")
_TAKING = frozenset({"list", "tuple", "set", "frozenset", "sorted", "iter", "enumerate", "zip", "dict", "sum", "min",
                     "max", "any", "all", "map", "filter", "reversed"})


def protocol(node: Any, me: str) -> list[str]:
    """The special methods of ``self`` that x's body runs without naming them, in the order of first use:
    ``for row in self`` and ``list(self)`` its ``__iter__`` (and ``__next__``, which a class's ``__iter__``
    often hands on to), ``len(self)`` its ``__len__``, ``self[k]`` its ``__getitem__`` (``__setitem__``,
    ``__delitem__`` where it is set or deleted), ``k in self`` its ``__contains__`` (textfsm's
    ``TextTable.Filter`` loops ``for row in self``, whose ``__next__`` walks ``self._table[1:]``: x's body
    never names ``_table``)."""
    def me_(n: Any) -> bool:
        return isinstance(n, ast.Name) and n.id == me

    uses: list[tuple[tuple[int, int], tuple[str, ...]]] = []
    for sub in ast.walk(node):
        called = sub.func.id if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) else ""
        if isinstance(sub, ast.For | ast.AsyncFor | ast.comprehension) and me_(sub.iter) \
                or called in _TAKING and any(map(me_, sub.args)):  # type: ignore[attr-defined]
            names: tuple[str, ...] = _ITERATED
        elif called == "len" and sub.args and me_(sub.args[0]):  # type: ignore[attr-defined]
            names = ("__len__",)
        elif isinstance(sub, ast.Subscript) and me_(sub.value):
            names = ("__getitem__",) if isinstance(sub.ctx, ast.Load) else (
                "__setitem__",) if isinstance(sub.ctx, ast.Store) else ("__delitem__",)
        elif isinstance(sub, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in sub.ops) \
                and any(map(me_, sub.comparators)):
            names = ("__contains__",)
        else:
            continue
        at = sub.iter if isinstance(sub, ast.comprehension) else sub  # (a comprehension has no position)
        uses.append(((at.lineno, at.col_offset), names))
    found: list[str] = []
    for _, names in sorted(uses):
        found += [name for name in names if name not in found]
    return found


def add_guards(info: hints.Hints, placed: Any) -> None:
    """``self`` attributes a decorator of the file reads before x runs: ``@authentication_required`` wraps x in
    ``check(cls, *args)``, which runs x only ``if cls.authenticated``. The wrapper, a function defined in the
    decorator that hands its first parameter on to the decorated function (``meth(cls, *args, **kwargs)``), is
    described as x's callees on ``self`` are: ``authenticated`` becomes an attribute of the input's ``self``."""
    node = placed.node
    if not placed.classes or placed.kind not in ("method", "property") or not node.decorator_list:
        return
    functions = {s.name: s for s in placed.tree.body if isinstance(s, ast.FunctionDef)}
    for decorator in node.decorator_list:
        outer = functions.get(_decorator(decorator.func if isinstance(decorator, ast.Call) else decorator))
        if outer is None or not outer.args.args:
            continue
        defs = [f for f in ast.walk(outer) if isinstance(f, ast.FunctionDef)]
        for wrapper in (w for w in defs if w is not outer and w.args.args):
            first = wrapper.args.args[0].arg  # the decorated function: a parameter of an enclosing def
            wrapped = {a.arg for f in defs if f is not wrapper for a in f.args.args}
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in wrapped and c.args
                   and isinstance(c.args[0], ast.Name) and c.args[0].id == first for c in ast.walk(wrapper)):
                hints.describe(wrapper, {}, info, first)


def _returned(func: Any) -> str | None:
    """``Q`` of a property whose every ``return`` gives ``self.Q`` (ruamel.yaml's ``Scanner.reader`` returns
    ``self._scanner_reader``, set from the loader in an ``except AttributeError`` the first time), else None."""
    if not any(_decorator(d) == "property" for d in func.decorator_list):
        return None
    me = func.args.args[0].arg
    found = {r.value.attr if isinstance(r.value, ast.Attribute) and isinstance(r.value.value, ast.Name)
             and r.value.value.id == me else None for r in ast.walk(func) if isinstance(r, ast.Return)}
    return found.pop() if len(found) == 1 else None


def _alias(info: hints.Hints, name: str, kept: str) -> None:
    """What x does with ``self.name`` (a property returning ``self.kept``) describes ``self.kept``: its calls
    (``self.reader.peek()``), attributes and answers; the property itself is the class's, not input."""
    shown = {p.name: p for p in info.self_params}
    used, into = shown.get(name), shown.get(kept)
    if used is None or into is None or used is into:
        return
    for field in ("types", "attrs", "called", "optional", "keys", "classes"):
        target = getattr(into, field)
        target += [v for v in getattr(used, field) if v not in target]
    for attr, child in used.children.items():
        into.children.setdefault(attr, child)
    into.result = into.result or used.result
    into.item = into.item or used.item


def _methods(placed: Any) -> dict[str, Any]:
    """Plain methods and properties of x's class and of its bases defined in the file, by name (the class's
    own first); static and class methods are left out (their first parameter is not ``self``)."""
    out: dict[str, Any] = {}
    for cls in file_classes(placed.tree, placed.classes[-1]):
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name not in out \
                    and not any(_decorator(d) in ("staticmethod", "classmethod") for d in stmt.decorator_list):
                out[stmt.name] = stmt
    return out


def _decorator(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def add_forwarded(info: hints.Hints, placed: Any) -> None:
    """x's parameters handed on to a function of the file (``helper(p)``) or one x defines itself, a method of x's class
    (``self.parse(p)``), a base's (``super().__init__(subcon)``) or a file class's constructor
    (``Item(p)``): what that callee's body does with its parameter describes x's too (``if not
    isinstance(subcon, Construct): raise TypeError`` in the base's ``__init__``). Each callee's body is
    described with its parameter standing for x's (:func:`.hints.describe`), the first
    :data:`MAX_CALLEES` of them; its literals join x's."""
    node, params = placed.node, {p.name: p for p in info.params}
    if not params:
        return
    functions = {s.name: s for s in placed.tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    functions.update({s.name: s for s in ast.walk(node) if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
                      and s is not node})  # x's own nested functions (``def _build_long_summary(item):``)
    known: dict[str, Any] = {}  # what :func:`_callee` looked up, once each
    seen: list[Any] = []
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        callee, bound = _callee(call.func, functions, known, placed)
        if callee is None or callee is node or callee in seen or len(seen) >= MAX_CALLEES:
            continue
        names = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args][bound:]]
        mapped = {names[i]: params[a.id] for i, a in enumerate(call.args[:len(names)])
                  if isinstance(a, ast.Name) and a.id in params}
        mapped.update({k.arg: params[k.value.id] for k in call.keywords if k.arg in names
                       and isinstance(k.value, ast.Name) and k.value.id in params})
        mapped.update(_unpacked(call, callee, names, params))
        packed = _packed(call)
        if packed in params and params[packed].kind == "kwarg":  # ``super().__init__(a, **kwargs)``
            keys = params[packed].keys
            keys += [k for k in _keywords(call, callee, bound, placed, known) if k not in keys]
        if mapped:
            seen.append(callee)
            hints.describe(callee, mapped, info, None)


def _unpacked(call: ast.Call, callee: Any, names: list[str], params: dict[str, Any]) -> dict[str, Any]:
    """``_haab_count(*haab)``: x's parameter unpacked into the callee's remaining parameters is a tuple as wide as
    those the callee needs, each item described by the callee's use of its parameter (``p.item.parts``)."""
    last = call.args[-1] if call.args else None
    if not (isinstance(last, ast.Starred) and isinstance(last.value, ast.Name) and last.value.id in params):
        return {}
    p, rest = params[last.value.id], names[len(call.args) - 1:]
    width = len(rest) - max(0, len(callee.args.defaults) - (len(names) - len(rest)))  # those without a default
    if not 0 < width <= 6 or p.kind not in ("positional", "keyword"):
        return {}
    hints._add(p.types, "tuple")
    hints._add(p.element, f"unpack{width}")
    p.item = p.item or hints.Param(name=p.name + "[]", kind="item", depth=p.depth + 1)
    if len(p.item.parts) != width:
        p.item.parts = [hints.Param(name=f"{p.name}[{i}]", kind="item", depth=p.depth + 1) for i in range(width)]
    return dict(zip(rest, p.item.parts))


def _packed(call: ast.Call) -> str | None:
    """The name a call hands on as ``**name``, else None."""
    return next((k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)), None)


def _keywords(call: ast.Call, callee: Any, bound: int, placed: Any, known: dict[str, Any], depth: int = 0,
              above: frozenset[str] = frozenset()) -> list[str]:
    """The parameters of ``callee`` a call leaves to the mapping it hands on as ``**kwargs``, required ones
    first, and, where the callee hands its own ``**kwargs`` on again to a function, constructor or base of
    the file (``super().__init__(**kwargs)`` in a base's ``__init__``), those of that one too: mako's
    ``NamespaceTag.__init__`` passes ``**kwargs`` through ``Tag.__init__`` to ``Node.__init__(self, source,
    lineno, pos, filename)``, and an empty mapping fails there on every input. ``above``: the names the
    calls that handed the mapping on gave by keyword (they reach the same mapping)."""
    args = callee.args
    given = above | {k.arg for k in call.keywords if k.arg}
    named = [*args.args[bound:]][len(call.args):] + list(args.kwonlyargs)
    optional = {a.arg for a in args.args[len(args.args) - len(args.defaults):]}
    optional |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    names = [a.arg for a in named if a.arg not in given]
    out = [n for n in names if n not in optional] + [n for n in names if n in optional]
    if args.kwarg is None or depth >= 2:
        return out
    functions = {s.name: s for s in placed.tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    owner = _owner(placed.tree, callee)
    for inner in (n for n in ast.walk(callee) if isinstance(n, ast.Call) and _packed(n) == args.kwarg.arg):
        found, skip = _callee(inner.func, functions, known, placed, owner)
        if found is not None and found is not callee:
            out += [k for k in _keywords(inner, found, skip, placed, known, depth + 1, frozenset(given))
                    if k not in out]
    return out


def _owner(tree: Any, func: Any) -> str | None:
    """The name of the class statement whose body defines ``func``, else None."""
    return next((c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and func in c.body), None)


def _callee(func: ast.expr, functions: dict[str, Any], known: dict[str, Any], placed: Any,
            owner: str | None = None) -> tuple[Any, int]:
    """The file's definition a call reaches and how many of its parameters the call does not pass
    (``self`` of a method); (None, 0) when the file does not show it. ``known``: what was looked up
    already (a class's chain of bases in the file by its name, ``"self."``: x's class's methods).
    ``owner``: the class whose method makes the call, when not x's (then only ``super()`` calls resolve)."""

    def chain(name: str) -> list[Any]:
        if name not in known:
            known[name] = file_classes(placed.tree, name)
        return known[name]

    found: Any = None
    if isinstance(func, ast.Name):
        if func.id in functions:
            return functions[func.id], 0
        found = _method(chain(func.id), "__init__") if func.id.lstrip("_")[:1].isupper() else None  # ``Item(p)``
    elif isinstance(func, ast.Attribute) and (placed.classes or owner):
        value = func.value
        if isinstance(value, ast.Name) and value.id == "self" and owner is None:  # ``self.parse(p)``
            if "self." not in known:
                known["self."] = _methods(placed)
            found = known["self."].get(func.attr)
        elif isinstance(value, ast.Call) and getattr(value.func, "id", "") == "super":
            # the nearest base of the calling method's class (x's) that has it
            found = _method(chain(owner or placed.classes[-1])[1:], func.attr)
    return (found, 1) if found is not None else (None, 0)


def _method(chain: list[Any], name: str) -> Any:
    """Method ``name`` of the first class of ``chain`` (a class and its bases) that defines it, else None."""
    for cls in chain:
        found = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
        if found is not None:
            return found
    return None


def constructor(placed: Any, into: hints.Hints | None = None) -> list[hints.Param] | None:
    """Parameters of the enclosing class's constructor, when the file context shows it: its
    ``__init__`` (self skipped), or its ``__new__`` (cls skipped; the texts and numbers its body compares join
    ``into``'s literals, after x's own), else annotated fields (dataclasses, NamedTuple, attrs). None otherwise."""
    name = placed.classes[-1]
    cls = last_class(placed.tree, name)
    if cls is None:
        return None
    made = {stmt.name: stmt for stmt in cls.body if isinstance(stmt, ast.FunctionDef)
            and stmt.name in ("__init__", "__new__")}
    # ``__new__(cls, pack_uri_str)`` of a ``str`` subclass: its parameters. (Not of other classes: ``Decimal(value)``
    # rarely gets a value its ``__new__`` takes, and a bare instance with the attributes x reads serves better.)
    base = _base_kind(placed.tree, name)
    fields = _tuple_fields(placed.tree, name)  # ``class Term(namedtuple("Term", "tag data args"))``: built from them
    for method in ("__init__", "__new__") if base is not None or fields else ("__init__",):
        if method in made:
            found = hints.analyse(made[method], skip_first=True)
            params = [p for p in found.params if p.kind == "positional"]
            if method == "__new__" and params and base is not None:
                params[0].types.insert(0, base)  # ``str.__new__(cls, pack_uri_str)``: a text first
            if method == "__new__" and into is not None:  # ``text[:1] == "/"``: the value it must hold
                into.strings += [t for t in found.strings if t not in into.strings][:max(0, 40 - len(into.strings))]
            return _fields_read(params, fields, into)
    if fields:
        return _fields_read([hints.Param(name=f, kind="positional") for f in fields], fields, into)
    fields = [stmt for stmt in cls.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)]
    if not fields:
        kind = _builtin_base(placed.tree, name)  # ``class FrozenDict(dict)``: built from a mapping
        return [hints.Param(name="items", kind="positional", types=[kind])] if kind else None
    out = []
    for stmt in fields:
        types, element = hints.annotation_types(stmt.annotation)
        has, value = hints._literal(stmt.value)
        out.append(hints.Param(name=stmt.target.id, kind="positional", types=types, element=element,
                               default=value, has_default=has and stmt.value is not None))
    return out


def _tuple_fields(tree: Any, name: str) -> list[str]:
    """The fields of the named tuple the class ``name`` (or a base of it in the file) derives from: a named tuple of
    the file (``_Term = namedtuple(...)``, ``class Term(_Term)``) or one made in the class statement; else []."""
    for cls in file_classes(tree, name):
        for base in cls.bases:
            found = globalrefs.tuple_fields(tree, base.id) if isinstance(base, ast.Name) else \
                globalrefs.namedtuple_fields(base)
            if found:
                return found
    return []


def _fields_read(params: list[hints.Param], fields: list[str], into: hints.Hints | None) -> list[hints.Param]:
    """A named tuple's ``self.tag`` is its field, set only by its constructor: what x does with ``self.tag``
    (``self.tag.name == '.bag.'``) describes the constructor's parameter of that name (the ``self`` attribute
    itself is the class's, so never an input: :func:`.batch.drop_class_attributes`)."""
    shown = {p.name: p for p in into.self_params} if into is not None and fields else {}
    for p in params:
        used = shown.get(p.name)
        if used is not None and p.name in fields:
            for field in ("types", "attrs", "called", "optional", "keys", "classes"):
                target = getattr(p, field)
                target += [v for v in getattr(used, field) if v not in target]
            for attr, child in used.children.items():
                p.children.setdefault(attr, child)
            p.item, p.result = p.item or used.item, p.result or used.result
    return params


#: Builtin bases whose constructor takes one value of a kind the search draws (``class FrozenDict(dict)``).
_BUILTIN_BASES = {"dict": "dict", "OrderedDict": "dict", "Counter": "dict", "UserDict": "dict", "list": "list",
                  "UserList": "list", "set": "set", "frozenset": "set", "tuple": "tuple", "str": "str",
                  "UserString": "str", "bytes": "bytes", "int": "int", "float": "float"}


def _builtin_base(tree: Any, name: str) -> str | None:
    """The kind of value a class of the file is built from when neither it nor its bases in the file
    define ``__init__`` or ``__new__`` and one of them derives from a builtin container or scalar
    (``class FrozenDict(dict)``: ``FrozenDict({'a': 1})``); else None."""
    chain = file_classes(tree, name)
    if any(isinstance(s, ast.FunctionDef) and s.name in ("__init__", "__new__") for c in chain for s in c.body):
        return None
    return _base_kind(tree, name)


def _base_kind(tree: Any, name: str) -> str | None:
    """The kind of :data:`_BUILTIN_BASES` the class ``name`` of the file (or a base of it in the file) derives from."""
    for cls in file_classes(tree, name):
        for base in cls.bases:
            found = _BUILTIN_BASES.get(base.id if isinstance(base, ast.Name) else getattr(base, "attr", ""))
            if found is not None:
                return found
    return None
