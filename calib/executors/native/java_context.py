"""What of x's file context a Java build keeps, and how an instance of x's class is built
(docs/native-executors.md, "Java").

A sample's ``context`` is the file before x (``calib.data``; possibly cut at a character budget). It is
parsed with tree-sitter-java: x's class is the innermost type declaration still open at the end of the
context (a nested one inside its enclosing types). What is built around x, for x and every candidate alike:

- the context's ``import`` lines of JDK packages (``java.``, ``javax.`` as in JDK 17, ``jdk.``, ``org.w3c.``,
  ``org.xml.``, ...); an import from any other package that x (or a member it keeps) names is kept when a jar
  of the system's Java library folder holds the class (:mod:`.java_jars`; the jar, with those its manifest's
  ``Class-Path`` names, is then on the build's classpath: :attr:`JavaContext.jars`), else the sample is
  ``unsupported: external package <name> is not installed (...)``; a wildcard import is kept (with its jar)
  when a jar holds a type of it that x names, else dropped; a fully qualified name in x or a kept member
  (``org.apache.commons.codec.digest.DigestUtils.md5Hex(s)``) adds its jar; the ``package`` line is dropped;
- x's class and its enclosing types (``public``/``private``/``protected``/``abstract`` dropped, nested ones
  made ``static``, ``extends``/``implements`` dropped: the types after x are not in the context; so is
  ``@Override`` in the heads of x and the kept members), with the
  members x uses, transitively: fields, methods (every overload of a name used), constructors, nested
  types named, and initializer blocks that name a kept field. A member with a syntax error is left out;
- for an instance method, one constructor (the no-argument one, or the one with the fewest parameters, all of
  supported types) and every constructor when it delegates with ``this(...)``.

The input state of an instance method: its parameters, the chosen constructor's parameters as ``new.<name>``
(when it takes any) or else the kept non-final instance fields of supported types as ``this.<name>`` (set
after ``new``); the output gains ``"this"``: the kept instance fields of writable types after the call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from calib.data.treesitter import parser
from calib.executors.native.java_jars import JarIndex, jar_index, not_installed
from calib.executors.native.text import strip_comments
from calib.executors.native.types import Unsupported

__all__ = ["JavaContext", "is_jdk", "read_context", "unoverride"]

_JAVAX = ("accessibility", "annotation.processing", "crypto", "imageio", "lang.model", "management", "naming",
          "net", "print", "rmi.ssl", "script", "security.auth", "security.cert", "security.sasl", "smartcardio",
          "sound", "sql", "swing", "tools", "transaction.xa", "xml.catalog", "xml.crypto", "xml.datatype",
          "xml.namespace", "xml.parsers", "xml.stream", "xml.transform", "xml.validation", "xml.xpath",
          "xml.XMLConstants")
_JDK_ROOTS = ("java", "jdk", "org.w3c.dom", "org.xml.sax", "org.ietf.jgss", "com.sun.net.httpserver",
              "com.sun.management", "com.sun.source", "sun.misc", *(f"javax.{p}" for p in _JAVAX))
#: Declared types whose values the harness writes without identity hash codes (the "this" output).
_WRITABLE = re.compile(r"^(?:(?:int|long|short|byte|char|double|float|boolean|String|Integer|Long|Short|Byte|"
                       r"Character|Double|Float|Boolean)(?:\[\])*|(?:java\.util\.)?(?:List|ArrayList|LinkedList|Set|"
                       r"HashSet|LinkedHashSet|TreeSet|Deque|ArrayDeque|Queue|Collection|Map|HashMap|LinkedHashMap|"
                       r"TreeMap|Stack|Vector)(?:<.*>)?)$")
_TYPES = {"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
          "record_declaration": "record"}


def is_jdk(package: str) -> bool:
    """Whether ``package`` (dotted) is part of the JDK 17 (so it compiles without anything else)."""
    return any(package == root or package.startswith(root + ".") for root in _JDK_ROOTS)


@dataclass(frozen=True)
class _Member:
    kind: str  # field, method, constructor, type, init, constants
    names: frozenset[str]
    text: str
    idents: frozenset[str]
    static: bool = False
    final: bool = False
    type: str = ""  # a field's declared type
    params: tuple[tuple[str, str], ...] = ()  # a constructor's (type, name)
    declarators: tuple[tuple[str, bool], ...] = ()  # a field's (name, has an initializer)


@dataclass
class _Frame:
    kind: str
    name: str
    header: str
    members: list[_Member] = field(default_factory=list)


@dataclass(frozen=True)
class JavaContext:
    """What :func:`read_context` found: the build's text around x and the instance plan."""

    imports: str = ""
    opening: str = "class Target {\n"  # enclosing types and their kept members, x's class open last
    depth: int = 1  # braces to close after x
    owner: str = "Target"  # x's class as source names it (Outer.Inner)
    binary: str = "Target"  # ... and as the JVM does (Outer$Inner)
    ctor: tuple[tuple[str, str], ...] = ()  # (type, name) of the constructor's parameters
    settable: tuple[tuple[str, str], ...] = ()  # (type, name) of fields set from the state
    shown: tuple[str, ...] = ()  # fields reported after the call
    jars: tuple[str, ...] = ()  # real paths of the library jars x needs (and their Class-Path), classpath order


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _idents(node: Node, data: bytes) -> frozenset[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("identifier", "type_identifier"):
            out.add(_text(data, n))
        stack.extend(n.children)
    return frozenset(out)


def _mods(node: Node, data: bytes) -> set[str]:
    mods = next((c for c in node.children if c.type == "modifiers"), None)
    return set(_text(data, mods).split()) if mods is not None else set()


def unoverride(text: str) -> str:
    """``text`` with ``@Override`` blanked before its first brace (the supertypes are dropped: the
    annotation would not compile; the line numbers stay)."""
    head, brace, rest = text.partition("{")
    return re.sub(r"@Override\b", " " * 9, head) + brace + rest


def _member(node: Node, data: bytes, owner: str) -> _Member | None:
    text, idents, mods = unoverride(_text(data, node)), _idents(node, data), _mods(node, data)
    static, final = "static" in mods, "final" in mods
    kind = node.type
    if kind == "field_declaration" or kind == "constant_declaration":
        decls = [c for c in node.children if c.type == "variable_declarator"]
        names = [(_text(data, d.child_by_field_name("name")), d.child_by_field_name("value") is not None)
                 for d in decls if d.child_by_field_name("name") is not None]
        typ = node.child_by_field_name("type")
        return _Member("field", frozenset(n for n, _ in names), text, idents, static or kind == "constant_declaration",
                       final, _text(data, typ).strip() if typ is not None else "", declarators=tuple(names))
    name = node.child_by_field_name("name")
    label = _text(data, name) if name is not None else ""
    if kind == "method_declaration":
        if node.child_by_field_name("body") is None and "abstract" in mods:
            return _Member("abstract", frozenset([label]), text, idents)
        return _Member("method", frozenset([label]), text, idents, static)
    if kind == "constructor_declaration":
        params = []
        for p in (node.child_by_field_name("parameters") or node).children:
            if p.type in ("formal_parameter", "spread_parameter"):
                typ, pname = p.child_by_field_name("type"), p.child_by_field_name("name")
                params.append((_text(data, typ) if typ else "?", _text(data, pname) if pname else "?")
                              if p.type == "formal_parameter" else ("...", "..."))
        return _Member("constructor", frozenset([owner]), text, idents, params=tuple(params))
    if kind in _TYPES or kind == "annotation_type_declaration":
        return _Member("type", frozenset([label]), text, idents, static)
    if kind in ("static_initializer", "block"):
        return _Member("init", frozenset(), text, idents, kind == "static_initializer")
    return None


def _header(node: Node, data: bytes, kind: str, nested: bool) -> str:
    mods = [m for m in _mods(node, data) if m in ("static", "strictfp", "final")]
    if nested and kind == "class" and "static" not in mods:
        mods.append("static")
    name = _text(data, node.child_by_field_name("name"))
    params = node.child_by_field_name("type_parameters")
    comps = node.child_by_field_name("parameters") if kind == "record" else None
    suffix = (_text(data, params) if params else "") + (_text(data, comps) if comps else "")
    words = [*sorted(set(mods)), kind, name + suffix]
    return " ".join(words) + " {\n"


def _frames(root: Node, data: bytes) -> list[tuple[Node, _Frame]]:
    """The type declarations still open at the end of the context, outermost first."""
    chain: list[tuple[Node, _Frame]] = []
    children = list(root.children)
    while True:
        open_type = None
        for node in reversed(children):
            if node.type in ("line_comment", "block_comment") or node.is_missing and node.type == "}":
                continue
            if node.type in _TYPES:
                body = node.child_by_field_name("body")
                last = body.children[-1] if body is not None and body.children else None
                if last is not None and (last.is_missing or last.type != "}"):
                    open_type = node
            break
        if open_type is None:
            return chain
        kind = _TYPES[open_type.type]
        name = _text(data, open_type.child_by_field_name("name"))
        chain.append((open_type, _Frame(kind, name, _header(open_type, data, kind, bool(chain)))))
        children = list(open_type.child_by_field_name("body").children)


def _fill(chain: list[tuple[Node, _Frame]], data: bytes) -> None:
    for k, (node, frame) in enumerate(chain):
        inner = chain[k + 1][0] if k + 1 < len(chain) else None
        body = node.child_by_field_name("body")
        for child in body.children:
            if inner is not None and child.start_byte >= inner.start_byte:
                break
            if child.type == "enum_body_declarations":
                for sub in child.children:
                    if not sub.has_error and (m := _member(sub, data, frame.name)) is not None:
                        frame.members.append(m)
                continue
            if child.type == "enum_constant":
                frame.members.append(_Member("constants", frozenset([_text(data, child.child_by_field_name("name"))]),
                                             _text(data, child), _idents(child, data)))
                continue
            if child.has_error or child.is_missing:
                continue
            member = _member(child, data, frame.name)
            if member is not None:
                frame.members.append(member)


def _closure(frames: list[_Frame], need: set[str], seed: list[_Member]) -> set[int]:
    """ids of the members x needs, transitively (and those of ``seed``)."""
    kept: set[int] = set()
    pool = [m for f in frames for m in f.members]
    for m in seed:
        kept.add(id(m))
        need |= m.idents
    changed = True
    while changed:
        changed = False
        fields = {n for m in pool if id(m) in kept and m.kind == "field" for n in m.names}
        for m in pool:
            if id(m) in kept:
                continue
            if m.names & need or (m.kind == "init" and m.idents & fields) or m.kind == "constants":
                kept.add(id(m))
                need |= m.idents
                changed = True
    return kept


def _imports(root: Node, data: bytes, used: set[str]) -> tuple[str, list[str]]:
    """The import lines kept (JDK ones, and those a library jar provides) and the jars they need."""
    kept, jars = [], []
    index: JarIndex | None = None
    for node in root.children:
        if node.type != "import_declaration" or node.has_error:
            continue
        text = _text(data, node)
        path = re.sub(r"\s+", "", text.removeprefix("import").rstrip(";")).removeprefix("static")
        static = re.match(r"import\s+static\b", text) is not None
        wildcard = path.endswith(".*")
        parts = path.removesuffix(".*").split(".")
        package = ".".join(parts[:-1]) if not wildcard else ".".join(parts)
        if is_jdk(package):
            kept.append(text)
            continue
        if not wildcard and parts[-1] not in used:  # unused: dropped
            continue
        index = index or jar_index()
        target = ".".join(parts)
        if wildcard:  # kept when a jar holds what x may take from it, else dropped (as an unknown package)
            found = [jar for jar in ([index.provider(target)] if static else index.members(target, used)) if jar]
            if found:
                kept.append(text)
                jars += found
            continue
        owner = ".".join(parts[:-1]) if static else target
        jar = index.provider(owner)
        if jar is None:
            if static:
                package = ".".join(parts[:-2]) or package
            raise Unsupported(not_installed(owner if index.has_package(package) else package))
        kept.append(text)
        jars.append(jar)
    return "\n".join(kept) + ("\n" if kept else ""), jars


#: A dotted name starting with a lower-case word: a fully qualified name when a jar holds a prefix of it
_DOTTED = re.compile(r"(?<![\w.])[a-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*){2,}")


def _qualified(texts: list[str]) -> list[str]:
    """The jars holding the classes that ``texts`` (x, the kept members) name in full (``org.foo.Bar``)."""
    chains = [re.sub(r"\s+", "", m.group()).split(".") for t in texts for m in _DOTTED.finditer(strip_comments(t))]
    chains = [c for c in chains if c[0] not in ("this", "super") and not is_jdk(".".join(c))]
    if not chains:
        return []
    index = jar_index()
    jars = []
    for chain in chains:
        if chain[0] not in index.roots:
            continue
        for k in range(2, len(chain) + 1):
            if chain[k - 1][:1].isupper() and (jar := index.provider(".".join(chain[:k]))):
                jars.append(jar)
                break
    return jars


def _classpath(found: list[str]) -> tuple[str, ...]:
    return jar_index().closure(list(dict.fromkeys(found))) if found else ()


def _supported(typ: str) -> bool:
    return typ.removesuffix("[]") in ("int", "long", "short", "byte", "char", "double", "float", "boolean", "String") \
        and not typ.removesuffix("[]").endswith("[]")


def read_context(context: str, x_source: str, static: bool) -> JavaContext:
    """What goes around x in the build, from x's file ``context`` (see the module's doc); the default
    (``class Target``) when the context has no open type declaration."""
    data = context.encode("utf-8")
    root = parser("java").parse(data).root_node
    x_data = x_source.encode("utf-8")
    need = set(_idents(parser("java").parse(b"class X {\n" + x_data + b"\n}").root_node, b"class X {\n" + x_data))
    chain = _frames(root, data)
    if not chain:
        imports, jars = _imports(root, data, need)
        return JavaContext(imports=imports, jars=_classpath(jars + _qualified([x_source])))
    _fill(chain, data)
    frames = [f for _, f in chain]
    inner = frames[-1]
    seed: list[_Member] = []
    ctor_params: tuple[tuple[str, str], ...] = ()
    if not static:
        if inner.kind != "class":
            raise Unsupported(f"instance method of {inner.kind} {inner.name}")
        ctors = [m for m in inner.members if m.kind == "constructor"]
        if ctors:
            usable = [m for m in ctors if all(_supported(t) for t, _ in m.params)]
            if not usable:
                raise Unsupported(f"no constructor of {inner.name} with parameters of supported types")
            chosen = min(usable, key=lambda m: len(m.params))
            seed = ctors if "this(" in re.sub(r"\s+", "", chosen.text) else [chosen]
            ctor_params = chosen.params
    kept = _closure(frames, need, seed)
    used = set(need)
    for f in frames:
        for m in f.members:
            if id(m) in kept:
                used |= m.idents
                if m.kind == "abstract":
                    raise Unsupported(f"abstract method {next(iter(m.names))} of {f.name}")
    imports, jars = _imports(root, data, used)
    jars += _qualified([x_source, *(m.text for f in frames for m in f.members if id(m) in kept)])
    opening = "".join(f.header + "".join(_indent(m.text) for m in f.members if id(m) in kept and m.kind != "constants")
                      if f.kind != "enum" else f.header + _constants(f, kept) for f in frames)
    fields = [m for m in inner.members if id(m) in kept and m.kind == "field" and not m.static]
    settable = () if ctor_params else tuple((m.type, n) for m in fields if not m.final and _supported(m.type)
                                            for n, _ in m.declarators)
    shown = tuple(n for m in fields if _WRITABLE.match(m.type) for n, _ in m.declarators)
    return JavaContext(imports=imports, opening=opening, depth=len(frames),
                       owner=".".join(f.name for f in frames), binary="$".join(f.name for f in frames),
                       ctor=ctor_params, settable=settable, shown=shown if not static else (), jars=_classpath(jars))


def _constants(frame: _Frame, kept: set[int]) -> str:
    names = [m.text for m in frame.members if m.kind == "constants"]
    rest = "".join(_indent(m.text) for m in frame.members if id(m) in kept and m.kind != "constants")
    return "    " + ", ".join(names) + ";\n" + rest


def _indent(text: str) -> str:
    return "    " + text.strip() + "\n"
