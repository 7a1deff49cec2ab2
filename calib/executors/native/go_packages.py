"""Go packages outside the standard library, built from the system's Go source tree (:mod:`.go`).

Debian ships Go libraries as source: ``golang-github-google-uuid-dev`` installs
``/usr/share/gocode/src/github.com/google/uuid``. The build sandbox already sees ``/usr`` read-only, so
the Go builds run in GOPATH mode with ``GOPATH=/tmp/gopath:/usr/share/gocode`` (:data:`GOCODE`; no
module, no proxy, no network): ``go build`` finds such a package and what it imports there, and compiles
them into the shared build cache once. On the host, before anything is built, :func:`unbuildable` checks
that a package x needs and every package it imports, transitively, are there, reading the import lines of
the files ``go build`` would compile (file names and build constraints judged for the toolchain's
``GOOS``/``GOARCH`` and Go version, cgo off), so a missing one is named
(``external package <path> is not installed (apt-get install golang-<...>-dev, ...)``) instead of x
failing to compile. Only trusted files under the source tree are read; x's import paths are checked to
be plain package paths first.
"""

from __future__ import annotations

import functools
import os
import re

from calib.executors.native.coverage_go import go_version
from calib.executors.native.go_source import declarations, external
from calib.executors.native.language import which_real

__all__ = ["GOCODE", "debian_package", "gocode", "not_installed", "unbuildable"]

#: Where Debian's ``golang-*-dev`` packages put their source (``<GOCODE>/src/<import path>``).
GOCODE = "/usr/share/gocode"

# go/build's syslist (Go 1.19): a file named *_<GOOS>.go, *_<GOARCH>.go or *_<GOOS>_<GOARCH>.go is built
# only there
_GOOS = frozenset("aix android darwin dragonfly freebsd hurd illumos ios js linux nacl netbsd openbsd plan9 "
                  "solaris windows zos".split())
_UNIX = frozenset("aix android darwin dragonfly freebsd hurd illumos ios linux netbsd openbsd solaris".split())
_GOARCH = frozenset("386 amd64 amd64p32 arm armbe arm64 arm64be loong64 mips mipsle mips64 mips64le mips64p32 "
                    "mips64p32le ppc ppc64 ppc64le riscv riscv64 s390 s390x sparc sparc64 wasm".split())
_ELEMENT = re.compile(r"[A-Za-z0-9_~+-][A-Za-z0-9._~+-]*")
# the hosts whose packages Debian names by their first three path elements (golang-github-<owner>-<repo>-dev)
_THREE = frozenset(("github.com", "gitlab.com", "bitbucket.org", "golang.org", "codeberg.org", "salsa.debian.org"))


def gocode() -> str | None:
    """The real path of the system Go source tree (:data:`GOCODE`), or None when there is none."""
    return os.path.realpath(GOCODE) if os.path.isdir(os.path.join(GOCODE, "src")) else None


def debian_package(path: str) -> str:
    """The Debian package that ships the Go package ``path``, as Debian's Go team names them: the repository's
    host without its top-level domain, then its path (``github.com/google/uuid/sub`` gives
    ``golang-github-google-uuid-dev``, ``golang.org/x/text`` ``golang-golang-x-text-dev``,
    ``gopkg.in/yaml.v3`` ``golang-gopkg-yaml.v3-dev``); a guess for other hosts."""
    parts = path.split("/")
    host = parts[0]
    root = parts[:3 if host in _THREE else 2]
    short = "google" if host == "google.golang.org" else host.rsplit(".", 1)[0] if "." in host else host
    return f"golang-{'-'.join([short, *root[1:]]).lower()}-dev"


def not_installed(path: str) -> str:
    """The reason for an external package that is not in the system Go source tree."""
    return (f"external package {path} is not installed (apt-get install {debian_package(path)}, or the package "
            f"that ships {GOCODE}/src/{path})")


@functools.cache
def _target() -> tuple[str, str, int]:
    """(GOOS, GOARCH, Go 1 minor version) of the installed toolchain; the minor is 99 when unknown."""
    go = which_real("go")
    m = re.search(r"go1\.(\d+)\S*\s+(\w+)/(\w+)", go_version(go) if go else "")
    return (m.group(2), m.group(3), int(m.group(1))) if m else ("linux", "amd64", 99)


def _tag(tag: str) -> bool:
    goos, goarch, minor = _target()
    if tag in (goos, goarch, "gc") or tag == "unix" and goos in _UNIX or tag == "linux" and goos == "android":
        return True
    m = re.fullmatch(r"go1\.(\d+)", tag)
    return bool(m) and int(m.group(1)) <= minor


def _expression(text: str) -> bool:
    """A ``//go:build`` expression (``linux && (amd64 || arm64) && !js``); True when it cannot be read."""
    tokens = re.findall(r"\|\||&&|!|\(|\)|[\w.]+|\S", text)
    at = 0

    def atom() -> bool:
        nonlocal at
        tok = tokens[at] if at < len(tokens) else ""
        at += 1
        if tok == "!":
            return not atom()
        if tok == "(":
            value = either()
            if at >= len(tokens) or tokens[at] != ")":
                raise ValueError(text)
            at += 1
            return value
        if not re.fullmatch(r"[\w.]+", tok):
            raise ValueError(text)
        return _tag(tok)

    def both() -> bool:
        nonlocal at
        value = atom()
        while at < len(tokens) and tokens[at] == "&&":
            at += 1
            value = atom() and value
        return value

    def either() -> bool:
        nonlocal at
        value = both()
        while at < len(tokens) and tokens[at] == "||":
            at += 1
            value = both() or value
        return value

    try:
        value = either()
        return value if at == len(tokens) else True
    except ValueError:
        return True


def _plus_build(line: str) -> bool:
    """One ``// +build`` line: options separated by spaces, any of which holds; terms of an option by commas."""
    return any(all(not _tag(t[1:]) if t.startswith("!") else _tag(t) for t in option.split(","))
               for option in line.split())


def _name_builds(name: str) -> bool:
    """Whether go build compiles the file ``name`` of a package here (its name's ``_GOOS``/``_GOARCH``)."""
    if name.startswith(("_", ".")) or not name.endswith(".go") or name.endswith("_test.go"):
        return False
    stem = name.split(".", 1)[0]
    if "_" not in stem:
        return True
    parts = stem[stem.index("_"):].split("_")
    goos, goarch, _ = _target()
    if len(parts) >= 3 and parts[-2] in _GOOS and parts[-1] in _GOARCH:
        return _tag(parts[-2]) and parts[-1] == goarch
    if parts[-1] in _GOOS:
        return _tag(parts[-1])
    return parts[-1] == goarch if parts[-1] in _GOARCH else True


def _file_imports(file: str) -> tuple[str, ...] | None:
    """The import paths of a Go file, or None when go build leaves it out here (a build constraint, or
    cgo: ``import "C"``)."""
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ()
    package = re.search(r"^package\s", text, re.M)
    before = text[:package.start()] if package else ""
    found = re.findall(r"^//go:build\s(.*)$", before, re.M)
    if found and not _expression(found[0]):
        return None
    if not found and not all(_plus_build(line) for line in re.findall(r"^//\s*\+build\s(.*)$", before, re.M)):
        return None
    cut = len(text)  # the imports come before every other declaration
    for m in re.finditer(r"^(?:func|type|var|const)\b", text, re.M):
        last = declarations(text[:m.end()])[-1:]
        if last and last[0].start == m.start():
            cut = m.start()
            break
    paths = tuple(i.path for d in declarations(text[:cut]) if d.kind == "import" for i in d.imports)
    return None if "C" in paths else paths


def _package_dir(path: str, importer: str, root: str) -> str | None:
    """The folder of ``path`` imported from the folder ``importer`` (under ``<root>/src``; "" for x): a
    ``vendor`` folder of the importer or above it, else ``<root>/src/<path>``."""
    src = os.path.join(root, "src")
    here = importer
    while here and (here == src or here.startswith(src + os.sep)):
        vendored = os.path.join(here, "vendor", path)
        if os.path.isdir(vendored):
            return vendored
        here = os.path.dirname(here)
    direct = os.path.join(src, path)
    return direct if os.path.isdir(direct) else None


def _valid(path: str) -> bool:
    return all(_ELEMENT.fullmatch(e) for e in path.split("/"))


@functools.lru_cache(maxsize=4096)
def unbuildable(path: str) -> str:
    """"" when ``path`` is a standard package, or is installed in the system Go source tree together with
    every non-standard package it imports, transitively; else why not (the reason of an ``unsupported``
    sample: the first package missing, named with the package that would install it)."""
    if not external(path):
        return ""
    if path == "C" or not _valid(path):
        return f"external package {path}"
    root = gocode()
    if root is None:
        return not_installed(path)
    done: set[str] = set()  # the folders read
    todo: list[tuple[str, str, str]] = [(path, "", "")]  # (import path, importing folder, importing path)
    while todo:
        want, importer, by = todo.pop()
        if not _valid(want):
            return f"external package {want} (imported by {by})"
        folder = _package_dir(want, importer, root)
        if folder in done:
            continue
        try:
            files = sorted(n for n in os.listdir(folder) if _name_builds(n)) if folder else []
        except OSError:
            files = []
        imports = [got for n in files if (got := _file_imports(os.path.join(folder or "", n))) is not None]
        if folder is None or not imports:
            missing = not_installed(want) if folder is None else \
                f"external package {want} has no Go file to build in {folder}"
            return missing + (f" (imported by {by})" if by else "")
        done.add(folder)
        todo += [(name, folder, want) for name in sorted({p for got in imports for p in got}) if external(name)]
    return ""
