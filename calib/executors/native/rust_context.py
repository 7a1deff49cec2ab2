"""Rust source structure for the native harness: masking, items, structs and external crates.

x's file context (the code before x in its file, possibly cut mid-statement at its start) is split into
top-level items with a small scanner that knows comments, string/char literals and lifetimes
(:func:`mask`). What goes into the build (:func:`parse_context`): ``use`` of std/core/alloc (and
``crate``/``self`` paths), ``struct``, ``enum``, ``union``, ``impl``, ``trait``, ``fn``, ``const``,
``static``, ``type``, ``mod`` and ``macro_rules!`` items, with their attributes (``#[derive]``s kept).
Dropped: a leading fragment, an item with a syntax error (tree-sitter's Rust grammar), inner attributes
(``#![...]``), ``extern crate``, ``fn main``, x's own ``fn`` (top level or in an impl),
``#[cfg(test)]``/``#[test]`` items, an impl of a type the context does not define, and items that need
an external crate (a ``use`` of a crate that is not std/core/alloc, a path through one, or a name such a
``use`` imports; transitively). x needing one of those (:func:`external_crates`) is built with the crate
when the system's registry has it (:mod:`.rust_crates`; the crate then counts as available and its items
are kept), else ``unsupported: external crate <name> is not installed ...``. A context ending inside
``impl T {`` (x is a method of T) keeps the methods before x in a block of their own
(:attr:`Context.open_impl`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from calib.data.treesitter import parser

__all__ = ["Context", "Item", "STD_MODULES", "STD_ROOTS", "body_span", "external_crates", "mask", "parse_context",
           "std_modules", "structs_of"]

#: Paths that are not external crates: the standard crates, the file's own, primitive types and the
#: modules the harness template's ``use std::collections::*`` brings into scope.
STD_ROOTS = frozenset({
    "std", "core", "alloc", "crate", "self", "super", "Self", "i8", "i16", "i32", "i64", "i128", "isize", "u8",
    "u16", "u32", "u64", "u128", "usize", "f32", "f64", "bool", "char", "str", "hash_map", "btree_map",
    "hash_set", "btree_set", "binary_heap", "vec_deque", "linked_list"})
#: The standard library's modules a file reaches by a path after ``use std::<module>;`` (``fmt::Display``,
#: ``mem::swap``): a path through one that nothing of the context binds is std's, imported for the build
#: (:func:`std_modules`), not an external crate (a context cut before its ``use std::fmt;``). A ``use`` of one
#: of these names that is not under ``std::`` (``use time::Duration``) is still an external crate.
STD_MODULES = frozenset({
    "any", "array", "ascii", "borrow", "boxed", "cell", "char", "clone", "cmp", "collections", "convert",
    "default", "env", "error", "ffi", "fmt", "fs", "future", "hash", "hint", "io", "iter", "marker", "mem", "net",
    "num", "ops", "option", "panic", "path", "pin", "process", "ptr", "rc", "result", "slice", "string", "sync",
    "task", "thread", "time", "vec"})
_ITEM = re.compile(r"(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:default|unsafe|async|const|extern(?:\s+\"[^\"]*\")?)\s+)*"
                   r"(use|struct|enum|union|impl|trait|fn|const|static|type|mod|macro_rules!|extern\s+crate)\b")


def mask(text: str) -> str:
    """``text`` with comments and the insides of string and char literals blanked (same length, newlines kept),
    so braces, ``::`` and keywords can be found by position."""
    out = list(text)
    n, k = len(text), 0

    def blank(a: int, b: int) -> None:
        for j in range(a, min(b, n)):
            if out[j] != "\n":
                out[j] = " "

    while k < n:
        c = text[k]
        if text.startswith("//", k):
            end = text.find("\n", k)
            end = n if end < 0 else end
            blank(k, end)
            k = end
        elif text.startswith("/*", k):
            depth, j = 1, k + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(k, j)
            k = j
        elif (m := re.compile(r"b?r(#*)\"").match(text, k)) and (k == 0 or not (text[k - 1].isalnum()
                                                                               or text[k - 1] == "_")):
            end = text.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            blank(m.end(), end - 1 - len(m.group(1)))
            k = end
        elif c == '"':
            j = k + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(k + 1, j)
            k = j + 1
        elif c == "'":
            if text.startswith("\\", k + 1):
                j = text.find("'", k + 3)
                j = n if j < 0 else j
                blank(k + 1, j)
                k = j + 1
            elif k + 2 < n and text[k + 2] == "'":
                blank(k + 1, k + 2)
                k += 3
            else:
                k += 1  # a lifetime or a label
        else:
            k += 1
    return "".join(out)


def body_span(masked: str, start: int) -> int:
    """The position after the ``}`` closing the first ``{`` at or after ``start`` (or the text's end)."""
    k = masked.find("{", start)
    if k < 0:
        return len(masked)
    depth = 0
    for j in range(k, len(masked)):
        depth += {"{": 1, "}": -1}.get(masked[j], 0)
        if depth == 0:
            return j + 1
    return len(masked)


@dataclass(frozen=True)
class Item:
    """One top-level item: its kind (``fn``, ``struct``, ``impl`` ...), name (the type, for an impl), text."""

    kind: str
    name: str
    text: str
    attrs: str = ""


@dataclass
class Context:
    """The parts of x's file context the build uses."""

    items: list[Item] = field(default_factory=list)
    crates: dict[str, str] = field(default_factory=dict)  # name bound by an external `use` -> its crate
    open_impl: str = ""  # the type of an `impl T {` the context ends in (x is one of its methods)
    open_trait: bool = False  # ... and it is a trait impl (`impl Tr for T {`)
    known: set[str] = field(default_factory=set)  # names of the file's types and modules and std imports


_VALUE_ITEM = re.compile(r"\s*(?:pub(?:\s*\([^)]*\))?\s+)?(?:const|static|type|use|let)\s+(?!fn\b|unsafe\b|async\b)")


def _split(text: str) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """Spans of the complete top-level items of ``text`` (masked), and the span of an unclosed last one.
    Anything before a ``}`` that closes nothing (the context cut mid-item) is skipped."""
    spans: list[tuple[int, int]] = []
    depth, start, k = 0, 0, 0
    head: str | None = None  # the item's text before its first bracket, attributes left out
    while k < len(text):
        c = text[k]
        if depth == 0 and (text.startswith("#[", k) or text.startswith("#![", k)):
            nest, j = 0, text.index("[", k)
            while j < len(text):  # an attribute: its brackets do not start the item's head
                nest += {"[": 1, "]": -1}.get(text[j], 0)
                if nest == 0:
                    break
                j += 1
            k = j + 1
            if text.startswith("#![", k0 := text.rfind("#", 0, k)) and not text[start:k0].strip():
                spans.append((start, k))  # an inner attribute: an item of its own (dropped)
                start, head = k, None
            continue
        if c in "([{":
            if depth == 0 and head is None:
                head = re.sub(r"#!?\[[^\]]*\]", " ", text[start:k])
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:  # the tail of something the context's cut began inside
                depth, start, head = 0, k + 1, None
            elif depth == 0 and c == "}" and not _VALUE_ITEM.match(head or ""):
                spans.append((start, k + 1))
                start, head = k + 1, None
        elif c == ";" and depth == 0:
            spans.append((start, k + 1))
            start, head = k + 1, None
        k += 1
    rest = (start, len(text)) if text[start:].strip() else None
    return spans, (rest if depth > 0 else None)


def _classify(original: str, masked: str) -> Item | None:
    """The item in ``original`` (``masked``: the same, masked), or None for a fragment or an inner attribute."""
    m = re.match(r"\s*((?:#\[[^\]]*(?:\[[^\]]*\][^\]]*)*\]\s*)*)", masked)
    attrs_end = m.end() if m else 0
    rest = masked[attrs_end:]
    got = _ITEM.match(rest)
    if not got:
        return None
    kind = re.sub(r"\s+", " ", got.group(1))
    after = rest[got.end():]
    if kind == "impl":
        head = after.split("{", 1)[0]
        head = re.sub(r"^\s*<[^{]*?>\s*", "", head)  # impl<T>
        target = head.split(" for ", 1)[1] if " for " in head else head
        name_m = re.match(r"\s*(?:&\s*)?([A-Za-z_]\w*)", target)
        name = name_m.group(1) if name_m else ""
        name = ("for " + name) if " for " in head else name
    elif kind == "use":
        name = after.strip().rstrip(";").strip()
    else:
        name_m = re.match(r"\s*([A-Za-z_]\w*)", after)
        name = name_m.group(1) if name_m else ""
    return Item(kind, name, original.strip(), original[:attrs_end])


def _use_names(path: str) -> tuple[str, list[str]]:
    """The first segment of a ``use`` path and the names it binds (``a::{b, c as d}`` gives a, [b, d];
    ``a::{self, b}`` binds a)."""
    path = " ".join(path.replace("::", " :: ").split()).replace(" :: ", "::").strip().lstrip(":").strip().rstrip(";")
    root = re.split(r"::|\{|\s", path, maxsplit=1)[0]
    names = [m.group(1) for m in re.finditer(r"(\w+)::\{[^{}]*\bself\b", path)]
    for part in re.split(r"[{},]", path):
        part = part.strip()
        if not part or part.endswith("::"):
            continue
        alias = re.fullmatch(r"(.*?)\s+as\s+(\w+)", part)
        names.append(alias.group(2) if alias else part.split("::")[-1].strip())
    return root, [n for n in names if n not in ("*", "self", "_", "")]


def _words(masked: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", masked))


def _without_fn(text: str, name: str) -> str:
    """An impl's text without its method ``name`` (and the attributes on it)."""
    masked = mask(text)
    m = re.search(rf"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:const|async|unsafe)\s+)*fn\s+{name}\b",
                  masked)
    if not m or masked[:m.start()].count("{") - masked[:m.start()].count("}") != 1:
        return text
    return text[:m.start()] + text[body_span(masked, m.end()):]


def parse_context(context: str, x_name: str = "", available: frozenset[str] = frozenset()) -> Context:
    """The items of ``context`` the build uses (module docstring), x's own fn ``x_name`` removed; the crates
    ``available`` (built from the system's registry, :mod:`.rust_crates`) count as the standard ones do."""
    masked = mask(context)
    spans, open_span = _split(masked)
    out = Context()
    items = []
    for a, b in spans:
        item = _classify(context[a:b], masked[a:b])
        if item is not None:
            items.append(item)
    if open_span is not None:
        a, b = open_span
        got = _classify(context[a:b], masked[a:b])
        if got is not None and got.kind == "impl":
            out.open_impl = got.name.removeprefix("for ")
            out.open_trait = got.name.startswith("for ")
            closed = context[a:b].rstrip()
            inner_masked = mask(closed)
            depth = inner_masked.count("{") - inner_masked.count("}")
            if depth == 1 and not out.open_trait:  # the methods before x, in a block of their own
                items.append(Item("impl", out.open_impl, closed + "\n}", got.attrs))
    kept: list[Item] = []
    rust = parser("rust")
    for item in items:
        if rust.parse(item.text.encode("utf-8")).root_node.has_error:  # e.g. cut inside a literal
            continue
        if item.kind == "extern crate":
            named = re.match(r"(\w+)(?:\s+as\s+(\w+))?", item.name)
            crate, alias = (named.group(1), named.group(2) or named.group(1)) if named else ("", "")
            if crate in available:
                out.known.add(alias)
                kept.append(item)
            elif crate and crate not in STD_ROOTS:
                out.crates[alias] = crate
            continue
        if re.search(r"#\[\s*(?:cfg\s*\(\s*test\s*\)|test\s*\])", item.attrs):
            continue
        if item.kind == "use":
            root, names = _use_names(item.name)
            if root not in STD_ROOTS and root not in available:
                for n in [root, *names]:
                    out.crates[n] = root
                continue
            if root == "super":
                continue
            out.known.update(names)
        if item.kind == "fn" and item.name in ("main", x_name):
            continue
        if item.kind == "impl" and x_name:
            item = Item(item.kind, item.name, _without_fn(item.text, x_name), item.attrs)
        kept.append(item)
    out.known |= {i.name for i in kept if i.kind in ("mod", "struct", "enum", "union", "trait", "type")}
    local = out.known | available
    while True:  # items needing an external crate go, and then the items that need those
        dropped = [i for i in kept if external_crates(i.text, out.crates, local)]
        if not dropped:
            break
        for i in dropped:
            kept.remove(i)
            if i.kind != "impl" and i.name:
                out.crates[i.name] = next(iter(external_crates(i.text, out.crates, local)))
    # an impl of a type the context does not define (cut off before it): it would not build
    defined = {i.name for i in kept if i.kind in ("struct", "enum", "union", "type")}
    traits = {i.name for i in kept if i.kind == "trait"}
    out.items = [i for i in kept if i.kind != "impl" or i.name.removeprefix("for ") in defined
                 or _impl_trait(i.text) in traits]
    return out


def _impl_trait(text: str) -> str:
    """The trait an ``impl Trait for T`` implements ("" for an inherent impl)."""
    m = re.search(r"\bimpl\s*(?:<[^{]*?>)?\s*([A-Za-z_][\w:]*)[^{]*?\sfor\s", mask(text))
    return m.group(1).rsplit("::", 1)[-1] if m else ""


def external_crates(text: str, crates: dict[str, str], local: set[str]) -> set[str]:
    """The external crates ``text`` needs: a path ``name::`` whose root is not std/core/alloc, a primitive
    or a ``local`` module or type, or a name ``crates`` maps to the crate it came from."""
    masked = mask(text)
    found = {crates[w] for w in _words(masked) if w in crates}
    for m in re.finditer(r"(?<![\w:.])([a-z_][a-z0-9_]*)\s*::", masked):
        root = m.group(1)
        if root not in STD_ROOTS and root not in local and (root not in STD_MODULES or root in crates):
            found.add(root)
    return found


def std_modules(texts: list[str], local: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The standard library's modules (:data:`STD_MODULES`) ``texts`` reach by a path (``fmt::``) that nothing of
    the context binds (``local``): the build imports each (``use std::fmt;``)."""
    found = {m.group(1) for text in texts
             for m in re.finditer(r"(?<![\w:.])([a-z_][a-z0-9_]*)\s*::", mask(text))}
    return tuple(sorted(name for name in found & STD_MODULES if name not in local))


def structs_of(items: list[Item]) -> dict[str, tuple[list[tuple[str, str]], bool] | str]:
    """The structs among ``items`` by name: (fields as (name, type text), tuple struct) or why unsupported
    (generic, a lifetime)."""
    out: dict[str, tuple[list[tuple[str, str]], bool] | str] = {}
    for item in items:
        if item.kind != "struct":
            continue
        masked = mask(item.text)
        m = re.search(r"\bstruct\s+(\w+)\s*(<[^>{(]*>)?\s*(where\b[^{]*)?([{(;])", masked)
        if not m:
            continue
        if m.group(2):
            out[m.group(1)] = f"generic struct {m.group(1)}{m.group(2)}"
            continue
        if m.group(4) == ";":
            out[m.group(1)] = ([], False)
            continue
        close = "}" if m.group(4) == "{" else ")"
        depth, j = 0, m.start(4)
        for j in range(m.start(4), len(masked)):
            depth += {"{": 1, "(": 1, "[": 1, "<": 1, "}": -1, ")": -1, "]": -1, ">": -1}.get(masked[j], 0)
            if depth == 0 and masked[j] == close:
                break
        body = re.sub(r"#\[[^\]]*\]", " ", masked[m.end(4):j])
        from calib.executors.native.text import split_top  # noqa: PLC0415 - a leaf helper
        fields = []
        for k, decl in enumerate(split_top(body)):
            decl = re.sub(r"^pub(?:\s*\([^)]*\))?\s+", "", decl.strip())
            if m.group(4) == "(":
                fields.append((str(k), decl))
            else:
                fname, _, ftype = decl.partition(":")
                fields.append((fname.strip(), ftype.strip()))
        out[m.group(1)] = (fields, m.group(4) == "(")
    return out
