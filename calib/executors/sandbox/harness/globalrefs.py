"""Module-level objects x compares its inputs with, as input values (inside the sandbox; stdlib only).

``data is EOF`` (``EOF`` imported from a withheld module: a stand-in), ``default is _MISSING``
(``_MISSING = object()``), ``tokens.error is DocoptExit`` (a class of the file), ``self.subcon is
GreedyBytes``: no literal can write these objects, so no input reached the branch they guard. The
search now has them as values, ``Global('EOF')`` (:mod:`.values`), looked up in each run's build of the
module (:mod:`.placeholders`), so x and every candidate get their own build's object.

:func:`mine` finds, in x's body, each comparison (``is``, ``is not``, ``==``, ``!=``, and ``in`` a
tuple, list or set of names) of a module-level name (a class, an imported name, or a name bound to
something no literal writes) with what x takes as input: a parameter, an attribute of one, an item of
one, an attribute of ``self``, or what a call answers (``data = self.stream.char()``). :func:`extend`
puts the names into those pools: early in a parameter's or ``self`` attribute's pool, as the attribute
of every other object in the parameter's pool and of a copy of its first one, in a one-item tuple for
``*args``, and as the first answer of a quarter of the scripted stand-ins (:meth:`.pools.Pools._scripted`).
"""

from __future__ import annotations

import ast
import builtins

from .cmplog import NAME as RECORDER
from .hints import Hints
from .standins import COMPAT_TYPES
from .typenames import TYPE_NAMES
from .values import Arg, Global, Obj

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: At most this many names per place (a parameter, an attribute, the answers).
MAX_NAMES = 4

_OPS = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)
#: Values a module binds that inputs can already write (literals, containers, arithmetic, f-strings).
_WRITTEN = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.UnaryOp, ast.BinOp, ast.JoinedStr)


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, those inside its top-level ``if``/``try`` blocks included, in
    the order they run."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        out.append(stmt)
        if isinstance(stmt, ast.If | ast.Try):
            todo[:0] = [*stmt.body, *(s for h in getattr(stmt, "handlers", ()) for s in h.body), *stmt.orelse,
                        *getattr(stmt, "finalbody", ())]
    return out


def module_names(tree: ast.Module) -> set[str]:
    """Names the module binds at its top level (also inside ``if``/``try`` blocks there) to objects no
    literal can write: classes, names imported from modules, and assignments of anything but a literal."""
    out: set[str] = set()
    for stmt in _top_level(tree):
        if isinstance(stmt, ast.ClassDef):
            out.add(stmt.name)
        elif isinstance(stmt, ast.ImportFrom):
            out.update(a.asname or a.name for a in stmt.names if a.name != "*")
        elif isinstance(stmt, ast.Assign) and not isinstance(stmt.value, _WRITTEN):
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return out - set(dir(builtins))


def mine(node: Any, tree: ast.Module, params: list[str], self_name: str | None,
         plain: frozenset[str] = frozenset()) -> dict[tuple[str, ...], list[str]]:
    """Where each module-level name x compares with goes: ``("arg", p)``, ``("attr", p, a)``, ``("item", p)``,
    ``("self", a)`` or ``("answer",)``, to the names in the order x compares them. ``plain``: names bound to a
    text, bytes or number (``AF_INET``), which a recorded comparison notes as that value instead."""
    if node is None or tree is None:
        return {}
    body = [n for stmt in node.body for n in ast.walk(stmt)]
    local = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = module_names(tree) - local - set(params) - {self_name}
    if not names:
        return {}
    bound: dict[str, ast.expr] = {}  # ``data = self.stream.char()``: data stands for that
    for n in body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            bound.setdefault(n.targets[0].id, n.value)
    out: dict[tuple[str, ...], list[str]] = {}

    def where(expr: ast.expr, hops: int = 0) -> tuple[str, ...] | None:
        if isinstance(expr, ast.Name):
            if expr.id in params:
                return ("arg", expr.id)
            value = bound.get(expr.id)
            return where(value, hops + 1) if value is not None and hops < 2 else None
        if isinstance(expr, ast.Call):
            return ("answer",)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            if expr.value.id == self_name:
                return ("self", expr.attr)
            if expr.value.id in params:
                return ("attr", expr.value.id, expr.attr)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and expr.value.id in params:
            return ("item", expr.value.id)
        return None

    def add(place: tuple[str, ...] | None, name: str) -> None:
        found = out.setdefault(place, []) if place is not None else []
        if name not in found and len(found) < MAX_NAMES:
            found.append(name)

    for n in body:
        # ``a == b`` as the search runs it (:mod:`.cmplog`): the recorder notes a plain value (``af ==
        # AF_INET`` gives 2) but not an object (``self.os == OperatingSystem.LINUX``, ``target_rgb == sRGBColor``
        # with sRGBColor a stand-in), whose name is mined
        recorded = isinstance(n, ast.Call) and _recorded(n)
        if recorded:
            operands, ops = n.args[:2], [getattr(ast, n.args[2].value)()]
        elif isinstance(n, ast.Compare):
            operands, ops = [n.left, *n.comparators], n.ops
        else:
            continue
        for (a, b), op in zip(zip(operands, operands[1:]), ops):
            if isinstance(op, _OPS):
                for one, other in ((a, b), (b, a)):
                    if isinstance(one, ast.Name) and one.id in names and not (recorded and one.id in plain):
                        add(where(other), one.id)
                    elif isinstance(one, ast.Attribute) and isinstance(one.value, ast.Name) \
                            and one.value.id in names:  # ``self.os == OperatingSystem.LINUX``
                        add(where(other), f"{one.value.id}.{one.attr}")
            elif isinstance(op, ast.In | ast.NotIn) and isinstance(b, ast.Tuple | ast.List | ast.Set):
                for item in b.elts:
                    if isinstance(item, ast.Name) and item.id in names:
                        add(where(a), item.id)
    return out


def _recorded(call: ast.Call) -> bool:
    """``__calib_cmp__(a, b, "Eq")`` (or ``.inner``): a comparison the search's recorder makes."""
    func = call.func.value if isinstance(call.func, ast.Attribute) and call.func.attr == "inner" else call.func
    return (isinstance(func, ast.Name) and func.id == RECORDER and len(call.args) == 3
            and isinstance(call.args[2], ast.Constant) and call.args[2].value in ("Eq", "NotEq", "In", "NotIn", "Is",
                                                                                  "IsNot"))


def self_name(node: Any, params: list[str]) -> str | None:
    """The name of x's first parameter when the search left it out (``self``, ``cls``)."""
    args = getattr(node, "args", None)
    positional = [*args.posonlyargs, *args.args] if args is not None else []
    return positional[0].arg if positional and positional[0].arg not in params else None


def identities(node: Any, params: list[str], self_name: str | None) -> dict[str, list[Any]]:
    """What x compares its parameters with among ``self``'s attributes, as values of those attributes: ``node is
    self.head_node`` (also ``is not``, ``==``, ``!=``) gives ``head_node`` the value ``Arg('node')``, the very
    object x gets as ``node``; ``node in self.children`` gives ``children`` the list ``[Arg('node')]``."""
    if node is None or self_name is None:
        return {}
    out: dict[str, list[Any]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _recorded(n) and n.args[2].value in ("Is", "IsNot"):
            # ``node is self.head_node`` as the search runs it (not ``==`` or ``in``, which the search has always
            # run rewritten: read here, ``filename in self.changemap`` cost macholib's ``locate`` its verdict)
            left, op, right = n.args[0], getattr(ast, n.args[2].value)(), n.args[1]
        elif isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, op, right = n.left, n.ops[0], n.comparators[0]
        else:
            continue
        for param, other, reverse in ((left, right, False), (right, left, True)):
            if not (isinstance(param, ast.Name) and param.id in params and isinstance(other, ast.Attribute)
                    and isinstance(other.value, ast.Name) and other.value.id == self_name):
                continue
            if isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq):
                value: Any = Arg(param.id)
            elif isinstance(op, ast.In | ast.NotIn) and not reverse:
                value = [Arg(param.id)]
            else:
                continue
            held = out.setdefault(other.attr, [])
            if value not in held:
                held.append(value)
    return out


def extend(by_param: dict[str, list[Any]], refs: dict[tuple[str, ...], list[str]], kinds: dict[str, str],
           self_prefix: str) -> None:
    """Put each mined name into the pool of the place it was compared at (``kinds``: each parameter's
    kind, :class:`.hints.Param`; the answers are not here: :meth:`.pools.Pools._scripted` draws them)."""
    for place, names in refs.items():
        values = [Global(n) for n in names]
        kind, rest = place[0], place[1:]
        if not rest:  # the answers
            continue
        packed = kinds.get(rest[0]) == "vararg"  # ``*args``: its pool holds tuples of arguments
        if kind in ("arg", "attr") and packed or kind != "self" and kinds.get(rest[0]) == "kwarg":
            continue
        if kind == "arg" and (pool := by_param.get(rest[0])) is not None:
            pool[1:1] = values
        elif kind == "self" and (pool := by_param.get(self_prefix + rest[0])) is not None:
            pool[2:2] = values  # after the constructed instance's own value and the first drawn one
        elif kind == "attr" and (pool := by_param.get(rest[0])) is not None:
            # every other object of the pool has the attribute set to a name (its other attributes are
            # drawn, and an input varies a parameter as a whole), and a copy of the first has each
            objs = [i for i, v in enumerate(pool) if isinstance(v, Obj)]
            for k, i in enumerate(objs[1::2]):
                pool[i] = Obj(**{**vars(pool[i]), rest[1]: values[k % len(values)]})
            base = vars(pool[objs[0]]) if objs else {}
            at = objs[0] + 1 if objs else 1
            pool[at:at] = [Obj(**{**base, rest[1]: v}) for v in values]
        elif kind == "item" and (pool := by_param.get(rest[0])) is not None:
            pool[1:1] = [(v,) for v in values] if packed else [[v] for v in values]


def answers(refs: dict[tuple[str, ...], list[str]]) -> list[Global]:
    """The names what x's calls answer is compared with (``data = self.stream.char(); data is EOF``)."""
    return [Global(n) for n in refs.get(("answer",), [])]


#: Compatibility names for builtin types (``from six import string_types``), as hints only.


def type_aliases(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names of builtin types: ``bytes_type = bytes``, ``string_types = (str, bytes)`` (also
    inside ``if``/``try`` blocks there), and the compatibility names (:data:`.standins.COMPAT_TYPES`) imported."""
    out: dict[str, list[str]] = {}
    for stmt in _top_level(tree):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            items = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            kinds = [TYPE_NAMES[i.id] for i in items if isinstance(i, ast.Name) and i.id in TYPE_NAMES]
            if kinds and len(kinds) == len(items):
                out.setdefault(stmt.targets[0].id, kinds)
        elif isinstance(stmt, ast.ImportFrom):
            out.update({a.asname or a.name: COMPAT_TYPES[a.name] for a in stmt.names if a.name in COMPAT_TYPES})
    return out


def _called(call: ast.Call) -> str:
    """What ``call`` calls by name: ``isinstance``, or ``isa`` for the search's rewrite of it
    (``__calib_cmp__.isa(obj, bytes)``, :mod:`.cmplog`: the pools are made after x was rewritten); else ''."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == RECORDER:
        return func.attr
    return ""


def alias_hints(info: Hints, tree: ast.Module | None, self_name: str | None) -> None:
    """``isinstance(obj, bytes_type)`` with ``bytes_type = bytes``: ``obj`` (a parameter or ``self.attr``)
    takes bytes, as ``isinstance(obj, bytes)`` says (:func:`.hints.describe` reads builtin names only)."""
    if tree is None or info.node is None:
        return
    aliases = type_aliases(tree)
    if not aliases:
        return
    params = {p.name: p for p in info.params}
    attrs = {p.name: p for p in info.self_params}
    for n in ast.walk(info.node):
        if not (isinstance(n, ast.Call) and _called(n) in ("isinstance", "isa") and len(n.args) == 2):
            continue
        subject, spec = n.args
        if isinstance(subject, ast.Name):
            p = params.get(subject.id)
        elif isinstance(subject, ast.Attribute) and isinstance(subject.value, ast.Name) \
                and subject.value.id == self_name:
            p = attrs.get(subject.attr)
        else:
            p = None
        names = spec.elts if isinstance(spec, ast.Tuple) else [spec]
        for kind in (k for name in names if isinstance(name, ast.Name) for k in aliases.get(name.id, ())):
            if p is not None and kind not in p.types:
                p.types.append(kind)


#: Builtin classes a parameter used as a class takes first (:func:`class_hints`), looked up as builtins.
BUILTIN_CLASSES = ("int", "str", "float", "list", "dict", "tuple", "bool")


def class_hints(info: Hints) -> None:
    """A parameter used as a class (the second argument of ``isinstance``, either of ``issubclass``,
    ``inspect.isclass(p)``) takes classes: builtin ones (:data:`BUILTIN_CLASSES`) and those of the file
    its other uses name, as ``Global(...)`` values (``_compile_scalar(schema)``: ``if inspect.isclass(schema)``)."""
    if info.node is None:
        return
    params = {p.name: p for p in info.params}
    for n in ast.walk(info.node):
        if not isinstance(n, ast.Call):
            continue
        name = "isinstance" if _called(n) == "isa" else n.func.id if isinstance(n.func, ast.Name) else getattr(
            n.func, "attr", "")
        used = {"isinstance": n.args[1:2], "issubclass": n.args[:2], "isclass": n.args[:1]}.get(name, [])
        for arg in used:
            p = params.get(arg.id) if isinstance(arg, ast.Name) else None
            if p is not None and "class" not in p.types:
                p.types.append("class")


def subclasses(tree: ast.Module | None, bases: list[str]) -> list[str]:
    """The file's top-level classes that name one of ``bases`` as a base (``class Ru(TranslitLanguagePack)``)."""
    return [stmt.name for stmt in _top_level(tree) if isinstance(stmt, ast.ClassDef) and any(
        isinstance(b, ast.Name) and b.id in bases for b in stmt.bases)] if tree is not None else []


def tuple_width(tree: ast.Module | None, name: str) -> int:
    """How many fields the file's named tuple ``name`` has (``DateTuple = namedtuple("Date", ["YYYY", "MM",
    ...])``, also ``collections.namedtuple`` with a text of names); 0 when ``name`` is no such tuple."""
    return len(tuple_fields(tree, name))


def tuple_fields(tree: ast.Module | None, name: str) -> list[str]:
    """The field names of the file's named tuple ``name`` (:func:`tuple_width`); [] when ``name`` is no such tuple."""
    for stmt in _top_level(tree) if tree is not None else ():
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == name and isinstance(stmt.value, ast.Call) and len(stmt.value.args) >= 2:
            return namedtuple_fields(stmt.value)
    return []


def namedtuple_fields(call: ast.AST) -> list[str]:
    """The field names a ``namedtuple("Term", "tag data args")`` call gives (a list or tuple of texts too), else []."""
    if not isinstance(call, ast.Call) or len(call.args) < 2:
        return []
    func = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    fields = call.args[1]
    if func != "namedtuple":
        return []
    if isinstance(fields, ast.List | ast.Tuple):
        return [e.value for e in fields.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(fields, ast.Constant) and isinstance(fields.value, str):
        return fields.value.replace(",", " ").split()
    return []
