"""What the scaffold does when the file context fails for reasons outside x (runs inside the sandbox;
stdlib only). Helpers of :mod:`.scaffold` and :mod:`.runner`:

- **Optional imports.** ``try: import numpy`` / ``except ImportError: numpy = None`` is how a module
  says a dependency is optional. The sandbox has no third-party packages, so the handler would always
  run and x would only ever see ``numpy = None`` (textdistance's ``NeedlemanWunsch.__call__`` starts
  with ``if not numpy: raise ImportError``: every input invalid). When the handler only binds
  constants (or does nothing), the ``try`` body runs statement by statement instead, so a failing
  import binds stand-ins as it does at the top of the file; a handler that does work (``import json``
  after ``import ujson as json``, a fallback ``def``) keeps Python's behaviour. When x itself is
  defined in the ``else`` block of such a ``try`` (``try: import hypothesis`` / ``except ImportError:
  ...`` / ``else:`` the whole module, as hyperlink's ``hypothesis.py`` is), the body and then that
  ``else`` block run statement by statement, whatever the handler does: x and its neighbours exist.
- **Names a failing block would bind.** A module-level ``for`` / ``with`` / ``if`` / ``try`` that fails
  (``for name in os.listdir(DATA_DIR)``, ``with open(TABLE_PATH) as f: TABLE = json.load(f)``: a
  package data file that is not in the sandbox) binds the names it would have bound, and did not, to
  stand-ins, as a failing assignment does: x reading ``TABLE`` is then not a ``NameError``.
- **Test methods.** In a test (``test*`` methods of a class named ``*Test*`` or built on ``TestCase``,
  module-level ``test_*`` functions) the first failing assertion would end the run, and every line
  after it stays uncovered. Each ``assert`` statement, and each statement that calls
  ``self.assert*``/``self.fail*`` (``with self.assertRaises(E):`` included), is made to record its
  ``AssertionError`` in the output state's ``calls`` (``["failed", "AssertionError", message]``) and
  go on: the test's output is every check it made, in order, with the calls between them.
- **Methods read before they are defined.** ``__init__`` reading ``self._pass`` (a method that stands
  after it in the file, so outside its context) gets a stand-in there, as a call to such a method does. So does a
  method that a method of x's class calls (``self.parse_header()``, ``LocationParser._is_loclist(attr)``) when it
  stands after x in the file.
"""

from __future__ import annotations

import ast

from . import canon
from .names import caught as _names
from .standins import LOG, CalibStandIn

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: The module global through which a test method's assertions report their failures.
FAILED = "_calib_assertion_failed"
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def _constant_only(body: list[ast.stmt]) -> bool:
    """A handler that binds constants or does nothing (``x = None``, ``HAS_X = False``, ``pass``)."""
    for stmt in body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if value is None or not isinstance(value, ast.Constant):
            return False
    return True


def optional_import(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is ``try: import x ... except ImportError: x = None`` (see the module's doc)."""
    if not isinstance(stmt, ast.Try) or stmt.finalbody or stmt.orelse:
        return False
    if not any(isinstance(s, ast.Import | ast.ImportFrom) for s in stmt.body):
        return False
    if any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for s in stmt.body):
        return False  # a definition in the body (x itself, funcy's ``reductions``) stays Python's choice
    return any(h.type is not None and _names(h.type) & _IMPORT_ERRORS and _constant_only(h.body)
               for h in stmt.handlers)


def import_else(stmt: ast.stmt, node: ast.AST) -> bool:
    """Whether ``stmt`` is ``try: import x`` / ``except ImportError: ...`` / ``else: ...`` with ``node``
    (x's definition) in its ``else`` block."""
    if not isinstance(stmt, ast.Try) or not stmt.orelse or stmt.finalbody:
        return False
    if not any(isinstance(s, ast.Import | ast.ImportFrom) for s in stmt.body):
        return False
    if not any(h.type is not None and _names(h.type) & _IMPORT_ERRORS for h in stmt.handlers):
        return False
    return any(inner is node for block in stmt.orelse for inner in ast.walk(block))


def bound_names(stmt: ast.stmt) -> list[str]:
    """The global names a compound statement binds (targets, loop variables, ``as`` names, definitions
    and imports), not those of functions or classes defined in it."""
    out: list[str] = []
    todo: list[Any] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.append(node.id)
        elif isinstance(node, ast.alias):
            out.append((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if node is not stmt and not isinstance(node, ast.Lambda):
                out.append(node.name)
            continue
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.append(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return [n for i, n in enumerate(out) if n != "*" and n not in out[:i]]


# --- test methods -------------------------------------------------------------------------------------


def is_test(node: Any, classes: list[str], tree: ast.Module) -> bool:
    """A test: ``test*`` in a class named ``*Test*`` or built on ``...TestCase``, or a module-level ``test_*``."""
    if not node.name.startswith("test"):
        return False
    if not classes:
        return node.name.startswith("test_")
    if "test" in classes[-1].lower():
        return True
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name == classes[-1]:
            return any(name.endswith("TestCase") for base in cls.bases for name in _names(base))
    return False


def _checks(stmt: ast.stmt, me: str | None) -> bool:
    """An ``assert``, or a statement whose call is ``self.assert*(...)`` / ``self.fail*(...)`` (a
    ``with self.assertRaises(E):`` fails when its block leaves)."""
    if isinstance(stmt, ast.Assert):
        return True
    calls = [stmt.value] if isinstance(stmt, ast.Expr) else [i.context_expr for i in stmt.items] \
        if isinstance(stmt, ast.With) else []
    return me is not None and any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
        and c.func.value.id == me and c.func.attr.startswith(("assert", "fail")) for c in calls)


def soften_assertions(node: Any) -> None:
    """Rewrite ``node`` (a test) so that each check records its ``AssertionError`` and the test goes on."""
    me = node.args.args[0].arg if node.args.args else None

    def wrap(stmt: ast.stmt) -> ast.stmt:
        # the new nodes stand on the check's first line only: coverage maps each line to one statement
        at = {"lineno": stmt.lineno, "col_offset": stmt.col_offset, "end_lineno": stmt.lineno,
              "end_col_offset": stmt.col_offset}
        report = ast.Expr(ast.Call(ast.Name(FAILED, ast.Load(), **at), [ast.Name("_calib_e", ast.Load(), **at)], [],
                                   **at), **at)
        handler = ast.ExceptHandler(type=ast.Name("AssertionError", ast.Load(), **at), name="_calib_e", body=[report],
                                    **at)
        return ast.copy_location(ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[]), stmt)

    todo: list[Any] = [node]
    while todo:
        item = todo.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(item, field, None)
            if isinstance(block, list):
                todo.extend(s for s in block if isinstance(s, ast.stmt))  # a check's own block too
                block[:] = [wrap(s) if isinstance(s, ast.stmt) and _checks(s, me) else s for s in block]
        todo.extend(getattr(item, "handlers", []))
        todo.extend(getattr(item, "cases", []))


def assertion_failed(exc: BaseException) -> None:
    """What a softened check does with its failure: one entry in the call log."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a message that cannot be shown is still a failure
        message = "<unprintable>"
    LOG.record("failed", type(exc).__name__, canon.scrub(message))


# --- self attributes -----------------------------------------------------------------------------------


def guarded_reads(node: Any) -> frozenset[str]:
    """``self.attr`` x expects may be missing: read inside a ``try:`` whose handlers catch ``AttributeError``
    (``try: engine = self._engine except AttributeError: ...``), or asked for by ``hasattr(self, "attr")`` or
    ``getattr(self, "attr", default)`` (texttable's ``if hasattr(self, "_width"): return``). Such an attribute
    is not pre-filled with a stand-in (:func:`.calls.make_instance`), so that x meets it missing; an input's
    own ``self`` attributes still set it."""
    args = getattr(node, "args", None)
    me = args.args[0].arg if args is not None and args.args else None
    out: set[str] = set()
    for t in ast.walk(node) if me else ():
        if isinstance(t, ast.Try) and any("AttributeError" in _names(h.type) for h in t.handlers if h.type is not None):
            out.update(sub.attr for stmt in t.body for sub in ast.walk(stmt)
                       if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load)
                       and isinstance(sub.value, ast.Name) and sub.value.id == me)
        elif isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and not t.keywords \
                and (t.func.id == "hasattr" and len(t.args) == 2 or t.func.id == "getattr" and len(t.args) == 3) \
                and isinstance(t.args[0], ast.Name) and t.args[0].id == me \
                and isinstance(t.args[1], ast.Constant) and isinstance(t.args[1].value, str):
            out.add(t.args[1].value)
    return frozenset(out)


def missing_methods(node: Any, owner: type, method: Any) -> None:
    """On ``owner`` (x's class, x an initialiser): a stand-in method for each ``self.name(...)`` x calls
    and a stand-in for each ``self.name`` x only reads, when the class has no such attribute, x never
    sets it and does not expect it missing (:func:`guarded_reads`); a call is logged either way."""
    me = node.args.args[0].arg
    called: set[str] = set()
    read: set[str] = set()
    stored: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name) \
                and sub.func.value.id == me:
            called.add(sub.func.attr)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == me:
            (read if isinstance(sub.ctx, ast.Load) else stored).add(sub.attr)
    skip = stored | guarded_reads(node)
    for attr in sorted(called | read):
        if hasattr(owner, attr) or attr.startswith("__") and attr.endswith("__") or attr not in called and attr in skip:
            continue
        try:
            setattr(owner, attr, method("self." + attr) if attr in called else CalibStandIn("self." + attr))
        except Exception:  # noqa: BLE001 - a class that refuses new attributes keeps failing
            pass


def callees_missing(methods: list[Any], node: Any, cls_name: str) -> list[tuple[str, bool]]:
    """What the methods of x's class present in its context (``methods``), those x reaches, call on ``self`` or on
    the class by name (``LocationParser._attribute_is_loclistptr_class(attr)``) that is defined after x in the file,
    so outside the context: ``(name, on the class)`` pairs, for :func:`install_missing`. x's own calls on ``self``
    are left out (they are attributes of the input's ``self``), and so are the names x expects missing."""
    skip = guarded_reads(node)
    me = node.args.args[0].arg if node.args.args else None
    own = {sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
           and sub.value.id == me}
    present = {m.name: m for m in methods}
    found: dict[str, bool] = {}
    todo, reached = [node], {id(node)}
    while todo:  # x, then the methods it reaches through calls on ``self`` or on the class (not ``__del__``)
        method = todo.pop(0)
        first = method.args.args[0].arg if method.args.args and not _static(method) else None
        for sub in ast.walk(method):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                    and isinstance(sub.func.value, ast.Name) and sub.func.value.id in (first, cls_name):
                name = sub.func.attr
                if name in present:
                    if id(present[name]) not in reached:
                        reached.add(id(present[name]))
                        todo.append(present[name])
                    continue
                if name in skip or name.startswith("__") and name.endswith("__") or method is node and name in own:
                    continue
                found[name] = found.get(name, True) and (sub.func.value.id == cls_name or _static(method, "class"))
    return list(found.items())


def _static(method: Any, kinds: str = "static") -> bool:
    """Whether ``method`` is a ``@staticmethod`` (with ``kinds`` "class", also a ``@classmethod``)."""
    wanted = ("staticmethod", "classmethod") if kinds == "class" else ("staticmethod",)
    return any(getattr(d, "id", None) in wanted for d in method.decorator_list)


def install_missing(owner: type, missing: list[tuple[str, bool]], method: Any) -> None:
    """Stand-ins on ``owner`` for the ``missing`` names it lacks (:func:`callees_missing`): a method (``self.name()``),
    or for a name called on the class, a static method, so its arguments are logged as given (under the class's
    name: ``LocationParser._is_loclistptr``)."""
    for name, on_class in missing:
        if hasattr(owner, name):
            continue
        made = method(f"{owner.__name__ if on_class else 'self'}.{name}")
        try:
            setattr(owner, name, staticmethod(lambda *args, _m=made, **kwargs: _m(None, *args, **kwargs))
                    if on_class else made)
        except Exception:  # noqa: BLE001, S110 - a class that refuses new attributes keeps failing
            pass


# --- failures x handled and passed on -----------------------------------------------------------------


def handlers(node: Any) -> tuple[frozenset[int], frozenset[int]]:
    """(the lines of x's ``try`` bodies that have handlers, the first lines of the statements in those
    handlers): what :func:`passed_on` reads."""
    tried: set[int] = set()
    handling: set[int] = set()
    for t in ast.walk(node):
        if isinstance(t, ast.Try | ast.TryStar) and t.handlers:
            for stmt in t.body:
                tried.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            handling.update(sub.lineno for h in t.handlers for sub in ast.walk(h) if isinstance(sub, ast.stmt))
    return frozenset(tried), frozenset(handling)


def caught(node: Any) -> list[str]:
    """The names x's ``except`` clauses catch (``except ValidationError``, ``except (KeyError, errors.Bad)``: the
    last part of a dotted name)."""
    return sorted({name for h in ast.walk(node) if isinstance(h, ast.ExceptHandler) and h.type is not None
                   for name in _names(h.type)})


def passed_on(exc: BaseException, lines: set[int], found: tuple[frozenset[int], frozenset[int]],
              where: tuple[str, range, str]) -> bool:
    """Whether ``exc``, a dependency's failure the input state asked for (a stand-in in mode ``raise``),
    left x through one of x's own handlers (``except OSError: log(...); raise``): it came from a call in
    a ``try`` body of x and x then ran a statement of a handler of that ``try``. Passing a failure on is
    x's behaviour, as any exception x raises is; a failure that only went past x is not. (``where``: x's
    name, the lines it may start on and the scaffold's file name, which find x's frame.)"""
    tried, handling = found
    if not (lines & handling):
        return False
    tb = exc.__traceback__
    while tb is not None:  # x's frame shows once per raise: ``except E as error: raise error`` adds its line
        code = tb.tb_frame.f_code
        if (code.co_name, code.co_filename) == (where[0], where[2]) and code.co_firstlineno in where[1] \
                and tb.tb_lineno in tried:
            return True
        tb = tb.tb_next
    return False
