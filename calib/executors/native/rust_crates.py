"""External crates for Rust: the crates of the system's Cargo registry, compiled once in the build sandbox.

Debian installs crates as source under ``/usr/share/cargo/registry/<package>-<version>/`` (packages
``librust-<package>-dev``; :data:`REGISTRY`). A crate x uses (``md5::compute``) is looked up there
(:func:`resolve`): its folder is found by its name in code (``foo_bar`` is package ``foo_bar`` or
``foo-bar``), the highest installed version whose library is named so; its ``Cargo.toml`` (read with
:mod:`tomllib`) gives the library's name, edition and path, its features and its ``[dependencies]``
(with those of ``[target.'cfg(...)'.dependencies]`` tables true for this host, ``rustc --print cfg``).
Features are resolved as Cargo does for one package graph: the default features of the crates x uses,
the features each dependency asks for (``features = [...]``, its defaults unless ``default-features =
false``), ``dep:``/``name/feature``/``name?/feature`` items and optional dependencies, unified per crate.
Each dependency is the highest installed version its requirement allows. Refused, with the reason: a crate
or dependency that is not installed (the apt hint), one with a build script (``build.rs``, ``build =``) or a
procedural macro crate (calib runs no code at build time), an unreadable manifest, a dependency cycle.

:func:`prepare_crates` (the Rust :attr:`Language.prepare_build`) compiles every crate of the graph,
dependencies first, with ``rustc --crate-type lib`` (no coverage instrumentation: x's line coverage counts
x's lines only) in the build sandbox through :func:`calib.executors.native.warm.prepared`: one shared
directory per toolchain, crate version, features and dependencies' builds
(``~/.cache/calib/native-warm/rust-crate-<package>-<version>-<key>``), made once in a fresh directory and
bound read-only afterwards. The program is then built with ``--extern <name>=<rlib>`` for the crates x
uses and ``-L dependency=<dir>`` for every crate of the graph. The crate sources are system data; the only
code under test is x and its file, compiled afterwards like any variant.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from calib.executors.native.language import Tools, Warm
from calib.executors.native.sandbox import inside
from calib.executors.native.types import Signature
from calib.executors.native.warm import digest, prepared
from calib.executors.sandbox import Sandbox

__all__ = ["REGISTRY", "Crate", "Plan", "allows", "crates_of", "debian_package", "prepare_crates", "resolve"]

#: Debian's crate registry (read at call time: tests point it elsewhere; not under /tmp or /work, which the
#: sandbox's own tmpfs hide).
REGISTRY = "/usr/share/cargo/registry"
_BUILD_MEMORY = 8 << 30


def debian_package(name: str) -> str:
    """The Debian package of a crate: ``librust-<name>-dev``, ``_`` written ``-``."""
    return f"librust-{name.lower().replace('_', '-')}-dev"


def crates_of(sig: Signature) -> tuple[str, ...]:
    """The external crates x uses, by their name in code (:func:`rust.parse_rust_in` puts them in ``preamble``)."""
    return tuple(value for key, value in sig.preamble if key == "crate")


@dataclass(frozen=True)
class Dep:
    """One entry of a manifest's ``[dependencies]``."""

    name: str  # the name the crate's code uses (the table key)
    package: str
    req: str
    optional: bool = False
    defaults: bool = True
    features: tuple[str, ...] = ()


@dataclass
class Crate:
    """One registry crate of the graph, with what :func:`resolve` chose for it."""

    folder: str
    package: str
    version: str
    lib: str  # the library's crate name
    edition: str
    src: str  # the library's root file (path in the folder)
    table: dict[str, list[str]]  # [features]
    deps: tuple[Dep, ...]
    refusal: str  # why calib does not build it ("": it does)
    manifest: str  # the text of Cargo.toml
    features: set[str] = field(default_factory=set)
    via: str = ""  # the crate of x's that needs it (for reasons)
    edges: dict[str, str] = field(default_factory=dict)  # extern name -> folder of the dependency


@dataclass(frozen=True)
class Plan:
    """The crates to build, dependencies first, and the folder of each crate x uses by its name."""

    order: tuple[Crate, ...]
    direct: tuple[tuple[str, str], ...]


def _version_key(version: str) -> tuple[int, ...]:
    core, _, pre = version.partition("+")[0].partition("-")
    nums = [int(n) if n.isdigit() else 0 for n in core.split(".")][:3]
    return (*nums, *[0] * (3 - len(nums)), 0 if pre else 1)


def allows(req: str, version: str) -> bool:
    """Whether Cargo's version requirement ``req`` (``0.7``, ``^1.2``, ``~1.2.3``, ``>=1, <3``, ``1.*``, ``*``)
    allows ``version`` (pre-releases compared by their numbers)."""
    have = _version_key(version)[:3]
    for part in filter(None, (p.strip() for p in req.split(","))):
        m = re.fullmatch(r"(\^|~|=|>=|<=|>|<)?\s*(\d+|\*)(?:\.(\d+|\*))?(?:\.(\d+|\*))?(?:[-+][\w.+-]*)?", part)
        if not m:
            return False
        op, nums = m.group(1) or "^", [None if g in (None, "*") else int(g) for g in m.group(2, 3, 4)]
        if nums[0] is None:
            continue
        if None in nums and op == "^" and "*" in part:
            op = "="
        major, minor, patch = nums
        low = (major, minor or 0, patch or 0)
        if op in ("^", "~", "="):
            if op == "=" and patch is not None:
                high = (major, minor, patch + 1)
            elif minor is None:
                high = (major + 1, 0, 0)
            elif op != "^" or major > 0:
                high = (major, minor + 1, 0) if op != "^" else (major + 1, 0, 0)
            else:
                high = (0, minor + 1, 0) if minor > 0 or patch is None else (0, 0, (patch or 0) + 1)
            ok = low <= have < high
        else:
            ok = {">=": have >= low, "<=": have <= low, ">": have > low, "<": have < low}[op]
        if not ok:
            return False
    return True


def _rustc() -> str | None:
    return shutil.which("rustc") or shutil.which("rustc", path=os.path.expanduser("~/.cargo/bin"))


@functools.lru_cache(maxsize=4)
def _host(rustc: str | None) -> tuple[frozenset[str], str]:
    """This host's ``cfg`` values (``unix``, ``target_os="linux"``, ...) and target triple, from rustc."""
    def out(*args: str) -> str:
        try:
            return subprocess.run([rustc or "rustc", *args], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    triple = re.search(r"^host:\s*(\S+)", out("-vV"), flags=re.M)
    return frozenset(out("--print", "cfg").split()), triple.group(1) if triple else ""


def _cfg(spec: str, cfg: frozenset[str], triple: str) -> bool:
    """Whether a ``[target.<spec>]`` table applies here: a triple, or ``cfg(...)`` with all/any/not."""
    if not spec.startswith("cfg("):
        return spec == triple
    tokens, pos = re.findall(r'[A-Za-z_]\w*|"[^"]*"|[(),=]', spec[4:-1]), 0

    def value() -> bool:
        nonlocal pos
        name = tokens[pos]
        pos += 1
        if name in ("all", "any", "not") and tokens[pos] == "(":
            pos, got = pos + 1, []
            while tokens[pos] != ")":
                got.append(value())
                pos += tokens[pos] == ","
            pos += 1
            return all(got) if name == "all" else any(got) if name == "any" else not got[0]
        if pos < len(tokens) and tokens[pos] == "=":
            pos += 2
            return f"{name}={tokens[pos - 1]}" in cfg
        return name in cfg

    try:
        return value()
    except IndexError:
        return False


def _deps(table: dict[str, Any]) -> list[Dep]:
    out = []
    for name, spec in table.items():
        spec = {"version": spec} if isinstance(spec, str) else spec if isinstance(spec, dict) else {}
        out.append(Dep(name, str(spec.get("package", name)), str(spec.get("version", "*")), bool(spec.get("optional")),
                       spec.get("default-features", spec.get("default_features", True)) is not False,
                       tuple(str(f) for f in spec.get("features", ()))))
    return out


@functools.lru_cache(maxsize=256)
def _manifest(folder: str) -> Crate | str:
    """A registry folder's crate, or why its Cargo.toml cannot be read."""
    path = os.path.join(folder, "Cargo.toml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"{path} cannot be read ({type(exc).__name__})"
    package, lib = data.get("package", {}), data.get("lib", {})
    name, version = str(package.get("name", "")), str(package.get("version", ""))
    deps = _deps(data.get("dependencies", {}))
    cfg, triple = _host(_rustc())
    for spec, tables in data.get("target", {}).items():
        if isinstance(tables, dict) and _cfg(spec.replace(" ", ""), cfg, triple):
            deps += _deps(tables.get("dependencies", {}))
    build = package.get("build")
    refusal = ""
    if build not in (None, False) or (build is None and os.path.isfile(os.path.join(folder, "build.rs"))):
        refusal = "has a build script (build.rs), which calib does not run"
    elif lib.get("proc-macro") or lib.get("proc_macro"):
        refusal = "is a procedural macro crate, which calib does not build"
    table = {str(k): [str(v) for v in vs] for k, vs in data.get("features", {}).items() if isinstance(vs, list)}
    return Crate(folder, name, version, str(lib.get("name", name.replace("-", "_"))),
                 str(package.get("edition", "2015")), str(lib.get("path", "src/lib.rs")), table, tuple(deps),
                 refusal, text)


def _installed(package: str, root: str) -> list[str]:
    """The registry folders of ``package``, highest version first."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    found = [(m.group(1), n) for n in names if (m := re.fullmatch(rf"{re.escape(package)}-(\d+\.\d+\.\d+\S*)", n))]
    return [os.path.join(root, n) for _, n in sorted(found, key=lambda p: _version_key(p[0]), reverse=True)]


def _expand(crate: Crate, wanted: set[str]) -> tuple[set[str], set[str], dict[str, set[str]]]:
    """(the features on, the optional dependencies they activate, features asked of dependencies)."""
    optional = {d.name for d in crate.deps if d.optional}
    on: set[str] = set()
    active: set[str] = set()
    asked: dict[str, set[str]] = {}
    todo = [f for f in wanted if f != "default" or "default" in crate.table]
    while todo:
        feature = todo.pop()
        if feature in on:
            continue
        on.add(feature)
        if feature not in crate.table:
            active |= {feature} & optional  # the implicit feature of an optional dependency
            continue
        for item in crate.table[feature]:
            if item.startswith("dep:"):
                active.add(item[4:])
            elif "/" in item:
                dep, _, sub = item.partition("/")
                if not dep.endswith("?"):
                    active |= {dep} & optional
                asked.setdefault(dep.rstrip("?"), set()).add(sub)
            else:
                todo.append(item)
    hidden = {item[4:] for items in crate.table.values() for item in items if item.startswith("dep:")}
    return on | (active - hidden), active, asked


@functools.lru_cache(maxsize=64)
def _resolve(names: tuple[str, ...], root: str) -> Plan | str:
    graph: dict[str, Crate] = {}
    wanted: dict[str, set[str]] = {}
    top: dict[str, str] = {}  # folder -> the crate of x's that brought it in (for reasons)
    direct = []
    for name in names:
        folders = [f for pkg in dict.fromkeys((name, name.replace("_", "-"))) for f in _installed(pkg, root)]
        crates = [c for f in folders if not isinstance(c := _manifest(f), str) and c.lib == name]
        if not crates:
            return (f"external crate {name} is not installed (apt-get install {debian_package(name)}), "
                    "or a module of x's own crate in another file")
        direct.append((name, crates[0].folder))
        wanted[crates[0].folder], top[crates[0].folder] = {"default"}, name
    changed = True
    while changed:
        changed = False
        for folder in list(wanted):
            crate = graph.get(folder) or _manifest(folder)
            if isinstance(crate, str):
                return f"external crate {top[folder]}: {crate}"
            crate = graph.get(folder) or replace(crate, features=set(), edges={}, via=top[folder])  # cached: as read
            if crate.refusal:
                return f"external crate {top[folder]}: {crate.package} {crate.version} {crate.refusal}"
            graph[folder] = crate
            crate.features, active, asked = _expand(crate, wanted[folder])
            for dep in crate.deps:
                if dep.optional and dep.name not in active:
                    continue
                target = next((f for f in _installed(dep.package, root)
                               if allows(dep.req, os.path.basename(f)[len(dep.package) + 1:])), None)
                if target is None:
                    return (f"external crate {top[folder]}: {crate.package} {crate.version} needs {dep.package} "
                            f"{dep.req}, which is not installed (apt-get install {debian_package(dep.package)})")
                crate.edges[dep.name.replace("-", "_")] = target
                want = {*dep.features, *(["default"] if dep.defaults else []), *asked.get(dep.name, ())}
                if target not in wanted or not want <= wanted[target]:
                    wanted.setdefault(target, set()).update(want)
                    top.setdefault(target, top[folder])
                    changed = True
    order: list[Crate] = []
    state: dict[str, int] = {}

    def visit(folder: str) -> bool:  # depth first, dependencies before their users; False on a cycle
        if state.get(folder) == 2:
            return True
        if state.get(folder) == 1:
            return False
        state[folder] = 1
        if not all(visit(f) for f in graph[folder].edges.values()):
            return False
        state[folder] = 2
        order.append(graph[folder])
        return True

    for name, folder in direct:
        if not visit(folder):
            return f"external crate {name}: its dependencies form a cycle"
    return Plan(tuple(order), tuple(direct))


def resolve(names: tuple[str, ...] | list[str], root: str | None = None) -> Plan | str:
    """The crates to build for the crates ``names`` x uses (module docstring), or why they cannot be."""
    return _resolve(tuple(sorted(set(names))), root or REGISTRY)


def _stamp(folder: str) -> str:
    """What the folder's files are (names, sizes, times): a repackaged crate gets a new build."""
    parts = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(top, name))
            parts.append(f"{os.path.relpath(os.path.join(top, name), folder)}:{st.st_size}:{st.st_mtime_ns}")
    return digest(*parts)


@functools.lru_cache(maxsize=8)
def _rustc_id(rustc: str) -> str:
    try:
        return subprocess.run([rustc, "-vV"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return rustc


def _cargo_env(crate: Crate) -> tuple[tuple[str, str], ...]:
    """What Cargo tells a crate's compile (``env!("CARGO_PKG_VERSION")``)."""
    nums = (re.findall(r"\d+", crate.version) + ["0", "0", "0"])[:3]
    package = tomllib.loads(crate.manifest).get("package", {})
    return (("CARGO_PKG_NAME", crate.package), ("CARGO_PKG_VERSION", crate.version),
            ("CARGO_PKG_VERSION_MAJOR", nums[0]), ("CARGO_PKG_VERSION_MINOR", nums[1]),
            ("CARGO_PKG_VERSION_PATCH", nums[2]), ("CARGO_PKG_VERSION_PRE", crate.version.partition("-")[2]),
            ("CARGO_PKG_AUTHORS", ":".join(map(str, package.get("authors", [])))),
            ("CARGO_PKG_DESCRIPTION", str(package.get("description", ""))),
            ("CARGO_PKG_HOMEPAGE", str(package.get("homepage", ""))),
            ("CARGO_PKG_REPOSITORY", str(package.get("repository", ""))),
            ("CARGO_PKG_LICENSE", str(package.get("license", ""))), ("CARGO_MANIFEST_DIR", crate.folder),
            ("CARGO_CRATE_NAME", crate.lib))


def _argv(rustc: str, crate: Crate, key: str, deps: dict[str, tuple[str, str]], where: str) -> list[str]:
    """rustc's command for one crate; ``deps``: every crate of its graph below it, by folder: (its build
    directory as the build sees it, its rlib's name)."""
    argv = [rustc, "--crate-name", crate.lib, "--crate-type", "lib", "--edition", crate.edition,
            os.path.join(crate.folder, crate.src), "--cap-lints", "allow", "-C", "opt-level=1", "-C",
            "overflow-checks=on", "-C", "debuginfo=0", "-C", f"metadata={key}", "-C", f"extra-filename=-{key}",
            "--out-dir", where]
    for feature in sorted(crate.features):
        argv += ["--cfg", f'feature="{feature}"']
    for name, folder in sorted(crate.edges.items()):
        argv += ["--extern", f"{name}={deps[folder][0]}/{deps[folder][1]}"]
    for path, _ in deps.values():
        argv += ["-L", f"dependency={path}"]
    return argv


async def prepare_crates(sb: Sandbox, tools: Tools, sig: Signature, slots: asyncio.Semaphore) -> Tools | str:
    """The toolchain to build ``sig``'s variants with: the crates x uses built (once: module docstring) and
    bound read-only at ``/crates/<k>``, with ``--extern`` and ``-L dependency=`` added; or why they cannot be."""
    names = crates_of(sig)
    if not names:
        return tools
    plan = resolve(names)
    if isinstance(plan, str):
        return plan
    rustc = tools.exe["rustc"]
    root = os.path.realpath(REGISTRY)
    base = tools if root.startswith("/usr/") else replace(tools, ro=(*tools.ro, root))
    built: dict[str, tuple[str, str]] = {}  # folder -> (host directory, rlib name)
    below: dict[str, set[str]] = {}  # folder -> the folders of all its dependencies
    for crate in plan.order:
        below[crate.folder] = set(crate.edges.values()).union(*(below[f] for f in crate.edges.values()))
        deps = sorted(below[crate.folder])
        key = digest(_rustc_id(rustc), crate.folder, _stamp(crate.folder), crate.manifest, *sorted(crate.features),
                     *(f"{name}={built[f][0]}" for name, f in sorted(crate.edges.items())))
        mounts = {f: (inside(sb, built[f][0], f"/deps/{k}"), built[f][1]) for k, f in enumerate(deps)}
        binds = tuple((built[f][0], f"/deps/{k}", False) for k, f in enumerate(deps))
        recipe = Warm(key=lambda _tools, key=key: key, files=dict,
                      argv=lambda _tools, where, crate=crate, key=key, mounts=mounts: _argv(rustc, crate, key, mounts,
                                                                                            where))
        made = await prepared(sb, replace(base, build_binds=(*base.build_binds, *binds),
                                          build_env=(*base.build_env, *_cargo_env(crate))),
                              f"rust-crate-{crate.package}-{crate.version}", recipe, slots, _BUILD_MEMORY)
        if made is None:
            return f"external crate {crate.via}: {crate.package} {crate.version} did not build in the build sandbox"
        built[crate.folder] = (made, f"lib{crate.lib}-{key}.rlib")
    folders = [c.folder for c in plan.order]
    binds = tuple((built[f][0], f"/crates/{k}", False) for k, f in enumerate(folders))
    where = {f: inside(sb, built[f][0], f"/crates/{k}") for k, f in enumerate(folders)}
    args = [arg for f in folders for arg in ("-L", f"dependency={where[f]}")]
    for name, folder in plan.direct:
        args += ["--extern", f"{name}={where[folder]}/{built[folder][1]}"]
    return replace(tools, build_binds=(*tools.build_binds, *binds), build_args=(*tools.build_args, *args))
