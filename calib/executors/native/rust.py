"""Rust signatures and call glue for the native harness (``calib/executors/native/harness/rust/harness.rs``).

Supported parameters: integers (``i8``-``i64``, ``u8``-``u64``, ``isize``, ``usize``), ``f32``/``f64``,
``bool``, ``char``, ``String``/``&str``/``&String``, ``Vec<T>``/``&[T]``/``&Vec<T>`` of those, and structs
of x's file context whose fields are of those types or such structs (a JSON object); ``&mut`` ones
(``&mut [T]``, ``&mut Vec<T>``, ``&mut String``, ``&mut i32``, ``&mut S`` ...) are reported after the
call. Methods: x may be a method of a struct of its context (``&self``, ``&mut self``, ``self``; the
receiver is the parameter ``self``, reported after the call when ``&mut``), or an associated function
(``T::name(...)``). Return types: ``()`` and anything the harness's ``CalibW`` trait writes (the types
above, ``Option<T>``, pairs, the context's structs). Generic functions, enums and trait impls' methods are
not supported (``unsupported: ...``); external crates are built from the system's Cargo registry
(:mod:`.rust_crates`) or refused. What of the context is built: :mod:`.rust_context`; line coverage:
:mod:`.coverage_rust`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from calib.executors.native.coverage_rust import locate_llvm, rust_coverage
from calib.executors.native.language import Language, Tools, native_run, which_real
from calib.executors.native.rust_context import external_crates, mask, parse_context, std_modules, structs_of
from calib.executors.native.rust_crates import crates_of, prepare_crates, resolve
from calib.executors.native.text import split_top, strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "parse_rust", "parse_rust_in", "prepare_rust", "rust_context", "rust_glue", "rust_sysroot"]

_SCALARS = {f"{s}{b}": (b, s == "i") for s in "iu" for b in (8, 16, 32, 64)}
_SCALARS |= {"isize": (64, True), "usize": (64, False)}


class _Rust:
    """What x's signature needs from its file: the structs (by name: their type, or why unsupported) and
    the type of the impl x is a method of (``""``: a free function)."""

    def __init__(self, structs: dict[str, tuple[list[tuple[str, str]], bool] | str], self_type: str) -> None:
        self.defs, self.self_type, self.cache = structs, self_type, {}  # type: ignore[var-annotated]

    def struct(self, name: str, stack: tuple[str, ...] = ()) -> Type:
        if name in self.cache:
            return self.cache[name]
        got = self.defs[name]
        if isinstance(got, str):
            raise Unsupported(got)
        if name in stack:
            raise Unsupported(f"recursive struct {name}")
        fields = []
        for fname, ftext in got[0]:
            try:
                if ftext.replace(" ", "").startswith("&"):
                    raise Unsupported(ftext)
                ft, _ = self.type(ftext, (*stack, name))
                if ft.kind == "list" and ft.elem is not None and ft.elem.kind == "struct":
                    raise Unsupported(ftext)
            except Unsupported:
                raise Unsupported(f"{name} (field {fname}: {ftext})") from None
            fields.append((fname, ft))
        self.cache[name] = Type("struct", native=name, fields=tuple(fields))
        return self.cache[name]

    def type(self, text: str, stack: tuple[str, ...] = ()) -> tuple[Type, bool]:
        """(protocol type, passed as ``&mut``) of a Rust parameter type."""
        t = text.replace(" ", "")
        mutable = t.startswith("&mut")
        t = re.sub(r"^&(?:'\w+)?(?:mut)?", "", t)
        if t == "Self" and self.self_type:
            t = self.self_type
        if t in _SCALARS:
            bits, signed = _SCALARS[t]
            return Type("int", bits=bits, signed=signed, native=t), mutable
        if t in ("f32", "f64"):
            return Type("float", native=t), mutable
        if t in ("bool", "char"):
            return Type(t, native=t), mutable
        if t in ("str", "String"):
            return Type("str", native="String"), mutable
        if t in self.defs:
            return self.struct(t, stack), mutable
        m = re.fullmatch(r"Vec<(.+)>|\[(.+)\]", t)
        if m:
            elem, _ = self.type(m.group(1) or m.group(2), stack)
            if elem.kind in ("list", "struct"):
                raise Unsupported(text.strip())
            return Type("list", elem=elem, native=f"Vec<{elem.native}>"), mutable
        raise Unsupported(text.strip())


def _type(text: str) -> tuple[Type, bool]:
    return _Rust({}, "").type(text)


_RECEIVER = re.compile(r"^(&\s*(?:'\w+\s*)?(mut\s+)?)?(mut\s+)?self\b")


def _impl_of(source: str) -> tuple[str, str]:
    """(the type of an inherent ``impl T {`` x's source itself is written in, or ""; the head of a generic
    or trait impl it is written in, which is unsupported, or "")."""
    m = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(?:unsafe\s+)?impl\s*(<[^{]*>)?\s*([^{]*)\{", mask(source))
    if not m:
        return "", ""
    head = " ".join(m.group(2).split())
    if m.group(1) or " for " in f" {head} " or not re.fullmatch(r"[A-Za-z_]\w*", head):
        return "", f"impl{m.group(1) or ''} {head}".strip()
    return head, ""


def _receiver(decl: str) -> str:
    """How a method takes ``self``: ``&mut``, ``&`` or ``move``; "" when ``decl`` is not the receiver."""
    m = _RECEIVER.match(decl.strip())
    if not m:
        return ""
    typed = decl.partition(":")[2].replace(" ", "")
    if typed:
        kinds = {"Self": "move", "&Self": "&", "&mutSelf": "&mut"}
        if typed not in kinds:
            raise Unsupported(f"receiver {decl.strip()}")
        return kinds[typed]
    return "&mut" if m.group(2) else "&" if m.group(1) else "move"


def parse_rust_in(source: str, context: str) -> Signature:
    """The :class:`Signature` of x (the first ``fn`` in ``source``) with its file's ``context``: struct
    parameters and results, a method's receiver (the parameter ``self``), external crates refused."""
    text = strip_comments(source)
    # generics with one level of brackets inside (`<T: AsRef<[u8]>>`)
    m = re.search(r"\bfn\s+([A-Za-z_]\w*)\s*(<(?:[^<>]|<[^<>]*>)*>)?\s*\(", text)
    if not m:
        raise Unsupported("no fn found")
    if m.group(2) and not re.fullmatch(r"<\s*'\w+(\s*,\s*'\w+)*\s*,?\s*>", m.group(2)):
        raise Unsupported(f"generic fn {m.group(1)}{m.group(2)}")
    if m.group(2):  # lifetimes only (`fn lines<'a>(s: &'a str)`): the call infers them; read the types without
        text = text[:m.start(2)] + re.sub(r"'\w+\s*(?=[\w\[(&])|\+\s*'\w+|'\w+\s*,?\s*(?=>)", "", text[m.end(2):])
        m = re.search(r"\bfn\s+([A-Za-z_]\w*)\s*\(", text)
        assert m is not None
    available: frozenset[str] = frozenset()
    while True:  # the crates x needs, and then those the context's items it needs use (rust_crates.py)
        ctx = parse_context(context, m.group(1), available)
        crates = external_crates(source, ctx.crates, ctx.known | available)
        if not crates:
            break
        plan = resolve([*available, *crates])
        if isinstance(plan, str):
            raise Unsupported(plan)
        available |= crates
    self_type, other = _impl_of(source)
    if other:
        raise Unsupported(f"method of {other}")
    if not self_type and ctx.open_impl:
        if ctx.open_trait:
            raise Unsupported(f"method of a trait impl for {ctx.open_impl}")
        self_type = ctx.open_impl
    if not self_type:
        self_type = next((i.name for i in parse_context(context, "", available).items if i.kind == "impl" and
                          not i.name.startswith("for ") and re.search(rf"\bfn\s+{m.group(1)}\b", mask(i.text))), "")
    rust = _Rust(structs_of(ctx.items), self_type)
    depth, k = 1, m.end()
    while depth and k < len(text):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        k += 1
    params_text = text[m.end():k - 1]
    rest = text[k:].split("{", 1)[0]
    ret = re.search(r"->\s*(.+?)\s*(?:where\b.*)?$", rest.strip(), flags=re.S)
    params, raw = [], []
    for decl in split_top(params_text):
        kind = _receiver(decl)
        if kind:
            if not self_type:
                raise Unsupported("method (self) without its impl in the context")
            if self_type not in rust.defs:
                raise Unsupported(f"receiver {self_type} (not a struct of the context)")
            params.append(Param("self", rust.struct(self_type), mutable=kind == "&mut"))
            raw.append(f"self: {kind}")
            continue
        name, _, typ = decl.partition(":")
        t, mutable = rust.type(typ)
        params.append(Param(name.replace("mut ", "").strip(), t, mutable=mutable))
        raw.append(decl)
    if ret:
        words = set(re.findall(r"\w+", ret.group(1).replace("Self", self_type or "Self")))
        for word in sorted(words & set(rust.defs)):
            try:
                rust.struct(word)
            except Unsupported as exc:
                raise Unsupported(f"return type {ret.group(1)} ({exc})") from None
    returns = Type("void", native="()") if not ret else Type("str", native=ret.group(1))  # written by CalibW
    crates_used = tuple(("crate", c) for c in sorted(available))  # rust_crates.prepare_crates builds them
    # std modules reached by a path the context does not import (its `use std::fmt;` cut off): rust_context imports them
    std = tuple(("std", name) for name in std_modules([source, *(i.text for i in ctx.items)], ctx.known | available))
    return Signature(m.group(1), tuple(params), returns, raw_params=tuple(raw),
                     preamble=((("impl", self_type),) if self_type else ()) + crates_used + std)


def parse_rust(source: str) -> Signature:
    """The :class:`Signature` of the first ``fn`` in ``source`` (no file context)."""
    return parse_rust_in(source, "")


def rust_glue(sig: Signature) -> str:
    """The body of ``calib_call``: read the arguments, call under ``catch_unwind``, write the results."""
    lines, call = [], []
    owner = dict(sig.preamble).get("impl", "")
    for k, (p, decl) in enumerate(zip(sig.params, sig.raw_params)):
        lines.append(f"let mut a{k}: {p.type.native} = CalibFromJ::fj(&args[{k}]);")
        written = decl.partition(":")[2].replace(" ", "")
        if written.startswith("&mut"):
            call.append(f"&mut a{k}")
        elif written.startswith("&"):
            call.append(f"&a{k}")
        elif p.type.kind in ("str", "list"):
            call.append(f"a{k}.clone()")
        else:
            call.append(f"a{k}")
    callee = f"{owner}::{sig.name}" if owner else sig.name
    lines.append("let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| "
                 f"{callee}({', '.join(call)})));")
    lines.append('match res { Ok(r) => { o.push_str("\\"return\\":"); CalibW::w(&r, o); } '
                 'Err(_) => o.push_str("\\"panic\\":true"), }')
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('o.push_str(",\\"args\\":{");')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o.push_str("{"," if n else ""}\\"{p.name}\\":"); CalibW::w(&a{k}, o);')
        lines.append('o.push_str("}");')
    return "\n    ".join(lines)


def _struct_impls(name: str, t: Type, tuple_struct: bool) -> str:
    """``CalibFromJ`` (from the array of its fields) and ``CalibW`` (a JSON object) for one struct."""
    reads = [f"CalibFromJ::fj(a.get({k}).unwrap_or(&CALIB_NULL))" for k in range(len(t.fields))]
    if not t.fields:
        build = f"{name} {{}}"
    elif tuple_struct:
        build = f"{name}({', '.join(reads)})"
    else:
        build = f"{name} {{ {', '.join(f'{f}: {r}' for (f, _), r in zip(t.fields, reads))} }}"
    writes = "".join(f'o.push_str("{"{" if k == 0 else ","}\\"{f}\\":"); CalibW::w(&self.{f}, o); '
                     for k, (f, _) in enumerate(t.fields)) or 'o.push_str("{");'
    return (f"impl CalibFromJ for {name} {{ fn fj(j: &CalibJ) -> Self {{ let a: &[CalibJ] = "
            f"if let CalibJ::Arr(v) = j {{ v }} else {{ &[] }}; {build} }} }}\n"
            f"impl CalibW for {name} {{ fn w(&self, o: &mut String) {{ "
            f"{writes} o.push('}}'); }} }}")


def rust_context(context: str, sig: Signature) -> str:
    """What of x's file goes into the build (:mod:`.rust_context`), and the harness's reader and writer for
    each of its structs whose fields it can read and write."""
    ctx = parse_context(context, sig.name, frozenset(crates_of(sig)))
    defs = structs_of(ctx.items)
    rust = _Rust(defs, "")
    out = [f"use std::{name};" for key, name in sig.preamble if key == "std"] + [item.text for item in ctx.items]
    for name, got in defs.items():
        try:
            t = rust.struct(name)
        except Unsupported:
            continue
        out.append(_struct_impls(name, t, not isinstance(got, str) and got[1]))
    return "\n".join(out)


def prepare_rust(source: str, sig: Signature) -> str:
    """A method's source inside ``impl T { ... }`` (on its first line: x keeps its line numbers), unless
    it is written in one."""
    owner = dict(sig.preamble).get("impl", "")
    if not owner or any(_impl_of(source)):
        return source
    return f"impl {owner} {{ {source}\n}}"


def rust_sysroot(rustc: str) -> str | None:
    try:
        out = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out.stdout.strip()) or None


def _locate_rust() -> Tools | None:
    # the rustup proxy (not resolved: it dispatches on its name) only to find the sysroot's real rustc
    rustc = shutil.which("rustc") or shutil.which("rustc", path=os.path.expanduser("~/.cargo/bin"))
    cc = which_real("cc")
    if not rustc or not cc:
        return None
    sysroot = rust_sysroot(rustc)
    if sysroot is None:
        return None
    real = os.path.join(sysroot, "bin", "rustc")
    llvm, ro = locate_llvm(real, sysroot)  # optional: without them x's coverage is unavailable
    return Tools({"rustc": real, "cc": cc, **llvm}, ro=(sysroot, *ro))


def _rust_build(tools: Tools, build: str, *, coverage: bool = False) -> list[str]:
    # debug build: overflow checks on (an overflow panics, as in `cargo run`), quick to compile; x's coverage
    # build at opt-level 0, instrumented, its harness writing the counts (coverage_rust.py)
    extra = ["-C", "instrument-coverage", "-C", "llvm-args=-enable-name-compression=false", "--cfg",
             "calib_coverage"] if coverage else []
    return [tools.exe["rustc"], "--edition", "2021", "-C", f"opt-level={0 if coverage else 1}",
            "-C", "overflow-checks=on", *extra,
            "-C", f"linker={tools.exe['cc']}", "-C", "debuginfo=0", "-A", "warnings", *tools.build_args,
            "-o", f"{build}/prog", f"{build}/main.rs"]


LANGUAGE = Language("rust", "rustc", "rustc (or rustup)", "main.rs", parse_rust, rust_glue, _locate_rust, _rust_build,
                    native_run, build_memory=8 << 30, prepare=prepare_rust, coverage=rust_coverage(_rust_build),
                    parse_in=parse_rust_in, context=rust_context, prepare_build=prepare_crates)
