"""A seeded sample of functions from code never used during calib's development (``conclusive.py --fresh``).

The code comes from Debian's pure-Python ``python3-*`` packages listed, at pinned versions, in
``benchmarks/fresh-packages.txt`` (none installed on the development machine, none a calib dependency):

1. :func:`fetch` downloads each with ``apt-get download PACKAGE=VERSION`` (apt checks the ``.deb`` against the
   signed archive index) and unpacks it with ``dpkg-deb -x`` into ``CACHE/unpacked/PACKAGE_VERSION``
   (default cache ``~/.cache/calib-bench/fresh``); nothing is installed and nothing is imported on the host;
2. :func:`fresh_pools` extracts the functions of every top-level module of the package's
   ``usr/lib/python3/dist-packages`` with the default sampler's code and rules
   (:func:`_functions.package_functions`: 10-50 body lines, no tests, vendored or generated files), exact
   duplicates dropped across files, and also every function that is an exact duplicate of one in the
   development pools (the standard library and :data:`_functions.PACKAGES`, as the default sampler sees them);
3. :func:`sample_fresh` spreads ``n`` over the Debian packages (:func:`_functions.spread`, round robin in name
   order) with one ``random.Random(seed)`` and shuffles them: same list, same interpreter, same seed, same sample.

A pinned version the archive no longer serves stops the run with a one-line :class:`FreshError` naming the
package and how to update the list.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _functions import Function, package_functions, spread, stdlib_pool, third_party_pool

from calib.data.extract import Deduplicator

__all__ = ["DEFAULT_CACHE", "DIST_PACKAGES", "LIST", "FreshError", "FreshPackage", "development_keys", "fetch",
           "fresh_pools", "import_roots", "read_list", "sample_fresh", "unpack"]

LIST = Path(__file__).resolve().with_name("fresh-packages.txt")
DEFAULT_CACHE = Path.home() / ".cache" / "calib-bench" / "fresh"
DIST_PACKAGES = Path("usr/lib/python3/dist-packages")
_DONE = ".calib-unpacked"  # written last into an unpacked package: the deb's SHA-256


class FreshError(RuntimeError):
    """The package list or a package of it cannot be used (the message says which and how to fix it)."""


@dataclass(frozen=True)
class FreshPackage:
    """One line of the package list."""

    name: str  # Debian binary package, e.g. python3-tomlkit
    version: str  # Debian version, e.g. 0.11.7-1
    why: str  # "domain: why chosen"


def read_list(path: Path = LIST) -> list[FreshPackage]:
    """The packages of ``path``: ``PACKAGE VERSION DOMAIN: WHY`` per line, ``#`` comment lines and blanks skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise FreshError(f"fresh package list {path}: {exc.strerror}; pass an existing file to --fresh-list") from exc
    packages: dict[str, FreshPackage] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].startswith("python3-"):
            raise FreshError(f"{path}:{number}: need 'python3-PACKAGE VERSION domain: why', got {line.strip()!r}")
        if parts[0] in packages:
            raise FreshError(f"{path}:{number}: {parts[0]} is listed twice; keep one line per package")
        packages[parts[0]] = FreshPackage(*parts)
    if not packages:
        raise FreshError(f"{path}: no packages listed; add 'python3-PACKAGE VERSION domain: why' lines")
    return list(packages.values())


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, timeout=300)
    except FileNotFoundError as exc:
        raise FreshError(f"{args[0]} not found: --fresh needs Debian's apt-get and dpkg-deb") from exc


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("W:")]
    return lines[-1] if lines else "no message"


def unpack(package: FreshPackage, cache: Path = DEFAULT_CACHE, *, list_path: Path = LIST,
           architecture_all: bool = True) -> tuple[Path, str]:
    """The unpacked ``.deb`` of ``package`` and its SHA-256 (downloaded and unpacked into ``cache`` on first
    use, reused afterwards); ``architecture_all``: refuse a package built for one architecture."""
    target = Path(cache) / "unpacked" / f"{package.name}_{package.version.replace(':', '%3a')}"
    done = target / _DONE
    if not done.is_file():
        (Path(cache) / "unpacked").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix="download-") as tmp:
            Path(tmp).chmod(0o755)
            got = _run(["apt-get", "download", "-q", f"{package.name}={package.version}"], cwd=Path(tmp))
            debs = sorted(Path(tmp).glob("*.deb"))
            if got.returncode != 0 or len(debs) != 1:
                raise FreshError(
                    f"{package.name}={package.version} is no longer downloadable ({_last_line(got.stderr)}); "
                    f"update its version in {list_path} to the Candidate of `apt-cache policy {package.name}` "
                    f"(after `apt-get update`) or drop the line")
            fields = _run(["dpkg-deb", "-f", str(debs[0]), "Version", "Architecture"]).stdout
            if f"Version: {package.version}" not in fields or (architecture_all and "Architecture: all" not in fields):
                raise FreshError(f"{debs[0].name}: not {package.version} for architecture all ({fields.split()}); "
                                 f"list only pure-Python packages in {list_path}")
            digest = hashlib.sha256(debs[0].read_bytes()).hexdigest()
            unpacked = Path(tmp) / "root"
            got = _run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)])
            if got.returncode != 0:
                raise FreshError(f"dpkg-deb -x {debs[0].name}: {_last_line(got.stderr)}")
            (unpacked / _DONE).write_text(digest + "\n", encoding="utf-8")
            shutil.rmtree(target, ignore_errors=True)
            unpacked.rename(target)
    return target, done.read_text(encoding="utf-8").strip()


def fetch(package: FreshPackage, cache: Path = DEFAULT_CACHE, *, list_path: Path = LIST) -> tuple[Path, str]:
    """The unpacked ``dist-packages`` folder of ``package`` and its ``.deb``'s SHA-256 (:func:`unpack`)."""
    target, digest = unpack(package, cache, list_path=list_path)
    root = target / DIST_PACKAGES
    if not root.is_dir():
        raise FreshError(f"{package.name}: no {DIST_PACKAGES} in the package (not a Python 3 library); "
                         f"drop it from {list_path}")
    return root, digest


def _tops(root: Path) -> list[str]:
    """Top-level modules of a dist-packages folder: packages (folders) and single ``.py`` files."""
    names = {p.name if p.is_dir() else p.stem for p in root.iterdir()
             if (p.is_dir() and p.name.isidentifier()) or (p.suffix == ".py" and p.stem.isidentifier())}
    return sorted(names)


def _key(fn: Function) -> bytes:
    return Deduplicator.key({"language": "python", "signature": fn.text, "body": ""})


def development_keys(min_lines: int = 10, max_lines: int = 50) -> set[bytes]:
    """Digests of every function the default sampler can draw (standard library and installed PACKAGES)."""
    dedup = Deduplicator()
    pools = [stdlib_pool(min_lines, max_lines, dedup), *third_party_pool(min_lines, max_lines, dedup).values()]
    return {_key(fn) for pool in pools for fn in pool}


def fresh_pools(roots: dict[str, Path], min_lines: int = 10, max_lines: int = 50,
                seen: frozenset[bytes] | set[bytes] = frozenset()) -> tuple[dict[str, list[Function]], int]:
    """Functions in range per Debian package (``roots``: package -> its dist-packages folder), and how many
    were dropped as exact duplicates of ``seen`` (digests of functions used during development)."""
    dedup = Deduplicator()
    pools: dict[str, list[Function]] = {}
    dropped = 0
    for name, root in sorted(roots.items()):
        found = [replace(fn, package=name) for top in _tops(root)
                 for fn in package_functions(root, top, "fresh", dedup, min_lines, max_lines)]
        kept = [fn for fn in found if _key(fn) not in seen]
        dropped += len(found) - len(kept)
        if kept:
            pools[name] = kept
    return pools, dropped


def sample_fresh(n: int, seed: int, *, list_path: Path = LIST, cache: Path = DEFAULT_CACHE, min_lines: int = 10,
                 max_lines: int = 50, exclude: frozenset[str] = frozenset(),
                 ) -> tuple[list[Function], dict[str, Any]]:
    """``n`` fresh functions (spread over the listed packages, shuffled) and the sample's description:
    the list, the seed, every package's version, ``.deb`` SHA-256, pool size and share of the sample.
    ``exclude``: function ids left out of the pools before drawing (the functions of tuning samples, so
    that a held-out sample shares none of them)."""
    packages = read_list(list_path)
    fetched = {p.name: fetch(p, cache, list_path=list_path) for p in packages}
    pools, dropped = fresh_pools({name: root for name, (root, _) in fetched.items()}, min_lines, max_lines,
                                 development_keys(min_lines, max_lines))
    excluded = 0
    for name in list(pools) if exclude else ():
        kept = [fn for fn in pools[name] if fn.function_id not in exclude]
        excluded += len(pools[name]) - len(kept)
        if kept:
            pools[name] = kept
        else:
            del pools[name]
    rng = random.Random(seed)
    picked = spread(rng, pools, n)
    rng.shuffle(picked)
    drawn: dict[str, int] = {}
    for fn in picked:
        drawn[fn.package] = drawn.get(fn.package, 0) + 1
    description = {
        "kind": "fresh", "seed": seed, "list": str(list_path),
        "list_sha256": hashlib.sha256(Path(list_path).read_bytes()).hexdigest(), "cache": str(cache),
        "pool": sum(len(v) for v in pools.values()), "dropped_seen_in_development": dropped,
        "excluded": excluded,
        "packages": [{"name": p.name, "version": p.version, "deb_sha256": fetched[p.name][1],
                      "pool": len(pools.get(p.name, [])), "drawn": drawn.get(p.name, 0)} for p in packages],
    }
    return picked, description


def import_roots(description: dict[str, Any]) -> tuple[str, ...]:
    """The unpacked dist-packages folders of a fresh sample (its ``own_package`` import paths)."""
    cache = Path(description["cache"])
    return tuple(str(cache / "unpacked" / f"{p['name']}_{p['version'].replace(':', '%3a')}" / DIST_PACKAGES)
                 for p in description["packages"])
