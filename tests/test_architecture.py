"""The architecture, checked (docs/architecture.md): import contracts, no circles, no reaching into another
package's private modules, module sizes, the document's own references, and its plugin example run for real."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import grimp
import numpy as np
import pytest

import calib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(calib.__file__).resolve().parent
DOC = REPO / "docs" / "architecture.md"

#: Modules allowed over ~400 lines, each with why (data tables, or code that runs inside the sandbox,
#: stdlib only, where a split costs every batch's start-up another import).
LONG_MODULES = {
    "calib/executors/sandbox/harness/zygote.py": "in-sandbox fork server: one file the batch loads at start",
    "calib/executors/sandbox/harness/standins.py": "in-sandbox stand-in objects: loaded by every batch",
    "calib/executors/sandbox/harness/runner.py": "in-sandbox runner: loaded by every batch",
    "calib/executors/sandbox/harness/cmplog.py": "in-sandbox comparison recorder: loaded by every exploring batch",
    "calib/executors/sandbox/harness/pools.py": "in-sandbox value pools: loaded by every exploring batch",
    "calib/executors/sandbox/harness/scaffold.py": "in-sandbox module builder: loaded by every batch",
}
MAX_LINES = 420  # "about 400"


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("calib", cache_dir=None)


def test_import_linter_contracts_hold():
    """The contracts in pyproject.toml ([tool.importlinter]): layers, independence of the study kinds,
    of their report parts and of the executors, and a sandbox that knows no executor."""
    done = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())", "--no-cache"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"Contracts: (\d+) kept, 0 broken", done.stdout), done.stdout[-2000:]


def test_no_import_circles(graph):
    """No module imports itself back through others (type-checking-only imports included)."""
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("calib")}
             for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components, iterative enough for this graph
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for m in sorted(edges):
        if m not in index:
            visit(m)
    assert cycles == []


def _private_owner(module: str) -> str | None:
    """The package a private module belongs to (``calib.servers._http`` -> ``calib.servers``), or None."""
    parts = module.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_module_imports_another_packages_private_modules(graph):
    bad = []
    for m in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(m):
            owner = _private_owner(imported)
            if owner is not None and not (m == owner or m.startswith(owner + ".")):
                bad.append(f"{m} -> {imported}")
    assert bad == []


def test_modules_are_about_400_lines_at_most():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert set(long) <= set(LONG_MODULES), {k: v for k, v in long.items() if k not in LONG_MODULES}


def test_architecture_doc_names_only_modules_paths_and_groups_that_exist():
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:calib|tests|docs|benchmarks|studies|servers|scripts)/[\w./<>-]*)`", text))
    missing = [p for p in sorted(paths) if "<" not in p and not (REPO / p.rstrip("/")).exists()]
    assert missing == []
    dotted = set(re.findall(r"`(calib(?:\.[a-z_][\w]*)+)`", text))
    groups = {d for d in dotted if d.count(".") == 1 and d.split(".")[1] in {"servers", "executors", "metrics",
                                                                              "study_kinds"}}
    unresolved = []
    for name in sorted(dotted - groups):
        module = name.replace(".", "/")
        if not ((REPO / f"{module}.py").exists() or (REPO / module / "__init__.py").exists()):
            head, _, attr = name.rpartition(".")
            path = REPO / f"{head.replace('.', '/')}.py"
            init = REPO / head.replace(".", "/") / "__init__.py"
            src = path if path.exists() else init
            if not (src.exists() and re.search(rf"^(?:class|def) {attr}\b|^{attr}\b\s*[:=]",
                                               src.read_text(encoding="utf-8"), re.M)):
                unresolved.append(name)
    assert unresolved == []
    # every entry-point group the registries read is named in the document, and nothing else
    from calib._registry import Registry

    registries = [obj for mod in ("calib.servers.registry", "calib.metrics.base", "calib.executors.base",
                                  "calib.study.kinds")
                  for obj in vars(__import__(mod, fromlist=["_"])).values() if isinstance(obj, Registry)]
    assert {r.group for r in registries} == {"calib.servers", "calib.metrics", "calib.executors",
                                             "calib.study_kinds"}
    for r in registries:
        assert f"`{r.group}`" in text, r.group


def _doc_block(title: str) -> str:
    """The first fenced code block after the line ``title`` in docs/architecture.md."""
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index(title):]
    match = re.search(r"```[a-z]*\n(.*?)```", after, re.S)
    assert match is not None, title
    return match.group(1)


def test_the_plugin_example_of_the_document_works(tmp_path, monkeypatch):
    """docs/architecture.md's worked example, installed the way pip installs a package (its module and a
    dist-info with entry_points.txt on sys.path): calib finds the metric through the entry point."""
    code = _doc_block("`calib_jaccard/__init__.py`:")
    toml = _doc_block("`pyproject.toml` of the plugin:")
    site, group, name = _install(tmp_path, "calib_jaccard", code, toml)
    monkeypatch.syspath_prepend(str(site))
    assert name in {ep.name for ep in entry_points(group=group)}
    from calib.metrics import create_metric
    from calib.metrics.base import REGISTRY

    monkeypatch.delitem(REGISTRY.factories, name, raising=False)
    assert name in REGISTRY.names()
    metric = create_metric(name)
    # token-set Jaccard by hand: {def, f, (, x, ), :, return, +, 1} vs the same with 2 for 1: 8 shared of 10
    assert metric.score("def f(x): return x + 1", "def f(x): return x + 2", "python") == pytest.approx(8 / 10)
    assert metric.score("a b", "a b", "python") == 1.0
    monkeypatch.delitem(REGISTRY.factories, name, raising=False)
    assert textwrap.dedent(code)  # the block is the module as written


def _install(tmp_path: Path, package: str, code: str, toml: str) -> tuple[Path, str, str]:
    """Install ``package`` (one module) the way pip does: the module and a dist-info with its entry points."""
    group, name, target = re.search(r'\[project\.entry-points\."([\w.]+)"\]\s*\n(\w+)\s*=\s*"([\w.:]+)"',
                                    toml).groups()
    site = tmp_path / "site"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(code)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {target}\n")
    return site, group, name


def _calib_cli(*args: str, cwd: Path, site: Path | None) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    # cwd is not the plugin's folder: python -m puts the working folder on sys.path
    return subprocess.run([sys.executable, "-m", "calib", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_study_kind_example_of_the_document_runs_as_a_plugin(tmp_path):
    """docs/architecture.md's study-kind example, installed as a package: `calib study`, `calib check` and
    `calib report` find it by its entry point, validate its own spec section, and its table is what scipy says."""
    import json

    import polars as pl
    from scipy.stats import mannwhitneyu

    code = _doc_block("`calib_balance/__init__.py`:")
    toml = re.search(r'```toml\n(\[project\.entry-points\."calib\.study_kinds"\].*?)```', DOC.read_text(),
                     re.S).group(1)
    site, group, name = _install(tmp_path, "calib_balance", code, toml)
    assert (group, name) == ("calib.study_kinds", "balance")
    spec_text = _doc_block("A spec of the kind")
    work = tmp_path / "study"
    work.mkdir()
    (work / "spec.toml").write_text(spec_text)
    # members have 4 more lines than controls, give or take: the test must find them unbalanced
    rng = np.random.default_rng(7)
    rows = []
    for i in range(40):
        membership = "member" if i % 2 else "control"
        lines = int(rng.integers(3, 10)) + (4 if membership == "member" else 0)
        body = "\n" + "".join(f"    x{j} = {j}\n" for j in range(lines)) + "    return x0\n"
        rows.append({"signature": f"def f{i}(a):", "body": body, "membership": membership, "language": "python"})
    functions = pl.DataFrame(rows)
    functions.write_parquet(work / "functions.parquet")

    done = _calib_cli("study", "spec.toml", "--run-dir", "run", cwd=work, site=site)
    assert done.returncode == 0, done.stderr
    table = pl.read_parquet(work / "run" / "tables" / "balance.parquet")
    counts = {m: [b.count("\n") + 1 for b in functions.filter(pl.col("membership") == m)["body"]]
              for m in ("member", "control")}
    expected = mannwhitneyu(counts["member"], counts["control"]).pvalue  # scipy, independent of the plugin
    assert table["membership"].to_list() == ["control", "member"]
    assert table["n"].to_list() == [20, 20]
    assert table["mean_lines"].to_list() == pytest.approx([np.mean(counts["control"]), np.mean(counts["member"])])
    assert table["p_value"].to_list() == pytest.approx([expected, expected])
    assert expected < 0.05
    summary = json.loads((work / "run" / "report" / "summary.json").read_text())
    assert summary["p_value"] == pytest.approx(expected) and summary["study"]["kind"] == "balance"
    assert "Members and controls differ in body lines" in (work / "run" / "report" / "report.md").read_text()
    assert json.loads((work / "run" / "spec.json").read_text())["balance"] == {"alpha": 0.05}

    checked = _calib_cli("check", "spec.toml", "--json", cwd=work, site=site)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["stages"] == ["samples", "balance", "report"]
    again = _calib_cli("study", "spec.toml", "--run-dir", "run", cwd=work, site=site)
    assert again.returncode == 0 and "ran: none; up to date: samples, balance, report" in again.stdout

    # the kind's own section is validated like a built-in one: key and line named, exit 2
    (work / "bad.toml").write_text(spec_text.replace("alpha = 0.05", "alpha = 2"))
    bad = _calib_cli("check", "bad.toml", cwd=work, site=site)
    line = spec_text.splitlines().index("alpha = 0.05") + 1
    assert bad.returncode == 2 and f"bad.toml:{line}: balance.alpha:" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    (work / "bad.toml").write_text(spec_text.replace('paths = ["functions.parquet"]', "").replace(
        'source = "functions"', 'source = "organism"'))
    bad = _calib_cli("check", "bad.toml", cwd=work, site=site)
    assert bad.returncode == 2 and "data.source: the balance kind reads a corpus or a functions table" in bad.stderr

    # without the plugin installed: the kind is unknown, with the known ones listed
    missing = _calib_cli("check", "spec.toml", cwd=work, site=None)
    assert missing.returncode == 2 and "study.kind: 'balance' is not a study kind; use one of census" in missing.stderr
    report = _calib_cli("report", "run", cwd=work, site=None)
    assert report.returncode == 2 and "study.kind = 'balance' is not a study kind the report renders" in report.stderr
    rendered = _calib_cli("report", "run", cwd=work, site=site)
    assert rendered.returncode == 0, rendered.stderr
