"""Java signatures and call glue for the native harness (``calib/executors/native/harness/java/harness.java``).

The method (static or not) is placed in a class ``Target``. Supported parameters: ``int``, ``long``,
``short``, ``byte``, ``char``, ``double``, ``float``, ``boolean``, ``String`` and one-dimensional arrays
of those (every array is reported after the call: the method may change it). Return types: ``void``,
those types, and any object the harness's writer knows (boxed numbers, collections).
"""

from __future__ import annotations

import glob
import os
import re

from calib.executors.native.language import Language, Tools, which_real
from calib.executors.native.text import split_top, strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "java_etc", "java_glue", "parse_java"]

_PRIMS = {"int": Type("int", bits=32, native="int"), "long": Type("int", bits=64, native="long"),
          "short": Type("int", bits=16, native="short"), "byte": Type("int", bits=8, native="byte"),
          "char": Type("char", native="char"), "double": Type("float", native="double"),
          "float": Type("float", native="float"), "boolean": Type("bool", native="boolean"),
          "String": Type("str", native="String")}
_READ = {"int": "(int) i({})", "long": "i({})", "short": "(short) i({})", "byte": "(byte) i({})", "char": "c({})",
         "double": "d({})", "float": "(float) d({})", "boolean": "b({})", "String": "s({})"}
_READ_ARRAY = {"int": "ints", "long": "longs", "short": "shorts", "byte": "bytes", "char": "chars",
               "double": "doubles", "float": "floats", "boolean": "booleans", "String": "strings"}
_HEAD = re.compile(r"((?:(?:public|private|protected|static|final|synchronized|strictfp)\s+)*)"
                   r"(?:<[^>]*>\s*)?([\w\[\]<>?,. ]+?)\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*(?:throws\s+[\w.,\s]+)?\{")


def parse_java(source: str) -> Signature:
    """The :class:`Signature` of the first method in ``source``."""
    m = _HEAD.search(strip_comments(source))
    if not m:
        raise Unsupported("no method definition found")
    params = []
    for decl in split_top(m.group(4)):
        words = [w for w in decl.replace("final ", " ").split() if not w.startswith("@")]
        if len(words) != 2:
            raise Unsupported(f"parameter {decl!r}")
        typ, name = words
        base = typ.removesuffix("[]")
        if base not in _PRIMS or base.endswith("[]"):
            raise Unsupported(typ)
        t = _PRIMS[base]
        if typ != base:
            params.append(Param(name, Type("list", elem=t, native=typ), mutable=True))
        else:
            params.append(Param(name, t))
    ret = m.group(2).strip()
    return Signature(m.group(3), tuple(params), Type("void" if ret == "void" else "str", native=ret))


def java_glue(sig: Signature) -> str:
    """The body of ``Main.call``: read the arguments, call, write the return value and the arrays."""
    lines = []
    for k, p in enumerate(sig.params):
        src = f"args.get({k})"
        if p.type.kind == "list":
            assert p.type.elem is not None
            lines.append(f"{p.type.native} a{k} = {_READ_ARRAY[p.type.elem.native]}({src});")
        else:
            lines.append(f"{p.type.native} a{k} = {_READ[p.type.native].format(src)};")
    call = f"new Target().{sig.name}({', '.join(f'a{k}' for k in range(len(sig.params)))})"
    if sig.returns.kind == "void":
        lines += [f"{call};", 'o.append("\\"return\\":null");']
    else:
        lines += [f"{sig.returns.native} r = {call};", 'o.append("\\"return\\":");', "W.w(o, r);"]
    mutated = [(k, p) for k, p in enumerate(sig.params) if p.mutable]
    if mutated:
        lines.append('o.append(",\\"args\\":{");')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o.append("{"," if n else ""}\\"{p.name}\\":"); W.w(o, (Object) a{k});')
        lines.append('o.append("}");')
    return "\n        ".join(lines)


_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=32m",
        "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=128m", "-XX:-UsePerfData",
        "-XX:ActiveProcessorCount=1")


def _locate_java() -> Tools | None:
    java, javac = which_real("java"), which_real("javac")
    if not java or not javac:
        return None
    env = (("MALLOC_ARENA_MAX", "2"),)
    return Tools({"java": java, "javac": javac}, ro=java_etc(), build_env=env, run_env=env)


def _java_build(tools: Tools, build: str) -> list[str]:
    return [tools.exe["javac"], "-J-Xmx384m", *(f"-J{flag}" for flag in _JVM if "Tiered" not in flag), "-proc:none",
            "-nowarn", "-encoding", "UTF-8", "-d", build, f"{build}/Main.java"]


def _java_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    return [tools.exe["java"], f"-Xmx{memory_mb}m", "-Xss16m", *_JVM, "-cp", build, "Main"]


def java_etc() -> tuple[str, ...]:
    """``/etc/java-*`` directories (the JDK's ``conf`` links there on Debian)."""
    return tuple(sorted(os.path.realpath(p) for p in glob.glob("/etc/java-*") if os.path.isdir(p)))


LANGUAGE = Language("java", "javac", "openjdk-17-jdk-headless", "Main.java", parse_java, java_glue, _locate_java,
                    _java_build, _java_run, build_memory=4 << 30, run_overhead=2 << 30, startup=10.0,
                    each=False)
