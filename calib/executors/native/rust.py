"""Rust signatures and call glue for the native harness (``calib/executors/native/harness/rust/harness.rs``).

Supported parameters: integers (``i8``-``i64``, ``u8``-``u64``, ``isize``, ``usize``), ``f32``/``f64``,
``bool``, ``char``, ``String``/``&str``/``&String``, and ``Vec<T>``/``&[T]``/``&Vec<T>`` of those;
``&mut`` ones (``&mut [T]``, ``&mut Vec<T>``, ``&mut String``, ``&mut i32`` ...) are reported after the
call. Return types: ``()`` and anything the harness's ``W`` trait writes (the types above, ``Option<T>``,
pairs). Generic functions are not supported.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from calib.executors.native.language import Language, Tools, native_run, which_real
from calib.executors.native.text import split_top, strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "parse_rust", "rust_glue", "rust_sysroot"]

_SCALARS = {f"{s}{b}": (b, s == "i") for s in "iu" for b in (8, 16, 32, 64)}
_SCALARS |= {"isize": (64, True), "usize": (64, False)}


def _type(text: str) -> tuple[Type, bool]:
    """(protocol type, passed as ``&mut``) of a Rust parameter type."""
    t = text.replace(" ", "")
    mutable = t.startswith("&mut")
    t = re.sub(r"^&(?:'\w+)?(?:mut)?", "", t)
    if t in _SCALARS:
        bits, signed = _SCALARS[t]
        return Type("int", bits=bits, signed=signed, native=t), mutable
    if t in ("f32", "f64"):
        return Type("float", native=t), mutable
    if t in ("bool", "char"):
        return Type(t, native=t), mutable
    if t in ("str", "String"):
        return Type("str", native="String"), mutable
    m = re.fullmatch(r"Vec<(.+)>|\[(.+)\]", t)
    if m:
        elem, _ = _type(m.group(1) or m.group(2))
        if elem.kind == "list":
            raise Unsupported(text)
        return Type("list", elem=elem, native=f"Vec<{elem.native}>"), mutable
    raise Unsupported(text)


def parse_rust(source: str) -> Signature:
    """The :class:`Signature` of the first ``fn`` in ``source``."""
    text = strip_comments(source)
    m = re.search(r"\bfn\s+([A-Za-z_]\w*)\s*(<[^>]*>)?\s*\(", text)
    if not m:
        raise Unsupported("no fn found")
    if m.group(2):
        raise Unsupported(f"generic fn {m.group(1)}{m.group(2)}")
    depth, k = 1, m.end()
    while depth and k < len(text):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        k += 1
    params_text = text[m.end():k - 1]
    rest = text[k:].split("{", 1)[0]
    ret = re.search(r"->\s*(.+?)\s*(?:where\b.*)?$", rest.strip(), flags=re.S)
    params = []
    for decl in split_top(params_text):
        if "self" in decl.split(":")[0]:
            raise Unsupported("methods (self)")
        name, _, typ = decl.partition(":")
        t, mutable = _type(typ)
        params.append(Param(name.replace("mut ", "").strip(), t, mutable=mutable))
    returns = Type("void", native="()") if not ret else Type("str", native=ret.group(1))  # written by trait W
    return Signature(m.group(1), tuple(params), returns, raw_params=tuple(split_top(params_text)))


def rust_glue(sig: Signature) -> str:
    """The body of ``calib_call``: read the arguments, call under ``catch_unwind``, write the results."""
    lines, call = [], []
    for k, (p, decl) in enumerate(zip(sig.params, sig.raw_params)):
        lines.append(f"let mut a{k}: {p.type.native} = FromJ::fj(&args[{k}]);")
        written = decl.partition(":")[2].replace(" ", "")
        if written.startswith("&mut"):
            call.append(f"&mut a{k}")
        elif written.startswith("&"):
            call.append(f"&a{k}")
        elif p.type.kind in ("str", "list"):
            call.append(f"a{k}.clone()")
        else:
            call.append(f"a{k}")
    lines.append(f"let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {sig.name}({', '.join(call)})));")
    lines.append('match res { Ok(r) => { o.push_str("\\"return\\":"); r.w(o); } '
                 'Err(_) => o.push_str("\\"panic\\":true"), }')
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('o.push_str(",\\"args\\":{");')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o.push_str("{"," if n else ""}\\"{p.name}\\":"); a{k}.w(o);')
        lines.append('o.push_str("}");')
    return "\n    ".join(lines)


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
    return Tools({"rustc": os.path.join(sysroot, "bin", "rustc"), "cc": cc}, ro=(sysroot,))


def _rust_build(tools: Tools, build: str) -> list[str]:
    # debug build: overflow checks on (an overflow panics, as in `cargo run`), quick to compile
    return [tools.exe["rustc"], "--edition", "2021", "-C", "opt-level=1", "-C", "overflow-checks=on",
            "-C", f"linker={tools.exe['cc']}", "-C", "debuginfo=0", "-A", "warnings", "-o", f"{build}/prog",
            f"{build}/main.rs"]


LANGUAGE = Language("rust", "rustc", "rustc (or rustup)", "main.rs", parse_rust, rust_glue, _locate_rust, _rust_build,
                    native_run, build_memory=8 << 30)
