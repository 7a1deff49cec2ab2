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

__all__ = ["kept_items", "line_wrapped"]

_KEEP = {
    "c": {"preproc_include", "preproc_def", "preproc_function_def", "type_definition", "struct_specifier",
          "union_specifier", "enum_specifier", "declaration", "function_definition", "preproc_call"},
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
