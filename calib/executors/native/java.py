"""Java signatures and call glue for the native harness (``calib/executors/native/harness/java/harness.java``).

The method (static or not) is placed in its class as x's file context gives it (:mod:`.java_context`: the
enclosing types and the members x uses), else in a class ``Target``. Supported parameters: ``int``, ``long``,
``short``, ``byte``, ``char``, ``double``, ``float``, ``boolean``, ``String`` and one-dimensional arrays
of those (every array is reported after the call: the method may change it). Return types: ``void``,
those types, and any object the harness's writer knows (boxed numbers, collections). An instance method
is called on an instance built from the input state (``new.<parameter>`` of the chosen constructor, or
``this.<field>``); its fields after the call are the output's ``"this"``. Each input runs in a class loader
of its own (the harness); line coverage comes from JaCoCo (:mod:`.coverage_java`). Library jars x's imports
need (:mod:`.java_jars`) are named on the source's first line; the build script (``JAVA_BUILD``) puts them on
javac's classpath and writes the run's (``calib.args``, which the run's command line names).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re

from calib.executors.native.coverage_java import ARGS, CLASSPATH, JAVA_BUILD, jacoco_coverage, template_line
from calib.executors.native.java_context import JavaContext, read_context, unoverride
from calib.executors.native.language import Language, Tools, which_real
from calib.executors.native.text import split_top, strip_comments
from calib.executors.native.types import Param, Signature, Type, Unsupported

__all__ = ["LANGUAGE", "java_context", "java_etc", "java_glue", "parse_java", "parse_java_in", "prepare_java"]

_PRIMS = {"int": Type("int", bits=32, native="int"), "long": Type("int", bits=64, native="long"),
          "short": Type("int", bits=16, native="short"), "byte": Type("int", bits=8, native="byte"),
          "char": Type("char", native="char"), "double": Type("float", native="double"),
          "float": Type("float", native="float"), "boolean": Type("bool", native="boolean"),
          "String": Type("str", native="String")}
_READ = {"int": "(int) CalibMain.i({})", "long": "CalibMain.i({})", "short": "(short) CalibMain.i({})",
         "byte": "(byte) CalibMain.i({})", "char": "CalibMain.c({})", "double": "CalibMain.d({})",
         "float": "(float) CalibMain.d({})", "boolean": "CalibMain.b({})", "String": "CalibMain.s({})"}
_READ_ARRAY = {"int": "ints", "long": "longs", "short": "shorts", "byte": "bytes", "char": "chars",
               "double": "doubles", "float": "floats", "boolean": "booleans", "String": "strings"}
_HEAD = re.compile(r"((?:(?:public|private|protected|static|final|synchronized|strictfp)\s+)*)"
                   r"(?:<[^>]*>\s*)?([\w\[\]<>?,. ]+?)\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*(?:throws\s+[\w.,\s]+)?\{")


_MODIFIERS = re.compile(r"^\s*(?:(?:public|private|protected|static|final|synchronized|strictfp|default|native)\s+)*")


#: Boxed types: read as their primitive (autoboxed), and the big numbers from a long or a double
_BOXED = {"Integer": "int", "Long": "long", "Short": "short", "Byte": "byte", "Character": "char",
          "Double": "double", "Float": "float", "Boolean": "boolean"}
_BIG = {"BigInteger": ("java.math.BigInteger.valueOf(CalibMain.i({}))", _PRIMS["long"]),
        "BigDecimal": ("java.math.BigDecimal.valueOf(CalibMain.d({}))", _PRIMS["double"])}
#: Collection parameters of boxed elements or strings: the class built (mutable, reported after the call)
_COLLECTIONS = {"List": "java.util.ArrayList", "ArrayList": "java.util.ArrayList", "Collection": "java.util.ArrayList",
                "Iterable": "java.util.ArrayList", "LinkedList": "java.util.LinkedList",
                "Set": "java.util.LinkedHashSet", "HashSet": "java.util.LinkedHashSet",
                "LinkedHashSet": "java.util.LinkedHashSet", "SortedSet": "java.util.TreeSet",
                "TreeSet": "java.util.TreeSet"}


#: Text parameters: a string read from the input state (``Object``: the method gets a ``String``);
#: the builders are built from it, may be changed by x and are reported after the call
_TEXT = {"CharSequence": "CalibMain.s({})", "Object": "CalibMain.s({})",
         "StringBuilder": "new StringBuilder(CalibMain.s({}))", "StringBuffer": "new StringBuffer(CalibMain.s({}))"}


def _param(name: str, typ: str) -> Param:
    typ = re.sub(r"\s+", "", typ).removeprefix("java.util.").removeprefix("java.math.").removeprefix("java.lang.")
    if typ.endswith("...") and "<" not in typ:  # varargs: an array of the element type
        typ = typ[:-3] + "[]"
    if typ in _TEXT:
        return Param(name, dataclasses.replace(_PRIMS["String"], native=typ), mutable=typ.startswith("StringBu"))
    coll = re.fullmatch(r"(\w+)<(\w+)>", typ)
    if coll and coll.group(1) in _COLLECTIONS:
        elem = "String" if coll.group(2) == "String" else _BOXED.get(coll.group(2))
        if elem is None:
            raise Unsupported(typ)
        return Param(name, Type("list", elem=_PRIMS[elem], native=f"{_COLLECTIONS[coll.group(1)]}<{coll.group(2)}>"),
                     mutable=True)
    if typ in _BIG:
        return Param(name, dataclasses.replace(_BIG[typ][1], native=typ))
    base = typ.removesuffix("[]")
    base = _BOXED.get(base, base) if typ == base else base
    if base not in _PRIMS or base.endswith("[]"):
        raise Unsupported(typ)
    if typ != base and typ.endswith("[]"):
        return Param(name, Type("list", elem=_PRIMS[base], native=typ), mutable=True)
    return Param(name, _PRIMS[base] if typ == base else dataclasses.replace(_PRIMS[base], native=typ))


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
        params.append(_param(words[1], words[0]))
    ret = _MODIFIERS.sub("", m.group(2)).strip()
    return Signature(m.group(3), tuple(params), Type("void" if ret == "void" else "str", native=ret))


def _plan(sig: Signature) -> dict[str, str]:
    """The Java entries of ``sig.preamble`` (:func:`parse_java_in`), with the defaults of x alone."""
    plan = {"imports": "", "opening": "class Target {\n", "depth": "1", "owner": "Target", "binary": "Target",
            "static": "", "arity": str(len(sig.params)), "shown": "", "jars": ""}
    plan.update(dict(sig.preamble))
    return plan


def _read(p: Param, src: str) -> str:
    if p.type.kind == "list":
        assert p.type.elem is not None
        array = f"CalibMain.{_READ_ARRAY[p.type.elem.native]}({src})"
        return array
    if p.type.native in _BIG:
        return _BIG[p.type.native][0].format(src)
    if p.type.native in _TEXT:
        return _TEXT[p.type.native].format(src)
    if p.type.native in _BOXED:
        return _READ[_BOXED[p.type.native]].format(src)
    return _READ[p.type.native].format(src)


def java_glue(sig: Signature) -> str:
    """The class ``CalibCall`` nested in x's class (its ``call`` reads the arguments, builds the instance,
    calls, writes the return value, the arrays and the instance's fields), the braces closing x's classes,
    and ``CalibEntry`` (CalibCall's binary name, a constant the harness's loader uses)."""
    plan = _plan(sig)
    arity = int(plan["arity"])
    lines = []
    for k, p in enumerate(sig.params):
        if "<" in p.type.native:  # a collection: filled from the array, boxed element by element
            lines.append(f"{p.type.native} a{k} = new {p.type.native.split('<')[0]}<>();")
            lines.append(f"for (var v : {_read(p, f'args.get({k})')}) a{k}.add(v);")
        else:
            lines.append(f"{p.type.native} a{k} = {_read(p, f'args.get({k})')};")
    call_args = ", ".join(f"a{k}" for k in range(arity))
    owner = plan["owner"]
    if plan["static"]:  # x alone: through an instance of Target, so an instance candidate compiles too
        call = f"{owner}.{sig.name}({call_args})" if plan["opening"] != "class Target {\n" else \
            f"new Target().{sig.name}({call_args})"
    else:
        ctor = ", ".join(f"a{k}" for k, p in enumerate(sig.params) if p.name.startswith("new."))
        lines.append(f"{owner} self = new {owner}({ctor});")
        lines += [f"self.{p.name[5:]} = a{k};" for k, p in enumerate(sig.params) if p.name.startswith("this.")]
        call = f"self.{sig.name}({call_args})"
    if sig.returns.kind == "void":
        lines += [f"{call};", 'o.append("\\"return\\":null");']
    else:
        lines += [f"{sig.returns.native} r = {call};", 'o.append("\\"return\\":");', "CalibMain.W.w(o, r);"]
    mutated = [(k, p) for k, p in enumerate(sig.params[:arity]) if p.mutable]
    if mutated:
        lines.append('o.append(",\\"args\\":{");')
        for n, (k, p) in enumerate(mutated):
            lines.append(f'o.append("{"," if n else ""}\\"{p.name}\\":"); CalibMain.W.w(o, (Object) a{k});')
        lines.append('o.append("}");')
    shown = [f for f in plan["shown"].split(",") if f]
    if shown and not plan["static"]:
        lines.append('o.append(",\\"this\\":{");')
        for n, f in enumerate(shown):
            lines.append(f'o.append("{"," if n else ""}\\"{f}\\":"); CalibMain.W.w(o, (Object) self.{f});')
        lines.append('o.append("}");')
    body = "\n            ".join(lines)
    closing = "}\n" * int(plan["depth"])
    return (f"    static final class CalibCall implements CalibMain.Call {{\n"
            f"        public void call(java.util.List<Object> args, StringBuilder o) throws Throwable {{\n"
            f"            {body}\n        }}\n    }}\n{closing}"
            f"final class CalibEntry {{ static final String CALL = \"{plan['binary']}$CalibCall\"; }}\n")


def prepare_java(source: str, sig: Signature) -> str:
    """x's class opened (from the file context: its enclosing types and the members x uses), then x."""
    return _plan(sig)["opening"] + unoverride(source)


def _head(plan: dict[str, str]) -> str:
    """What replaces the template's first line: the classpath line when x needs library jars, the imports."""
    return (f"{CLASSPATH}{plan['jars']}\n" if plan["jars"] else "") + plan["imports"]


def java_context(context: str, sig: Signature) -> str:
    """The file's first lines: the jars x needs (``// calib-classpath: a.jar:b.jar``, read by the build
    script: nothing of x's file can come before it) and the imports of x's file that compile."""
    return _head(_plan(sig))


def parse_java_in(source: str, context: str) -> Signature:
    """x's :class:`Signature` in its file ``context`` (:mod:`.java_context`): for an instance method, the
    chosen constructor's parameters (``new.<name>``) or the fields set from the state (``this.<name>``) are
    parameters too, after x's own; the build plan rides in ``preamble``."""
    sig = parse_java(source)
    head = _HEAD.search(strip_comments(source))
    words = head.group(1) + _MODIFIERS.match(head.group(2)).group() if head else ""  # type: ignore[union-attr]
    static = bool(re.search(r"\bstatic\b", words))
    try:
        ctx = read_context(context, source, static) if context.strip() else JavaContext()
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - a context the reader does not understand: one sample's reason
        raise Unsupported(f"file context not understood ({type(exc).__name__})") from None
    params = list(sig.params)
    for prefix, pairs in (("new.", ctx.ctor), ("this.", ctx.settable)):
        for typ, name in pairs:
            params.append(_param(f"{prefix}{name}", typ))
    plan = (("imports", ctx.imports), ("opening", ctx.opening), ("depth", str(ctx.depth)), ("owner", ctx.owner),
            ("binary", ctx.binary), ("static", "1" if static else ""), ("arity", str(len(sig.params))),
            ("shown", ",".join(ctx.shown)), ("jars", ":".join(ctx.jars)))
    return Signature(sig.name, tuple(params), sig.returns, preamble=plan)


def _x_start(sig: Signature) -> tuple[str, int]:
    plan = _plan(sig)
    return plan["binary"], template_line() + _head(plan).count("\n") + plan["opening"].count("\n")


_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=32m",
        "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=128m", "-XX:-UsePerfData",
        "-XX:ActiveProcessorCount=1")


_JAVAC = ["-J-Xmx384m", *(f"-J{flag}" for flag in _JVM if "Tiered" not in flag), "-proc:none", "-nowarn",
          "-encoding", "UTF-8"]


def _locate_java() -> Tools | None:
    java, javac, sh = which_real("java"), which_real("javac"), which_real("sh")
    if not java or not javac:
        return None
    exe = {"java": java, "javac": javac}
    if sh:  # for the coverage build (coverage_java.py)
        exe["sh"] = sh
    env = (("MALLOC_ARENA_MAX", "2"),)
    return Tools(exe, ro=java_etc(), build_env=env, run_env=env)


def _java_build(tools: Tools, build: str) -> list[str]:
    if "sh" not in tools.exe:  # no library jars then (x needing one does not compile)
        return [tools.exe["javac"], *_JAVAC, "-d", build, f"{build}/CalibMain.java"]
    return [tools.exe["sh"], "-c", JAVA_BUILD, "calib-build", build, tools.exe["javac"], *_JAVAC]


def _java_run(tools: Tools, build: str, memory_mb: int) -> list[str]:
    classpath = [f"@{build}/{ARGS}"] if "sh" in tools.exe else ["-cp", build]  # the build wrote calib.args
    return [tools.exe["java"], f"-Xmx{memory_mb}m", "-Xss16m", *_JVM, *classpath, "CalibMain"]


def java_etc() -> tuple[str, ...]:
    """``/etc/java-*`` directories (the JDK's ``conf`` links there on Debian)."""
    return tuple(sorted(os.path.realpath(p) for p in glob.glob("/etc/java-*") if os.path.isdir(p)))


LANGUAGE = Language("java", "javac", "openjdk-17-jdk-headless", "CalibMain.java", parse_java, java_glue, _locate_java,
                    _java_build, _java_run, prepare=prepare_java, coverage=jacoco_coverage(_JAVAC, _x_start),
                    each=False, parse_in=parse_java_in, context=java_context, build_memory=4 << 30,
                    run_overhead=2 << 30, startup=10.0)
