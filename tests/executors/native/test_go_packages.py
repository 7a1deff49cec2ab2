"""The Go executor with packages outside the standard library, from the system Go source tree.

x's file imports ``github.com/google/uuid`` (Debian's golang-github-google-uuid-dev, installed as source
in /usr/share/gocode/src); the build runs in GOPATH mode with that tree on GOPATH, in the build sandbox.
End-to-end tests compile and run real code in the sandbox; expected outputs come from Python's own
``uuid`` module, an implementation independent of the Go package. A package that is not installed is
``unsupported`` with the package that would install it (:mod:`calib.executors.native.go_packages`).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from calib.executors.native import go_packages
from calib.executors.native.go import parse_go, prepare_go
from calib.executors.native.go_packages import debian_package, unbuildable
from calib.executors.native.types import Unsupported
from tests.executors.native.test_native import compare, needs

UUID_SOURCE = "/usr/share/gocode/src/github.com/google/uuid"
needs_uuid = pytest.mark.skipif(not os.path.isdir(UUID_SOURCE),
                                reason=f"golang-github-google-uuid-dev is not installed (no {UUID_SOURCE})")

# x's file, before x: a struct type and a helper of its own, and the uuid import
ACCOUNT_CONTEXT = """package accounts

import (
	"strings"

	"github.com/google/uuid"
)

// Account is a user of a host.
type Account struct {
	Name string
	Host string
}

func normalize(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}
"""
# a stable ID per account: the name-based (MD5, version 3) UUID of "name" or "name@host" in the DNS namespace
ACCOUNT_ID = """func AccountID(a Account) string {
	name := normalize(a.Name)
	if a.Host != "" {
		name = name + "@" + normalize(a.Host)
	}
	return uuid.NewMD5(uuid.NameSpaceDNS, []byte(name)).String()
}"""
# the same, written otherwise: uuid.NewHash with crypto/md5 and version 3 is what NewMD5 does
ACCOUNT_ID_SAME = """func AccountID(acct Account) string {
	key := normalize(acct.Name)
	if len(acct.Host) > 0 {
		key = fmt.Sprintf("%s@%s", key, normalize(acct.Host))
	}
	return uuid.NewHash(md5.New(), uuid.NameSpaceDNS, []byte(key), 3).String()
}"""
# changes behaviour: the host is not normalized (differs only where the host has upper case or spaces)
ACCOUNT_ID_RAW_HOST = """func AccountID(a Account) string {
	name := normalize(a.Name)
	if a.Host != "" {
		name = name + "@" + a.Host
	}
	return uuid.NewMD5(uuid.NameSpaceDNS, []byte(name)).String()
}"""
ACCOUNTS = [{"a": {"Name": name, "Host": host}} for name, host in [
    ("alice", ""), ("Bob", "example.com"), (" carol ", "Mail.Example.org"), ("dave", "localhost"),
    ("", ""), ("EVE", ""), ("frank", " ftp.example.net "), ("grace", "example.com"), ("heidi", "HOST"),
    ("ivan", "a.b.c"),
]]


def account_id(name: str, host: str) -> str:
    """The reference: Python's uuid.uuid3 (RFC 4122 name-based UUID, version 3, MD5; Python's uuid module,
    https://docs.python.org/3/library/uuid.html#uuid.uuid3) of the normalized name in NAMESPACE_DNS, the
    namespace github.com/google/uuid calls NameSpaceDNS (6ba7b810-9dad-11d1-80b4-00c04fd430c8)."""
    key = name.strip().lower() + ("@" + host.strip().lower() if host else "")
    return str(uuid.uuid3(uuid.NAMESPACE_DNS, key))


@needs("go")
@needs_uuid
def test_x_using_an_installed_package_is_conclusive_and_matches_python_uuid3():
    result = compare("go", ACCOUNT_ID, [ACCOUNT_ID_SAME, ACCOUNT_ID_RAW_HOST], context=ACCOUNT_CONTEXT,
                     inputs=ACCOUNTS)
    assert result.conclusive, result.reason
    assert result.valid_inputs == 10 and result.distinct_outputs == 10
    # only x's own lines count (2-6: every statement of x), not the lines of the uuid package
    assert result.coverage == 1.0 and result.uncovered_lines == () and result.warnings == ()
    for row in result.inputs:
        a = row.state["a"]
        assert json.loads(row.output)["return"] == account_id(a["Name"], a["Host"]), a
    same, raw = result.candidates
    assert same.outcome == "ran" and same.sim_func == 1.0 and all(same.matches)
    expected = [s["a"]["Host"] == s["a"]["Host"].strip().lower() for s in ACCOUNTS]
    assert list(raw.matches) == expected and not all(expected) and raw.sim_func < 1.0


@needs("go")
@needs_uuid
def test_synthesized_inputs_give_the_reference_outputs():
    result = compare("go", ACCOUNT_ID, [ACCOUNT_ID], context=ACCOUNT_CONTEXT)
    assert result.valid_inputs == 10 and result.candidates[0].sim_func in (1.0, None), result.reason
    for row in result.inputs:
        a = row.state["a"]
        assert json.loads(row.output)["return"] == account_id(a["Name"], a["Host"]), a


# statements start on lines 2 (u :=), 3 (if), 4 (return -1) and 6: 4 executable lines. NewMD5 always gives a
# version 3 UUID, so line 4 is never reached: 3/4 < 0.8. The uuid package's own lines do not count.
UUID_UNREACHABLE = """func Tag(name string) int {
	u := uuid.NewMD5(uuid.NameSpaceOID, []byte(name))
	if u.Version() != 3 {
		return -1
	}
	return int(u[0])
}"""


@needs("go")
@needs_uuid
def test_an_unreachable_branch_is_still_inconclusive_for_coverage():
    result = compare("go", UUID_UNREACHABLE, [UUID_UNREACHABLE], context='import "github.com/google/uuid"\n')
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(3 / 4) and result.uncovered_lines == (4,)
    assert not result.conclusive and result.reason == "coverage 0.75 < 0.8"
    for row in result.inputs:
        expected = uuid.uuid3(uuid.NAMESPACE_OID, row.state["name"]).bytes[0]  # Python's uuid module again
        assert json.loads(row.output)["return"] == expected


ABSENT = "github.com/calib-test/absent/sub"
ABSENT_WHY = ("external package github.com/calib-test/absent/sub is not installed (apt-get install "
              "golang-github-calib-test-absent-dev, or the package that ships "
              "/usr/share/gocode/src/github.com/calib-test/absent/sub)")


def test_a_package_that_is_not_installed_is_unsupported_with_the_package_to_install():
    source = "func F(x int) int { return absent.Twice(x) }"
    with pytest.raises(Unsupported) as info:
        parse_go(source, f'package p\n\nimport absent "{ABSENT}"\n')
    assert str(info.value) == ABSENT_WHY
    # a declaration of the file that x needs, using it, counts too
    with pytest.raises(Unsupported) as info:
        parse_go("func F(x int) int { return twice(x) }",
                 f'import absent "{ABSENT}"\n\nfunc twice(x int) int {{ return absent.Twice(x) }}\n')
    assert str(info.value) == ABSENT_WHY


@needs("go")
def test_compare_says_unsupported_and_builds_nothing():
    result = compare("go", "func F(x int) int { return absent.Twice(x) }", ["func F(x int) int { return x }"],
                     context=f'import absent "{ABSENT}"\n')
    assert not result.conclusive and result.reason == f"unsupported: {ABSENT_WHY}"


def test_debian_package_names():
    assert debian_package("github.com/google/uuid") == "golang-github-google-uuid-dev"
    assert debian_package("github.com/BurntSushi/toml/internal") == "golang-github-burntsushi-toml-dev"
    assert debian_package("golang.org/x/text/unicode/norm") == "golang-golang-x-text-dev"
    assert debian_package("gopkg.in/yaml.v3") == "golang-gopkg-yaml.v3-dev"


def test_import_paths_that_are_no_package_paths_are_refused():
    for path in ("../../etc", "./local", "github.com/a/../b", "C"):
        assert unbuildable(path) == f"external package {path}"
    assert unbuildable("fmt") == "" and unbuildable("encoding/json") == ""


def _tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


MISSING = 'import "example.com/missing"\n'


def test_dependencies_are_followed_as_go_build_would(tmp_path, monkeypatch):
    # a fake source tree: example.com/a imports example.com/b, which imports example.com/missing only in files
    # built elsewhere (windows, js, neither linux nor darwin), in a cgo file and in a test; example.com/c and
    # the linux file of example.com/d import example.com/gone for real (this test runs on linux)
    _tree(tmp_path, {
        "example.com/a/a.go": 'package a\n\nimport (\n\t"fmt"\n\t"example.com/b"\n)\n\nfunc A() { fmt.Println(b.B) }\n',
        "example.com/b/b.go": "// Package b.\npackage b\n\n// import \"example.com/comment\"\nvar B = 1\n",
        "example.com/b/b_windows.go": 'package b\n\nimport "example.com/missing"\n',
        "example.com/b/b_other.go": '//go:build windows || (linux && js)\n\npackage b\n\n' + MISSING,
        "example.com/b/b_old.go": '// +build !linux,!darwin\n\npackage b\n\nimport "example.com/missing"\n',
        "example.com/b/b_cgo.go": 'package b\n\nimport (\n\t"C"\n\t"example.com/missing"\n)\n',
        "example.com/b/b_test.go": 'package b\n\nimport "example.com/missing"\n',
        "example.com/c/c.go": 'package c\n\n/*\nvar x\n*/\nimport "example.com/b"\nimport g "example.com/gone"\n',
        "example.com/v/v.go": 'package v\n\nimport "example.com/dep"\n',
        "example.com/v/vendor/example.com/dep/dep.go": "package dep\n",
        "example.com/empty/README": "no Go here\n",
        "example.com/d/d_linux.go": '//go:build unix && !windows && go1.1\n\npackage d\n\nimport "example.com/gone"\n',
    })
    monkeypatch.setattr(go_packages, "GOCODE", str(tmp_path))
    unbuildable.cache_clear()
    try:
        assert unbuildable("example.com/a") == ""
        assert unbuildable("example.com/v") == ""  # its dependency is vendored
        assert unbuildable("example.com/d").startswith("external package example.com/gone is not installed")
        why = unbuildable("example.com/c")
        assert why.startswith("external package example.com/gone is not installed (apt-get install ") and \
            why.endswith(f"{tmp_path}/src/example.com/gone) (imported by example.com/c)"), why
        assert unbuildable("example.com/empty") == \
            f"external package example.com/empty has no Go file to build in {tmp_path}/src/example.com/empty"
        assert unbuildable("example.com/dep").startswith("external package example.com/dep is not installed")
    finally:
        unbuildable.cache_clear()


@needs_uuid
def test_the_variant_imports_the_package_by_the_files_name_for_it():
    context = 'import (\n\tid "github.com/google/uuid"\n)\n\nfunc keep(u id.UUID) string { return u.String() }\n'
    source = "func F(s string) string { return keep(id.NewSHA1(id.NameSpaceURL, []byte(s))) }"
    text = prepare_go(source, parse_go(source, context))
    assert text.splitlines()[0] == 'import (id "github.com/google/uuid")' and "func keep" in text
