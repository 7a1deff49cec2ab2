"""Go signatures, x's file context and call glue for the native harness (``calib/executors/native/harness/go/``).

x is a function or a method (``func (s *Stack) Push(v int) int``). Its file's context (the rest of the
file: types, helpers, constants, variables, imports) goes into the build with every variant: what the
variant needs of it (:func:`calib.executors.native.go_source.needed`), the variant's own declarations
winning over the file's, and the imports it uses (:func:`prepare_go`). Parameters, results and receivers
are read and written by reflection in the harness: see :mod:`.go_types` for the supported types. Every
slice, struct, pointer and receiver is reported after the call (the function may change it). x's line
coverage: :mod:`.coverage_go`. Packages outside the standard library come from the system Go source tree
(GOPATH mode, ``/usr/share/gocode``): :mod:`.go_packages`.
"""

from __future__ import annotations

import os
import re

from calib.executors.native.coverage_go import GO_COVERAGE, GO_WARM, locate_cover
from calib.executors.native.go_packages import gocode, unbuildable
from calib.executors.native.go_source import Decl, blank, declarations, needed, package_refs
from calib.executors.native.go_types import GoSignature, go_type, shapes, type_table
from calib.executors.native.language import Language, Tools, native_run, which_real
from calib.executors.native.text import split_top
from calib.executors.native.types import Param, Type, Unsupported

__all__ = ["LANGUAGE", "STANDARD", "GoSignature", "go_cache", "go_glue", "parse_go", "prepare_go"]

#: Standard packages imported when a variant uses them without importing them (as goimports would), by the
#: name they are used by: (path, a member that keeps the import used even if a local variable shadows it).
STANDARD = {
    "fmt": ("fmt", "Sprint"), "sort": ("sort", "Ints"), "strings": ("strings", "Repeat"), "math": ("math", "Abs"),
    "strconv": ("strconv", "Itoa"), "utf8": ("unicode/utf8", "RuneLen"), "unicode": ("unicode", "IsLetter"),
    "utf16": ("unicode/utf16", "Encode"), "bytes": ("bytes", "Equal"), "errors": ("errors", "New"),
    "os": ("os", "Exit"), "syscall": ("syscall", "Getpid"), "bits": ("math/bits", "OnesCount"),
    "rand": ("math/rand", "Intn"), "cmplx": ("math/cmplx", "Abs"), "big": ("math/big", "NewInt"),
    "regexp": ("regexp", "MustCompile"), "time": ("time", "Now"), "bufio": ("bufio", "NewReader"),
    "io": ("io", "ReadAll"), "sync": ("sync", "NewCond"), "atomic": ("sync/atomic", "AddInt64"),
    "reflect": ("reflect", "TypeOf"), "json": ("encoding/json", "Marshal"), "hex": ("encoding/hex", "EncodeToString"),
    "binary": ("encoding/binary", "PutUvarint"), "base64": ("encoding/base64", "NewEncoding"),
    "heap": ("container/heap", "Init"), "list": ("container/list", "New"), "path": ("path", "Join"),
    "filepath": ("path/filepath", "Join"), "context": ("context", "Background"), "log": ("log", "Println"),
    "sha256": ("crypto/sha256", "Sum256"), "md5": ("crypto/md5", "Sum"),
}


def _head(code: str, start: int) -> tuple[str, int, str, str]:
    """(parameter list, offset after it, results text, type parameters) of the func declared at ``start``
    of blanked ``code``, after its name."""
    m = re.compile(r"\s*(\[[^\]]*\])?\s*\(").match(code, start)
    if not m:
        raise Unsupported("no parameter list after the function's name")
    depth, k = 1, m.end()
    while depth and k < len(code):
        depth += {"(": 1, ")": -1}.get(code[k], 0)
        k += 1
    body = code.find("{", k)
    return code[m.end():k - 1], k, code[k:body if body >= 0 else len(code)].strip(), m.group(1) or ""


def _params(text: str, types: dict[str, str]) -> list[tuple[str, str, Type]]:
    """(name, type as written, protocol type) of each parameter; ``a, b int`` groups share the type."""
    out: list[tuple[str, str, Type]] = []
    pending = ""
    for piece in reversed(split_top(text)):
        words = piece.split(None, 1)
        if len(words) == 2:
            pending = words[1].strip()
        elif not pending:
            raise Unsupported(f"parameter {piece!r}")
        spelled = pending
        if spelled.startswith("..."):
            t = go_type(spelled[3:], types)
            t = Type("list", elem=t, native="[]" + spelled[3:])
        else:
            t = go_type(spelled.lstrip("*") if spelled.startswith("*") and spelled.count("*") == 1 else spelled,
                        types)
        out.insert(0, (words[0], spelled, t))
    return out


def _func(decls: list[Decl]) -> Decl:
    for d in decls:
        if d.kind == "func" and d.names:
            return d
    raise Unsupported("no top-level func found")


def parse_go(source: str, context: str = "") -> GoSignature:
    """The :class:`GoSignature` of the first top-level ``func`` of ``source`` (a function or a method; no
    type parameters), with the types and declarations of x's file: ``context`` (the rest of the file,
    which may hold x too) and the other declarations of ``source``."""
    own = declarations(source)
    x = _func(own)
    around = [d for d in declarations(context) if d.kind != "package"] if context.strip() else []
    rest = [d for d in own if d is not x and d.kind != "package"]
    decls = [d for d in [*around, *rest] if d.kind != "import" and x.keys.isdisjoint(d.keys)]
    imports = tuple(i for d in [*around, *rest] if d.kind == "import" for i in d.imports)
    types = type_table([*around, *rest])
    code = blank(source)
    name = x.names[0]
    at = re.compile(r"func\s*(?:\([^()]*\))?\s*" + name).match(code, x.start)
    assert at is not None  # declarations() found it so
    params_text, _, result, generic = _head(code, at.end())
    if generic:
        raise Unsupported(f"generic func {name}{generic}")
    found = _params(params_text, types)
    recv = ""
    if x.recv_text:
        words = x.recv_text.split()
        spelled = words[-1]
        if "[" in spelled:
            raise Unsupported(f"generic type {spelled.lstrip('*')}")
        recv = spelled.lstrip("*")
        if recv not in types:
            raise Unsupported(f"receiver type {recv} is not declared in x's file (pass the file as context)")
        label = words[0] if len(words) == 2 and words[0] != "_" else "receiver"
        while label in {n for n, _, _ in found}:
            label += "_"
        found.insert(0, (label, spelled, go_type(recv, types)))
    params = tuple(Param(n, t, mutable=s.startswith("*") or t.kind in ("list", "struct") or k == 0 and bool(recv))
                   for k, (n, s, t) in enumerate(found))
    count = len(split_top(result[1:-1])) if result.startswith("(") else 1 if result else 0
    sig = GoSignature(name, params, Type("void" if count == 0 else "str", native=result), raw_params=(str(count),),
                      recv=recv, spelled=tuple(s for _, s, _ in found), decls=tuple(decls), imports=imports)
    for path in _imports_of(source, sig)[1]:
        why = unbuildable(path)
        if why:
            raise Unsupported(why)
    return sig


def _imports_of(function: str, sig: GoSignature) -> tuple[list[Decl], list[str], str, list[Decl]]:
    """For one variant: (the declarations of x's file it needs, the import paths it uses, the import line,
    its own declarations)."""
    own = declarations(function)
    code = blank(function)
    skip = frozenset(k for d in own if d.kind not in ("package", "import") for k in d.keys) | {sig.key}
    avoid = frozenset(i.name for i in sig.imports if unbuildable(i.path))
    kept = needed(list(sig.decls), frozenset(re.findall(r"[A-Za-z_]\w*", code)), skip, avoid)
    refs = set(package_refs(code)).union(*(d.pkgs for d in kept))
    declared = {n for d in [*own, *kept] if d.kind not in ("package", "import") and not d.recv for n in d.names}
    mine = [i for d in own if d.kind == "import" for i in d.imports]
    specs, uses, paths = [], [], []
    for i in [*mine, *sig.imports]:
        if i.name in ("_", ".") and not unbuildable(i.path) and f'{i.name} "{i.path}"' not in specs:
            specs.append(f'{i.name} "{i.path}"')
    for ref in sorted(refs - declared):
        spec = next((i for i in [*mine, *sig.imports] if i.name == ref), None)
        if spec is not None:
            specs.append(f'{ref} "{spec.path}"')
            paths.append(spec.path)
            if STANDARD.get(ref, ("",))[0] == spec.path:
                uses.append(f"var _ = {ref}.{STANDARD[ref][1]}")
        elif ref in STANDARD:
            path, member = STANDARD[ref]
            specs.append(f'{ref} "{path}"')
            uses.append(f"var _ = {ref}.{member}")
            paths.append(path)
    line = f"import ({'; '.join(specs)})" if specs else ""
    return kept, paths, "; ".join([line, *uses]) if line else "", own


def prepare_go(function: str, sig: GoSignature) -> str:
    """What goes into ``function.go`` after its ``package main`` line: one line of imports (those the variant
    and the declarations it needs use), the variant with its own ``package`` and ``import`` lines blanked
    (so x's lines keep their numbers: x starts on the file's third line), then the declarations of x's file
    it needs and does not declare itself."""
    kept, _, line, own = _imports_of(function, sig)
    text = list(function)
    for d in own:
        if d.kind in ("package", "import"):
            for k in range(d.start, d.start + len(d.text)):
                if text[k] != "\n":
                    text[k] = " "
    tail = "\n\n".join(d.text for d in kept)
    return f"{line}\n{''.join(text)}\n\n{tail}\n"


def go_glue(sig: GoSignature) -> str:
    """The body of ``calibCall``: build the arguments (and the receiver) from the input state, call, write
    the results and the state after the call of every slice, struct, pointer and receiver."""
    lines = []
    found = shapes(sig.params)
    if found:
        entries = ", ".join(f'"{t}": {{{", ".join(chr(34) + n + chr(34) for n in names)}}}'
                            for t, names in sorted(found.items()))
        lines.append(f"calibShape = map[string][]string{{{entries}}}")
    spelled = sig.spelled or tuple(p.type.native for p in sig.params)
    args = []
    for k, s in enumerate(spelled):
        if s.startswith("*"):
            lines += [f"a{k} := new({s[1:]})", f"calibIn(a{k}, calibArgs, {k})"]
        else:
            lines += [f"var a{k} {'[]' + s[3:] if s.startswith('...') else s}", f"calibIn(&a{k}, calibArgs, {k})"]
        args.append(f"a{k}..." if s.startswith("...") else f"a{k}")
    recv = bool(getattr(sig, "recv", ""))
    call = f"{'a0.' if recv else ''}{sig.name}({', '.join(args[1:] if recv else args)})"
    count = int(sig.raw_params[0])
    if count == 0:
        lines += [call, 'calibO.WriteString("\\"return\\":null")']
    else:
        results = [f"r{k}" for k in range(count)]
        lines.append(f"{', '.join(results)} := {call}")
        value = results[0] if count == 1 else f"[]any{{{', '.join(results)}}}"
        lines += ['calibO.WriteString("\\"return\\":")', f"calibW(calibO, {value})"]
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('calibO.WriteString(",\\"args\\":{")')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'calibO.WriteString("{"," if n else ""}\\"{p.name}\\":")')
            lines.append(f"calibW(calibO, a{k})")
        lines.append('calibO.WriteString("}")')
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
    # GOPATH mode: packages outside the standard library come from the system Go source tree (go_packages)
    system = gocode()
    gopath = f"/tmp/gopath:{system}" if system else "/tmp/gopath"
    env = (("GOCACHE", "/gocache"), ("GOPATH", gopath), ("HOME", "/tmp"), ("CGO_ENABLED", "0"),
           ("GOPROXY", "off"), ("GOFLAGS", "-mod=mod"), ("GO111MODULE", "off"), ("GOTOOLCHAIN", "local"))
    exe = {"go": go}
    cover = locate_cover(go)
    if cover:
        exe["cover"] = cover
    sh = which_real("sh")
    if sh:
        exe["sh"] = sh
    ro = (system,) if system and not system.startswith("/usr/") else ()  # /usr is bound already
    return Tools(exe, ro=ro, build_binds=((go_cache(), "/gocache", True),), build_env=env)


def _go_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["go"], "build", "-o", f"{build}/prog", f"{build}/main.go", f"{build}/function.go",
            f"{build}/nocover.go"]


LANGUAGE = Language("go", "go", "golang-go", "main.go", parse_go, go_glue, _locate_go, _go_build,
                    native_run, prepare=prepare_go, coverage=GO_COVERAGE, parse_in=parse_go,
                    warm=GO_WARM, build_memory=4 << 30, run_overhead=256 << 20)
