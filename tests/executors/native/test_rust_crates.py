"""Rust functions using external crates of the system's Cargo registry (calib/executors/native/rust_crates.py).

The end-to-end tests compile the registry's ``md5`` crate (Debian's ``librust-md5-dev``,
``/usr/share/cargo/registry/md5-0.7.0``) and x in the build sandbox and run x there. Expected digests are
Python's ``hashlib.md5(...).hexdigest()``, an implementation independent of the crate (RFC 1321). Crates of
a registry written by the test (a folder of its own) check dependencies, features, versions and refusals.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from calib.executors.native import rust_crates
from calib.executors.native import warm as warm_module
from calib.executors.native.rust import parse_rust_in, rust_context
from calib.executors.native.rust_crates import allows, resolve
from calib.executors.native.types import Unsupported
from calib.executors.native.warm import READY, cache_root
from tests.executors.native.test_native import compare, needs
from tests.executors.native.test_rust_native import needs_llvm

MD5_FOLDERS = glob.glob("/usr/share/cargo/registry/md5-*/Cargo.toml")


def needs_md5() -> None:
    if not MD5_FOLDERS:
        pytest.skip("the registry crate md5 is not installed (apt-get install librust-md5-dev)")


# The appendix-style file: its struct and helper, and `use md5;`; x uses all three.
CONTEXT = """use md5;
use std::fmt::Write as _;

/// An account as the file stores it.
#[derive(Debug, Clone)]
pub struct Account {
    pub name: String,
    pub id: u32,
}

fn normalize(name: &str) -> String {
    name.trim().to_lowercase()
}
"""
FINGERPRINT = """fn fingerprint(acct: &Account) -> String {
    let key = format!("{}:{}", normalize(&acct.name), acct.id);
    let digest = md5::compute(key.as_bytes());
    format!("{:x}", digest)
}"""
# the same digest, written out byte by byte
FINGERPRINT_BYTES = """fn fingerprint(a: &Account) -> String {
    let mut out = String::new();
    for b in md5::compute(format!("{}:{}", normalize(&a.name), a.id)).0.iter() {
        write!(out, "{:02x}", b).unwrap();
    }
    out
}"""
# the digest of other bytes: the separator changed
FINGERPRINT_DASH = FINGERPRINT.replace('"{}:{}"', '"{}-{}"')


def _fingerprint(state: dict) -> str:
    """What FINGERPRINT computes, with Python's own MD5 (hashlib; the inputs are ASCII, so Rust's trim and
    to_lowercase are Python's strip and lower)."""
    acct = state["acct"]
    return hashlib.md5(f"{acct['name'].strip().lower()}:{acct['id']}".encode()).hexdigest()


@needs("rust")
@needs_llvm
def test_a_function_using_its_file_and_the_md5_crate_is_conclusive_and_gives_md5_digests():
    needs_md5()
    result = compare("rust", FINGERPRINT, [FINGERPRINT_BYTES, FINGERPRINT_DASH], context=CONTEXT,
                     names=["same", "dash"])
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and result.uncovered_lines == ()  # x's own lines only: md5's are not counted
    assert result.distinct_outputs >= 2
    for row in result.inputs:
        assert json.loads(row.output)["return"] == _fingerprint(row.state), row.state
    same, dash = result.candidates
    assert same.outcome == "ran" and same.sim_func == 1.0
    assert dash.outcome == "ran" and dash.sim_func == 0.0 and not any(dash.matches)
    # the crate was built once into a shared directory, read-only afterwards; a second sample reuses it
    made = [d for d in cache_root().glob("rust-crate-md5-*") if (d / READY).is_file()]
    assert made and all(list(d.glob("libmd5-*.rlib")) for d in made)
    rlib = next(made[0].glob("libmd5-*.rlib"))
    before = rlib.stat()
    for name in [n for n in warm_module._DONE if n.startswith("rust-crate-md5-")]:
        del warm_module._DONE[name]  # as a new process would: it finds the directory complete
    again = compare("rust", FINGERPRINT, [FINGERPRINT], context=CONTEXT)
    assert again.conclusive and again.candidates[0].sim_func == 1.0, again.reason
    assert (rlib.stat().st_ino, rlib.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


# Lines 4-6 are never reached: no u32's square is 2, even wrapping (squares are 0 or 1 modulo 4, and 2^32 is
# a multiple of 4). llvm-cov counts 9 lines of x (as UNREACHABLE in test_rust_native.py): 6 of 9.
UNREACHABLE = """fn tag(acct: &Account) -> String {
    let digest = md5::compute(acct.name.as_bytes());
    if acct.id.wrapping_mul(acct.id) == 2 {
        let s = format!("never {}", acct.id);
        let t = s.to_uppercase();
        return t;
    }
    format!("{:x}", digest)
}"""


@needs("rust")
@needs_llvm
def test_coverage_still_applies_to_x_using_a_crate():
    needs_md5()
    result = compare("rust", UNREACHABLE, [UNREACHABLE], context=CONTEXT)
    assert not result.conclusive and result.reason == "coverage 0.67 < 0.8", result.reason
    assert result.uncovered_lines == (4, 5, 6)
    for row in result.inputs:
        assert json.loads(row.output)["return"] == hashlib.md5(row.state["acct"]["name"].encode()).hexdigest()


@needs("rust")
def test_a_crate_that_is_not_installed_is_unsupported_with_the_apt_hint(monkeypatch, tmp_path):
    x = "fn f(s: &str) -> String { zz_calib_absent::encode(s) }"
    result = compare("rust", x, [x])
    assert not result.conclusive
    assert result.reason == ("unsupported: external crate zz_calib_absent is not installed "
                             "(apt-get install librust-zz-calib-absent-dev), or a module of x's own crate in another "
                             "file")
    # md5 too, when the registry lacks it; through the file's `use md5::compute` as well
    monkeypatch.setattr(rust_crates, "REGISTRY", str(tmp_path))
    digest = 'fn h(s: &str) -> String { format!("{:x}", compute(s)) }'
    result = compare("rust", digest, [digest], context="use md5::compute;\n")
    assert result.reason == ("unsupported: external crate md5 is not installed (apt-get install librust-md5-dev), or a "
                             "module of x's own crate in another file")


def _crate(root: Path, folder: str, manifest: str, lib: str, **files: str) -> None:
    path = root / folder
    (path / "src").mkdir(parents=True)
    (path / "Cargo.toml").write_text(textwrap.dedent(manifest), encoding="utf-8")
    (path / "src" / "lib.rs").write_text(lib, encoding="utf-8")
    for name, text in files.items():
        (path / name.replace("__", "/")).write_text(text, encoding="utf-8")


@pytest.fixture
def registry(monkeypatch):
    """A registry of the test's own crates: outside /tmp and /work (the sandbox's own tmpfs hide those) and
    world-readable (the sandbox reads it as nobody); its crates are built into a cache of the test's own."""
    home = Path(os.path.expanduser("~/.cache"))
    home.mkdir(parents=True, exist_ok=True)
    where = Path(tempfile.mkdtemp(prefix="calib-test-registry-", dir=home))
    root = where / "registry"
    root.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(where / "cache"))
    base = """[package]\nname = "calibbase"\nversion = "{v}"\nedition = "2021"\n
[features]\ndefault = ["triple"]\ntriple = []\n"""
    lib = ('#[cfg(feature = "triple")]\npub fn base(x: u64) -> u64 {{ x * 3 + {k} }}\n'
           '#[cfg(not(feature = "triple"))]\npub fn base(x: u64) -> u64 {{ x * 2 + {k} }}\n')
    for version, k in (("1.0.0", 0), ("1.2.0", 100), ("2.0.0", 1000)):  # "1.0" allows 1.2.0, the highest of 1.x
        _crate(root, f"calibbase-{version}", base.format(v=version), lib.format(k=k))
    _crate(root, "calib-dep-0.2.1", """\
        [package]
        name = "calib-dep"
        version = "0.2.1"

        [dependencies.calibbase]
        version = "1.0"
        default-features = false

        [target.'cfg(windows)'.dependencies]
        zz-calib-windows-only = "1"
        """, 'pub fn twice_base(x: u64) -> u64 { calibbase::base(x) + 1 }\n'
             'pub fn version() -> &\'static str { env!("CARGO_PKG_VERSION") }\n')
    _crate(root, "calib-other-0.1.0", '[package]\nname = "calib-other"\nversion = "0.1.0"\n'
           '[dependencies]\ncalibbase = { version = "2", default-features = false }\n',
           "pub fn other(x: u64) -> u64 { calibbase::base(x) }\n")
    _crate(root, "calibbroken-0.1.0", '[package]\nname = "calibbroken"\nversion = "0.1.0"\n',
           "pub fn g(n: u32) -> u32 { n + }\n")
    _crate(root, "calibbuild-0.1.0", '[package]\nname = "calibbuild"\nversion = "0.1.0"\n', "pub fn b() {}\n",
           **{"build.rs": "fn main() {}\n"})
    _crate(root, "calibmacro-0.1.0", '[package]\nname = "calibmacro"\nversion = "0.1.0"\n[lib]\nproc-macro = true\n',
           "\n")
    _crate(root, "calibneeds-0.1.0", '[package]\nname = "calibneeds"\nversion = "0.1.0"\n'
           '[dependencies]\ncalibbuild = "0.1"\nzz-calib-absent = "1"\n', "pub fn n() {}\n")
    for top, dirs, files in os.walk(where):
        for name in (*dirs, *files):
            os.chmod(os.path.join(top, name), 0o755)
    os.chmod(where, 0o755)
    monkeypatch.setattr(rust_crates, "REGISTRY", str(root))
    yield root
    shutil.rmtree(where, ignore_errors=True)


@needs("rust")
def test_a_crate_and_its_dependency_are_built_with_their_features_and_versions(registry):
    x = 'fn f(n: u32) -> String { format!("{} {}", calib_dep::twice_base(n as u64), calib_dep::version()) }'
    result = compare("rust", x, [x], n_inputs=10)
    assert result.valid_inputs == 10, result.reason
    # calibbase 1.2.0 (the highest that "1.0" allows) without its default feature (x * 2 + 100), plus 1;
    # CARGO_PKG_VERSION as Cargo sets it; the windows-only dependency is not needed here
    assert [json.loads(r.output)["return"] for r in result.inputs] == [
        f"{2 * r.state['n'] + 101} 0.2.1" for r in result.inputs]
    # x's own calibbase is the highest installed (2.0.0: x * 3 + 1000), calib_dep's stays 1.2.0: two versions
    both = 'fn g(n: u32) -> u64 { calibbase::base(n as u64) + calib_dep::twice_base(n as u64) }'
    result = compare("rust", both, [both])
    assert [json.loads(r.output)["return"] for r in result.inputs] == [
        3 * r.state["n"] + 1000 + 2 * r.state["n"] + 101 for r in result.inputs]
    # calib_other asks for calibbase 2 without its default feature (x * 2 + 1000) ...
    other = "fn h(n: u32) -> u64 { calib_other::other(n as u64) }"
    result = compare("rust", other, [other])
    assert [json.loads(r.output)["return"] for r in result.inputs] == [2 * r.state["n"] + 1000 for r in result.inputs]
    # ... and with x using calibbase 2 too, the graph has one calibbase 2, its features unified (x * 3 + 1000)
    unified = "fn k(n: u32) -> u64 { calibbase::base(n as u64) + calib_other::other(n as u64) }"
    result = compare("rust", unified, [unified])
    assert [json.loads(r.output)["return"] for r in result.inputs] == [
        2 * (3 * r.state["n"] + 1000) for r in result.inputs]


def test_crates_that_cannot_be_built_here_are_refused_with_their_reason(registry):
    assert resolve(["calibbuild"]) == ("external crate calibbuild: calibbuild 0.1.0 has a build script (build.rs), "
                                       "which calib does not run")
    assert resolve(["calibmacro"]) == ("external crate calibmacro: calibmacro 0.1.0 is a procedural macro crate, "
                                       "which calib does not build")
    assert resolve(["calibneeds"]) == ("external crate calibneeds: calibneeds 0.1.0 needs zz-calib-absent 1, which "
                                       "is not installed (apt-get install librust-zz-calib-absent-dev)")
    with pytest.raises(Unsupported, match=re.escape("external crate calibbuild: calibbuild 0.1.0 has a build")):
        parse_rust_in("fn f(x: u8) -> u8 { calibbuild::b(); x }", "")
    plan = resolve(["calib_dep"])
    assert [(c.package, c.version, sorted(c.features)) for c in plan.order] == [
        ("calibbase", "1.2.0", []), ("calib-dep", "0.2.1", [])]


def test_the_file_items_using_an_installed_crate_are_kept(registry):
    context = ("use calib_dep::twice_base as tb;\nuse zz_calib_absent::Thing;\n"
               "fn helper(n: u32) -> u64 { tb(n as u64) }\nfn other(t: Thing) {}\n")
    sig = parse_rust_in("fn f(n: u32) -> u64 { helper(n) }", context)
    assert ("crate", "calib_dep") in sig.preamble
    built = rust_context(context, sig)  # the crate's use and the helper are built; the absent crate's items not
    assert "use calib_dep::twice_base as tb;" in built and "fn helper" in built
    assert "zz_calib_absent" not in built and "fn other" not in built


@needs("rust")
def test_a_crate_that_does_not_compile_is_unsupported(registry):
    x = "fn f(n: u32) -> u32 { calibbroken::g(n) }"
    result = compare("rust", x, [x])
    assert result.reason == ("unsupported: external crate calibbroken: calibbroken 0.1.0 did not build in the build "
                             "sandbox")
    assert not [p for p in cache_root().iterdir() if p.name.startswith(".rust-crate-calibbroken")]  # no leftovers


def test_version_requirements():
    for req, version, ok in [("0.7", "0.7.3", True), ("0.7", "0.8.0", False), ("^1.2", "1.9.0", True),
                             ("~1.2", "1.3.0", False), (">=1, <3", "2.5.0", True), ("1.*", "1.4.0", True),
                             ("*", "9.0.0", True), ("=0.7.0", "0.7.1", False), ("^0.0.3", "0.0.4", False),
                             ("0", "0.9.1", True), ("1.2.3", "1.2.2", False), ("<2", "2.0.0", False)]:
        assert allows(req, version) is ok, (req, version)
