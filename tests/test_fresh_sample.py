"""The fresh sample of ``benchmarks/conclusive.py --fresh`` (benchmarks/_fresh.py): the pinned package list,
extraction from an unpacked dist-packages tree with the default sampler's rules, the even seeded spread, the cache,
the one-line errors, and the Clopper-Pearson interval of the rates. No network: nothing here downloads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import binomtest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _fresh  # noqa: E402
import conclusive  # noqa: E402
from _functions import spread  # noqa: E402

FUNC = '''def {name}(items, limit=3):
    """Keep the first ``limit`` distinct items."""
    seen = set()
    out = []
    for item in items:
        if item in seen:
            continue
        seen.add(item)
        out.append(item)
        if len(out) >= limit:
            break
    total = len(out)
    return out, total
'''


SHORT = '''def too_short(x):
    y = x + 1
    return y
'''


def _tree(root: Path, package: str, names: list[str]) -> Path:
    """A dist-packages folder with one package of ``names`` functions, its tests and a dist-info."""
    pkg = root / package
    (pkg / "tests").mkdir(parents=True)
    (pkg / "__init__.py").write_text("".join(FUNC.format(name=n) + "\n\n" for n in names) + SHORT, encoding="utf-8")
    (pkg / "tests" / "test_it.py").write_text(FUNC.format(name="in_tests"), encoding="utf-8")
    (root / f"{package}-1.0.dist-info").mkdir()
    (root / f"{package}-1.0.dist-info" / "helper.py").write_text(FUNC.format(name="in_dist_info"), encoding="utf-8")
    return root


@pytest.mark.parametrize("listed", [_fresh.LIST, BENCH / "fresh-packages-2.txt", BENCH / "fresh-packages-3.txt"])
def test_shipped_list_pins_30_to_60_pure_python_packages_not_installed_here(listed: Path) -> None:
    packages = _fresh.read_list(listed)
    assert 30 <= len(packages) <= 60
    assert all(p.name.startswith("python3-") and p.version and ":" in p.why for p in packages)
    status = Path("/var/lib/dpkg/status")
    if status.is_file():  # none of them installed by apt on this machine
        installed = {block.split("\n", 1)[0].removeprefix("Package: ") for block in status.read_text().split("\n\n")
                     if "Status: install ok installed" in block}
        assert not installed & {p.name for p in packages}


def test_the_second_list_shares_no_package_with_the_first() -> None:
    # its samples are held out from every function the first list's samples showed the search's developers
    first, second = (_fresh.read_list(p) for p in (_fresh.LIST, BENCH / "fresh-packages-2.txt"))
    assert not {p.name for p in first} & {p.name for p in second}


def test_the_third_list_shares_no_package_with_the_first_two() -> None:
    # its seeds 1-5 are the fifteenth round's held-out sample: no function of theirs was seen before
    lists = [_fresh.read_list(p) for p in (_fresh.LIST, BENCH / "fresh-packages-2.txt", BENCH / "fresh-packages-3.txt")]
    third = {p.name for p in lists[2]}
    assert not third & {p.name for p in lists[0]} and not third & {p.name for p in lists[1]}


@pytest.mark.parametrize(("text", "message"), [
    ("python3-foo 1.0-1 text: x\npython3-foo 1.0-2 text: y\n", "listed twice"),
    ("python3-foo 1.0-1\n", "need 'python3-PACKAGE VERSION domain: why'"),
    ("foo 1.0-1 text: not a python3 package\n", ":1: need"),
    ("# only a comment\n\n", "no packages listed"),
])
def test_bad_list_is_a_one_line_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "list.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(_fresh.FreshError, match=message) as err:
        _fresh.read_list(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_pools_use_the_default_rules_and_drop_what_development_saw(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a", "alpha", ["first", "second", "shared"])
    b = _tree(tmp_path / "b", "beta", ["third", "shared"])  # "shared" duplicates alpha's: dropped across files
    pools, dropped = _fresh.fresh_pools({"python3-alpha": a, "python3-beta": b})  # 10-50 body lines, no tests
    assert dropped == 0
    assert {k: sorted(f.qualname for f in v) for k, v in pools.items()} == {
        "python3-alpha": ["first", "second", "shared"], "python3-beta": ["third"]}
    fn = pools["python3-alpha"][0]
    assert (fn.origin, fn.package, fn.module_name, fn.body_lines) == ("fresh", "python3-alpha", "alpha", 11)
    seen = {_fresh._key(f) for f in pools["python3-beta"]}  # beta's "third" counts as seen in development
    pools, dropped = _fresh.fresh_pools({"python3-alpha": a, "python3-beta": b}, seen=seen)
    assert dropped == 1 and "python3-beta" not in pools


def test_spread_is_even_seeded_and_stops_when_pools_run_dry(tmp_path: Path) -> None:
    import random

    big = _tree(tmp_path / "big", "big", [f"f{i}" for i in range(8)])
    small = _tree(tmp_path / "small", "small", ["g0"])
    pools, _ = _fresh.fresh_pools({"python3-big": big, "python3-small": small})
    picked = spread(random.Random(1), pools, 5)
    assert [f.package for f in picked].count("python3-small") == 1 and len(picked) == 5
    assert [f.ident for f in picked] == [f.ident for f in spread(random.Random(1), pools, 5)]
    assert len(spread(random.Random(1), pools, 100)) == 9


def test_cached_package_is_reused_without_download(tmp_path: Path) -> None:
    package = _fresh.FreshPackage("python3-alpha", "1:1.0-1", "text: test")
    target = tmp_path / "unpacked" / "python3-alpha_1%3a1.0-1"
    _tree(target / _fresh.DIST_PACKAGES, "alpha", ["first"])
    (target / _fresh._DONE).write_text("ab" * 32 + "\n", encoding="utf-8")
    root, digest = _fresh.fetch(package, tmp_path)
    assert root == target / _fresh.DIST_PACKAGES and digest == "ab" * 32
    assert _fresh.import_roots({"cache": str(tmp_path), "packages": [{"name": package.name,
                                                                      "version": package.version}]}) == (str(root),)


@pytest.mark.skipif(shutil.which("apt-get") is None or not Path("/var/lib/apt/lists").is_dir(),
                    reason="needs Debian's apt-get and its package lists")
def test_unavailable_pinned_version_names_package_and_fix(tmp_path: Path) -> None:
    if subprocess.run(["apt-cache", "show", "python3-tomlkit"], capture_output=True).returncode != 0:
        pytest.skip("python3-tomlkit is not in this machine's apt lists")
    package = _fresh.FreshPackage("python3-tomlkit", "0.0.0-calib-absent", "parsing: test")
    with pytest.raises(_fresh.FreshError, match=r"python3-tomlkit=0.0.0-calib-absent is no longer downloadable") \
            as err:
        _fresh.fetch(package, tmp_path)
    assert "apt-cache policy python3-tomlkit" in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "unpacked").iterdir())


@pytest.mark.parametrize(("k", "n"), [(0, 7), (3, 10), (159, 300), (300, 300)])
def test_rates_carry_the_exact_clopper_pearson_interval(k: int, n: int) -> None:
    rows = [{"conclusive": i < k} for i in range(n)]
    rate = conclusive._rate(rows)
    # reference: scipy.stats.binomtest(k, n).proportion_ci(method="exact") (Clopper & Pearson 1934)
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    assert (rate["k"], rate["n"]) == (k, n)
    assert rate["ci95_pct"] == [round(100 * ci.low, 1), round(100 * ci.high, 1)]
    assert conclusive._rate([])["ci95_pct"] is None
