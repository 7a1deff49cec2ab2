"""C++ signatures and call glue for the native harness (``calib/executors/native/harness/cpp/function.cpp``).

Supported parameters: the C scalars (``char`` is a character), ``const char *`` strings, ``std::string``
and ``std::vector<T>`` of those (also nested one level: ``std::vector<std::string>``), by value, by const
reference, or by non-const reference (then reported after the call). Other pointers are not supported.
The return value is written by the harness's ``w`` overloads (scalars, strings, vectors, pairs, optionals).
With x's file context (:mod:`.context`), its complete items (classes, helpers, constants, ``using`` lines)
are built before every variant; parameters and results still use the types above.
"""

from __future__ import annotations

import functools
import re
import subprocess

from calib.executors.native.c import scalar, split_head
from calib.executors.native.context import kept_items, line_wrapped
from calib.executors.native.coverage import gcov_coverage, locate_gcov
from calib.executors.native.language import HARNESS_ROOT, Language, Tools, native_run, split_build, which_real
from calib.executors.native.text import split_top
from calib.executors.native.types import Param, Signature, Type, Unsupported
from calib.executors.native.warm import Warm, digest

__all__ = ["LANGUAGE", "cpp_context", "cpp_glue", "parse_cpp"]


def _type(text: str) -> Type:
    t = re.sub(r"\s+", " ", text.replace("std::", "")).strip()
    t = re.sub(r"\s*([<>,])\s*", r"\1", t)
    if t == "string":
        return Type("str", native="std::string")
    m = re.fullmatch(r"vector<(.+)>", t)
    if m:
        elem = _type(m.group(1))
        if elem.kind == "list":
            raise Unsupported(text)
        return Type("list", elem=elem, native=f"std::vector<{elem.native}>")
    found = scalar(t, bool_names=("bool",))
    if found is None:
        raise Unsupported(text)
    return found


def parse_cpp(source: str) -> Signature:
    """The :class:`Signature` of the first function defined in ``source``."""
    ret, name, params_text = split_head(source, "cpp")
    if "::" in name or "template" in ret:
        raise Unsupported(f"{ret} {name}: templates and members")
    params = []
    for decl in split_top(params_text) if params_text not in ("", "void") else []:
        decl = re.sub(r"\s*=.*$", "", decl)  # a default value
        m = re.fullmatch(r"(.+?)([&*\s]+)([A-Za-z_]\w*)", decl.strip())
        if not m:
            raise Unsupported(f"parameter {decl!r}")
        typ, marks, pname = m.group(1), m.group(2), m.group(3)
        const = bool(re.search(r"\bconst\b", typ))
        if marks.count("*") == 1 and const and re.sub(r"\b(const|volatile)\b", " ", typ).split() == ["char"]:
            # a C string: read as a std::string, passed as its c_str() (not reported: it is const)
            params.append(Param(pname, Type("str", native="std::string"), by_pointer=True))
            continue
        if "*" in marks:
            raise Unsupported(f"{decl} (pointers)")
        t = _type(re.sub(r"\b(const|volatile)\b", " ", typ))
        params.append(Param(pname, t, mutable="&" in marks and not const))
    void = re.sub(r"\b(static|inline|constexpr)\b", " ", ret).strip() == "void"
    return Signature(name, tuple(params), Type("void" if void else "str", native=ret))


def cpp_context(context: str, sig: Signature) -> str:
    """The kept items of x's file context, numbered as ``context.cpp``'s lines (:mod:`.context`)."""
    template = (HARNESS_ROOT / "cpp" / "function.cpp").read_text(encoding="utf-8")
    first = template.split("/*@CALIB_FUNCTION@*/")[0].count("\n") + 1
    return line_wrapped(kept_items("cpp", context, sig.name), "context.cpp", "function.cpp", first)


def cpp_glue(sig: Signature) -> str:
    """The body of ``calib_call``: read the arguments, call, write the return value and references."""
    lines = [f"auto a{k} = rd<{p.type.native}>(args[{k}]);" for k, p in enumerate(sig.params)]
    call = f"{sig.name}({', '.join(f'a{k}.c_str()' if p.by_pointer else f'a{k}' for k, p in enumerate(sig.params))})"
    if sig.returns.kind == "void":
        lines += [f"{call};", 'o += "\\"return\\":null";']
    else:
        lines += [f"auto r = {call};", 'o += "\\"return\\":";', "w(o, r);"]
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('o += ",\\"args\\":{";')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o += "{"," if n else ""}\\"{p.name}\\":"; w(o, a{k});')
        lines.append('o += "}";')
    return "\n  ".join(lines)


def _locate_gxx() -> Tools | None:
    exe = {"cxx": which_real("g++"), "sh": which_real("sh"), "nm": which_real("nm"), "objcopy": which_real("objcopy")}
    if not all(exe.values()):
        return None
    gcov = locate_gcov(exe["cxx"])  # optional: without it the sample's coverage is unavailable
    return Tools({**exe, "gcov": gcov} if gcov else exe)  # type: ignore[dict-item,arg-type]


_CPP_FLAGS = ["-std=gnu++17", "-O1", "-fwrapv", "-w"]


def _cpp_build(tools: Tools, build: str) -> list[str]:
    # strong symbols only: weak ones (inline functions, template instances) are shared COMDAT code
    return split_build(tools, build, "cxx", "cpp", "TDBRGS", "", _CPP_FLAGS)


# The shared build directory (calib/executors/native/warm.py): <bits/stdc++.h> precompiled with the flags
# of the function's unit (pch/: normal; pch-cov/: x's coverage build) and the harness's objects.
_WARM = r"""set -e
cd "$1"; cc="$2"; header="$3"; shift 3
mkdir -p pch/bits pch-cov/bits
"$cc" "$@" -x c++-header "$header" -o pch/bits/stdc++.h.gch
"$cc" "$@" -O0 --coverage -x c++-header "$header" -o pch-cov/bits/stdc++.h.gch
ln -s "$header" pch/bits/stdc++.h  # a later #include of it (calib_io.hpp's) finds the header itself
ln -s "$header" pch-cov/bits/stdc++.h
"$cc" "$@" -c main.cpp -o harness.o
"$cc" "$@" -DCALIB_COVERAGE -c main.cpp -o harness-cov.o
"""


@functools.cache
def _toolchain(cxx: str) -> tuple[str, str]:
    """(g++'s version line, the path of the <bits/stdc++.h> it includes); ("", "") when it cannot say."""
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, check=False)
        found = subprocess.run([cxx, "-std=gnu++17", "-H", "-fsyntax-only", "-x", "c++", "-"], capture_output=True,
                               text=True, timeout=60, check=False, input="#include <bits/stdc++.h>\n")
    except (OSError, subprocess.SubprocessError):
        return "", ""
    first = found.stderr.splitlines()[0] if found.stderr else ""
    header = first[2:].strip() if first.startswith(". ") and first.endswith("stdc++.h") else ""
    return version.stdout.splitlines()[0] if version.stdout else "", header


def _harness_files() -> dict[str, str]:
    folder = HARNESS_ROOT / "cpp"
    return {"main.cpp": (folder / "harness.cpp").read_text(encoding="utf-8"),
            "calib_io.hpp": (folder / "calib_io.hpp").read_text(encoding="utf-8")}


def _warm_key(tools: Tools) -> str:
    version, header = _toolchain(tools.exe["cxx"])
    return digest(tools.exe["cxx"], version, header, *_CPP_FLAGS, *_harness_files().values())


def _warm_argv(tools: Tools, where: str) -> list[str]:
    header = _toolchain(tools.exe["cxx"])[1] or "/nonexistent/bits/stdc++.h"  # then making it fails: no cache
    return [tools.exe["sh"], "-c", _WARM, "calib-warm", where, tools.exe["cxx"], header, *_CPP_FLAGS]


LANGUAGE = Language("cpp", "g++", "g++", "main.cpp", parse_cpp, cpp_glue, _locate_gxx, _cpp_build, native_run,
                    build_memory=4 << 30, context=cpp_context, warm=Warm(_warm_key, _harness_files, _warm_argv),
                    coverage=gcov_coverage("cpp", "g++", "function.cpp", "cxx", "TDBRGS", "", _CPP_FLAGS,
                                           lambda source, sig: source))
