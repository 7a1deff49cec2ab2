"""C signatures and call glue for the native harness (``calib/executors/native/harness/c/function.c``).

Supported parameters: integer types (``char`` is a character), ``float``/``double``, ``bool``/``_Bool``,
``char *``/``const char *`` strings (a non-const one is reported after the call), pointers or ``[]``
arrays of numbers with their length in the next (or else the previous) integer parameter (a non-const
array is reported after the call), pointers to numbers without one (out-parameters such as ``int *result``:
a zeroed buffer of :data:`POINTER_CAPACITY` elements holding the input's values first, all of it reported
after the call unless const), and structs of scalars defined in the same source (``struct name``
or a ``typedef``), by value or as a pointer to one struct (reported after the call unless const).
Return types: ``void``, the scalars above, ``char *`` strings and such structs. A struct definition
of x's source is prepended to a candidate that does not define it itself. With x's file context
(:mod:`.context`), its structs and ``typedef`` names of scalars count too, and its complete items are
built before every variant.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from calib.executors.native.context import function_head, kept_items, line_wrapped
from calib.executors.native.coverage import gcov_coverage, locate_gcov
from calib.executors.native.language import HARNESS_ROOT, Language, Tools, native_run, split_build, which_real
from calib.executors.native.text import strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "c_context", "c_glue", "parse_c", "parse_c_in", "prepare_c", "scalar", "split_head"]

_INTS = {
    "signed char": (8, True), "unsigned char": (8, False), "short": (16, True), "short int": (16, True),
    "unsigned short": (16, False), "int": (32, True), "signed": (32, True), "signed int": (32, True),
    "unsigned": (32, False), "unsigned int": (32, False), "long": (64, True), "long int": (64, True),
    "unsigned long": (64, False), "long long": (64, True), "long long int": (64, True),
    "unsigned long long": (64, False), "size_t": (64, False), "ssize_t": (64, True), "int8_t": (8, True),
    "int16_t": (16, True), "int32_t": (32, True), "int64_t": (64, True), "uint8_t": (8, False),
    "uint16_t": (16, False), "uint32_t": (32, False), "uint64_t": (64, False),
    # typedefs of the C library and POSIX (their glibc x86-64 widths)
    "off_t": (64, True), "off64_t": (64, True), "ptrdiff_t": (64, True), "intptr_t": (64, True),
    "uintptr_t": (64, False), "intmax_t": (64, True), "uintmax_t": (64, False), "time_t": (64, True),
    "clock_t": (64, True), "pid_t": (32, True), "uid_t": (32, False), "gid_t": (32, False), "mode_t": (32, False),
    "socklen_t": (32, False), "ino_t": (64, False), "dev_t": (64, False), "nlink_t": (64, False),
    "wchar_t": (32, True), "wint_t": (32, False), "char16_t": (16, False), "char32_t": (32, False),
    "u_char": (8, False), "u_short": (16, False), "u_int": (32, False), "u_long": (64, False),
    "u_int8_t": (8, False), "u_int16_t": (16, False), "u_int32_t": (32, False), "u_int64_t": (64, False),
    **{f"{kind}{bits}_t": (bits, kind.startswith("int")) for bits in (8, 16, 32, 64)
       for kind in ("int_least", "uint_least")},
    **{f"{kind}{bits}_t": (8 if bits == 8 else 64, kind.startswith("int")) for bits in (8, 16, 32, 64)
       for kind in ("int_fast", "uint_fast")},  # glibc: the fast 16- and 32-bit types are 64 bits wide
}
_INT_WORDS = {"signed", "unsigned", "short", "long", "int"}


def _int_spelling(base: str) -> tuple[int, bool] | None:
    """(bits, signed) of an integer type spelled with its words in any order (``short unsigned int``,
    ``long long unsigned``, ``unsigned char``); None for anything else."""
    words = base.split()
    if not words or not set(words) <= _INT_WORDS | {"char"}:
        return None
    signed = "unsigned" not in words
    if "char" in words:
        return (8, signed) if len(words) > 1 and words.count("char") == 1 and "short" not in words \
            and "long" not in words and "int" not in words else None
    longs = words.count("long")
    if longs > 2 or ("short" in words and longs) or words.count("int") > 1 or words.count("short") > 1 \
            or ("signed" in words and "unsigned" in words):
        return None
    return (16 if "short" in words else 64 if longs else 32), signed
#: elements behind a pointer to numbers that has no length parameter (zeroed, the input's values first;
#: all of them are reported after the call unless the pointer is to const)
POINTER_CAPACITY = 64
_LENGTH_NAME = re.compile(r"^(n|len|length|size|sz|count|cnt|num|nelem|nmemb|cap|capacity)$"
                          r"|(_|^)(len|length|size|sz|count|cnt|num|n)$|^(n|num)_", re.IGNORECASE)
_QUALIFIERS = {"const", "volatile", "restrict", "static", "inline", "extern", "register", "__restrict"}


def scalar(base: str, *, bool_names: tuple[str, ...] = ("bool", "_Bool")) -> Type | None:
    """The protocol type of a C/C++ scalar spelled ``base`` (qualifiers removed), or None."""
    if (known := _INTS.get(base) or _int_spelling(base)) is not None:
        bits, signed = known
        return Type("int", bits=bits, signed=signed, native=base)
    if base == "char":
        return Type("char", native=base)
    if base in ("float", "double", "long double"):
        return Type("float", native=base)
    if base in bool_names:
        return Type("bool", native=base)
    return None


def _split_decl(decl: str) -> tuple[str, str, int, bool]:
    """(base type, name, pointer depth, const) of one C parameter declaration."""
    decl = decl.strip()
    depth = decl.count("*") + decl.count("[")
    decl = re.sub(r"\[[^\]]*\]", " ", decl).replace("*", " ")
    words = decl.split()
    if len(words) < 2:
        raise Unsupported(f"parameter without a name: {decl.strip()!r}")
    const = "const" in words
    base = " ".join(w for w in words[:-1] if w not in _QUALIFIERS)
    return base, words[-1], depth, const


def split_head(source: str, language: str = "c") -> tuple[str, str, str]:
    """(return type, name, parameter list) of the first function definition in C-like ``source``: read
    with tree-sitter (:func:`.context.function_head`), else with a regular expression."""
    head = function_head(language, source)
    if isinstance(head, str):
        raise Unsupported(head)
    if head is not None:
        return head
    text = re.sub(r"(?m)^[ \t]*#.*$", "", strip_comments(source))  # preprocessor lines (#include ...)
    m = re.search(r"(?:^|[;}])\s*([\w\s\*&:<>,]+?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:const\s*)?"
                  r"(?:noexcept\s*)?\{", text)
    if not m:
        raise Unsupported("no function definition found")
    return m.group(1).strip(), m.group(2), m.group(3).strip()


_STRUCT = re.compile(r"(typedef\s+)?struct\s+(\w+)?\s*\{([^{}]*)\}\s*(\w+)?\s*;")


_TYPEDEF = re.compile(r"\btypedef\s+([\w\s]+?)\s+(\w+)\s*;")


def _aliases(text: str) -> dict[str, str]:
    """``typedef`` names of scalar types in ``text``: name to the scalar's spelling."""
    out: dict[str, str] = {}
    for m in _TYPEDEF.finditer(text):
        base = " ".join(w for w in m.group(1).split() if w not in _QUALIFIERS)
        base = out.get(base, base)
        if scalar(base) is not None:
            out[m.group(2)] = base
    return out


def _structs(text: str, aliases: dict[str, str] | None = None) -> dict[str, tuple[Type | str, str, str]]:
    """Struct types defined in ``text`` by spelling (``struct p``, or a typedef name): (the type, or why
    it is unsupported; the definition; the name a candidate's own definition would use)."""
    found: dict[str, tuple[Type | str, str, str]] = {}
    for m in _STRUCT.finditer(text):
        spellings = ([f"struct {m.group(2)}"] if m.group(2) else []) + ([m.group(4)] if m.group(1) and m.group(4)
                                                                      else [])
        fields: list[tuple[str, Type]] = []
        problem = ""
        for decl in filter(None, (d.strip() for d in m.group(3).split(";"))):
            first, *more = [x.strip() for x in decl.split(",")]
            try:
                base, name, depth, _ = _split_decl(first)
            except Unsupported as exc:
                problem = str(exc)
                break
            t = scalar((aliases or {}).get(base, base))
            if t is None or depth or any(not re.fullmatch(r"\w+", x) for x in more):
                problem = f"field {decl}"
                break
            fields += [(n, t) for n in (name, *more)]
        for spelling in spellings:
            value: Type | str = problem or Type("struct", native=spelling, fields=tuple(fields))
            found[spelling] = (value, m.group(0), m.group(2) or m.group(4))
    return found


def _struct_type(structs: dict[str, tuple[Type | str, str, str]], base: str) -> Type | None:
    if base not in structs:
        return None
    t = structs[base][0]
    if isinstance(t, str):
        raise Unsupported(f"{base} ({t})")
    return t


def prepare_c(source: str, sig: Signature) -> str:
    """``source`` with x's struct definitions it uses but does not define itself put in front."""
    missing = [text for name, text in sig.preamble
               if not re.search(rf"\bstruct\s+{name}\s*\{{|\}}\s*{name}\s*;", strip_comments(source))]
    return "\n".join([*missing, source])


def parse_c(source: str, context: str = "") -> Signature:
    """The :class:`Signature` of the C function defined in ``source``; :class:`Unsupported` names the
    first parameter or return type the harness cannot handle. ``context``: the kept items of x's file
    (:func:`c_context`'s text without its ``#line`` lines), whose structs and scalar typedefs count too;
    only x's own struct definitions go into ``preamble`` (the context is built with every variant)."""
    ret_text, name, params_text = split_head(source)
    own = strip_comments(source)
    aliases = _aliases(strip_comments(context) + "\n" + own)
    structs = {**_structs(strip_comments(context), aliases), **_structs(own, aliases)}
    mine = _structs(own, aliases)
    used: dict[str, str] = {}
    decls = [] if params_text in ("", "void") else [p for p in params_text.split(",")]
    parsed = [(aliases.get(b, b), n, d, c) for b, n, d, c in (_split_decl(d) for d in decls)]
    params: list[Param] = []
    used_as_length: set[int] = set()
    for i, (base, pname, depth, const) in enumerate(parsed):
        if i in used_as_length:
            continue
        if depth <= 1 and (st := _struct_type(structs, base)) is not None:
            if base in mine:
                used[structs[base][2]] = structs[base][1]
            params.append(Param(pname, st, mutable=depth == 1 and not const, by_pointer=depth == 1))
        elif depth == 0:
            t = scalar(base)
            if t is None:
                raise Unsupported(f"{base} {pname}")
            params.append(Param(pname, t))
        elif depth == 1 and base == "char":
            params.append(Param(pname, Type("str", native="const char *" if const else "char *"), mutable=not const))
        elif depth == 1 and (elem := scalar(base)) is not None and elem.kind != "char":
            # the length: the next integer parameter, else the previous one when its name says length
            j = next((k for k in (i + 1, i - 1) if 0 <= k < len(parsed) and k not in used_as_length
                      and parsed[k][2] == 0 and scalar(parsed[k][0]) is not None
                      and scalar(parsed[k][0]).kind == "int"  # type: ignore[union-attr]
                      and (k > i or _LENGTH_NAME.search(parsed[k][1]))), None)
            if j is None:  # an out-parameter (``int *result``) or an array of a length x knows otherwise
                params.append(Param(pname, Type("list", elem=elem, native=f"{base} *"), mutable=not const,
                                    capacity=POINTER_CAPACITY))
                continue
            used_as_length.add(j)
            if j < i:  # the length came first and was taken as a parameter of its own
                params = [p for p in params if p.name != parsed[j][1]]
            params.append(Param(pname, Type("list", elem=elem, native=f"{base} *"), mutable=not const,
                                length=parsed[j][1]))
        else:
            raise Unsupported(f"{base} {'*' * depth}{pname}")
    ret_words = [w for w in ret_text.replace("*", " * ").split() if w not in _QUALIFIERS]
    stars = ret_words.count("*")
    ret_base = " ".join(w for w in ret_words if w != "*")
    ret_base = aliases.get(ret_base, ret_base)
    if ret_base == "void" and stars == 0:
        returns = Type("void", native="void")
    elif ret_base == "char" and stars == 1:
        returns = Type("str", native="char *")
    elif stars == 0 and (t := scalar(ret_base)) is not None:
        returns = t
    elif stars == 0 and (st := _struct_type(structs, ret_base)) is not None:
        if ret_base in mine:
            used[structs[ret_base][2]] = structs[ret_base][1]
        returns = st
    else:
        raise Unsupported(f"return type {ret_text}")
    return Signature(name, tuple(params), returns, raw_params=tuple(p[1] for p in parsed),
                     preamble=tuple(used.items()))


def parse_c_in(source: str, context: str) -> Signature:
    """:func:`parse_c` with the items of ``context`` a build keeps."""
    name = split_head(source)[1]  # x's own definition is left out of the context
    return parse_c(source, kept_items("c", context, name))


def _x_line(unit: str) -> int:
    """The line of ``unit``'s template where x's source begins (the placeholders' line)."""
    return (HARNESS_ROOT / "c" / unit).read_text(encoding="utf-8").split("/*@CALIB_FUNCTION@*/")[0].count("\n") + 1


def c_context(context: str, sig: Signature) -> str:
    """The kept items of x's file context, numbered as ``context.c``'s lines (:mod:`.context`)."""
    return line_wrapped(kept_items("c", context, sig.name), "context.c", "function.c", _x_line("function.c"))


def _writer(t: Type) -> str:
    if t.kind == "int":
        return "w_int" if t.signed else "w_uint"
    return {"float": "w_num", "bool": "w_bool", "char": "w_char", "str": "w_str"}[t.kind]


def _read_scalar(t: Type, src: str) -> str:
    if t.kind == "char":
        return f"j_str({src})[0]"
    if t.kind == "bool":
        return f"({src}).i != 0"
    return f"({t.native}) {'j_num' if t.kind == 'float' else 'j_int'}({src})"


def _write(t: Type, expr: str) -> list[str]:
    """Statements writing ``expr`` of type ``t`` as JSON."""
    if t.kind != "struct":
        return [f"{_writer(t)}({expr});"]
    out = []
    for n, (name, ft) in enumerate(t.fields):
        out.append(f'w("{"{" if n == 0 else ","}\\"{name}\\":");')
        out += _write(ft, f"{expr}.{name}")
    return [*out, 'w("}");'] if t.fields else ['w("{}");']


def c_glue(sig: Signature) -> str:
    """The body of ``calib_call``: read the arguments, call, write return value and mutated arguments."""
    lines: list[str] = []
    local: dict[str, str] = {}
    for k, p in enumerate(sig.params):
        v = f"a{k}"
        t = p.type
        if t.kind in ("int", "char"):
            read = f"j_str(args.a[{k}])[0]" if t.kind == "char" else f"j_int(args.a[{k}])"
            lines.append(f"{t.native} {v} = ({t.native}) ({read});")
        elif t.kind == "float":
            lines.append(f"{t.native} {v} = ({t.native}) j_num(args.a[{k}]);")
        elif t.kind == "bool":
            lines.append(f"bool {v} = args.a[{k}].i != 0;")
        elif t.kind == "str":
            lines.append(f"char *{v} = j_str(args.a[{k}]);")
        elif t.kind == "struct":
            lines.append(f"{t.native} {v}; memset(&{v}, 0, sizeof {v});")
            lines += [f"{v}.{name} = {_read_scalar(ft, f'args.a[{k}].a[{n}]')};"
                      for n, (name, ft) in enumerate(t.fields)]
            if p.by_pointer:
                v = f"&{v}"
        else:
            assert t.elem is not None
            e = t.elem.native
            conv = "j_num" if t.elem.kind == "float" else "j_int"  # a JSON bool reads as 0/1
            if p.capacity:  # no length parameter: the input's values at the front of a zeroed buffer
                lines.append(f"long long {v}_n = args.a[{k}].n < {p.capacity} ? args.a[{k}].n : {p.capacity}; "
                             f"{e} *{v} = calloc({p.capacity}, sizeof({e}));")
            else:
                lines.append(f"long long {v}_n = args.a[{k}].n; {e} *{v} = malloc(sizeof({e}) * ({v}_n + 1));")
                local[p.length] = f"{v}_n"
            lines.append(f"for (long long _k = 0; _k < {v}_n; _k++) {v}[_k] = ({e}) {conv}(args.a[{k}].a[_k]);")
        local[p.name] = v
    call_args = ", ".join(local[n] for n in sig.raw_params)
    if sig.returns.kind == "void":
        lines += [f"{sig.name}({call_args});", 'w("\\"return\\":null");']
    else:
        decl = "const char *" if sig.returns.kind == "str" else sig.returns.native
        lines += [f"{decl} r = {sig.name}({call_args});", 'w("\\"return\\":");', *_write(sig.returns, "r")]
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('w(",\\"args\\":{");')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'w("{"," if n else ""}\\"{p.name}\\":");')
            if p.type.kind == "str":
                lines.append(f"w_str(a{k});")
            elif p.type.kind == "struct":
                lines += _write(p.type, f"a{k}")
            else:
                assert p.type.elem is not None
                lines.append(f"W_ARRAY({_writer(p.type.elem)}, a{k}, {p.capacity or f'a{k}_n'});")
        lines.append('w("}");')
    return "\n  ".join(lines)


def _locate_gcc(driver: str) -> Callable[[], Tools | None]:
    def locate() -> Tools | None:
        exe = {"cc": which_real(driver), "sh": which_real("sh"), "nm": which_real("nm"),
               "objcopy": which_real("objcopy")}
        if not all(exe.values()):
            return None
        gcov = locate_gcov(exe["cc"])  # optional: without it the sample's coverage is unavailable
        return Tools({**exe, "gcov": gcov} if gcov else exe)  # type: ignore[dict-item,arg-type]
    return locate


_C_FLAGS = ["-std=gnu11", "-O1", "-fwrapv", "-w"]


def _c_build(tools: Tools, build: str) -> list[str]:
    return split_build(tools, build, "cc", "c", "TDBRGSVW", "-lm", _C_FLAGS)


LANGUAGE = Language("c", "gcc", "gcc", "main.c", parse_c, c_glue, _locate_gcc("gcc"), _c_build, native_run,
                    prepare=prepare_c, parse_in=parse_c_in, context=c_context,
                    coverage=gcov_coverage("c", "gcc", "function.c", "cc", "TDBRGSVW", "-lm", _C_FLAGS, prepare_c))
