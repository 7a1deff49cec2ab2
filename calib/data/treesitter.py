"""Functions of C, C++, Java, Rust and Go documents, cut out of tree-sitter syntax trees.

The grammars are the PyPI wheels pinned in ``pyproject.toml`` (tree-sitter 0.22.3 with
tree-sitter-{c,cpp,java,rust,go}): the same set CodeBLEU and TSED use, nothing downloaded at run time.
One :class:`tree_sitter.Parser` per language is built on first use and cached (:func:`parser`).

What counts as a function (a definition with a body; declarations without one are skipped):

- C: ``function_definition``; C++: the same, also in classes, structs, namespaces, ``extern "C"`` blocks
  and templates (the ``template <...>`` head belongs to the signature); ``= default`` has no body;
- Java: ``method_declaration``, ``constructor_declaration`` and ``compact_constructor_declaration`` in
  classes, interfaces (default methods), enums and records;
- Rust: ``function_item`` at module level, in ``impl`` blocks (qualname ``Type.method``, generic
  arguments dropped) and trait default methods; ``#[...]`` attributes belong to the signature;
- Go: ``function_declaration`` and ``method_declaration`` (qualname ``Receiver.method``, ``*`` and type
  arguments dropped).

Functions inside function bodies (local classes, closures, nested ``fn``) stay part of their parent.
Qualnames join the enclosing classes/structs/impl types/traits with ``.``; a C++ out-of-line
definition ``A::f`` gives ``A.f``. The docstring is the run of comments right before the function
(attributes included), with no blank line between them.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterator

from tree_sitter import Language, Node, Parser

from calib._exceptions import InvalidParameterError
from calib.data.candidates import Candidate

__all__ = ["BRACE_LANGUAGES", "function_candidates", "parser"]

#: Language name → the module of its grammar wheel.
BRACE_LANGUAGES = {
    "c": "tree_sitter_c",
    "cpp": "tree_sitter_cpp",
    "java": "tree_sitter_java",
    "rust": "tree_sitter_rust",
    "go": "tree_sitter_go",
}

_FUNCTIONS = {
    "c": {"function_definition"},
    "cpp": {"function_definition"},
    "java": {"method_declaration", "constructor_declaration", "compact_constructor_declaration"},
    "rust": {"function_item"},
    "go": {"function_declaration", "method_declaration"},
}
_SCOPES = {
    "c": {},
    "cpp": {"class_specifier": "name", "struct_specifier": "name", "union_specifier": "name"},
    "java": {"class_declaration": "name", "interface_declaration": "name", "enum_declaration": "name",
             "record_declaration": "name"},
    "rust": {"impl_item": "type", "trait_item": "name"},
    "go": {},
}
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_COMMENTS = {"comment", "line_comment", "block_comment"}
_PREFIXES = {"attribute_item"}  # Rust outer attributes, kept with the function like decorators


@functools.cache
def parser(language: str) -> Parser:
    """The cached parser for ``language`` (one of :data:`BRACE_LANGUAGES`)."""
    if language not in BRACE_LANGUAGES:
        raise InvalidParameterError(f"language={language!r}: expected one of {', '.join(BRACE_LANGUAGES)}")
    module = importlib.import_module(BRACE_LANGUAGES[language])
    return Parser(Language(module.language()))


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _type_name(text: str) -> str:
    # "*pkg.List[T]" -> "List", "Foo<T>" -> "Foo", "&'a mut Bar" -> "Bar"
    text = text.split("<", 1)[0].split("[", 1)[0]
    text = text.replace("&", " ").replace("*", " ").replace("mut ", " ").strip()
    text = text.split()[-1] if text.split() else text
    return text.rsplit(".", 1)[-1].rsplit("::", 1)[-1]


def _name(language: str, node: Node, data: bytes) -> str:
    if language in ("c", "cpp"):
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        if declarator is None:
            return "<anonymous>"
        name = declarator.child_by_field_name("declarator")
        if name is None:
            return "<anonymous>"
        text = _text(data, name).replace(" ", "")
        if "::" in text:  # A<T>::g -> A.g
            while _TEMPLATE_ARGS.search(text):
                text = _TEMPLATE_ARGS.sub("", text)
            text = text.replace("::", ".")
        return text
    name = node.child_by_field_name("name")
    base = _text(data, name) if name is not None else "<anonymous>"
    if language == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        for param in receiver.named_children if receiver is not None else []:
            kind = param.child_by_field_name("type")
            if kind is not None:
                return f"{_type_name(_text(data, kind))}.{base}"
    return base


def _walk(language: str, node: Node, data: bytes, prefix: str) -> Iterator[tuple[Node, str]]:
    functions, scopes = _FUNCTIONS[language], _SCOPES[language]
    for child in node.named_children:
        if child.type in functions:
            if child.child_by_field_name("body") is not None:
                yield child, prefix + _name(language, child, data)
        elif child.type in scopes:
            name_node = child.child_by_field_name(scopes[child.type])
            inner = prefix
            if name_node is not None:
                name = _text(data, name_node)
                inner = f"{prefix}{_type_name(name) if child.type == 'impl_item' else name}."
            yield from _walk(language, child, data, inner)
        else:
            yield from _walk(language, child, data, prefix)


def _last_row(node: Node) -> int:
    # Rust line comments own their newline, so they end at column 0 of the next row.
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _leading(node: Node, data: bytes, line_starts: list[int]) -> tuple[Node, list[Node]]:
    """The first node of the function (attributes, template head) and the comments right before it.

    A comment counts when it starts its line and no blank line separates it from what follows it.
    """
    first = node
    while first.parent is not None and first.parent.type == "template_declaration":
        first = first.parent
    sibling = first.prev_named_sibling
    while sibling is not None and sibling.type in _PREFIXES:
        first, sibling = sibling, sibling.prev_named_sibling
    comments: list[Node] = []
    after = first
    while (sibling is not None and sibling.type in _COMMENTS
           and _last_row(sibling) in (after.start_point[0], after.start_point[0] - 1)
           and not data[line_starts[sibling.start_point[0]] : sibling.start_byte].strip()):
        comments.append(sibling)
        after, sibling = sibling, sibling.prev_named_sibling
    return first, comments[::-1]


def function_candidates(language: str, text: str) -> list[Candidate]:
    """Every function of ``text`` (a document in ``language``, LF line ends) before length filtering."""
    data = text.encode("utf-8", "surrogatepass")
    tree = parser(language).parse(data)
    line_starts, char_starts = [0], [0]  # byte and character offsets of each line's start
    for line in text.split("\n"):
        width = len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
        line_starts.append(line_starts[-1] + width + 1)
        char_starts.append(char_starts[-1] + len(line) + 1)
    found = []
    for node, qualname in _walk(language, tree.root_node, data, ""):
        first, comments = _leading(node, data, line_starts)
        body = node.child_by_field_name("body")
        start_byte = line_starts[first.start_point[0]]
        signature = data[start_byte : body.start_byte].decode("utf-8", "replace").rstrip()
        body_text = _text(data, body)
        inner = body_text[1:-1] if body_text.startswith("{") and body_text.endswith("}") else body_text
        docstring = ""
        if comments:
            docstring = data[comments[0].start_byte : comments[-1].end_byte].decode("utf-8", "replace").rstrip()
        found.append(Candidate(
            qualname=qualname,
            start=char_starts[first.start_point[0]],
            signature=signature,
            docstring=docstring,
            body=body_text,
            body_lines=sum(1 for line in inner.split("\n") if line.strip()),
            start_line=first.start_point[0] + 1,
            has_error=node.has_error or (first is not node and first.has_error),
        ))
    return found
