"""Java x using a library of the system's Java library folder (docs/native-executors.md, "Java",
"Libraries"; calib/executors/native/java_jars.py): the jar holding an imported class (Debian's
``/usr/share/java``, here ``libcommons-codec-java``) is on the classpath of x's build and runs, in the
sandboxes; a class no jar holds makes the sample unsupported, with the hint; line coverage stays x's own.

The comparisons compile and run real code in the sandbox. Expected outputs come from Python's ``hashlib``
(an implementation independent of commons-codec: MD5 is RFC 1321, SHA-256 FIPS 180-4), applied to the UTF-8
bytes of the same text, which is what ``DigestUtils.md5Hex(String)``/``sha256Hex(String)`` digest (their
documentation: "data to digest; converted to bytes using StringUtils.getBytesUtf8(String)").
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile

import pytest

from calib.executors.native import java_jars
from calib.executors.native.java import parse_java_in
from calib.executors.native.java_jars import JAR_DIR, jar_index, not_installed
from calib.executors.native.types import Unsupported
from tests.executors.native.test_java_native import _jacoco
from tests.executors.native.test_native import compare, needs

CODEC = os.path.join(JAR_DIR, "commons-codec.jar")
_codec = pytest.mark.skipif(not os.path.isfile(CODEC),
                            reason="commons-codec is not installed (apt-get install libcommons-codec-java)")
HINT = f"(no jar in {JAR_DIR} provides it; apt-get install the lib...-java package that does)"

# The appendix's shape: the file before x (package, imports, the class, a field and a helper), x an instance
# method using the field (through the helper) and the library. Lines of x with code: 2, 3 (the test), 4 (even
# lengths) and 6 (odd lengths): all reached when the inputs' texts have both parities.
CONTEXT = """package org.example.audit;

import java.util.List;
import org.apache.commons.codec.digest.DigestUtils;
import org.slf4j.Logger;

/** Fingerprints of texts. */
public class Fingerprint {
    private static final Logger LOG = null;
    private String salt = "calib";
    private String salted(String text) {
        return salt + ":" + text;
    }
"""
FINGERPRINT = """    public String fingerprint(String text) {
        String digest = DigestUtils.md5Hex(salted(text));
        if (text.length() % 2 == 0) {
            return digest.substring(0, 12);
        }
        return DigestUtils.sha256Hex(text).substring(0, 12);
    }"""
# the same function written otherwise (the field read directly, the test inverted)
SAME = """    public String fingerprint(String text) {
        return text.length() % 2 != 0 ? DigestUtils.sha256Hex(text).substring(0, 12)
            : DigestUtils.md5Hex(salt + ":" + text).substring(0, 12);
    }"""
# changed behaviour: the salted MD5 for every text (the same as x on even lengths only)
MD5_ONLY = """    public String fingerprint(String text) {
        return DigestUtils.md5Hex(salted(text)).substring(0, 12);
    }"""


def _fingerprint(text: str, salt: str) -> str:
    """Reference (hashlib): MD5 of ``salt:text`` for even lengths, SHA-256 of the text for odd ones; hex, 12."""
    if len(text) % 2 == 0:
        return hashlib.md5(f"{salt}:{text}".encode()).hexdigest()[:12]
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@needs("java")
@_jacoco()
@_codec
def test_java_x_using_commons_codec_matches_hashlib_and_counts_its_own_lines(monkeypatch):
    native = sys.modules["calib.executors.native"]
    copies: list[bytes] = []
    write = native.write_copies
    monkeypatch.setattr(native, "write_copies", lambda d, got, name: (copies.extend(got), write(d, got, name)))
    result = compare("java", FINGERPRINT, [SAME, MD5_ONLY], context=CONTEXT)
    assert result.conclusive, result.reason
    assert sorted(result.inputs[0].state) == ["text", "this.salt"]
    for row in result.inputs:
        text, salt = row.state["text"], row.state["this.salt"]
        assert json.loads(row.output) == {"return": _fingerprint(text, salt), "stdout": "", "this": {"salt": salt}}
    assert {len(r.state["text"]) % 2 for r in result.inputs} == {0, 1}
    # x's own lines, all reached: the library's (never reached in full) are not counted
    assert result.coverage == 1.0 and result.uncovered_lines == ()
    same, md5_only = result.candidates
    assert same.outcome == "ran" and same.sim_func == 1.0
    assert md5_only.sim_func < 1.0
    assert list(md5_only.matches) == [len(r.state["text"]) % 2 == 0 for r in result.inputs]
    # the agent instruments x's classes only: no probe of the library's classes reaches the counts
    assert copies and any(b"Fingerprint" in c for c in copies)
    assert not any(b"org/apache/commons" in c for c in copies)


# MD5's hex is always 32 characters long: lines 4-6 are never reached; lines with code 2, 3, 4, 5, 6, 8.
UNREACHABLE = """    public String check(String text) {
        String digest = DigestUtils.md5Hex(salt + text);
        if (digest.length() != 32) {
            digest = digest.trim();
            digest = "odd:" + digest;
            return digest;
        }
        return digest;
    }"""


@needs("java")
@_jacoco()
@_codec
def test_java_unreachable_branch_beside_a_library_is_inconclusive_for_coverage():
    context = "import org.apache.commons.codec.digest.DigestUtils;\n\npublic class Fingerprint {\n" \
              "    private String salt = \"calib\";\n"
    result = compare("java", UNREACHABLE, [UNREACHABLE], context=context)
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(3 / 6) and result.uncovered_lines == (4, 5, 6)
    assert not result.conclusive and result.reason == "coverage 0.50 < 0.8"
    for row in result.inputs:
        s = row.state
        assert json.loads(row.output)["return"] == hashlib.md5((s["this.salt"] + s["text"]).encode()).hexdigest()


# a wildcard import and a fully qualified name (the jars of both: commons-codec) build and run too
WILDCARD = """    static String both(String text) {
        return DigestUtils.sha256Hex(text) + "/" + org.apache.commons.codec.binary.Hex.encodeHexString(text.getBytes(
            java.nio.charset.StandardCharsets.UTF_8));
    }"""


@needs("java")
@_jacoco()
@_codec
def test_java_wildcard_import_and_qualified_name_are_built_with_their_jar():
    context = "import org.apache.commons.codec.digest.*;\n\nclass Codec {\n"
    result = compare("java", WILDCARD, [WILDCARD], context=context)
    assert result.conclusive, result.reason
    for row in result.inputs:
        text = row.state["text"]
        want = hashlib.sha256(text.encode()).hexdigest() + "/" + text.encode().hex()
        assert json.loads(row.output)["return"] == want


@needs("java")
def test_java_import_no_jar_provides_is_unsupported_with_the_hint():
    context = "import org.calib.absent.Digests;\n\npublic class T {\n"
    result = compare("java", "static String f(String s) { return Digests.md5(s); }", ["int g() { return 1; }"],
                     context=context)
    assert not result.conclusive
    assert result.reason == f"unsupported: external package org.calib.absent is not installed {HINT}"
    assert result.candidates[0].outcome == "not_run"


@_codec
@pytest.mark.parametrize(("context", "source", "name"), [
    ("import org.calib.absent.StringUtils;\n\npublic class Text {\n",
     "static String f(String s) { return StringUtils.capitalize(s); }", "org.calib.absent"),
    ("import static org.calib.absent.Assert.assertTrue;\npublic class T {\n",
     "static int f(int a) { assertTrue(a > 0); return a; }", "org.calib.absent"),
    # the package is installed, the class is not (a newer commons-codec): the class is named
    ("import org.apache.commons.codec.digest.NoSuchDigest;\nclass T {\n",
     "static String f(String s) { return NoSuchDigest.hex(s); }", "org.apache.commons.codec.digest.NoSuchDigest"),
])
def test_java_classes_no_jar_holds_give_their_name(context, source, name):
    with pytest.raises(Unsupported) as got:
        parse_java_in(source, context)
    assert str(got.value) == not_installed(name) == f"external package {name} is not installed {HINT}"


@_codec
@pytest.mark.parametrize(("context", "source", "jars"), [
    ("import org.apache.commons.codec.digest.DigestUtils;\nclass T {\n",
     "static String f(String s) { return DigestUtils.md5Hex(s); }", [CODEC]),
    ("import static org.apache.commons.codec.digest.DigestUtils.md5Hex;\nclass T {\n",
     "static String f(String s) { return md5Hex(s); }", [CODEC]),
    ("import static org.apache.commons.codec.digest.DigestUtils.*;\nclass T {\n",
     "static String f(String s) { return md5Hex(s); }", [CODEC]),
    ("import org.apache.commons.codec.digest.*;\nclass T {\n",
     "static String f(String s) { return DigestUtils.md5Hex(s); }", [CODEC]),
    ("class T {\n", "static String f(String s) { return org.apache.commons.codec.digest.DigestUtils.md5Hex(s); }",
     [CODEC]),
    # unused: an external import, a wildcard import of which x names no type (both dropped, no jar)
    ("import org.apache.commons.codec.digest.DigestUtils;\nimport org.calib.absent.*;\nclass T {\n",
     "static int f(int a) { return a; }", []),
    ("import org.apache.commons.codec.digest.*;\nclass T {\n", "static int f(int a) { return a; }", []),
])
def test_java_imports_and_qualified_names_choose_the_jars(context, source, jars):
    sig = parse_java_in(source, context)
    assert dict(sig.preamble)["jars"] == ":".join(os.path.realpath(j) for j in jars)


# --- the index, on jars made here ---------------------------------------------------------------------------

def _jar(path, classes, manifest=""):
    with zipfile.ZipFile(path, "w") as z:
        if manifest:
            z.writestr("META-INF/MANIFEST.MF", manifest)
        for name in classes:
            z.writestr(name, b"\xca\xfe\xba\xbe")


def test_jar_index_names_class_path_and_cache(tmp_path):
    _jar(tmp_path / "lib-1.2.jar", ["org/lib/A.class", "org/lib/A$In.class", "META-INF/versions/11/org/lib/B.class",
                                    "module-info.class"],
         "Manifest-Version: 1.0\nClass-Path: dep.jar\n  missing.jar\n")
    os.symlink("lib-1.2.jar", tmp_path / "lib.jar")
    _jar(tmp_path / "dep.jar", ["org/dep/D.class"])
    _jar(tmp_path / "lib-all.jar", ["org/lib/A.class", "org/other/O.class"])  # a bundle holding org.lib.A too
    index = jar_index(str(tmp_path), under=str(tmp_path))
    lib, dep, bundle = (os.path.realpath(tmp_path / n) for n in ("lib-1.2.jar", "dep.jar", "lib-all.jar"))
    assert index.names[lib] == "lib.jar"  # the unversioned name of the file
    assert index.provider("org.lib.A") == lib  # held by both: the one holding more of org.lib wins
    assert index.provider("org.lib.A.In") == lib and index.provider("org.lib.B") == lib
    assert index.provider("org.other.O") == bundle and index.provider("org.lib.Missing") is None
    assert index.members("org.lib", {"A", "Z"}) == [lib] and index.has_package("org.dep")
    assert index.closure([lib]) == (lib, dep)  # with its Class-Path (the missing entry left out)
    assert jar_index(str(tmp_path), under=str(tmp_path)) is index  # nothing changed: the same index
    read = java_jars._READ[lib][1]
    _jar(tmp_path / "dep.jar", ["org/dep/D.class", "org/dep/E.class"])
    os.utime(tmp_path / "dep.jar", ns=(1, 1))
    again = jar_index(str(tmp_path), under=str(tmp_path))
    assert again is not index and again.provider("org.dep.E") == dep
    assert java_jars._READ[lib][1] is read  # the unchanged jar was not read again


def test_jar_index_leaves_out_jars_outside_the_sandbox_binds(tmp_path):
    _jar(tmp_path / "x.jar", ["org/x/X.class"])
    assert jar_index(str(tmp_path)).provider("org.x.X") is None  # real path not under /usr
