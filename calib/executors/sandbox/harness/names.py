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


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BINDERS = (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)


_Scope = tuple[int, bool, set[str], set[str], set[str]]


def _scopes(tree: ast.AST) -> tuple[list[_Scope], set[str]]:
    """The module's scopes, the module's own first, and the names it probes for a ``NameError``: per scope its
    parent's index, whether it is a function's (class bodies are skipped by the scopes nested in them), the
    names it binds, those it reads and those it declares ``global``."""
    scopes: list[_Scope] = [(-1, False, set(), set(), set())]
    probed: set[str] = set()
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    fields = _CHILD_FIELDS
    node_type, list_type, name_type, load, cls = ast.AST, list, ast.Name, ast.Load, ast.ClassDef
    while stack:
        node, at = stack.pop()
        kind = type(node)
        if kind is name_type:
            scopes[at][3 if type(node.ctx) is load else 2].add(node.id)  # type: ignore[attr-defined]
            continue
        if kind in _FUNCTIONS or kind is cls:  # the name, decorators, defaults, annotations, bases: here
            outer = [*getattr(node, "decorator_list", ())]
            if kind is not ast.Lambda:
                scopes[at][2].add(node.name)  # type: ignore[attr-defined]
            if kind is cls:
                outer += [*node.bases, *node.keywords]  # type: ignore[attr-defined]
                params: set[str] = set()
            else:
                args = node.args  # type: ignore[attr-defined]
                every = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a]
                outer += [*args.defaults, *(d for d in args.kw_defaults if d is not None),
                          *(a.annotation for a in every if a.annotation is not None),
                          *([node.returns] if getattr(node, "returns", None) is not None else [])]
                params = {a.arg for a in every}
            stack.extend((n, at) for n in outer)
            scopes.append((at, kind is not cls, params, set(), set()))
            body = node.body if kind is not ast.Lambda else [node.body]  # type: ignore[attr-defined]
            stack.extend((n, len(scopes) - 1) for n in body)
            continue
        if kind in _COMPREHENSIONS:  # its first iterable is read where the comprehension is
            first = node.generators[0]  # type: ignore[attr-defined]
            stack.append((first.iter, at))
            scopes.append((at, True, set(), set(), set()))
            inner = len(scopes) - 1
            stack.extend((n, inner) for n in (first.target, *first.ifs, *node.generators[1:],  # type: ignore[attr-defined]
                                              *(getattr(node, f) for f in ("elt", "key", "value") if hasattr(node, f))))
            continue
        if kind is ast.Global or kind is ast.Nonlocal:  # ``nonlocal``: a function's around it, never a global
            scopes[at][4 if kind is ast.Global else 2].update(node.names)  # type: ignore[attr-defined]
            continue
        if kind is ast.alias:
            scopes[at][2].add((node.asname or node.name).split(".")[0])  # type: ignore[attr-defined]
            continue
        if kind in _BINDERS or kind is ast.MatchMapping:
            if bound := getattr(node, "name" if kind is not ast.MatchMapping else "rest"):
                scopes[at][2].add(bound)
        elif kind is ast.Try and any(h.type is not None and "NameError" in caught(h.type)
                                     for h in node.handlers):  # type: ignore[attr-defined]
            probed.update(n.id for s in node.body for n in ast.walk(s)  # type: ignore[attr-defined]
                          if isinstance(n, ast.Name))
        names = fields.get(kind)  # :func:`walk`'s loop, inlined in both: as a function of its own it made
        if names is None:         # walk 17 % slower and this walk 32 % (every batch runs both on its module)
            names = fields[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in names:
            child = getattr(node, name, None)
            if type(child) is list_type:
                stack.extend((c, at) for c in child if isinstance(c, node_type))
            elif isinstance(child, node_type):
                stack.append((child, at))
    return scopes, probed


def unresolved_names(tree: ast.AST) -> set[str]:
    """Names the module reads as globals (in its own statements, or in a function, class or comprehension
    that neither binds them nor sits in a function that does) that its own statements never bind, and that
    are not builtins.

    By scope, as Python resolves them: a helper defined later in the file than x (avro's ``incompatible``)
    is a stand-in even where a class has an attribute of that name (``SchemaCompatibilityType.incompatible =
    "incompatible"``) or a function a parameter; a name bound anywhere counted as bound before issue 24's
    twenty-ninth round, and x calling such a helper raised ``NameError``."""
    scopes, probed = _scopes(tree)
    read = set(scopes[0][3])
    for parent, _function, bound, loads, declared in scopes[1:]:
        for name in loads - (bound - declared):  # not its own: a function's around it, or a global
            up = -1 if name in declared else parent
            while up > 0 and not (scopes[up][1] and name in scopes[up][2] and name not in scopes[up][4]):
                up = scopes[up][0]
            if up <= 0:
                read.add(name)
    # dunder names (``__builtins__``, ``__doc__``, ``__spec__`` ...) are the interpreter's, never stand-ins;
    # nor is a name the module probes with ``try: xrange`` / ``except NameError:`` (``_IS_PY2 = False``): it
    # raises NameError there, as in Python 3 (a stand-in made boltons' funcutils take its Python 2 branches).
    # A global that only functions bind (``global _cur_menu`` / ``_cur_menu = menu``, set by the function that
    # starts the program) does not exist when x is called: a stand-in too, unless the module binds it itself
    return {name for name in read - scopes[0][2] - probed if not hasattr(builtins, name)
            and not (name.startswith("__") and name.endswith("__"))}


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
