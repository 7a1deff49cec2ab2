"""What the scaffold's module reads and binds: its nodes (:func:`walk`), the global names it reads but binds
nowhere (stand-ins, :func:`unresolved_names`) and the attributes it reaches through ``super()`` (inside the
sandbox, stdlib only; split from :mod:`.scaffold`)."""

from __future__ import annotations

import ast
import builtins
import re

#: Per node type, the fields that can hold nodes with names (not ``ctx``, operators or plain values).
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "arg", "name", "attr", "module", "level",
                          "kind", "is_async", "type_comment", "conversion", "lineno", "col_offset", "rest", "asname"})


def walk(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but the expression contexts and operators (what :func:`ast.walk` gives,
    without them, in another order; several times faster, and every batch walks its whole module)."""
    out: list[ast.AST] = []
    stack = [tree]
    fields = _CHILD_FIELDS
    node_type, list_type = ast.AST, list
    while stack:
        node = stack.pop()
        out.append(node)
        kind = type(node)
        names = fields.get(kind)
        if names is None:
            names = fields[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in names:
            child = getattr(node, name, None)
            if type(child) is list_type:
                stack.extend(c for c in child if isinstance(c, node_type))
            elif isinstance(child, node_type):
                stack.append(child)
    return out


def caught(expr: ast.AST) -> set[str]:
    """Class names an ``except`` clause catches (``ImportError``, ``(ImportError, OSError)``, ``x.Error``)."""
    return {n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(expr) if isinstance(n, ast.Name | ast.Attribute)}


#: What Python 3 code binds Python 2's builtins to (``xrange = range``, often later in the file than x, or in a
#: ``from .compat import *``): read in x's module and bound nowhere before x, they are these, not stand-ins.
PY3_EQUIVALENTS = {"xrange": range, "unicode": str, "basestring": str, "long": int, "unichr": chr}


#: What :func:`unresolved_names` does with a node, by its exact type (``ast.parse`` makes no subclasses).
_NAME, _DEF, _ARG, _ALIAS, _HANDLER, _MATCH, _REST, _DECLARED = range(8)
_KINDS: dict[type, int] = {ast.Name: _NAME, ast.FunctionDef: _DEF, ast.AsyncFunctionDef: _DEF, ast.ClassDef: _DEF,
                           ast.arg: _ARG, ast.alias: _ALIAS, ast.ExceptHandler: _HANDLER, ast.MatchAs: _MATCH,
                           ast.MatchStar: _MATCH, ast.MatchMapping: _REST, ast.Global: _DECLARED,
                           ast.Nonlocal: _DECLARED}


def unresolved_names(tree: ast.AST) -> set[str]:
    """Names the module reads but binds nowhere and that are not builtins."""
    loaded: set[str] = set()
    bound: set[str] = set()
    probed: set[str] = set()
    declared: set[str] = set()  # ``global name`` in a function
    kinds, load, try_type = _KINDS, ast.Load, ast.Try
    for node in walk(tree):
        kind = kinds.get(type(node))
        if kind is None:
            if type(node) is try_type and any(h.type is not None and "NameError" in caught(h.type)
                                              for h in node.handlers):  # type: ignore[attr-defined]
                probed.update(n.id for s in node.body for n in ast.walk(s)  # type: ignore[attr-defined]
                              if isinstance(n, ast.Name))
        elif kind == _NAME:
            (loaded if type(node.ctx) is load else bound).add(node.id)  # type: ignore[attr-defined]
        elif kind == _DEF or kind == _HANDLER or kind == _MATCH:
            if node.name:  # type: ignore[attr-defined]
                bound.add(node.name)  # type: ignore[attr-defined]
        elif kind == _ARG:
            bound.add(node.arg)  # type: ignore[attr-defined]
        elif kind == _ALIAS:
            bound.add((node.asname or node.name).split(".")[0])  # type: ignore[attr-defined]
        elif kind == _REST:
            if node.rest:  # type: ignore[attr-defined]
                bound.add(node.rest)  # type: ignore[attr-defined]
        else:
            bound.update(node.names)  # type: ignore[attr-defined]
            if type(node) is ast.Global:
                declared.update(node.names)  # type: ignore[attr-defined]
    # dunder names (``__builtins__``, ``__doc__``, ``__spec__`` ...) are the interpreter's, never stand-ins;
    # nor is a name the module probes with ``try: xrange`` / ``except NameError:`` (``_IS_PY2 = False``): it
    # raises NameError there, as in Python 3 (a stand-in made boltons' funcutils take its Python 2 branches)
    # A global that only functions bind (``global _cur_menu`` / ``_cur_menu = menu``, set by the function that
    # starts the program) does not exist when x is called: a stand-in too, unless the module binds it itself
    if declared:
        bound -= declared - module_bound(tree)
    return {name for name in loaded - bound - probed if not hasattr(builtins, name)
            and not (name.startswith("__") and name.endswith("__"))}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)


def module_bound(tree: ast.AST) -> set[str]:
    """Names the module's own statements bind (not the bodies of its functions and classes, which bind theirs,
    nor comprehensions): its assignments, imports, definitions, loop and ``with`` targets, handlers' names."""
    bound: set[str] = set()
    stack = list(getattr(tree, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return bound


def super_names(tree: ast.AST) -> set[str]:
    """Attributes the module reaches through ``super().name`` (``super().__init__``, ``super().feed``)."""
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"}


#: ``raise Name`` and ``except Name``/``except (A, B)``: two patterns that start with a literal, which the
#: regular expression engine searches for fast (one alternation tried at every position cost 0.4 ms a module)
_RAISE = re.compile(r"raise\s+(?:[\w.]+\.)?([A-Z]\w*)")
_EXCEPT = re.compile(r"except\s*\(?\s*((?:[\w.]+\s*,\s*)*[\w.]+)")


def raised_names(source: str) -> set[str]:
    """Capitalised names ``source`` raises (``raise NonExistentKey(key)``, ``raise errors.Invalid``) or catches
    (``except Invalid:``, ``except (KeyError, Invalid) as e:``), by their last part: exception classes."""
    found: set[str] = set()
    for pattern in (_RAISE, _EXCEPT):
        for match in pattern.finditer(source):
            start = match.start()
            if start and (source[start - 1].isalnum() or source[start - 1] in "_."):  # ``praise``, ``x.raise``
                continue
            for name in match.group(1).split(","):
                last = name.strip().rsplit(".", 1)[-1]
                if last[:1].isupper():
                    found.add(last)
    return found
