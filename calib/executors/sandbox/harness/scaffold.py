"""Scaffolding from the file context: the module a function runs in (runs inside the sandbox; stdlib only).

The function x is placed back where it stood, after the code that preceded it in its file (its
context), and the resulting module is executed statement by statement so that one failing statement
does not take the rest down:

- an import that fails (module not installed, relative import of a withheld package) or that names a
  module in the always-mocked list (network clients, ``subprocess``) binds recording stand-ins;
- a failing assignment binds its targets to stand-ins; a failing ``def``/``class`` is retried without
  its decorators, and a class whose body fails is rebuilt from the body statements that succeed;
- every global name the module reads but never defines (and is not a builtin) is bound to a stand-in
  first, so a call to an unresolvable helper is logged instead of raising ``NameError``.

A candidate runs in the same module with its definition in x's place. ``trim_context`` drops leading
context lines that were cut mid-statement (contexts are cut at a line, not at a statement).
"""

from __future__ import annotations

import ast
import builtins
import textwrap
import types

from . import compat, fixups, mocks, standins, trees
from .names import PY3_EQUIVALENTS, raised_names, super_names, unresolved_names, walk  # noqa: F401 - walk: scaffold.walk
from .standins import FAKE_PACKAGE, CalibStandIn, is_standin, standin_for

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

FILENAME = "<calib:module>"
MODULE_PREFIX = "calib_scaffold"

#: Top-level modules always replaced by stand-ins: they reach networks, databases or other processes.
MOCKED_MODULES = frozenset({
    "requests", "httpx", "aiohttp", "urllib3", "boto3", "botocore", "smtplib", "ftplib", "paramiko",
    "psycopg2", "psycopg", "pymysql", "MySQLdb", "pymongo", "redis", "sqlalchemy", "subprocess",
    "socket", "http", "webbrowser", "telnetlib", "poplib", "imaplib", "grpc", "kafka", "pika",
    # graphical toolkits: no display in the sandbox, so they fail for the environment's reasons
    "tkinter", "turtle", "_tkinter", "wx", "PyQt5", "PyQt6", "PySide2", "PySide6", "gi", "pygame",
})


class ScaffoldError(Exception):
    """The function itself cannot be placed or defined (reported as the variant's outcome)."""


def indentation(function: str) -> str:
    """The leading whitespace of the function's first non-blank line."""
    for line in function.splitlines():
        if line.strip():
            return line[: len(line) - len(line.lstrip())]
    return ""


def reindent(function: str, indent: str) -> str:
    """The function re-indented so that its first line starts with ``indent``."""
    body = textwrap.dedent(function.expandtabs(8) if "\t" in indentation(function) else function)
    return textwrap.indent(body, indent, lambda line: True) if indent else body


def _parses(source: str) -> bool:
    try:
        return bool(ast.parse(source))
    except (SyntaxError, ValueError):
        return False


def trim_context(context: str, function: str) -> str:
    """The longest suffix of ``context`` (starting at a line) after which ``function`` parses.

    Returns ``""`` when even the function alone does not parse at its indentation (then it is run
    dedented, as a module-level function).
    """
    joined = joined_context(context)
    if _parses(joined + function):
        return joined
    return _parsing_suffix(joined, function)


def joined_context(context: str) -> str:
    """``context`` ending with a newline (as :func:`trim_context` returns it when the function parses after it)."""
    return context if not context or context.endswith("\n") else context + "\n"


def _parsing_suffix(joined: str, function: str) -> str:
    """:func:`trim_context` once the whole context is known not to parse before ``function``."""
    lines = joined.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if i and line[:1] not in ("", " ", "\t", "\n", "#", ")", "]", "}") and _parses("".join(lines[i:]) + function):
            return "".join(lines[i:])
    return ""


def reported_context(whole: str, chars: Any, function: str) -> str:
    """The suffix of ``whole`` x ran after, ``chars`` long as x's explore batch reported it (``context_chars``,
    job key ``trim``; host side); trimmed here when the report holds no length of it. A batch that lies about it
    changes only the context its candidates run in, as one that forges its own outputs changes what x is taken
    to do (docs/executors.md, *What a batch can forge*)."""
    if isinstance(chars, int) and not isinstance(chars, bool) and 0 <= chars <= len(whole):
        return whole[len(whole) - chars:] if chars else ""
    return trim_context(whole, function)


class Placed:
    """A function placed in its module: the parsed module, the definition node and where it sits."""

    def __init__(self, source: str, tree: ast.Module, node: ast.FunctionDef | ast.AsyncFunctionDef,
                 classes: list[str], first_line: int) -> None:
        self.source = source
        self.tree = tree
        self.node = node
        self.classes = classes  # enclosing class names, outermost first
        self.first_line = first_line  # first line of the function text in ``source``
        self.warnings: list[str] = []
        self.nested: Any = None  # x or its outermost class, when in a block of the module (:func:`place`)
        self.context_chars = 0  # how long the context before the function is (set by :func:`place`)
        self.flags = future_flags(tree)  # what each statement compiles with: the file's own ``__future__`` imports

    @property
    def qualname(self) -> str:
        return ".".join([*self.classes, self.node.name])

    @property
    def accessor(self) -> str | None:
        """``setter`` or ``deleter`` for ``@name.setter``/``@name.deleter`` (a method of the kind ``method``)."""
        return next((d.attr for d in self.node.decorator_list
                     if isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")), None)

    @property
    def kind(self) -> str:
        """``function``, ``method``, ``staticmethod``, ``classmethod`` or ``property``."""
        if not self.classes:
            return "function"
        for dec in self.node.decorator_list:
            name = dec.id if isinstance(dec, ast.Name) else dec.attr if isinstance(dec, ast.Attribute) else ""
            if name in ("staticmethod", "classmethod", "property"):
                return name
        # Python makes these class methods without a decorator (``__new__`` a static method that is
        # given the class: it is called the same way)
        if self.node.name in ("__new__", "__init_subclass__", "__class_getitem__"):
            return "classmethod"
        return "method"


def future_flags(tree: ast.Module) -> int:
    """The compiler flags of the module's leading ``from __future__ import ...`` statements (after its docstring),
    for each statement compiled apart with ``dont_inherit``: as Python compiles the whole file, and not with the
    harness's own ``annotations`` (in Python 3 only ``annotations`` changes what code does: string annotations)."""
    import __future__  # noqa: PLC0415 - loaded already: every harness module imports ``annotations`` from it

    flags = 0
    for index, stmt in enumerate(tree.body):
        if index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            continue
        if not isinstance(stmt, ast.ImportFrom) or stmt.module != "__future__" or stmt.level:
            break
        for alias in stmt.names:
            feature = getattr(__future__, alias.name, None)
            flags |= getattr(feature, "compiler_flag", 0)
    return flags


def compile_statement(stmt: ast.stmt, flags: int) -> Any:
    """One statement of x's module compiled alone, with the file's own ``__future__`` flags (:func:`future_flags`) and
    none of the harness's (``dont_inherit``): every statement of the module and the copies the harness pins of them."""
    return compile(ast.Module(body=[stmt], type_ignores=[]), FILENAME, "exec", flags, dont_inherit=True)


def place(context: str, function: str, *, trim: bool = False) -> Placed:
    """Put ``function`` after ``context`` and find its definition node. The context is already trimmed
    (:func:`trim_context`), or with ``trim`` it is trimmed here when the function does not parse after it
    (x's explore batch: the host then takes the same suffix for the candidates, docs/executors.md,
    "Scaffolding"); without, a function that does not parse after it runs without it."""
    tree = None
    if context:  # parsed once: the module's tree is the check that context and function fit together
        try:
            tree = ast.parse(context + function)
        except (SyntaxError, ValueError):
            context = _parsing_suffix(joined_context(context), function) if trim else ""
        if tree is None and context:
            try:
                tree = ast.parse(context + function)
            except (SyntaxError, ValueError):
                context = ""
    if not context:
        function = reindent(function, "")
    source = context + function
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) else ""
            raise ScaffoldError(f"the function does not parse: {getattr(exc, 'msg', exc)}{where}") from None
    first_line = context.count("\n") + 1
    found = _find(tree.body, first_line, [])
    if found is None:
        raise ScaffoldError("no function definition starts on the function's first line")
    node, classes, top = found
    placed = Placed(source=source, tree=tree, node=node, classes=classes, first_line=first_line)
    placed.context_chars = len(context)
    # in a block (``try: ... except ImportError: def x``) whose branch defining x the module may not take
    placed.nested = None if any(stmt is top for stmt in tree.body) else top
    return placed


def _find(body: list[ast.stmt], line: int, classes: list[str], top: Any = None) -> tuple[Any, list[str], Any] | None:
    """x's node, its classes and the outermost definition holding it (x or its outermost class)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and _start(stmt) == line:
            return stmt, classes, top or stmt
        inner: list[tuple[list[ast.stmt], list[str]]] = []
        if isinstance(stmt, ast.ClassDef):
            inner.append((stmt.body, [*classes, stmt.name]))
        elif isinstance(stmt, ast.If | ast.Try | ast.TryStar | ast.With):
            blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
            blocks += [h.body for h in getattr(stmt, "handlers", [])]
            inner += [(b, classes) for b in blocks]
        for block, cls in inner:
            hit = _find(block, line, cls, top or (stmt if isinstance(stmt, ast.ClassDef) else None))
            if hit is not None:
                return hit
    return None


def _start(stmt: Any) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])


def _defined_by(obj: Any, stmt: Any) -> bool:
    """Whether ``obj`` (a function, or a class by its methods) was made by the definition ``stmt``."""
    functions = vars(obj).values() if isinstance(obj, type) else [obj]
    return any(isinstance(f, types.FunctionType) and f.__code__.co_filename == FILENAME
               and _start(stmt) <= f.__code__.co_firstlineno <= (stmt.end_lineno or stmt.lineno) for f in functions)


# --- free names -------------------------------------------------------------------------------------


# --- executing the module ---------------------------------------------------------------------------


#: The placed function of the last :class:`Module` made (one per harness process): what
#: :func:`.calls.make_instance` reads to find the attributes the class's methods use.
LAST: list[Placed | None] = [None]


class Module:
    """A module built from placed source; :meth:`build` executes it into a fresh namespace."""

    def __init__(self, placed: Placed, *, module_name: str, bare: bool = False,
                 mocked: frozenset[str] = MOCKED_MODULES, fix_ups: bool = True) -> None:
        self.placed, self.fixups = placed, fix_ups  # off: optional imports and tests run as Python runs them
        self.module_name = module_name
        self.bare = bare
        self.mocked = mocked
        self.standin_names = set() if bare else unresolved_names(placed.tree)
        # one module per harness process: its own ``super().name`` uses, found when first needed
        standins.SUPER_SOURCE[:] = [None if bare else (lambda: super_names(placed.tree)), None]
        standins.RAISED.clear()
        standins.RAISED.update(() if bare else raised_names(placed.source))
        LAST[0] = placed
        self._compiled: dict[int, tuple[Any, int, int]] = {}  # by id: the code and the statement's lines
        # copies of statements retried another way, made once: a copy made per build could reuse the id
        # (the compiled code's key) of another build's freed copy, of another statement
        self._retried: dict[tuple[int, str], tuple[ast.stmt, Any]] = {}
        self._import_else = None if bare or not fix_ups else next(
            (s for s in placed.tree.body if fixups.import_else(s, placed.node)), None)
        self.warnings: list[str] = []
        self.extra_globals: dict[str, Any] = {}  # names the harness adds (the comparison recorder)
        self.rewrite: Any = None  # what a statement is compiled as (x with coverage probes: .probes)
        self._callees_missing: list[tuple[str, bool]] | None = None  # (.fixups.callees_missing), found once
        if self.fixups and fixups.is_test(placed.node, placed.classes, placed.tree):  # checks go on after a failure
            fixups.soften_assertions(placed.node)
            self.extra_globals[fixups.FAILED] = fixups.assertion_failed

    def recompile(self, changed: list[ast.AST] | None = None) -> None:
        """Forget compiled statements (after the tree was rewritten): those holding a node of ``changed``
        (by their lines), or all of them."""
        if changed is None:
            self._compiled = {}
            return
        spans = [(node.lineno, node.end_lineno or node.lineno) for node in changed]  # type: ignore[attr-defined]
        self._compiled = {key: held for key, held in self._compiled.items()
                          if not any(first <= held[2] and held[1] <= last for first, last in spans)}

    def _code(self, stmt: ast.stmt) -> Any:
        key = id(stmt)
        held = self._compiled.get(key)
        if held is None:
            node = stmt if self.rewrite is None else self.rewrite(stmt)
            held = self._compiled[key] = (compile_statement(node, self.placed.flags), stmt.lineno,
                                          stmt.end_lineno or stmt.lineno)
        return held[0]

    def _body(self) -> list[ast.stmt]:
        """The module's statements a build runs (in a bare build, x's own and those after it)."""
        body = self.placed.tree.body
        if self.bare:
            body = [s for s in body if s.lineno >= self.placed.first_line
                    or any(d.lineno >= self.placed.first_line for d in getattr(s, "decorator_list", []))]
        return body

    def precompile(self) -> None:
        """Compile the statements a build runs, running none of them: a process forked after this (x's replay,
        :mod:`.handover`) builds from the same code objects instead of compiling each statement again. A
        statement that does not compile is left to the build, which handles it as before."""
        for stmt in self._body():
            try:
                self._code(stmt)
            except Exception:  # noqa: BLE001, S112 - ``return`` outside a function: the build reports it
                continue

    def build(self) -> dict[str, Any]:
        """Execute the module into a new namespace; records why statements were replaced in ``warnings``."""
        package = self.module_name.rpartition(".")[0] if "." in self.module_name else FAKE_PACKAGE
        ns: dict[str, Any] = {"__name__": self.module_name, "__builtins__": builtins, "__file__": FILENAME,
                              "__package__": package}
        for name in self.standin_names:
            ns[name] = PY3_EQUIVALENTS[name] if name in PY3_EQUIVALENTS else standin_for(name)
        ns.update(self.extra_globals)
        self.warnings = []
        _forget_warnings()
        compat.forget()  # a fresh ``six`` per build, where one is made (.compat)
        for stmt in self._body():
            self._run(stmt, ns)
        nested = self.placed.nested  # in a branch not taken (or a block the bare build skipped): defined after it
        if nested is not None and not _defined_by(ns.get(nested.name), nested):
            for stmt in trees.imports_before(self.placed.tree, nested):  # the branch's imports it may use
                if any(name not in ns for name in fixups.bound_names(stmt)):  # (``_get_ident`` of Python 2's)
                    self._run(stmt, ns)
            self._run(nested, ns)
        if not self.bare:
            self._missing_methods(ns)
        return ns

    def _missing_methods(self, ns: dict[str, Any]) -> None:
        """An initialiser (``__init__``) that calls ``self.parse(...)`` or reads ``self._pass``, methods
        defined after it in the file (so not in its context), gets stand-ins for them
        (:func:`.fixups.missing_methods`). (Other methods get such attributes as stand-ins on the instance.)
        Any method x: what the class's methods in its context call that stands after x (:func:`.fixups.
        callees_missing`), found once per module."""
        placed = self.placed
        if not placed.classes or not placed.node.args.args:
            return
        owner = ns.get(placed.classes[0])
        for name in placed.classes[1:]:
            owner = getattr(owner, name, None)
        if not isinstance(owner, type):
            return
        if placed.node.name in ("__init__", "__post_init__"):
            fixups.missing_methods(placed.node, owner, _standin_method)
        if self._callees_missing is None:
            from .mutators import file_classes  # noqa: PLC0415

            methods = [m for cls in file_classes(placed.tree, placed.classes[-1]) for m in cls.body
                       if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m is not placed.node]
            self._callees_missing = fixups.callees_missing(methods, placed.node, placed.classes[-1])
        fixups.install_missing(owner, self._callees_missing, _standin_method)

    def _run(self, stmt: ast.stmt, ns: dict[str, Any]) -> None:
        if isinstance(stmt, ast.Import | ast.ImportFrom) and self._mocked(stmt):
            self._standins_for_import(stmt, ns, "mocked")
            return
        if not self.bare and self.fixups and fixups.optional_import(stmt):  # the body as top-level statements
            for inner in stmt.body:  # type: ignore[attr-defined]
                self._run(inner, ns)
            return
        if stmt is self._import_else:  # x in its ``else``: the body, then the ``else`` block, at the top level
            for inner in [*stmt.body, *stmt.orelse]:  # type: ignore[attr-defined]
                self._run(inner, ns)
            return
        try:
            exec(self._code(stmt), ns)  # noqa: S102 - the whole point: untrusted code, inside the sandbox
            if type(stmt) is ast.Try and not self.bare and self.fixups:
                self._unbound_imports(stmt, ns)
            if type(stmt) is ast.ClassDef and stmt.keywords and is_standin(ns.get(stmt.name)):
                # ``class A(metaclass=withheld.Meta)``: the stand-in metaclass made A a stand-in
                self.warnings.append(f"line {stmt.lineno}: class {stmt.name} built without its keywords "
                                     "(its metaclass is a stand-in)")
                exec(self._code(self._retry(stmt, "keywords")), ns)  # noqa: S102 - in the sandbox, as above
            return
        except BaseException as exc:  # noqa: BLE001
            if _fatal(exc):
                raise
            error = exc
        where = f"line {stmt.lineno}"
        if self.bare:
            self.warnings.append(f"{where}: {type(error).__name__}")
            return
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            self._standins_for_import(stmt, ns, type(error).__name__)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.decorator_list:
            bare_def = self._retry(stmt, "undecorated")
            self.warnings.append(f"{where}: decorators dropped ({type(error).__name__})")
            self._run(bare_def, ns)
        elif isinstance(stmt, ast.ClassDef):
            self._rebuild_class(stmt, ns, error)
        else:
            names = _targets(stmt) or fixups.bound_names(stmt)  # a block's names too (a data file it reads)
            for name in names:
                ns.setdefault(name, standin_for(name))
            bound = f" ({', '.join(names)} stand-ins)" if names else ""
            self.warnings.append(f"{where}: {type(error).__name__}{bound}")

    def _unbound_imports(self, stmt: ast.Try, ns: dict[str, Any]) -> None:
        """A ``try`` importing a dependency whose handler ran and did not bind what the import would have
        (``except ImportError: warnings.warn(...)``, ``except: pass``): x reading ``tablib`` would be a
        NameError. Those names are stand-ins, as a failed import at the top of the file gives; what the
        handler bound (``import json`` after ``import ujson as json``, ``HAS_YAML = False``) stays."""
        for imp in stmt.body:
            if not isinstance(imp, ast.Import | ast.ImportFrom):
                continue
            missing = [a for a in imp.names if a.name != "*" and (a.asname or a.name.split(".")[0]) not in ns]
            if missing:
                part = ast.copy_location(ast.Import(names=missing) if isinstance(imp, ast.Import) else
                                         ast.ImportFrom(module=imp.module, names=missing, level=imp.level), imp)
                self._standins_for_import(part, ns, "left unbound by the handler of the try at line "
                                                    f"{stmt.lineno}")

    def _mocked(self, stmt: ast.Import | ast.ImportFrom) -> bool:
        if isinstance(stmt, ast.ImportFrom):
            return bool(stmt.module) and stmt.level == 0 and stmt.module.split(".")[0] in self.mocked
        return any(alias.name.split(".")[0] in self.mocked for alias in stmt.names)

    def _standins_for_import(self, stmt: ast.Import | ast.ImportFrom, ns: dict[str, Any], why: str) -> None:
        if isinstance(stmt, ast.Import):  # a mocked module's pure names stay real (.mocks)
            for alias in stmt.names:
                bound = alias.asname or alias.name.split(".")[0]
                ns[bound] = mocks.partly_real(alias.name if alias.asname or bound == alias.name else "",
                                              alias.name if alias.asname else bound)
        else:
            module = "." * stmt.level + (stmt.module or "")
            for alias in stmt.names:
                if alias.name != "*":
                    ok, value = mocks.real(module, alias.name) if why == "mocked" else (False, None)
                    ns[alias.asname or alias.name] = value if ok else standin_for(f"{module}.{alias.name}".lstrip("."))
        self.warnings.append(f"line {stmt.lineno}: import stand-ins ({why})")

    def _retry(self, stmt: Any, how: str) -> Any:
        """``stmt`` without its decorators (``undecorated``) or, a class, without its keywords (``keywords``)
        or without bases and keywords."""
        kept = self._retried.get((id(stmt), how))
        # made again when the statement's body was replaced since (x's comparisons rewritten by the search)
        if kept is None or kept[0] is not stmt or kept[1].body is not stmt.body:
            copy = ast.copy_location(type(stmt)(**{f: getattr(stmt, f) for f in stmt._fields}), stmt)
            if how == "undecorated":
                copy.decorator_list = []
            elif how == "keywords":
                copy.keywords = []
            else:
                copy.bases, copy.keywords = [], []
            kept = self._retried[(id(stmt), how)] = (stmt, ast.fix_missing_locations(copy))
        return kept[1]

    def undecorated(self, ns: dict[str, Any]) -> Any:
        """x defined without its decorators in ``ns`` (not bound there): for a decorator that registers x and
        returns nothing (pint's ``@register_unit_format("H")``), whose name is then ``None``."""
        local: dict[str, Any] = {}
        exec(self._code(self._retry(self.placed.node, "undecorated")), ns, local)  # noqa: S102 - in the sandbox
        return local[self.placed.node.name]

    def _rebuild_class(self, stmt: ast.ClassDef, ns: dict[str, Any], error: BaseException) -> None:
        # first the whole class without its bases (a metaclass keyword is one): its private names are
        # mangled and ``super()`` finds its class, as in the file; a statement of its body that fails
        # then rebuilds it statement by statement, each that fails a stand-in. ``class Base(command.Command,
        # metaclass=abc.ABCMeta)`` with ``command`` withheld (the stand-in base's metaclass and ABCMeta conflict) is
        # first built with its bases and without its keywords: ``super().get_parser()`` reaches the withheld base
        if stmt.keywords and "metaclass conflict" in str(error):
            try:
                exec(self._code(self._retry(stmt, "keywords")), ns)  # noqa: S102 - in the sandbox, as above
                self.warnings.append(f"line {stmt.lineno}: class {stmt.name} built without its keywords (its "
                                     "metaclass conflicts with a withheld base's)")
                return
            except BaseException as exc:  # noqa: BLE001
                if _fatal(exc):
                    raise
        self.warnings.append(f"line {stmt.lineno}: class {stmt.name} rebuilt without bases ({type(error).__name__})")
        try:
            exec(self._code(self._retry(stmt, "plain")), ns)  # noqa: S102 - in the sandbox, as above
            return
        except BaseException as exc:  # noqa: BLE001
            if _fatal(exc):
                raise
        body_ns: dict[str, Any] = {"__module__": self.module_name, "__qualname__": stmt.name}
        for inner in stmt.body:
            try:
                exec(self._code(inner), ns, body_ns)  # noqa: S102
            except BaseException as exc:  # noqa: BLE001
                if _fatal(exc):
                    raise
                for name in _targets(inner):
                    body_ns.setdefault(name, CalibStandIn(f"{stmt.name}.{name}"))
        ns[stmt.name] = type(stmt.name, (object,), body_ns)


def _standin_method(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return CalibStandIn(name)(*args, **kwargs)

    return method


def _forget_warnings() -> None:
    """Which warnings were shown is state too: a warning is printed once per code location, so the second
    input that warns would print nothing (a replay in a fresh process would). Every build shows none."""
    import sys  # noqa: PLC0415

    warnings = sys.modules.get("warnings")
    if warnings is not None:
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()  # every ``__warningregistry__`` is cleared on its next use
        getattr(warnings, "onceregistry", {}).clear()


def _fatal(exc: BaseException) -> bool:
    """Exceptions that must stop the harness's work on this input (its own timer, exit requests)."""
    return not isinstance(exc, Exception) and not isinstance(exc, SystemExit | GeneratorExit)


def _targets(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, ast.AnnAssign | ast.AugAssign) else []
    return [node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)]
