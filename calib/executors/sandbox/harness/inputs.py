"""Environment, stdin and file inputs x reads, from its source (runs inside the sandbox; stdlib only).

:func:`scan` reads x's body (and the module's functions x calls by name, two levels down) for:

- environment variables named by a literal (or a module constant): ``os.environ["X"]``,
  ``os.environ.get("X")``, ``os.getenv("X")``, ``"X" in os.environ``, ``os.environ.setdefault/pop("X")``;
- stdin: ``input()``, ``sys.stdin`` (``read``, ``readline``, ``readlines``, iteration), ``fileinput``;
- the command line: ``sys.argv`` (``getopt`` on it too), ``parse_args()``/``parse_known_args()`` with no
  arguments (or a parameter's, ``None`` by default), and the arguments the parser declares
  (``add_argument``: option strings, positional names, ``choices``, ``type``, flag actions; ``add_parser``);
- files opened by a literal name (``open("settings.json")``, ``Path("app.ini")``, ``config.read(...)``),
  folders listed by a literal name (``os.listdir``/``scandir``/``walk``, ``Path(...).iterdir()``/``glob``,
  ``glob.glob("data/*.csv")``) and how their contents are parsed: JSON (the keys x subscripts or gets
  on what it loaded, nested), INI (``configparser``: the sections and keys x reads), CSV (the columns it
  reads), ``key = value`` lines (``line.split("=", 1)`` over an opened file's lines: the keys x reads or
  tests with ``"quotes" in config``), else plain lines.

:func:`content` writes a small file of that shape (variant 0 the most plausible, then values flipped,
a key missing, empty); the search (:mod:`.synth`) varies them like arguments. Seeded, small, and
only ever written into the sandbox's private working directory.
"""

from __future__ import annotations

import ast
import json

from . import cmplog
from .trees import clone

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    import random
    from collections.abc import Callable
    from typing import Any

ENV_PREFIX = "env."  # search pseudo-parameters: an environment variable's value (None: unset)
FILE_PREFIX = "file:"  # a file's content (None: absent)
DIR_PREFIX = "dir:"  # a folder's files, name -> content (None: absent)
STDIN = "<stdin>"  # stdin's text
ARGV = "<argv>"  # the command line's arguments, sys.argv[1:]

_ENV_METHODS = frozenset({"get", "setdefault", "pop"})
_OPENERS = frozenset({"open", "Path", "PurePath", "exists", "isfile", "getsize", "read", "read_file", "load",
                      "loadtxt", "fromfile", "stat", "FileIO", "TextIOWrapper", "read_text", "read_bytes"})
_LISTERS = frozenset({"listdir", "scandir", "walk"})
_GLOBS = frozenset({"glob", "iglob", "rglob"})
_INI_GETTERS = frozenset({"get", "getint", "getfloat", "getboolean", "has_option"})
_BOOL_WORDS = ("debug", "enable", "enabled", "verbose", "active", "strict", "quiet", "force", "dry_run", "flag")
_INT_WORDS = ("port", "count", "size", "timeout", "retries", "limit", "max", "min", "level", "workers", "threads",
              "number", "age", "year", "id", "width", "height", "depth")
MAX_FILES, MAX_DIRS, MAX_KEYS = 3, 2, 12
_PARSE = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"})
_FLAGS = frozenset({"store_true", "store_false", "store_const", "append_const", "count", "help", "version"})


class Uses:
    """What x reads besides its arguments."""

    def __init__(self) -> None:
        self.env: list[str] = []
        self.stdin = False
        self.stdin_lines = 0  # input() calls: lines one run may ask for
        self.files: list[str] = []
        self.dirs: dict[str, str] = {}  # folder -> the suffix a glob asks for ('' any)
        self.formats: set[str] = set()  # json, ini, csv
        self.keys: list[tuple[str, ...]] = []  # key paths subscripted on non-parameters (JSON objects, CSV rows)
        self.ini: dict[str, list[str]] = {}  # section -> keys
        self.ini_reads: list[tuple[str, str]] = []  # (section, key) of two-argument getters
        self.separator = ""  # ``line.split("=", 1)`` of lines read from a file: ``key = value`` lines ("pairs")
        self.tested: list[str] = []  # keys x tests with ``"quotes" in config`` (a name, not a parameter)
        self.argv = False
        # the parser's arguments: (option strings or [name], kind: flag int float path str command, choices,
        # required); kept only where x reads the command line
        self.options: list[tuple[list[str], str, list[str], bool]] = []

    def __bool__(self) -> bool:
        return bool(self.env or self.stdin or self.files or self.dirs or self.argv)


def _text(node: ast.AST | None, consts: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _is_environ(node: ast.AST, params: Any = ()) -> bool:
    """``os.environ`` or ``environ`` (imported from os; not a parameter of that name, a WSGI environ)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ"
                                            and "environ" not in params)


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def looks_like_file(name: str) -> bool:
    """``settings.json``, ``conf/app.ini``: a relative name with a letter-led extension, no pattern."""
    stem, dot, ext = name.rpartition(".")
    return (bool(dot and stem and ext) and ext[:1].isalpha() and len(ext) <= 5 and len(name) < 80
            and not name.startswith(("/", "~")) and ".." not in name.split("/")
            and all(c.isalnum() or c in "-_./" for c in name))


def _folder(name: str) -> str | None:
    name = name.rstrip("/") or "."
    if name.startswith(("/", "~")) or ".." in name.split("/") or not all(c.isalnum() or c in "-_./" for c in name):
        return None
    return name


def _bodies(node: ast.AST, tree: ast.Module | None) -> list[ast.AST]:
    """x, then the module's functions it calls by name (two levels down, at most six)."""
    defs = {d.name: d for d in (tree.body if tree is not None else [])
            if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)}
    defs.pop(getattr(node, "name", ""), None)  # x itself (a recursive call is no helper)
    if any(isinstance(n, ast.Name) and n.id == cmplog.NAME for n in ast.walk(node)):
        node = cmplog.Plain().visit(clone(node))
    found, todo = [node], [node]
    for _ in range(2):
        nxt = []
        for body in todo:
            for call in ast.walk(body):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in defs:
                    d = defs.pop(call.func.id)
                    if len(found) < 7:
                        found.append(d)
                        nxt.append(d)
        todo = nxt
    return found


def _constants(tree: ast.Module | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for stmt in tree.body if tree is not None else []:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                out[stmt.targets[0].id] = stmt.value.value
    return out


def _input_names(tree: ast.Module | None) -> set[str]:
    """``input`` and the module's other names for it: ``raw_input = input`` (Python 2 compatibility, often in a
    ``try``), ``from six.moves import input as ask``."""
    names, body = {"input"}, list(tree.body if tree is not None else [])
    for stmt in body:
        if isinstance(stmt, ast.Try | ast.If):
            body += [*stmt.body, *stmt.orelse, *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == "input":
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.ImportFrom) and stmt.module in ("builtins", "six.moves", "future.builtins"):
            names.update(a.asname or a.name for a in stmt.names if a.name in ("input", "raw_input"))
    return names


def _key_path(node: ast.AST, consts: dict[str, str], params: set[str]) -> tuple[str, ...] | None:
    """``cfg["db"]["host"]`` / ``cfg.get("db", {}).get("host")`` on a local name -> ("db", "host")."""
    path: list[str] = []
    while True:
        if isinstance(node, ast.Subscript):
            key = _text(node.slice, consts)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            key = _text(node.args[0], consts)
            node = node.func.value
        else:
            break
        if key is None:
            return None
        path.insert(0, key)
    if not path or not isinstance(node, ast.Name) or node.id in params or _is_environ(node, params):
        return None
    return tuple(path)


def scan(node: ast.AST, tree: ast.Module | None, params: set[str]) -> Uses:
    """What x (and what it calls in its module) reads from the environment, stdin and the file system."""
    uses = Uses()
    consts = _constants(tree)
    paths: list[tuple[str, ...]] = []
    bodies = _bodies(node, tree)
    opened = {_callee(n) for body in bodies for n in ast.walk(body) if isinstance(n, ast.Call)}
    asks = _input_names(tree)
    for body in bodies:
        for n in ast.walk(body):
            if isinstance(n, ast.Subscript) and _is_environ(n.value, params):
                _add(uses.env, _text(n.slice, consts))
            elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.In | ast.NotIn) \
                    and _is_environ(n.comparators[0], params):
                _add(uses.env, _text(n.left, consts))
            elif isinstance(n, ast.Attribute) and n.attr == "stdin" and isinstance(n.value, ast.Name) \
                    and n.value.id == "sys":  # ``sys.stdin``, not ``self.stdin``
                uses.stdin = True
            elif isinstance(n, ast.Name) and n.id in ("stdin", "fileinput") and n.id not in params:
                uses.stdin = True
            elif isinstance(n, ast.Attribute) and n.attr == "argv" and isinstance(n.value, ast.Name) \
                    and n.value.id == "sys":
                uses.argv = True
            elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.In | ast.NotIn) \
                    and isinstance(n.comparators[0], ast.Name) and n.comparators[0].id not in params \
                    and (key := _text(n.left, consts)) is not None and key.isidentifier():
                _add(uses.tested, key)
            elif isinstance(n, ast.Call):
                _call(n, uses, consts, params, asks)
            if isinstance(n, ast.Subscript | ast.Call) and (path := _key_path(n, consts, params)) is not None:
                paths.append(path)
            if isinstance(n, ast.Name) and n.id in ("json", "configparser", "ConfigParser", "csv", "DictReader"):
                uses.formats.add({"json": "json", "csv": "csv", "DictReader": "csv"}.get(n.id, "ini"))
    if uses.separator and "open" in opened:  # ``key, value = line.split("=", 1)`` over an opened file's lines
        uses.formats.add("pairs")
    top = [s for s in tree.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)] \
        if tree is not None and uses.argv else []  # a parser built at the module's top level
    for n in (c for s in top for c in ast.walk(s) if isinstance(c, ast.Call) and _callee(c) == "add_argument"):
        _option(n, uses, consts)
    if not uses.argv:
        uses.options = []
    # in source order, without the prefixes of longer paths: {"db": {"host": ...}} rather than {"db": ...}
    unique = list(dict.fromkeys(paths))
    uses.keys = [p for p in unique if not any(len(q) > len(p) and q[:len(p)] == p for q in unique)][:MAX_KEYS]
    if "ini" in uses.formats:
        for section, *key in [*uses.ini_reads, *(p for p in paths if len(p) == 2)]:
            keys = uses.ini.setdefault(section, [])
            if key and key[0] not in keys and len(keys) < MAX_KEYS:
                keys.append(key[0])
    return uses


def env_pool(strings: list[str], ints: list[int], files: list[str]) -> list[Any]:
    """Values for an environment variable: unset first, then typed guesses and the mined literals."""
    mined = [s for s in strings if len(s) <= 80 and "\0" not in s][:12]
    return [None, *mined, "1", "0", "true", "false", "", *(str(i) for i in ints[:6]), "8080", "yes",
            *files[:1], "/work", "value"]


def stdin_pool(uses: Uses, strings: list[str], ints: list[int]) -> list[str]:
    """Texts for stdin: lines of numbers, of words, of the mined literals; as many lines as ``input()``
    calls where x makes several."""
    words = [s for s in strings if "\n" not in s and len(s) <= 40][:8]
    lines = [*(str(i) for i in ints[:8]), *words, "3", "42", "-1", "hello", "1 2 3", "a b c", "0"]
    width = max(1, min(uses.stdin_lines, 4))
    out = ["", "1 2 3\n4 5\n", "hello world\nsecond line\n"]
    out += ["".join(lines[(i + j) % len(lines)] + "\n" for j in range(width)) for i in range(len(lines))]
    return list(dict.fromkeys(out))


def stdin_fresh(rng: random.Random, uses: Uses, strings: list[str], ints: list[int]) -> str:
    words = [s for s in strings if "\n" not in s and len(s) <= 40][:12] + ["hello", "x", "1 2", ""]
    numbers = [str(i) for i in ints[:12]] + [str(rng.randint(-10, 300))]
    count = max(uses.stdin_lines, 1) + rng.choice((0, 0, 1, 2))
    return "".join(rng.choice(rng.choice((words, numbers))) + "\n" for _ in range(count))


def _call(n: ast.Call, uses: Uses, consts: dict[str, str], params: set[str], asks: set[str]) -> None:
    name = _callee(n)
    func = n.func
    first = _text(n.args[0], consts) if n.args else None
    if name in _ENV_METHODS and isinstance(func, ast.Attribute) and _is_environ(func.value, params):
        _add(uses.env, first)
    elif name == "getenv" and (isinstance(func, ast.Name) or isinstance(func.value, ast.Name)
                               and func.value.id == "os"):
        _add(uses.env, first)
    elif name in asks and isinstance(func, ast.Name) and name not in params:
        uses.stdin = True
        uses.stdin_lines += 1
    elif name in _INI_GETTERS and len(n.args) >= 2 and isinstance(func, ast.Attribute) \
            and not _is_environ(func.value):
        section, key = first, _text(n.args[1], consts)
        if section is not None and key is not None:  # kept when x uses configparser (``dict.get(k, d)`` too)
            uses.ini_reads.append((section, key))
    elif name in ("has_section", "add_section") and first is not None:
        uses.ini.setdefault(first, [])
    elif name in _PARSE and isinstance(func, ast.Attribute) and (not n.args or isinstance(n.args[0], ast.Name)
                                                                  and n.args[0].id in params
                                                                  or _is_none(n.args[0])):
        uses.argv = True
    elif name == "add_argument" and isinstance(func, ast.Attribute):
        _option(n, uses, consts)
    elif name in ("split", "partition") and first in ("=", ":") and isinstance(func, ast.Attribute):
        uses.separator = uses.separator or first
    elif name == "add_parser" and first is not None and len(uses.options) < 2 * MAX_KEYS:
        uses.options.append(([first], "command", [], False))
    if name in _OPENERS and first is not None and looks_like_file(first) and len(uses.files) < MAX_FILES:
        _add(uses.files, first)
    elif name in _LISTERS and isinstance(func, ast.Attribute) and len(uses.dirs) < MAX_DIRS:
        folder = _folder(first) if first is not None else "." if not n.args else None
        if folder is not None:
            uses.dirs.setdefault(folder, "")
    elif name in _GLOBS and first is not None and len(uses.dirs) < MAX_DIRS:
        owner = func.value if isinstance(func, ast.Attribute) else None
        base = _text(owner.args[0], consts) if isinstance(owner, ast.Call) and _callee(owner) == "Path" \
            and owner.args else None
        pattern = f"{base}/{first}" if base is not None else first
        folder, _, leaf = pattern.rpartition("/")
        folder = _folder(folder or ".")
        if folder is not None and "*" not in folder:
            uses.dirs.setdefault(folder, leaf.rpartition("*")[2] if "*" in leaf else "")
    elif name == "iterdir" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
            and _callee(func.value) == "Path" and func.value.args and len(uses.dirs) < MAX_DIRS:
        folder = _text(func.value.args[0], consts)
        if folder is not None and (folder := _folder(folder)) is not None:
            uses.dirs.setdefault(folder, "")


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _option(n: ast.Call, uses: Uses, consts: dict[str, str]) -> None:
    """One ``add_argument`` call: its option strings (or positional name), kind, choices, whether required."""
    names = [s for a in n.args if (s := _text(a, consts)) is not None and s]
    if not names or len(uses.options) >= 2 * MAX_KEYS:
        return
    kw = {k.arg: k.value for k in n.keywords if k.arg}
    action, typ, nargs = kw.get("action"), kw.get("type"), _text(kw.get("nargs"), consts)
    action = _text(action, consts) or (action.attr if isinstance(action, ast.Attribute) else "")
    typ = typ.id if isinstance(typ, ast.Name) else typ.attr if isinstance(typ, ast.Attribute) else ""
    box = kw.get("choices")
    choices = [str(e.value) for e in box.elts if isinstance(e, ast.Constant)] \
        if isinstance(box, ast.List | ast.Tuple | ast.Set) else []
    label = (names[-1] + (_text(kw.get("dest"), consts) or "") + (_text(kw.get("metavar"), consts) or "")).lower()
    kind = ("flag" if action in _FLAGS or action == "BooleanOptionalAction" else typ if typ in ("int", "float")
            else "path" if typ in ("FileType", "Path", "open") or "file" in label or "path" in label else "str")
    positional = not names[0].startswith("-")
    required = nargs not in ("?", "*", "...") if positional else isinstance(kw.get("required"), ast.Constant) \
        and kw["required"].value is True
    uses.options.append((names, kind, choices, required))


def _add(names: list[str], name: str | None) -> None:
    if name and name not in names and len(names) < 16:
        names.append(name)


# --- contents ---------------------------------------------------------------------------------------


def _value(key: str, variant: int, strings: list[str], ints: list[int], rng: random.Random | None) -> Any:
    """A plausible value for ``key``: flipped between variants, drawn from the mined literals past them."""
    lower = key.lower()
    if any(w == lower or lower.endswith("_" + w) or lower.startswith(w + "_") for w in _BOOL_WORDS):
        return (True, False)[variant % 2] if rng is None else rng.random() < 0.5
    if any(w == lower or lower.endswith("_" + w) or lower.startswith(w + "_") for w in _INT_WORDS):
        pool = [*ints[:6], 8080, 0, 3, 1]
        return pool[variant % len(pool)] if rng is None else rng.choice(pool + [rng.randint(-5, 9000)])
    pool = [*strings[:8], "example", "", "a,b"]
    return pool[variant % len(pool)] if rng is None else rng.choice(pool)


def content(name: str, uses: Uses, variant: int, strings: list[str], ints: list[int],
            rng: random.Random | None = None) -> str:
    """A small file for ``name`` in the shape x parses it: ``variant`` 0 the most plausible; 1 the values
    flipped; 2 the first key (or section) missing; 3 empty; past those (or with ``rng``) values drawn from
    the mined literals."""
    lower = name.lower()
    kind = ("json" if lower.endswith(".json") else "ini" if lower.endswith((".ini", ".cfg", ".conf", ".toml"))
            else "csv" if lower.endswith((".csv", ".tsv")) else "")
    if not kind and len(uses.formats) == 1:
        kind = next(iter(uses.formats))
    if variant == 3 and rng is None:
        return ""
    drop = variant == 2 and rng is None
    if kind == "json":
        obj: dict[str, Any] = {}
        paths = uses.keys[1:] if drop and len(uses.keys) > 1 else uses.keys  # the first key missing
        for path in paths:
            here = obj
            for part in path[:-1]:
                if not isinstance(here.get(part), dict):
                    here[part] = {}
                here = here[part]
            here[path[-1]] = _value(path[-1], variant, strings, ints, rng)
        if not uses.keys:
            obj = {"name": "example", "values": [1, 2, 3], "enabled": variant % 2 == 0}
        return json.dumps(obj, indent=1) + "\n"
    if kind == "ini":
        sections = uses.ini or {"section": ["key", "number"]}
        lines = []
        for s, (section, keys) in enumerate(sections.items()):
            if drop and s == 0 and len(sections) > 1:
                continue
            lines.append(f"[{section}]")
            for key in (keys[1:] if drop and len(sections) == 1 and len(keys) > 1 else keys):
                value = _value(key, variant, strings, ints, rng)
                lines.append(f"{key} = {str(value).lower() if isinstance(value, bool) else value}")
            lines.append("")
        return "\n".join(lines)
    if kind == "pairs":  # ``name = value`` lines: the keys x reads or tests for, in its order
        keys = list(dict.fromkeys([*(p[0] for p in uses.keys if len(p) == 1), *uses.tested]))[:MAX_KEYS]
        keys = (keys[1:] if drop and len(keys) > 1 else keys) or ["name", "value"]
        values = (_value(k, variant, strings, ints, rng) for k in keys)
        sep = " = " if uses.separator == "=" else ": "
        return "".join(f"{k}{sep}{str(v).lower() if isinstance(v, bool) else v}\n" for k, v in zip(keys, values))
    if kind == "csv":
        columns = [p[-1] for p in uses.keys if len(p) == 1][:6] or ["id", "name", "value"]
        rows = [",".join(columns)]
        for r in range(3 if not drop else 1):
            rows.append(",".join(str(_value(c, variant + r, strings, ints, rng)).replace(",", " ") for c in columns))
        return "\n".join(rows) + "\n"
    words = [s for s in strings[:6] if "\n" not in s] or ["first line", "second line"]
    if rng is not None:
        return "\n".join(rng.choice(words + ["", "42", "x = 1"]) for _ in range(rng.randint(1, 4))) + "\n"
    return ["first line\nsecond line\nthird line\n", "\n".join(words) + "\n", "only line\n"][variant % 3]


def folder(ext: str, variant: int, make: Callable[[str, int], str]) -> dict[str, str]:
    """The files of a listed folder: two, three or none (variants 0, 1, 2), named with the suffix a glob
    asks for (else ``.txt`` and ``.json``)."""
    suffixes = [ext or ".txt", ext or ".json", ext or ".txt"]
    count = (2, 3, 0)[variant % 3]
    names = [f"{stem}{suffix}" for stem, suffix in zip(("a", "b", "c"), suffixes)][:count]
    return {n: make(n, variant) for n in names}
