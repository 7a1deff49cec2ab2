"""Reading Go source text for the native Go executor (:mod:`.go`): literals blanked, top-level declarations,
imports, what a declaration refers to, and which declarations of x's file a function needs.

No Go parser runs on the host: the text is scanned (comments and string/rune literals blanked, brackets
counted), which is all the file context needs (docs/native-executors.md, "Go"). A declaration starts
at a top-level ``func``/``type``/``var``/``const``/``import``/``package`` keyword that begins a
statement (after a ``;`` or a line end that Go turns into one) and runs to the next one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from calib.executors.native.language import which_real

__all__ = ["Decl", "Import", "blank", "declarations", "entries", "external", "needed", "package_refs"]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = ("func", "type", "var", "const", "import", "package")
# a line end after one of these ends a statement (Go's semicolon rule), so a keyword after it starts one
_ENDS = re.compile(r"(?:[\w\)\]\}\"'`]|\+\+|--)$")


def blank(text: str, *, strings: bool = True) -> str:
    """``text`` with every comment (and, with ``strings``, every string and rune literal's content)
    replaced by spaces: same length, same line breaks, quotes kept, so positions stay valid."""
    out = list(text)
    k, n = 0, len(text)
    while k < n:
        ch = text[k]
        two = text[k:k + 2]
        if two == "//":
            end = text.find("\n", k)
            end = n if end < 0 else end
        elif two == "/*":
            end = text.find("*/", k + 2)
            end = n if end < 0 else end + 2
        elif ch in "\"'`":
            end = k + 1
            while end < n and text[end] != ch and (ch == "`" or text[end] != "\n"):
                end += 2 if text[end] == "\\" and ch != "`" else 1
            end = min(end, n - 1) + 1
            if strings:
                for j in range(k + 1, end - 1):
                    if out[j] != "\n":
                        out[j] = " "
            k = end
            continue
        else:
            k += 1
            continue
        for j in range(k, end):
            if out[j] != "\n":
                out[j] = " "
        k = end
    return "".join(out)


@dataclass(frozen=True)
class Import:
    name: str  # the name it is used by: its alias, else the path's last element; "_" or "." as written
    path: str


@dataclass(frozen=True)
class Decl:
    """One top-level declaration: its kind (``func``, ``type``, ...), the names it declares, for a method
    its receiver's type name, its original ``text``, the identifiers its code uses (``idents``) and the
    package names it qualifies (``pkgs``: ``strings`` in ``strings.Split``); for ``type`` declarations,
    each type's definition (blanked text after the name)."""

    kind: str
    names: tuple[str, ...]
    text: str
    start: int  # offset of ``text`` in the source
    idents: frozenset[str]
    pkgs: frozenset[str]
    recv: str = ""
    recv_text: str = ""
    types: tuple[tuple[str, str], ...] = ()
    imports: tuple[Import, ...] = ()

    @property
    def keys(self) -> frozenset[str]:
        """How the declaration is identified: its names, a method as ``Type.Name``."""
        return frozenset(f"{self.recv}.{n}" if self.recv else n for n in self.names)


def _starts(code: str) -> list[tuple[int, str]]:
    """(offset, keyword) of every top-level declaration in blanked ``code``."""
    found, depth = [], 0
    for m in re.finditer(r"[()\[\]{}]|\b(?:func|type|var|const|import|package)\b", code):
        tok = m.group()
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth = max(0, depth - 1)
        elif not depth:
            j = m.start() - 1
            while j >= 0 and code[j] in " \t\r\n":
                j -= 1
            if j < 0 or code[j] == ";" or ("\n" in code[j + 1:m.start()] and _ENDS.search(code[max(0, j - 1):j + 1])):
                found.append((m.start(), tok))
    return found


def entries(body: str) -> list[str]:
    """The specs of a grouped declaration's ``( ... )`` body, or the fields of a struct's ``{ ... }`` body
    (blanked), split at depth-0 line ends and ``;``."""
    out, depth, cur = [], 0, []
    for ch in body:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch in "\n;" and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [e.strip() for e in out if e.strip()]


def _group(code: str) -> list[str] | None:
    """The specs of ``var (...)``-style ``code`` (after the keyword), or None when it is not grouped."""
    rest = code.lstrip()
    if not rest.startswith("("):
        return None
    depth = 0
    for k, ch in enumerate(rest):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
        if depth == 0:
            return entries(rest[1:k])
    return entries(rest[1:])


_PKG_REF = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\.\s*[A-Za-z_]")


def package_refs(code: str) -> frozenset[str]:
    """Names used as ``name.Member`` in blanked ``code`` (packages, but also variables: an over-estimate)."""
    return frozenset(_PKG_REF.findall(code))


def _package_name(path: str) -> str:
    """The name an import without an alias is used by, as Go's convention has it: the path's last element,
    without a major-version element or suffix (``gopkg.in/yaml.v3`` and ``github.com/a/b/v2`` give
    ``yaml`` and ``b``) or a ``go-`` prefix."""
    parts = [p for p in path.split("/") if p]
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        parts.pop()
    name = re.sub(r"\.v\d+$", "", parts[-1] if parts else path)
    return re.sub(r"\W", "_", name.removeprefix("go-"))


def _imports(original: str, code: str) -> tuple[Import, ...]:
    specs = _group(code[len("import"):])
    out = []
    offset = code.index("import") + len("import")
    raw = original[offset:]
    kept = blank(raw, strings=False)
    for m in re.finditer(r"([A-Za-z_]\w*|\.)?\s*\"([^\"\n]*)\"", kept):
        path = m.group(2)
        out.append(Import(m.group(1) or _package_name(path), path))
    if specs is None:
        out = out[:1]
    return tuple(out)


def declarations(source: str) -> list[Decl]:
    """Every top-level declaration of Go ``source``, in order (the ``package`` clause included)."""
    code = blank(source)
    starts = _starts(code)
    decls = []
    for n, (start, kind) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(source)
        text, part = source[start:end].rstrip(), code[start:end].rstrip()
        after = part[len(kind):]
        names: list[str] = []
        recv = recv_text = ""
        types: list[tuple[str, str]] = []
        imports: tuple[Import, ...] = ()
        if kind == "func":
            m = re.match(r"\s*(?:\(([^()]*)\))?\s*([A-Za-z_]\w*)", after)
            if m:
                names = [m.group(2)]
                recv_text = (m.group(1) or "").strip()
                base = re.sub(r"\[.*", "", recv_text.split()[-1] if recv_text else "").lstrip("*")
                recv = base
        elif kind in ("type", "var", "const"):
            specs = _group(after)
            for spec in specs if specs is not None else [after.strip()]:
                m = re.match(r"([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)", spec)
                if not m:
                    continue
                found = [w.strip() for w in m.group(1).split(",")]
                names += found
                if kind == "type":
                    types.append((found[0], spec[m.end():].strip()))
        elif kind == "import":
            imports = _imports(text, part)
        idents = frozenset(_IDENT.findall(after)) - set(names)
        decls.append(Decl(kind, tuple(names), text, start, idents, package_refs(part), recv, recv_text, tuple(types),
                          imports))
    return decls


def needed(decls: list[Decl], uses: frozenset[str], skip: frozenset[str],
           avoid: frozenset[str] = frozenset()) -> list[Decl]:
    """The declarations of ``decls`` a function using the identifiers ``uses`` needs, in file order: those
    declaring a name it (or a needed declaration) uses, every method of a needed type (fmt and sort find
    them through interfaces) and every ``init`` function that uses a needed name, but for those methods and
    ``init`` functions that use a package named in ``avoid`` (one that cannot be built) without being
    named. Never ``main``, a ``package`` clause, an import, or a declaration with a key in ``skip`` (the
    function's own)."""
    want = set(uses)
    kept: list[Decl] = []
    types: set[str] = set()
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for d in decls:
            if d in kept or d.kind in ("package", "import") or d.keys & skip or d.names == ("main",) and not d.recv:
                continue
            if d.kind == "func" and d.recv:
                use = d.recv in types and (d.names[0] in want or not d.pkgs & avoid)
            elif d.kind == "func" and d.names == ("init",):
                use = bool(d.idents & names) and not d.pkgs & avoid
            else:
                use = bool(set(d.names) & want)
            if use:
                kept.append(d)
                want |= d.idents
                names |= set(d.names)
                if d.kind == "type":
                    types |= set(d.names)
                changed = True
    return [d for d in decls if d in kept]


@lru_cache(maxsize=1)
def _goroot() -> str:
    go = which_real("go")
    return os.path.dirname(os.path.dirname(go)) if go else ""


def external(path: str) -> bool:
    """Whether an import path is outside Go's standard library (its first element has a dot, or the
    installed toolchain has no such package; "C" is cgo, unavailable here)."""
    if path == "C" or "." in path.split("/", 1)[0]:
        return True
    root = _goroot()
    return bool(root) and not os.path.isdir(os.path.join(root, "src", path))
