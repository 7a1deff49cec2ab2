"""Line coverage of x in Java: JaCoCo (Debian's ``libjacoco-java``, ``libasm-java``), through the
:class:`~calib.executors.native.language.Coverage` kit (docs/native-executors.md, "Java").

1. x's coverage build is its normal build (``CalibMain.java``) plus, in the same build directory, the agent
   (``jacocoagent.jar``, taken out of ``org.jacoco.agent.jar``) and calib's report program
   (``harness/java/CalibJacoco.java``, compiled against ``org.jacoco.core`` and ASM into ``report/``);
2. it runs like any run, with ``JAVA_TOOL_OPTIONS=-javaagent:...=output=none`` (the agent instruments every
   class x's per-input class loaders define: they share the probes of a class id) and ``CALIB_COVERAGE=1``:
   after each input the harness takes that input's execution data from the agent (and resets it) into the
   record (``"cov"``);
3. the report program reads the copies and the build's class files **in the build sandbox** and prints
   every method's lines (JSON), under all copies merged and under each copy alone; :func:`read_jacoco` keeps
   x's own: the methods of x's class and its nested classes (lambdas, anonymous classes) whose lines lie
   within x's method, as the template places it; :func:`read_jacoco_each` gives the lines each copy (each
   input) reached, with which the inputs are chosen (``per_copy``: docs/native-executors.md, "Choosing
   inputs").
"""

from __future__ import annotations

import json
import os
from typing import Any

from calib.executors.native.coverage import REPORT_BYTES, LineCoverage
from calib.executors.native.language import HARNESS_ROOT, Coverage, Tools
from calib.executors.native.types import Signature
from calib.executors.sandbox.types import base_interpreter

__all__ = ["ARGS", "CLASSPATH", "JACOCO", "JACOCO_JARS", "JAVA_BUILD", "jacoco_coverage", "missing_jacoco",
           "read_jacoco", "read_jacoco_each", "template_line", "x_lines"]

#: What the kit needs from Debian's packages (libjacoco-java 0.8.6, libasm-java 9.4).
JACOCO_JARS = {"agent": "/usr/share/java/org.jacoco.agent.jar", "core": "/usr/share/java/org.jacoco.core.jar",
               "asm": "/usr/share/java/asm.jar", "asm-commons": "/usr/share/java/asm-commons.jar",
               "asm-tree": "/usr/share/java/asm-tree.jar"}
JACOCO = "JaCoCo is not installed (apt-get install libjacoco-java libasm-java)"
_JVM_SMALL = ("-XX:+UseSerialGC", "-XX:ReservedCodeCacheSize=32m", "-XX:CompressedClassSpaceSize=64m",
              "-XX:MaxMetaspaceSize=128m", "-XX:-UsePerfData", "-XX:ActiveProcessorCount=1")

#: The first line of ``CalibMain.java`` when x needs library jars (:mod:`.java_context`, :mod:`.java_jars`):
#: this, then their real paths joined by ``:``. calib writes it before anything of x's file.
CLASSPATH = "// calib-classpath: "
#: The java launcher's argument file every build writes next to the classes: ``-cp`` with the build directory
#: and the jars (the run's command line names it: ``java ... @<build>/calib.args CalibMain``)
ARGS = "calib.args"
# Inside the build sandbox, in the build directory: the jars of the source's first line, if any, for javac
# and the run (calib.args); the jars' real paths hold no blank, quote or colon (java_jars._SAFE).
_JARS = r"""jars=""; first=""
IFS= read -r first < CalibMain.java || true
case "$first" in "// calib-classpath: "*) jars="${first#// calib-classpath: }";; esac
printf '%s\n' -cp "\"$PWD${jars:+:$jars}\"" > calib.args
"""
#: The normal build (java.py): javac with the jars, if any, on its classpath.
JAVA_BUILD = r"""set -e
cd "$1"; javac="$2"; shift 2
""" + _JARS + r"""if [ -n "$jars" ]; then set -- "$@" -cp "$jars"; fi
"$javac" "$@" -d "$PWD" CalibMain.java
"""
# x's coverage build: the agent taken out of Debian's jar (by the base Python interpreter, which every sandbox
# mounts: quicker than the JDK's jar tool), then the normal build and the report program in one javac run (the
# report's classes then moved to report/, apart from x's).
_BUILD = r"""set -e
cd "$1"; javac="$2"; python="$3"; cp="$4"; shift 4
""" + _JARS + r"""
"$python" -I -S -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("jacocoagent.jar", ".")' "$AGENT_JAR"
"$javac" "$@" -cp "$cp${jars:+:$jars}" -d "$PWD" CalibMain.java CalibJacoco.java
mkdir report
mv CalibJacoco*.class report/
"""


def _classpath() -> str:
    return ":".join(os.path.realpath(JACOCO_JARS[k]) for k in ("core", "asm", "asm-commons", "asm-tree"))


def missing_jacoco(tools: Tools) -> str:
    """"" when Debian's JaCoCo and ASM jars are here, else why not (with the fix)."""
    if "sh" not in tools.exe or not all(os.path.isfile(p) for p in JACOCO_JARS.values()):
        return JACOCO
    return ""


def x_lines(source: str) -> int:
    """How many lines x's own method takes in ``source`` (its first line to its closing brace): the helpers
    after it are not x."""
    depth, seen, line = 0, False, 1
    k, n = 0, len(source)
    while k < n:
        ch = source[k]
        two = source[k:k + 2]
        if two == "//":
            k = source.find("\n", k)
            k = n if k < 0 else k
            continue
        if two == "/*":
            end = source.find("*/", k + 2)
            end = n if end < 0 else end + 2
            line += source.count("\n", k, end)
            k = end
            continue
        if ch in "\"'":
            if source.startswith('"""', k):
                end = source.find('"""', k + 3)
                end = n if end < 0 else end + 3
            else:
                end = k + 1
                while end < n and source[end] not in (ch, "\n"):
                    end += 2 if source[end] == "\\" else 1
                end += 1
            line += source.count("\n", k, min(end, n))
            k = end
            continue
        if ch == "\n":
            line += 1
        elif ch == "{":
            depth, seen = depth + 1, True
        elif ch == "}":
            depth -= 1
            if seen and depth == 0:
                return line
        k += 1
    return line


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _doc(raw: bytes) -> dict[str, Any] | str:
    if len(raw) >= REPORT_BYTES:
        return f"the JaCoCo report is over {REPORT_BYTES} bytes"
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return "the JaCoCo report is not JSON"
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return f"JaCoCo could not read the execution data or x's classes ({' '.join(doc['error'].split())[:200]})"
    if not isinstance(doc, dict) or not isinstance(doc.get("methods"), list):
        return "the JaCoCo report has no method list"
    return doc


def _lines(methods: Any, binary: str, name: str, span: tuple[int, int]) -> tuple[set[int], set[int]] | str:
    """x's lines with code and those reached (lines of ``CalibMain.java``) in one method list."""
    if not isinstance(methods, list):
        return "the JaCoCo report has no method list"
    first, last = span
    executable: set[int] = set()
    executed: set[int] = set()
    found = False
    for m in methods:
        if not isinstance(m, dict) or not isinstance(m.get("class"), str) or not isinstance(m.get("lines"), list):
            return "malformed method record in the JaCoCo report"
        owner = m["class"]
        if owner != binary and not (owner.startswith(binary + "$") and not owner.endswith("$CalibCall")):
            continue
        start, end = _int(m.get("first")), _int(m.get("last"))
        if start is None or end is None or not first <= start <= end <= last:
            continue
        found = found or (owner == binary and m.get("name") == name)
        for item in m["lines"]:
            number = _int(item[0]) if isinstance(item, list) and len(item) == 2 else None
            status = _int(item[1]) if isinstance(item, list) and len(item) == 2 else None
            if number is None or status not in (1, 2, 3) or not start <= number <= end:
                return "malformed line record in the JaCoCo report"
            executable.add(number)
            if status != 1:
                executed.add(number)
    if not found:
        return f"the JaCoCo report has no method {name} of {binary} in lines {first}-{last} of CalibMain.java"
    if not executable:
        return f"the JaCoCo report lists no line with code in {name}"
    return executable, executed


def read_jacoco(raw: bytes, binary: str, name: str, span: tuple[int, int]) -> LineCoverage | str:
    """x's line coverage from the report program's output ``raw`` (all copies merged): the lines of the
    methods of class ``binary`` (and its nested classes but calib's glue) lying within ``span`` (lines of
    ``CalibMain.java``), one of them named ``name``; or why it cannot be read."""
    doc = _doc(raw)
    got = doc if isinstance(doc, str) else _lines(doc["methods"], binary, name, span)
    if isinstance(got, str):
        return got
    executable, executed = got
    uncovered = tuple(sorted(n - span[0] + 1 for n in executable - executed))
    return LineCoverage(len(executed) / len(executable), len(executable), len(executed), uncovered)


def read_jacoco_each(raw: bytes, binary: str, name: str, span: tuple[int, int]
                     ) -> tuple[frozenset[int], list[frozenset[int]]] | str:
    """x's lines with code and the lines each copy reached (the report's ``copies``, in copy order), as x's
    lines (1 = x's first); or why they cannot be read."""
    doc = _doc(raw)
    got = doc if isinstance(doc, str) else _lines(doc["methods"], binary, name, span)
    if isinstance(got, str):
        return got
    assert isinstance(doc, dict)
    copies = doc.get("copies")
    if not isinstance(copies, list) or not copies:
        return "the JaCoCo report has no list of copies"
    each = []
    for methods in copies:
        one = _lines(methods, binary, name, span)
        if isinstance(one, str):
            return one
        each.append(frozenset(n - span[0] + 1 for n in one[1] & got[0]))
    return frozenset(n - span[0] + 1 for n in got[0]), each


def jacoco_coverage(javac_flags: list[str], preamble: Any, memory_flag: str = "-Xmx384m") -> Coverage:
    """The Java kit. ``javac_flags``: the normal build's flags; ``preamble(sig)``: (x's class's binary name,
    the line of ``CalibMain.java`` where x starts)."""

    def build_argv(tools: Tools, build: str) -> list[str]:
        return [tools.exe["sh"], "-c", _BUILD.replace("$AGENT_JAR", os.path.realpath(JACOCO_JARS["agent"])),
                "calib-build", build, tools.exe["javac"], base_interpreter(), _classpath(), *javac_flags]

    def run_env(build: str, tmp: str) -> tuple[tuple[str, str], ...]:
        # only x's classes (the default package: the harness's loaders define them) are instrumented; the
        # classes of library jars and of the JDK (in packages) are not, so their probes never reach the counts
        agent = f"-javaagent:{build}/jacocoagent.jar=output=none,excludes=CalibMain*:*.*"
        return (("JAVA_TOOL_OPTIONS", agent), ("CALIB_COVERAGE", "1"))

    def report_argv(tools: Tools, build: str, copies: str, scratch: str) -> list[str]:
        return [tools.exe["java"], memory_flag, *_JVM_SMALL, "-cp", f"{build}/report:{_classpath()}", "CalibJacoco",
                build, copies]

    def span(function: str, sig: Signature) -> tuple[str, tuple[int, int]]:
        binary, first = preamble(sig)
        return binary, (first, first + x_lines(function) - 1)

    def read(raw: bytes, function: str, sig: Signature) -> LineCoverage | str:
        binary, lines = span(function, sig)
        return read_jacoco(raw, binary, sig.name, lines)

    def per_copy(raw: bytes, function: str, sig: Signature) -> tuple[frozenset[int], list[frozenset[int]]] | str:
        binary, lines = span(function, sig)
        return read_jacoco_each(raw, binary, sig.name, lines)

    return Coverage(build_argv=build_argv, report_argv=report_argv, read=read, per_copy=per_copy,
                    count_name="jacoco.exec", missing=missing_jacoco, run_env=run_env)


def template_line() -> int:
    """The line of the harness template holding x's placeholder (before the imports are filled in)."""
    text = (HARNESS_ROOT / "java" / "harness.java").read_text(encoding="utf-8")
    return text.split("/*@CALIB_FUNCTION@*/")[0].count("\n") + 1
