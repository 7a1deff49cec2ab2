"""The jars of the system Java library folder (Debian's ``/usr/share/java``, packages ``lib<...>-java``)
that a Java x needs (docs/native-executors.md, "Java", "Libraries").

An ``import`` outside the JDK (or a fully qualified name in the code) is resolved to the jar that holds the
class: :func:`jar_index` reads the entries of every jar of the folder (``zipfile`` on the host: these are
system files, not the sample's) and keeps each jar's contents cached by its real path, size and
modification time, so a sample only lists the folder. A file installed under several names
(``commons-codec-1.15.jar`` -> ``commons-codec.jar``) is one jar, named by its unversioned name. Where
several jars hold a class, the one with an unversioned name wins, then the one holding more of the class's
package, then the smaller (``asm.jar`` rather than ``asm-all.jar``), then the name.
:meth:`JarIndex.closure` adds the jars their manifests' ``Class-Path`` names. Only jars whose real path lies
under ``/usr`` are used: the build and run sandboxes bind ``/usr`` read-only, nothing else of the host.
"""

from __future__ import annotations

import os
import re
import urllib.parse
import zipfile
from dataclasses import dataclass, field

__all__ = ["JAR_DIR", "JarIndex", "jar_index", "not_installed"]

#: Debian's folder of Java libraries (``lib<...>-java`` packages install their jars there)
JAR_DIR = "/usr/share/java"
#: What a jar's real path may look like to be put on a classpath (``:`` and blanks never appear)
_SAFE = re.compile(r"^/[\w./+~-]+\.jar$")
_VERSIONED = re.compile(r"[-_]\d[\w.~+-]*\.jar$")


@dataclass(frozen=True)
class _Contents:
    classes: frozenset[str]  # "org/foo/Bar", "org/foo/Bar$Inner"
    packages: dict[str, int]  # "org/foo" -> how many classes of it the jar holds
    class_path: tuple[str, ...]  # real paths of the jars its manifest's Class-Path names (existing ones)


#: real path -> ((size, mtime_ns), contents): a jar is read again only when it changed
_READ: dict[str, tuple[tuple[int, int], _Contents]] = {}


def _class_path(jar: str, z: zipfile.ZipFile) -> tuple[str, ...]:
    try:
        raw = z.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except KeyError:
        return ()
    lines: list[str] = []
    for line in raw.splitlines():  # a line starting with one space continues the one before
        if line.startswith(" ") and lines:
            lines[-1] += line[1:]
        else:
            lines.append(line)
    entries = next((v.split() for k, _, v in (x.partition(":") for x in lines) if k.strip().lower() == "class-path"),
                   [])
    out = []
    for entry in entries:  # URLs relative to the jar's own location
        path = urllib.parse.unquote(entry.removeprefix("file:"))
        path = os.path.realpath(os.path.join(os.path.dirname(jar), path))
        if path.endswith(".jar") and os.path.isfile(path):
            out.append(path)
    return tuple(dict.fromkeys(out))


def _contents(jar: str, key: tuple[int, int]) -> _Contents | None:
    """The classes of the jar at real path ``jar`` whose (size, mtime_ns) is ``key`` (cached by it), None
    when it is unreadable."""
    cached = _READ.get(jar)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with zipfile.ZipFile(jar) as z:
            names = z.namelist()
            class_path = _class_path(jar, z)
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    classes: set[str] = set()
    for name in names:
        if not name.endswith(".class"):
            continue
        name = re.sub(r"^META-INF/versions/\d+/", "", name[:-6])
        if name.startswith("META-INF/") or name.rsplit("/", 1)[-1] in ("module-info", "package-info"):
            continue
        classes.add(name)
    packages: dict[str, int] = {}
    for name in classes:
        package = name.rpartition("/")[0]
        packages[package] = packages.get(package, 0) + 1
    got = _Contents(frozenset(classes), packages, class_path)
    _READ[jar] = (key, got)
    return got


@dataclass
class JarIndex:
    """The jars of one folder: by class and by package, each list best first."""

    names: dict[str, str] = field(default_factory=dict)  # real path -> its name in the folder (unversioned first)
    by_class: dict[str, list[str]] = field(default_factory=dict)  # "org/foo/Bar" -> real paths
    packages: dict[str, list[str]] = field(default_factory=dict)  # "org/foo" -> real paths
    roots: frozenset[str] = frozenset()  # first segments of every package ("org", "com", ...)
    under: str = "/usr/"  # where the jars' real paths lie (what the sandboxes bind)

    def provider(self, dotted: str) -> str | None:
        """The jar (real path) holding class ``dotted`` (``org.foo.Bar``; a nested class as ``org.foo.Bar.Inner``
        too), or None."""
        parts = dotted.split(".")
        for k in range(len(parts) - 1, 0, -1):  # the longest package first
            jars = self.by_class.get("/".join(parts[:k]) + "/" + "$".join(parts[k:]))
            if jars:
                return jars[0]
        return None

    def members(self, dotted: str, names: set[str]) -> list[str]:
        """The jars holding a type of package (or class) ``dotted`` named in ``names`` (a wildcard import)."""
        base = dotted.replace(".", "/")
        out = []
        for name in sorted(names):
            for sep in ("/", "$"):
                jars = self.by_class.get(base + sep + name)
                if jars:
                    out.append(jars[0])
        return list(dict.fromkeys(out))

    def has_package(self, dotted: str) -> bool:
        return dotted.replace(".", "/") in self.packages

    def closure(self, jars: list[str]) -> tuple[str, ...]:
        """``jars`` and, transitively, the jars their manifests' ``Class-Path`` names (those under
        :attr:`under`; the others are left out)."""
        out: list[str] = []
        todo = list(jars)
        while todo:
            jar = todo.pop(0)
            if jar in out or not _SAFE.match(jar) or not jar.startswith(self.under):
                continue
            out.append(jar)
            try:
                stat = os.stat(jar)
            except OSError:
                continue
            got = _contents(jar, (stat.st_size, stat.st_mtime_ns))
            todo += list(got.class_path) if got else []
        return tuple(out)


_INDEX: dict[str, tuple[tuple[tuple[str, str, int, int], ...], JarIndex]] = {}


def jar_index(folder: str = JAR_DIR, under: str = "/usr/") -> JarIndex:
    """The index of the jars in ``folder`` whose real paths lie under ``under`` (rebuilt only when a jar was
    added, removed or changed; a jar's entries are read only when it changed)."""
    listing = []
    try:
        entries = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".jar"))
    except OSError:
        entries = []
    for name in entries:
        real = os.path.realpath(os.path.join(folder, name))
        try:
            stat = os.stat(real)
        except OSError:
            continue
        if real.startswith(under) and _SAFE.match(real):
            listing.append((name, real, stat.st_size, stat.st_mtime_ns))
    key = tuple(listing)
    cached = _INDEX.get(folder)
    if cached is not None and cached[0] == key:
        return cached[1]
    index = JarIndex(under=under)
    contents: dict[str, _Contents] = {}
    for name, real, size, mtime in listing:
        got = _contents(real, (size, mtime))
        if got is None:
            continue
        contents[real] = got
        best = index.names.get(real)
        if best is None or _rank_name(name) < _rank_name(best):
            index.names[real] = name
    for real, got in contents.items():
        for name in got.classes:
            index.by_class.setdefault(name, []).append(real)
        for package in got.packages:
            index.packages.setdefault(package, []).append(real)

    def rank(real: str, package: str) -> tuple[bool, int, int, str]:
        name, got = index.names[real], contents[real]
        return bool(_VERSIONED.search(name)), -got.packages.get(package, 0), len(got.classes), name

    for name, jars in index.by_class.items():
        package = name.rpartition("/")[0]
        jars.sort(key=lambda real, package=package: rank(real, package))
    for package, jars in index.packages.items():
        jars.sort(key=lambda real, package=package: rank(real, package))
    index.roots = frozenset(p.split("/", 1)[0] for p in index.packages)
    _INDEX[folder] = (key, index)
    return index


def _rank_name(name: str) -> tuple[bool, int, str]:
    """Names of one file: the unversioned first, then the shorter, then by name."""
    return bool(_VERSIONED.search(name)), len(name), name


def not_installed(name: str) -> str:
    """The ``unsupported`` reason of a package (or class) no jar provides."""
    return (f"external package {name} is not installed (no jar in {JAR_DIR} provides it; apt-get install "
            "the lib...-java package that does)")
