"""What of x's file context a C or C++ build keeps (docs/native-executors.md, "File context").

A functional sample's ``context`` is the file before x (``calib.data``: possibly cut at a character
budget, so it may begin inside a construct). It is parsed with tree-sitter and only its complete
top-level items are kept, in order: ``#include`` and ``#define`` lines, type definitions, structs,
unions, enums, declarations (globals, prototypes), helper functions, and (C++) namespaces, classes,
templates and ``using`` lines. An item with a syntax error, and a definition of a function named like x,
are left out; an include guard's body counts as top level. The kept text goes before x in x's
translation unit between ``#line`` directives, so compiler messages name ``context.c`` (or
``context.cpp``) and x's own lines keep the numbers they have without a context (line coverage reads
them).
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from calib.data.treesitter import parser

__all__ = ["function_head", "kept_items", "line_wrapped"]

_KEEP = {
    "c": {"preproc_include", "preproc_def", "preproc_function_def", "type_definition", "struct_specifier",
          "union_specifier", "enum_specifier", "declaration", "function_definition"},
}
_KEEP["cpp"] = _KEEP["c"] | {"namespace_definition", "class_specifier", "template_declaration", "using_declaration",
                             "alias_declaration", "namespace_alias_definition", "static_assert_declaration",
                             "linkage_specification"}
_CONDITIONALS = {"preproc_ifdef", "preproc_if"}
_NEEDS_SEMICOLON = {"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"}


def _function_name(node: Node, data: bytes) -> str:
    """The name a function definition defines (``f``, ``ns::f`` gives ``f``), or ""."""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in ("identifier", "field_identifier", "qualified_identifier",
                                                             "destructor_name", "operator_name"):
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return ""
    return data[declarator.start_byte:declarator.end_byte].decode("utf-8", "replace").rsplit("::", 1)[-1]


def _top(node: Node) -> Iterator[Node]:
    """The top-level items, an include guard's (or any conditional's) body included."""
    for child in node.children:
        if child.type in _CONDITIONALS:
            yield from (c for c in child.children if c.is_named and c.type not in ("identifier", "preproc_defined"))
        else:
            yield child


def kept_items(language: str, context: str, drop: str) -> str:
    """The complete top-level items of ``context`` a build keeps (module docstring), one after another;
    a function definition named ``drop`` (x's name) is left out."""
    if not context.strip():
        return ""
    data = context.encode("utf-8")
    tree = parser(language).parse(data)
    keep = _KEEP[language]
    out: list[str] = []
    for node in _top(tree.root_node):
        if node.type not in keep or node.has_error:
            continue
        if node.type == "function_definition" and _function_name(node, data) == drop:
            continue
        text = data[node.start_byte:node.end_byte].decode("utf-8", "replace").rstrip()
        if node.type in _NEEDS_SEMICOLON and not text.endswith(";"):
            text += ";"
        out.append(text)
    return "\n".join(out)


def line_wrapped(kept: str, context_name: str, unit: str, next_line: int) -> str:
    """``kept`` between ``#line`` directives: its lines numbered as ``context_name``'s, and the line after
    it as line ``next_line`` of ``unit`` again. Empty when nothing is kept."""
    if not kept:
        return ""
    return f'#line 1 "{context_name}"\n{kept}\n#line {next_line} "{unit}"\n'


def _definitions(node: Node) -> Iterator[Node]:
    for child in _top(node):
        if child.type == "function_definition":
            yield child
        elif child.type in ("template_declaration", "namespace_definition", "linkage_specification"):
            yield from _definitions(child.child_by_field_name("body") or child)


def _first_definition(node: Node, data: bytes) -> Node | None:
    """x's definition: the first one not declared ``static`` (a static one before it is a file-local helper,
    as C defines helpers before their use), else the first."""
    found = list(_definitions(node))
    for candidate in found:
        storage = [c for c in candidate.children if c.type == "storage_class_specifier"]
        if not any(data[c.start_byte:c.end_byte] == b"static" for c in storage):
            return candidate
    return found[0] if found else None


def function_head(language: str, source: str) -> tuple[str, str, str] | str | None:
    """(return type, name, parameter list) of x's definition in C or C++ ``source`` (the first not
    ``static``, else the first) read with tree-sitter (comments left out); a string says why the signature
    cannot be read (a K&R definition, a macro or syntax error in it, a function pointer parameter); None: no
    definition found."""
    data = source.encode("utf-8")
    node = _first_definition(parser(language).parse(data).root_node, data)
    if node is None:
        return None
    if node.parent is not None and node.parent.type == "template_declaration":
        return "a function template"
    declarator, stars = node.child_by_field_name("declarator"), 0
    while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
        stars += declarator.type == "pointer_declarator"
        declarator = declarator.child_by_field_name("declarator") or (declarator.named_children or [None])[-1]
    if declarator is None or declarator.type != "function_declarator":
        return "a definition whose declarator is not a plain function (a macro in the signature?)"
    if declarator.has_error:
        return "a signature with a macro or syntax error in it: " + _clip(data, declarator)
    params = declarator.child_by_field_name("parameters")
    if params is None:
        return "no parameter list"
    decls = [c for c in params.named_children if c.type != "comment"]
    if any(c.type == "identifier" for c in decls) or any(c.type == "declaration" for c in node.children):
        return "a K&R-style definition"
    for c in decls:
        if any(d.type == "function_declarator" for d in _descendants(c)):
            return "a function pointer parameter: " + _clip(data, c)
    name_node = declarator.child_by_field_name("declarator")
    name = _clip(data, name_node) if name_node is not None else ""
    body = node.child_by_field_name("body")
    head_end = node.child_by_field_name("declarator").start_byte  # type: ignore[union-attr]
    ret = data[node.start_byte:head_end].decode("utf-8", "replace").strip() + " *" * stars
    if body is None or not name:
        return None
    text = ", ".join(_clip(data, c) for c in decls)
    return ret.strip(), name, text


def _descendants(node: Node) -> Iterator[Node]:
    for child in node.children:
        yield child
        yield from _descendants(child)


def _clip(data: bytes, node: Node) -> str:
    return " ".join(data[node.start_byte:node.end_byte].decode("utf-8", "replace").split())
