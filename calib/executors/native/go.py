"""Go signatures and call glue for the native harness (``calib/executors/native/harness/go/harness.go``).

Supported parameters: ``int``/``int8``-``int64``, ``uint``/``uint8``-``uint64``/``byte``, ``rune`` (a
character), ``float32``/``float64``, ``bool``, ``string`` and slices ``[]T`` of those (every slice is
reported after the call: the function may change its elements). Results: none, one, or several (then
``return`` is the list of them); the harness writes any value via reflection.
"""

from __future__ import annotations

import os
import re

from calib.executors.native.language import Language, Tools, native_run, which_real
from calib.executors.native.text import split_top, strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "go_cache", "go_glue", "parse_go"]

_INTS = {"int": (64, True), "int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True),
         "uint": (64, False), "uint8": (8, False), "byte": (8, False), "uint16": (16, False),
         "uint32": (32, False), "uint64": (64, False)}


def _type(text: str) -> Type:
    t = text.strip()
    if t in _INTS:
        bits, signed = _INTS[t]
        return Type("int", bits=bits, signed=signed, native=t)
    if t in ("float32", "float64"):
        return Type("float", native=t)
    if t == "bool":
        return Type("bool", native=t)
    if t == "string":
        return Type("str", native=t)
    if t == "rune":
        return Type("char", native=t)
    if t.startswith("[]"):
        elem = _type(t[2:])
        if elem.kind == "list":
            raise Unsupported(text)
        return Type("list", elem=elem, native=t)
    raise Unsupported(text)


def parse_go(source: str) -> Signature:
    """The :class:`Signature` of the first top-level ``func`` in ``source`` (no receiver, no type
    parameters); ``raw_params`` holds the number of results as its only item."""
    text = strip_comments(source)
    m = re.search(r"\bfunc\s+([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*\(", text)
    if not m:
        raise Unsupported("no top-level func found (methods with a receiver are not supported)")
    if m.group(2):
        raise Unsupported(f"generic func {m.group(1)}{m.group(2)}")
    depth, k = 1, m.end()
    while depth and k < len(text):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        k += 1
    pieces = split_top(text[m.end():k - 1])
    params: list[Param] = []
    pending_type = ""
    for piece in reversed(pieces):  # `a, b int`: a name without a type takes the next one's
        words = piece.split(None, 1)
        if len(words) == 2:
            pending_type = words[1]
        elif not pending_type:
            raise Unsupported(f"parameter {piece!r}")
        t = _type(pending_type)
        params.insert(0, Param(words[0], t, mutable=t.kind == "list"))
    result = text[k:].split("{", 1)[0].strip()
    if result.startswith("("):
        count = len(split_top(result[1:-1]))
    else:
        count = 1 if result else 0
    return Signature(m.group(1), tuple(params), Type("void" if count == 0 else "str", native=result),
                     raw_params=(str(count),))


def _read(t: Type, src: str) -> str:
    if t.kind == "int":
        return f"{t.native}({'jInt' if t.signed else 'jUint'}({src}))"
    return {"float": f"{t.native}(jNum({src}))", "bool": f"jBool({src})", "str": f"jStr({src})",
            "char": f"jRune({src})"}[t.kind]


def go_glue(sig: Signature) -> str:
    """The body of ``call``: read the arguments, call, write the results and the slices."""
    lines = []
    for k, p in enumerate(sig.params):
        t = p.type
        if t.kind == "list":
            assert t.elem is not None
            lines.append(f"src{k} := jArr(args[{k}])")
            lines.append(f"a{k} := make({t.native}, len(src{k}))")
            lines.append(f"for k, e := range src{k} {{ a{k}[k] = {_read(t.elem, 'e')} }}")
        else:
            lines.append(f"a{k} := {_read(t, f'args[{k}]')}")
    call = f"{sig.name}({', '.join(f'a{k}' for k in range(len(sig.params)))})"
    count = int(sig.raw_params[0])
    if count == 0:
        lines += [call, 'o.WriteString("\\"return\\":null")']
    else:
        results = [f"r{k}" for k in range(count)]
        lines.append(f"{', '.join(results)} := {call}")
        value = results[0] if count == 1 else f"[]any{{{', '.join(results)}}}"
        lines += ['o.WriteString("\\"return\\":")', f"w(o, {value})"]
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('o.WriteString(",\\"args\\":{")')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o.WriteString("{"," if n else ""}\\"{p.name}\\":")')
            lines.append(f"w(o, a{k})")
        lines.append('o.WriteString("}")')
    return "\n\t".join(lines)


def go_cache() -> str:
    """The host directory of Go's build cache (the standard library is compiled into it once)."""
    path = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "calib", "go-build")
    os.makedirs(path, exist_ok=True)
    return path


def _locate_go() -> Tools | None:
    go = which_real("go")
    if not go:
        return None
    env = (("GOCACHE", "/gocache"), ("GOPATH", "/tmp/gopath"), ("HOME", "/tmp"), ("CGO_ENABLED", "0"),
           ("GOPROXY", "off"), ("GOFLAGS", "-mod=mod"), ("GO111MODULE", "off"), ("GOTOOLCHAIN", "local"))
    return Tools({"go": go}, build_binds=((go_cache(), "/gocache", True),), build_env=env)


def _go_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["go"], "build", "-o", f"{build}/prog", f"{build}/main.go"]


LANGUAGE = Language("go", "go", "golang-go", "main.go", parse_go, go_glue, _locate_go, _go_build, native_run,
                    build_memory=4 << 30, run_overhead=256 << 20)
