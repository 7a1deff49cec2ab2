"""Strings for the regular expressions x uses (runs inside the sandbox; stdlib only).

A branch behind ``PATTERN.match(text)`` is taken only by a text the pattern matches, which random
strings almost never are. :func:`generate` walks the pattern as Python's own parser reads it
(``re._parser``, ``sre_parse`` before 3.11) and writes strings it matches: a choice per alternation,
a few repetitions of each repeat (bounded), every group filled in one of them (named groups too), a
back-reference repeating what its group took; :func:`near_misses` changes such a string a little
(one character of another class, one less, one more). Strings are checked against the compiled
pattern itself (a pattern that could backtrack catastrophically only on strings of up to 10
characters); a pattern it cannot read gives nothing, never an exception, and the work per pattern is
bounded by steps and length, not the clock (the harness freezes it).

Two sources: the patterns x's source names (:func:`samples`, for :func:`.hints.mine_module`), and a
failed ``pattern.match(s)`` on part of an input, recorded by :mod:`.cmplog` (:func:`rewrite`, for
:func:`.synth.replacements`). Also here: texts rewritten to pass a check on their length, characters
or number of parts (:func:`resize`, :func:`recast`, :func:`parts`), and non-ASCII samples.
"""

from __future__ import annotations

import ast
import random
import re

try:
    from re import _constants as _c
    from re import _parser as _sre
except ImportError:  # Python < 3.11
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _sre  # type: ignore[no-redef]

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MAX_PATTERN = 2000  # longer patterns are not read
MAX_LENGTH = 120  # longest string written
MAX_STEPS = 3000  # pattern nodes visited per string
EXTRA = 3  # at most this many repetitions beyond a repeat's minimum
_MAXREPEAT = _c.MAXREPEAT
#: characters per category (``\d``, ``\w``, ``\s`` and their complements), ASCII first
_CATEGORY = {
    "CATEGORY_DIGIT": "0123456789", "CATEGORY_NOT_DIGIT": "aZ_-x", "CATEGORY_SPACE": " \t",
    "CATEGORY_NOT_SPACE": "aZ0_x-", "CATEGORY_WORD": "abcxyzABXZ0129_", "CATEGORY_NOT_WORD": " -.,:",
    "CATEGORY_LINEBREAK": "\n", "CATEGORY_NOT_LINEBREAK": "ab1 ",
}
_ANY = "aZ0 _-.x9:/"  # candidates for ``.`` and negated sets
_NEGATED = _ANY + "AbQ5,;!#@+=*()[]{}<>\"'&%$~é\t"
_FUNCS = {"match": 2, "search": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "sub": 4, "subn": 4, "split": 3,
          "compile": 1}  # re.<name>(pattern, ...): where its flags go
#: strings for code that handles encodings or code points (``line.encode("ascii")``, ``ord(char)``)
UNICODE = ["café", "naïve — résumé ✓", "日本語テキスト", "\U0001f600 ok"]


class _GiveUp(Exception):
    pass


def _in_category(ch: str, name: str) -> bool:
    base = name.replace("_NOT_", "_")
    hit = (ch.isdigit() if base == "CATEGORY_DIGIT" else ch.isspace() if base == "CATEGORY_SPACE"
           else ch.isalnum() or ch == "_" if base == "CATEGORY_WORD" else ch == "\n")
    return hit != ("_NOT_" in name)


def _in_set(ch: str, items: Any) -> bool:
    for op, av in items:
        name = str(op)
        if (name == "LITERAL" and ord(ch) == av or name == "RANGE" and av[0] <= ord(ch) <= av[1]
                or name == "CATEGORY" and _in_category(ch, str(av))):
            return True
    return False


class _Writer:
    """One string the parsed pattern matches; ``mode`` says how repeats are drawn."""

    def __init__(self, rng: random.Random, mode: str, flags: int) -> None:
        self.rng, self.mode, self.steps = rng, mode, 0
        self.groups: dict[int, str] = {}
        self.dotall = bool(flags & re.DOTALL)

    def seq(self, items: Any) -> str:
        return "".join(self.one(op, av) for op, av in items)

    def one(self, op: Any, av: Any) -> str:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _GiveUp
        name, rng = str(op), self.rng
        if name == "LITERAL":
            return chr(av)
        if name == "NOT_LITERAL":
            return rng.choice([c for c in _ANY if ord(c) != av])
        if name == "ANY":
            return rng.choice(_ANY if not self.dotall else _ANY + "\n")
        if name == "IN":
            return self.charset(av)
        if name == "CATEGORY":
            return rng.choice(_CATEGORY.get(str(av), "a"))
        if name == "BRANCH":
            return self.seq(rng.choice(av[1]))
        if name == "SUBPATTERN":
            text = self.seq(av[-1])
            if av[0] is not None:
                self.groups[av[0]] = text
            return text
        if name == "ATOMIC_GROUP":
            return self.seq(av)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, item = av
            if low > MAX_LENGTH:
                raise _GiveUp
            top = min(high, low + EXTRA) if high != _MAXREPEAT else low + EXTRA
            count = (low if self.mode == "least" else max(low, min(1, top)) if self.mode == "full"
                     else rng.randint(low, top))
            out = "".join(self.seq(item) for _ in range(count))
            if len(out) > MAX_LENGTH:
                raise _GiveUp
            return out
        if name == "GROUPREF":
            return self.groups.get(av, "")
        if name == "GROUPREF_EXISTS":
            group, yes, no = av
            return self.seq(yes if group in self.groups else no or [])
        if name in ("AT", "ASSERT", "ASSERT_NOT"):  # anchors and lookarounds: the check below sorts them out
            return ""
        raise _GiveUp  # an opcode this writer does not know

    def charset(self, items: Any) -> str:
        rng = self.rng
        if items and str(items[0][0]) == "NEGATE":
            left = [c for c in _NEGATED if not _in_set(c, items[1:])]
            if not left:
                raise _GiveUp
            return rng.choice(left)
        op, av = rng.choice(items)
        name = str(op)
        if name == "LITERAL":
            return chr(av)
        if name == "RANGE":
            low, high = av
            printable = [c for c in _CATEGORY["CATEGORY_WORD"] + _ANY if low <= ord(c) <= high]
            return rng.choice(printable) if printable and rng.random() < 0.8 else chr(rng.randint(low, high))
        if name == "CATEGORY":
            return rng.choice(_CATEGORY.get(str(av), "a"))
        raise _GiveUp


def _risky(items: Any, inside: bool = False) -> bool:
    """A repeat (or alternation) inside an unbounded repeat: matching may backtrack exponentially."""
    for op, av in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if inside or _risky(av[2], inside or av[1] == _MAXREPEAT):
                return True
        elif name == "BRANCH":
            if inside or any(_risky(b, inside) for b in av[1]):
                return True
        elif name == "SUBPATTERN":
            if _risky(av[-1], inside):
                return True
        elif name in ("ASSERT", "ASSERT_NOT") and _risky(av[1], inside):
            return True
        elif name in ("GROUPREF_EXISTS", "GROUPREF") and inside:
            return True
    return False


SAFE_CHECK = 10  # a risky pattern is checked on strings up to this long (2**10 paths at most for (a+)+)


class _Check:
    """The compiled pattern as a judge: ``fullmatch`` is True, False, or None (not asked: too slow)."""

    def __init__(self, compiled: Any, risky: bool) -> None:
        self.compiled, self.risky = compiled, risky

    def __call__(self, text: str) -> bool | None:
        if self.risky and len(text) > SAFE_CHECK:
            return None
        return self.compiled.fullmatch(text) is not None


def _parse(pattern: Any, flags: int) -> tuple[Any, _Check, bool] | None:
    """(parsed pattern, its check, bytes?)."""
    try:
        is_bytes = isinstance(pattern, bytes)
        text = pattern.decode("latin-1") if is_bytes else pattern
        if not isinstance(text, str) or len(text) > MAX_PATTERN:
            return None
        flags = int(flags) & ~re.LOCALE & ~(re.UNICODE if is_bytes else 0)
        parsed = _sre.parse(text, flags)
        compiled = re.compile(text, flags | (re.ASCII if is_bytes else 0))
        return parsed, _Check(compiled, _risky(parsed)), is_bytes
    except Exception:  # noqa: BLE001 - any pattern it cannot read gives nothing
        return None


def generate(pattern: Any, flags: int = 0, rng: random.Random | None = None, count: int = 3) -> list[Any]:
    """Up to ``count`` distinct strings ``pattern`` matches from start to end (``bytes`` for a bytes
    pattern): the first fills every optional part once, the others draw repeats at random."""
    read = _parse(pattern, flags)
    if read is None:
        return []
    parsed, checked, is_bytes = read
    rng = rng or random.Random(repr(pattern))
    out: list[str] = []
    for attempt in range(4 * count):
        mode = "full" if attempt % 3 == 0 else "least" if attempt == 2 else "random"
        try:
            text = _Writer(rng, mode, int(flags)).seq(parsed)
        except (_GiveUp, ValueError, TypeError, RecursionError):
            continue
        if text in out or checked(text) is False:
            continue
        out.append(text)
        if len(out) >= count:
            break
    return [_encode(t) for t in out] if is_bytes else out


def _encode(text: str) -> Any:
    return text.encode("latin-1" if all(ord(c) < 256 for c in text) else "utf-8")


def near_misses(pattern: Any, flags: int = 0, rng: random.Random | None = None, count: int = 2) -> list[Any]:
    """Up to ``count`` strings close to ones ``pattern`` matches that it does not match in full: one
    character of another class, the last one dropped, one more at the end."""
    read = _parse(pattern, flags)
    rng = rng or random.Random(repr(pattern))
    matches = generate(pattern, flags, rng, 2)
    if read is None or not matches:
        return []
    checked, is_bytes = read[1], read[2]
    out: list[Any] = []
    for m in matches:
        text = m.decode("latin-1") if is_bytes else m
        i = rng.randrange(len(text)) if text else 0
        other = "a" if text[i:i + 1].isdigit() else "7" if text[i:i + 1].isalpha() else "!"
        for miss in (text[:i] + other + text[i + 1:], text[:-1], text + rng.choice("!x ")):
            if miss == text or checked(miss) is not False:
                continue
            value = _encode(miss) if is_bytes else miss
            if value not in out and value not in matches:
                out.append(value)
    rng.shuffle(out)
    return out[:count]


def _flags(node: ast.expr | None) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        value = getattr(re, node.attr, 0)
        return int(value) if isinstance(value, re.RegexFlag) else 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    return 0


def _text(node: ast.expr | None, names: dict[str, Any]) -> Any:
    """The literal text of a pattern expression: a constant, a module constant's name, ``a + b``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return node.value
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), str | bytes):
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, names), _text(node.right, names)
        if type(left) is type(right) and left is not None:
            return left + right
    return None


def _call(node: ast.AST, names: dict[str, Any]) -> tuple[Any, int] | None:
    """(pattern, flags) of ``re.<function>(pattern, ..., flags)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.func.attr in _FUNCS):
        return None
    pattern = _text(node.args[0], names)
    if pattern is None:
        return None
    at = _FUNCS[node.func.attr]
    flags = node.args[at] if len(node.args) > at else next((k.value for k in node.keywords if k.arg == "flags"), None)
    return pattern, _flags(flags)


def patterns(node: ast.AST, tree: ast.Module | None, limit: int = 4) -> list[tuple[Any, int]]:
    """The patterns x uses by name: literals of ``re.<function>(...)`` calls in its body, and module
    or class constants ``NAME = re.compile(...)`` (or a pattern string) it refers to."""
    texts: dict[str, Any] = {}
    compiled: dict[str, tuple[Any, int]] = {}
    scopes = [tree.body] if tree is not None else []
    scopes += [c.body for c in (tree.body if tree is not None else []) if isinstance(c, ast.ClassDef)]
    for body in scopes:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if (text := _text(stmt.value, texts)) is not None:
                    texts[name] = text
                elif (found := _call(stmt.value, texts)) is not None:
                    compiled[name] = found
    out: list[tuple[Any, int]] = []
    for n in ast.walk(node):
        found = _call(n, texts)
        if found is None and isinstance(n, ast.Name | ast.Attribute):
            found = compiled.get(n.id if isinstance(n, ast.Name) else n.attr)
        if found is not None and found not in out:
            out.append(found)
            if len(out) >= limit:
                break
    return out


def _handles_text(node: ast.AST) -> bool:
    """Whether x calls ``ord``, ``.encode``/``.decode``/``.isascii`` or names an ASCII encoding."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and (isinstance(n.func, ast.Name) and n.func.id == "ord" or isinstance(
                n.func, ast.Attribute) and n.func.attr in ("encode", "decode", "isascii")):
            return True
        if isinstance(n, ast.Constant) and n.value in ("ascii", "us-ascii", "utf-8", "utf8"):
            return True
    return False


def samples(node: ast.AST, tree: ast.Module | None, rng: random.Random | None = None, limit: int = 8) -> list[str]:
    """Extra string candidates for x: two strings each pattern it uses matches and one near miss,
    and non-ASCII text when x handles encodings or code points."""
    rng = rng or random.Random(0)
    out: list[str] = []
    try:
        for pattern, flags in patterns(node, tree):
            for text in generate(pattern, flags, rng, 2) + near_misses(pattern, flags, rng, 1):
                value = text.decode("latin-1") if isinstance(text, bytes) else text
                if value not in out:
                    out.append(value)
        if _handles_text(node):
            out += UNICODE[:3]
    except (RecursionError, ValueError, TypeError):
        pass
    return out[:limit]


def splice(v: Any, part: Any, new: Any) -> Any:
    """``v`` with its first ``part`` replaced by ``new``, found ignoring case if need be (x may have
    upper-cased the input first: ``doi = doi.upper()``); None when ``part`` is not in ``v``."""
    if type(v) is not type(part) or type(new) is not type(v) or not part:
        return None
    if part in v:
        return v.replace(part, new, 1)
    low, needle = v.lower(), part.lower()
    at = low.find(needle)
    if at < 0 or len(low) != len(v) or len(needle) != len(part):
        return None
    return v[:at] + new + v[at + len(part):]


def rewrite(v: Any, text: Any, spec: Any, rng: random.Random | None = None) -> list[Any]:
    """Input value ``v`` with the ``text`` a pattern failed to match replaced by strings it matches
    (``spec``: the pattern and its flags, as :mod:`.cmplog` recorded them)."""
    if type(v) is not type(text) or type(spec) is not tuple or len(spec) != 2 or type(spec[0]) is not type(v):
        return []
    if v != text and splice(v, text, text) is None:
        return []
    pattern, flags = spec
    made = generate(pattern, flags, rng or random.Random(repr((pattern, v))[:400]), 3)
    return made if v == text else [splice(v, text, m) for m in made]


_DIGITS = "0123456789"
_LETTERS = "abcdefghij"


def recast(text: str, check: str) -> str:
    """``text`` changed so that ``text.<check>()`` holds (``"!isdigit"``: no longer holds): what a
    failed ``body.isdigit()`` check on part of an input asks for."""
    if check.startswith("!"):
        last = text[-1:]
        other = {"isupper": last.lower(), "islower": last.upper(), "isascii": "é", "isspace": "x"}.get(
            check[1:], "-" if check[1:] in ("isalpha", "isalnum", "isidentifier") else "x")
        return text[:-1] + (other if other != last else "_")
    if check in ("isdigit", "isdecimal", "isnumeric"):
        return "".join(c if c in _DIGITS else _DIGITS[ord(c) % 10] for c in text)
    if check in ("isalpha", "isalnum", "isidentifier"):
        out = "".join(c if c.isalpha() or check == "isalnum" and c.isdigit() else _LETTERS[ord(c) % 10] for c in text)
        return out if check != "isidentifier" or out else "x"
    if check == "isspace":
        return " " * max(1, len(text))
    if check in ("isupper", "islower"):
        out = text.upper() if check == "isupper" else text.lower()
        return out if any(c.isalpha() for c in out) else out + ("A" if check == "isupper" else "a")
    if check == "isascii":
        return "".join(c if c.isascii() else "a" for c in text)
    return text


def resize(text: Any, n: int) -> list[Any]:
    """``text`` (a string or bytes) at length ``n`` (up to 4096: file headers checked as ``len(buf) > 524``): its
    own characters repeated, or digits after it."""
    if type(text) not in (str, bytes) or not 0 <= n <= 4096:
        return []
    digits = _DIGITS if type(text) is str else _DIGITS.encode()
    fill = text or digits
    out = [(fill * (n // len(fill) + 1))[:n], (text + digits * (n // 10 + 1))[:n]]
    return list(dict.fromkeys(out))


def parts(text: Any, sep: Any, n: int) -> list[Any]:
    """``text`` rewritten to split into ``n`` parts at ``sep`` (None: whitespace): its own parts, the
    last repeated or the extra ones dropped, and ``n`` numbered parts (``"1.2.3.4"``)."""
    if type(text) not in (str, bytes) or not 1 <= n <= 32 or sep is not None and type(sep) is not type(text):
        return []
    is_bytes, pieces = type(text) is bytes, text.split(sep)
    joiner = sep if sep is not None else (b" " if is_bytes else " ")
    fill = pieces[-1] if pieces and pieces[-1] else (b"a" if is_bytes else "a")
    numbered = [str(i + 1).encode() if is_bytes else str(i + 1) for i in range(n)]
    out = [joiner.join((pieces + [fill] * n)[:n]), joiner.join(numbered)]
    return [p for p in dict.fromkeys(out) if len(p) <= 4 * MAX_LENGTH]
