"""The run record (manifest ``provenance``) in the report of every study kind: summary.json and the Methods section.

Each kind's run directory is the one its own report tests build (functional: ``_fake_run.make_run``);
its manifest gets the record ``calib.study.provenance.collect`` writes for that kind's spec in this
environment, with the servers a real stage runner recorded from loopback servers shaped like TGI 3
and vLLM (``tests/study/test_provenance.py``). The expected values are obtained independently:
``git rev-parse HEAD``, ``bwrap --version``, ``importlib.metadata``, the spec's ``study.seed`` and
what the loopback TGI says of its dtype (``torch.float16``).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from calib.report import write_report
from calib.report.record import NOT_RECORDED
from calib.report.run import setting
from calib.study import load_spec
from calib.study.provenance import collect
from calib.study.resources import Resources
from calib.study.runner import RunOptions, Stage, run_stages
from calib.study.spec import StudySpec
from tests.report._fake_run import make_run
from tests.report.extraction import test_census_report, test_extraction_report
from tests.report.probes import test_probes_report
from tests.study.test_provenance import _probe_both, _serving, _Tgi3, _Vllm

REPO = Path(__file__).resolve().parents[2]
KINDS = ("functional", "extraction", "census", "probes")
# The kinds whose stages run code: their record has a sandbox (calib/study/provenance.py).
EXECUTING = ("functional", "probes")
# text-generation 0.7 (the tgi kind's client) calls pydantic's deprecated .dict() on every request.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")

_BUILDERS: dict[str, Callable[[Path], Any]] = {
    "functional": lambda root: make_run(root, examples=0),
    "extraction": test_extraction_report.build_run,
    "census": test_census_report.build_run,
    "probes": test_probes_report.build_run,
}


def _first_line(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return (done.stdout or done.stderr).strip().splitlines()[0].strip()


def _commit() -> str | None:
    """calib's commit as git says it, or None where calib is an installed package (then the record has none)."""
    if (REPO / ".git").exists() and shutil.which("git"):
        return _first_line("git", "-C", str(REPO), "rev-parse", "HEAD")
    return None


@pytest.fixture(scope="module")
def loopback_servers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the tgi and openai kinds recorded of a TGI 3 and a vLLM server (the latter states no dtype)."""
    root = tmp_path_factory.mktemp("loopback")
    (root / "functions.parquet").write_bytes(b"")
    with _serving(_Tgi3().app()) as tgi, _serving(_Vllm().app()) as vllm:
        text = (f'[study]\nname = "loopback"\nkind = "extraction"\n\n'
                f'[servers.target]\nkind = "tgi"\nbase_url = "{tgi}"\nmax_retries = 0\n\n'
                f'[servers.reference]\nkind = "openai"\nbase_url = "{vllm}"\nmax_retries = 0\n\n'
                '[models]\ntarget = "target"\nreference = "reference"\n\n'
                '[data]\nsource = "functions"\npaths = ["functions.parquet"]\n')
        (root / "loopback.toml").write_text(text)
        spec = load_spec(root / "loopback.toml")
        stage = Stage("probe", (), "probed", "1", lambda spec, options: {}, _probe_both)
        run_stages([stage], spec, text, root / "run", options=RunOptions(progress=False), resources=Resources(spec),
                   manifest_extra=lambda: {})
    return json.loads((root / "run" / "manifest.json").read_text())["provenance"]["servers"]


def _with_record(run: Path, servers: dict[str, Any]) -> dict[str, Any]:
    """Write into ``run``'s manifest the record collected for its spec, with ``servers``; returns the record."""
    data = json.loads((run / "spec.json").read_text())
    # The record's target and reference are the loopback servers (an organism's server table would need
    # an [organism] table the run's spec has not got); the run's other servers stay as they are.
    servers_spec = {name: table for name, table in (data.get("servers") or {}).items()
                    if not str(table.get("model_dir", "")).startswith("organism:")}
    servers_spec |= {"target": {"kind": "tgi", "base_url": "http://127.0.0.1:1"},
                     "reference": {"kind": "openai", "base_url": "http://127.0.0.1:1"}}
    models = {"panel": ["target", "reference"]} if data["study"]["kind"] == "probes" else \
        {"target": "target", "reference": "reference"}
    # The extraction tests' spec reads the organism's data without an [organism] table, as no real spec may.
    reads_organism = setting(data, "data.source", "organism") == "organism"
    organism = data.get("organism") or ({"preset": "tiny"} if reads_organism else None)
    spec = StudySpec.model_validate({**data, "servers": servers_spec, "models": models, "organism": organism})
    record = collect(spec, Resources(spec), previous={"servers": servers})
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "provenance": record}))
    return record


@pytest.fixture(scope="module", params=KINDS)
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             loopback_servers: dict[str, Any]) -> dict[str, Any]:
    kind = request.param
    run = Path(_BUILDERS[kind](tmp_path_factory.mktemp(f"record-{kind}")))
    record = _with_record(run, loopback_servers)
    paths = write_report(run)
    return {"kind": kind, "run": run, "record": record, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text()}


def _provenance_part(md: str) -> str:
    """The Markdown from the Provenance heading to the References heading (both in the Methods section)."""
    start = md.index("### Provenance")
    assert md.index("## Methods") < start
    return md[start:md.index("### References", start)]


def _html_rows(html: str, anchor: str) -> list[list[str]]:
    table = re.search(rf'<table id="{anchor}">.*?</table>', html, re.S)
    assert table, f"no table {anchor} in report.html"
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S)
            if "<td>" in row]


def test_summary_states_the_commit_the_dtypes_and_the_seed(rendered):
    record = rendered["summary"]["methods"]["run_record"]
    assert record["calib_commit"] == _commit()
    if record["calib_commit"] is not None:
        assert isinstance(record["calib_dirty"], bool)
    servers = {s["server"]: s for s in record["servers"]}
    # TGI's GET /info says "torch.float16"; vLLM reports no dtype and the spec states none: null, with why.
    assert (servers["target"]["kind"], servers["target"]["dtype"], servers["target"]["model"]) == (
        "tgi", "float16", "bigcode/starcoder2-3b")
    assert servers["target"]["missing"] == []
    assert servers["reference"]["dtype"] is None and servers["reference"]["server_version"] == "0.10.1"
    assert {m["field"] for m in servers["reference"]["missing"]} == {"dtype", "revision"}
    seed = json.loads((rendered["run"] / "spec.json").read_text())["study"]["seed"]
    assert {"key": "study.seed", "value": seed} in record["seeds"]
    assert {"name": "numpy", "version": importlib.metadata.version("numpy")} in record["packages"]


def test_report_states_the_commit_the_servers_and_the_seeds(rendered):
    summary, md, html = rendered["summary"], rendered["md"], rendered["html"]
    record = summary["methods"]["run_record"]
    part = _provenance_part(md)
    commit = _commit()
    dirty = " (with uncommitted changes)" if record["calib_dirty"] else ""
    assert (f"calib commit `{commit}`{dirty};" if commit else "calib commit –;") in part
    seed = json.loads((rendered["run"] / "spec.json").read_text())["study"]["seed"]
    assert f"study.seed = {seed}" in part
    assert "| target | tgi | `bigcode/starcoder2-3b` | `733247c55e3f73af49ce8e9c7949bf14af205928` | float16 | " \
           "3.3.4 | – |" in part
    row = next(line for line in part.splitlines() if line.startswith("| reference |"))
    assert "| – | – | 0.10.1 | dtype: " in row and "revision: " in row  # nulls shown missing, with their reason
    assert f"numpy {importlib.metadata.version('numpy')}" in part
    assert "127.0.0.1" not in md and "base_url" not in md  # server addresses never reach the report

    rows = {r[0]: r for r in _html_rows(html, "run-servers-table")}
    assert rows["target"][4] == "float16" and rows["reference"][4] == "–"
    if commit:
        assert f"calib commit <code>{commit}</code>" in html
    assert f"study.seed = {seed}" in html


def test_the_sandbox_is_stated_only_for_the_kinds_that_run_code(rendered):
    part = _provenance_part(rendered["md"])
    executor = rendered["summary"]["methods"]["run_record"]["executor"]
    if rendered["kind"] not in EXECUTING:
        assert executor is None and "Sandbox:" not in part
    else:
        assert executor["toolchains"] == [] and "Compilers" not in part  # Python samples: no compiler to state
        if shutil.which("bwrap"):
            assert executor["bwrap"] == _first_line("bwrap", "--version")
            assert f"{executor['bwrap']}, PYTHONHASHSEED = 0." in part
            assert {"key": "sandbox.PYTHONHASHSEED", "value": "0"} in rendered["summary"]["methods"]["run_record"][
                "seeds"]


@pytest.fixture(scope="module")
def functional_record(tmp_path_factory: pytest.TempPathFactory, loopback_servers: dict[str, Any]) -> dict[str, Any]:
    """summary.json ``methods.run_record`` of a functional run: the shape every kind's must have."""
    run = make_run(tmp_path_factory.mktemp("shape"), examples=0)
    _with_record(run, loopback_servers)
    return json.loads(write_report(run)["summary"].read_text())["methods"]["run_record"]


def test_every_kind_has_the_same_summary_shape(rendered, functional_record):
    expected = functional_record
    record = rendered["summary"]["methods"]["run_record"]
    assert list(record) == list(expected)
    assert [list(s) for s in record["servers"]] == [list(s) for s in expected["servers"]]
    if record["executor"] is not None:
        assert list(record["executor"]) == list(expected["executor"])


def test_docs_describe_the_run_record_of_every_kind(rendered):
    doc = (REPO / "docs" / "report.md").read_text()
    headings = {"functional": "## summary.json", "extraction": "## Extraction report", "census": "## Census report",
                "probes": "## Probes report"}
    start = doc.index(headings[rendered["kind"]])
    end = doc.find("\n## ", start + 1)
    section = doc[start:end if end > 0 else len(doc)]

    def keys(value: Any) -> set[str]:
        if isinstance(value, dict):
            return set(value) | {k for inner in value.values() for k in keys(inner)}
        return {k for inner in value for k in keys(inner)} if isinstance(value, list) else set()

    missing = sorted(k for k in keys({"methods": {"run_record": rendered["summary"]["methods"]["run_record"]}})
                     if f"`{k}`" not in section)
    assert not missing, f"run record keys not documented in the {rendered['kind']} part of docs/report.md: {missing}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_manifest_without_a_record_renders_not_recorded(kind, tmp_path):
    run = Path(_BUILDERS[kind](tmp_path / kind))
    assert "provenance" not in json.loads((run / "manifest.json").read_text())
    paths = write_report(run)
    assert json.loads(paths["summary"].read_text())["methods"]["run_record"] is None
    part = _provenance_part(paths["markdown"].read_text())
    assert NOT_RECORDED in part and "Run record: not recorded." in part
    assert "run-servers-table" not in paths["html"].read_text()
    assert "Run record: not recorded." in paths["html"].read_text()


def test_a_c_study_states_its_compiler(tmp_path, loopback_servers):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    run = make_run(tmp_path / "run", examples=0)
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, "data": {**spec["data"], "language": "c"}}))
    _with_record(run, loopback_servers)  # before the samples table is read, the record takes data.language
    summary_path, md_path = (write_report(run)[k] for k in ("summary", "markdown"))
    gcc = _first_line(str(Path(shutil.which("gcc")).resolve()), "--version")
    toolchains = json.loads(summary_path.read_text())["methods"]["run_record"]["executor"]["toolchains"]
    assert {"language": "c", "tool": "cc", "version": gcc} in toolchains
    assert f"c `cc`: {gcc}" in _provenance_part(md_path.read_text())


def test_what_a_machine_could_not_report_is_shown_with_its_reason(tmp_path, loopback_servers):
    """An installed calib (no commit) on a machine without bubblewrap: the record's nulls and their reasons."""
    run = Path(test_probes_report.build_run(tmp_path / "run"))
    record = _with_record(run, loopback_servers)
    why = "bubblewrap is not installed or cannot run here: code ran unsandboxed (unsafe_no_sandbox)"
    record["calib"] |= {"commit": None, "dirty": None}
    record["executor"] |= {"bwrap": None, "pythonhashseed": None, "missing": {"bwrap": why, "pythonhashseed": why}}
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "provenance": record}))
    part = _provenance_part(write_report(run)["markdown"].read_text())
    assert "calib commit –;" in part and "(with uncommitted changes)" not in part
    assert "no bubblewrap, PYTHONHASHSEED = –." in part
    assert f"Not reported by the sandbox: bwrap: {why}; pythonhashseed: {why}." in part
