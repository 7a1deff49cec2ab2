"""What a function's source says about its inputs (runs inside the sandbox; stdlib only).

For every parameter: its annotation, default, name, and how the body uses it (``p.lower()`` → text,
``p.append`` → list, ``p["key"]`` → mapping with that key, ``p.attr`` → object with that attribute,
``p + 1``/``range(p)`` → number, ``p(...)`` → callable, ``isinstance(p, T)`` → T). Literals mined from
the body (comparison constants and their neighbours, dict keys, string constants, members of ``in``
collections) seed the value pools, which is how a search reaches the branches guarded by them.
"""

from __future__ import annotations

import ast

from .copies import copies
from .literals import literal as _literal  # noqa: F401 - read as hints._literal
from .literals import mine as _mine
from .literals import mine_module  # noqa: F401 - read as hints.mine_module
from .shapes import SHAPES, shaped  # noqa: F401 - x's parameters' names: part of what x says
from .typenames import TYPE_NAMES, annotation_types, class_names, tuple_rows
from .uses import add as _add
from .uses import add_all as _add_all
from .uses import attribute_use as _attribute_use
from .uses import call_use as _call_use
from .uses import called as _called
from .uses import compare_use as _compare_use
from .uses import type_of  # noqa: F401 - read as hints.type_of
from .uses import whole as _whole

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

class Param:
    """One parameter of the function and what is known about the values it takes.

    (A plain class, not a dataclass: importing ``dataclasses`` costs the harness milliseconds per batch.)
    """

    def __init__(self, name: str, kind: str, types: list[str] | None = None, element: list[str] | None = None,
                 default: Any = None, has_default: bool = False, depth: int = 0) -> None:
        self.name = name
        self.kind = kind  # positional | keyword | vararg | kwarg | attribute (of self)
        self.types: list[str] = types if types is not None else []  # int, float, str, bool, bytes, list, ...
        self.element: list[str] = element if element is not None else []  # element types of containers
        self.default = default
        self.has_default = has_default
        self.keys: list[Any] = []  # mapping keys the body reads
        self.attrs: list[str] = []  # attributes the body reads
        self.called: list[str] = []  # attributes the body calls (p.attr(...))
        self.classes: list[str] = []  # non-builtin classes named by annotations/isinstance
        self.bases: list[str] = []  # the file's classes it must be a subclass of (``issubclass(cls, Pack)``)
        self.optional: list[str] = []  # attributes the body asks about (``hasattr(p, "zone")``)
        self.children: dict[str, Param] = {}  # p.attr the body uses, described likewise
        self.result: Param | None = None  # what calling it returns, by the use of ``token = tokens.current()``
        self.item: Param | None = None  # what the body does with each item (``for t in terminals: t.name``)
        self.parts: list[Param] = []  # an item's positions, by what the body does with each (``for k, v in p``)
        self.annotated = False  # the parts are typed by the parameter's annotation (``List[Tuple[int, str]]``)
        self.equals: list[Any] = []  # containers it is compared with (``segments == ['']``): values it may hold
        self.seps: list[str] = []  # what the body splits it on (``params.split(";")``): texts holding them
        self.depth = depth

    def __repr__(self) -> str:
        return f"Param({self.name!r}, {self.kind!r}, types={self.types!r})"


class Hints:
    """What the body of x says about its parameters, and the literals mined from it."""

    def __init__(self, params: list[Param]) -> None:
        self.params = params
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.strings: list[str] = []  # the texts, most plausible first
        self.files: list[str] = []
        self.self_params: list[Param] = []  # self.attr the method reads, as parameters
        self.node: Any = None  # x's definition, and its module (mine_module): for inputs.scan
        self.tree: Any = None
        # module-level names whose first build bound a text, bytes, number or None: the comparison recorder notes
        # those values itself (:func:`.globalrefs.mine`; set by the runner after the build)
        self.plain_globals: frozenset[str] = frozenset()
        # the first build bound a stand-in at module level with no warning (``from . import seps``, served by the
        # stand-in package): the search varies the stand-in modes, as for a failed import (set by the runner)
        self.bound_standins = False


def analyse(node: ast.FunctionDef | ast.AsyncFunctionDef, *, skip_first: bool) -> Hints:
    """Parameters with their hints, and the literals mined from the body."""
    positional = [*(args := node.args).posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params: list[Param] = []
    for arg, default in zip(positional, defaults):
        params.append(_param(arg, "positional", default))
    if args.vararg:
        params.append(_param(args.vararg, "vararg", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(_param(arg, "keyword", default))
    if args.kwarg:
        params.append(_param(args.kwarg, "kwarg", None))
    self_name = positional[0].arg if skip_first and positional else None
    if skip_first and params and params[0].kind == "positional":
        params = params[1:]
    hints = Hints(params=params)
    hints.node = node
    describe(node, {p.name: p for p in params}, hints, self_name)
    return hints


def broad_after(node: Any) -> bool:
    """Whether one of x's ``try`` statements has a handler of every exception (``except Exception``, a bare
    ``except``) after another handler: what a withheld exception's handler before it catches, it never sees."""
    broad = ("Exception", "BaseException")
    return node is not None and any(
        isinstance(t, ast.Try) and any(h.type is None or isinstance(h.type, ast.Name) and h.type.id in broad
                                       for h in t.handlers[1:]) for t in ast.walk(node))


def _param(arg: ast.arg, kind: str, default: ast.expr | None) -> Param:
    types, element = annotation_types(arg.annotation)
    has, value = _literal(default)
    param = Param(name=arg.arg, kind=kind, types=types, element=element, default=value, has_default=has)
    if arg.annotation is not None:
        _add_all(param.classes, class_names(arg.annotation))
        rows = tuple_rows(arg.annotation) if "list" in types or "set" in types else None
        if rows:  # ``Iterable[Tuple[int, Optional[Loc]]]``: items that wide, each position typed by its annotation
            param.item = item = Param(name=arg.arg + "[]", kind="item", types=["tuple"], depth=1)
            item.parts = [Param(name=f"{item.name}[{i}]", kind="item", types=t, element=e, depth=1) for i, (t, e, _) in
                          enumerate(rows)]
            for part, (_, _, classes) in zip(item.parts, rows):
                _add_all(part.classes, classes)
            item.annotated, param.element[:] = True, [f"tuple{len(rows)}"]  # (rows of them: .pools.Pools._values)
    if has and value is not None and not types:
        param.types.append(type_of(value))
    return param


class _Subjects:
    """Maps expressions to the Param they describe: a parameter name, or ``self.attr`` for methods."""

    def __init__(self, params: dict[str, Param], hints: Hints, self_name: str | None) -> None:
        self.params = params
        self.hints = hints
        self.self_name = self_name
        self.aliases: dict[str, Param] = {}  # ``lastc = block.last_child``: lastc describes that attribute
        self.stored: dict[str, Param] = {}  # ``self.error = error``: the use of self.error describes error
        self.looped: dict[str, Any] = {}  # ``for k in ("x", "y")``: the literal values a loop name takes

    def __call__(self, node: ast.AST) -> Param | None:
        if isinstance(node, ast.Name):
            return self.params.get(node.id) or self.aliases.get(node.id)
        if (self.self_name and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == self.self_name):
            p = next((p for p in self.hints.self_params if p.name == node.attr), None)
            if p is None:
                p = Param(name=node.attr, kind="attribute")
                self.hints.self_params.append(p)
            return self.stored.get(node.attr, p)
        if isinstance(node, ast.Subscript) and type(_literal(node.slice)[1]) is int and (owner := self(
                node.value)) is not None and owner.depth < 2 and owner.kind != "item":  # ``tokens[3].split("=")``:
            owner.item = owner.item or Param(name=owner.name + "[]", kind="item", depth=owner.depth + 1)  # what the
            return owner.item  # body does with an item at a position describes the items (not an item's positions:
            # ``t[0]``, ``t[4]`` of ``for t in tokens`` are a record's fields, each of its own kind)
        if isinstance(node, ast.Attribute) and _plain_attribute(node.attr):
            owner = self(node.value)  # ``item.content``: what the body does with it describes that attribute
            if owner is not None and owner.depth < 2:
                child = owner.children.get(node.attr)
                if child is None:
                    child = owner.children[node.attr] = Param(name=node.attr, kind="attribute", depth=owner.depth + 1)
                return child
        return None


_OBJECT_ATTRS = frozenset(dir(object()))


def _enumerated(target: ast.AST, it: ast.AST) -> bool:
    """``for i, v in enumerate(p)``: v is an item of p."""
    return (isinstance(it, ast.Call) and getattr(it.func, "id", None) == "enumerate" and len(it.args) == 1
            and isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name))


def _plain_attribute(attr: str) -> bool:
    """An attribute an argument object can carry: not a dunder every object has (``__class__``), but
    ``module.__name__`` or ``func.__wrapped__`` are."""
    return not (attr.startswith("__") and attr.endswith("__")) or attr not in _OBJECT_ATTRS


def describe(func: ast.AST, params: dict[str, Param], hints: Hints, self_name: str | None) -> None:
    """Add to ``hints`` what the body of ``func`` says about ``params`` and about ``self_name``'s attributes."""
    subject = _Subjects(params, hints, self_name)
    body = func.body  # type: ignore[attr-defined]
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value", None), str):
        body = body[1:]  # the docstring: prose, not a value the code compares (it was every text pool's first)
    body_nodes = [n for stmt in body for n in ast.walk(stmt)]
    looped = {n.target.id: _literal(n.iter)[1] for n in body_nodes if isinstance(n, ast.For | ast.comprehension)
              and isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Tuple | ast.List)}
    subject.looped = looped
    if self_name:  # ``self.error = error`` (x keeps a parameter): what x does with self.error describes error
        subject.stored.update({t.attr: params[n.value.id] for n in body_nodes if isinstance(n, ast.Assign)
                               and isinstance(n.value, ast.Name) and n.value.id in params for t in n.targets
                               if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == self_name})
    copies(body_nodes, subject, params, self_name)  # (first: ``i = longtext.find(...)`` reads through one)
    for n in body_nodes:  # a local bound to an attribute of a parameter or of self, or to what calling one
        # returns (``token = tokens.current()``: the body's use of token describes the call's answers)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and n.targets[0].id not in params and n.targets[0].id != self_name:
            if isinstance(n.value, ast.Attribute) and (p := subject(n.value)) is not None:
                subject.aliases.setdefault(n.targets[0].id, p)
            elif isinstance(n.value, ast.Call) and (p := subject(n.value.func)) is not None:
                p.result = p.result or Param(name=p.name + "()", kind="result", depth=p.depth + 1)
                subject.aliases.setdefault(n.targets[0].id, p.result)
            elif isinstance(n.value, ast.Subscript) and not isinstance(n.value.slice, ast.Slice) \
                    and (p := subject(n.value.value)) is not None and p.depth < 2:  # ``tokens = info[month]``:
                p.item = p.item or Param(name=p.name + "[]", kind="item", depth=p.depth + 1)  # its use
                subject.aliases.setdefault(n.targets[0].id, p.item)  # describes the values (or items)
    items = {n.target.id: p for n in body_nodes if isinstance(n, ast.For | ast.comprehension)  # ``for v in p``
             and isinstance(n.target, ast.Name) and (p := subject(_whole(n.iter))) is not None}
    items.update({n.target.elts[1].id: p for n in body_nodes if isinstance(n, ast.For | ast.comprehension)
                  and _enumerated(n.target, n.iter) and (p := subject(_whole(n.iter.args[0]))) is not None})
    for name, p in items.items():  # ``for t in terminals[:n]: t.name``: the use of t describes p's items
        if name not in params and name != self_name:
            p.item = p.item or Param(name=p.name + "[]", kind="item", depth=p.depth + 1)
            subject.aliases.setdefault(name, p.item)
    for n in body_nodes:  # ``for k, v in self._body: k.key``: the use of k and v describes each position
        if isinstance(n, ast.For | ast.comprehension) and isinstance(n.target, ast.Tuple) and 1 < len(
                n.target.elts) <= 4 and all(isinstance(e, ast.Name) for e in n.target.elts) \
                and (p := subject(_whole(n.iter))) is not None:
            p.item = p.item or Param(name=p.name + "[]", kind="item", depth=p.depth + 1)
            p.item.parts = p.item.parts or [Param(name=f"{p.item.name}[{i}]", kind="item", depth=p.depth + 1)
                                            for i in range(len(n.target.elts))]
            for e, part in zip(n.target.elts, p.item.parts):
                if e.id not in params and e.id != self_name:
                    subject.aliases.setdefault(e.id, part)
    for loop in (n for n in body_nodes if isinstance(n, ast.For)):  # ``try: v in seen`` / ``except TypeError``
        if any(isinstance(h, ast.ExceptHandler) and "TypeError" in ast.dump(h.type or ast.Pass())
               for h in (x for b in loop.body for x in ast.walk(b))):
            for it in (loop.iter.body, loop.iter.orelse) if isinstance(loop.iter, ast.IfExp) else (loop.iter,):
                if (p := subject(it)) is not None:
                    _add(p.element, "unhashable")  # items that cannot be hashed (lists) reach the handler
    for node in body_nodes:
        if isinstance(node, ast.Attribute):
            subject(node)  # registers self.attr
            p = subject(node.value)
            if p is not None:
                _attribute_use(p, node.attr)
        elif isinstance(node, ast.Subscript) and (p := subject(node.value)) is not None:
            ok, key = _literal(node.slice)  # ``d["key"]``, or ``d[k] for k in ("host", "port")``
            keys = [key] if ok and isinstance(key, str) else [
                k for k in looped.get(getattr(node.slice, "id", None)) or [] if isinstance(k, str)]
            if keys:
                _add(p.types, "dict")
                _add_all(p.keys, keys)
            else:
                _add(p.types, "list")
                if isinstance(node.slice, ast.Slice):  # ``value[1:]``: text is sliced as often as lists
                    _add(p.types, "str")
        elif isinstance(node, ast.Call):
            _call_use(node, subject)
            if getattr(node.func, "id", "") == "isinstance" and len(node.args) == 2 \
                    and (p := items.get(getattr(node.args[0], "id", ""))) is not None:  # ``isinstance(v, Line)``
                spec = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                _add_all(p.element, [TYPE_NAMES.get(getattr(t, "id", ""), f"class:{getattr(t, 'id', '')}")
                                     for t in spec if isinstance(t, ast.Name)])
        elif isinstance(node, ast.Assign) and type(node.targets[0]) is ast.Tuple and (p := subject(node.value)):
            _add(p.types, "tuple")  # ``ltext, lnum = lpair``: as many items as the targets (pools.unpacked)
            _add(p.element, f"unpack{len(node.targets[0].elts)}")
        elif isinstance(node, ast.For | ast.comprehension) and (p := subject(node.iter)) is not None:
            _add(p.types, "list")
            if isinstance(node.target, ast.Tuple):
                _add(p.element, f"tuple{len(node.target.elts)}")
        elif isinstance(node, ast.BinOp):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if (p := subject(side)) is not None:
                    ok, value = _literal(other)
                    if side is node.left and isinstance(node.op, ast.Div) and ok and isinstance(value, str):
                        _add(p.types, "pathobj")  # ``folder / "README.md"``: a pathlib path
                    elif _called(other) == "timedelta":  # ``day + timedelta(days=1)``: a date (or a datetime)
                        _add(p.types, "date")
                    else:
                        _add(p.types, type_of(value) if ok else "int")
        elif isinstance(node, ast.Compare):
            _compare_use(node, subject, hints)
        elif isinstance(node, ast.Constant):
            _mine(node.value, hints)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                ok, value = _literal(key)
                if ok:
                    _mine(value, hints)
