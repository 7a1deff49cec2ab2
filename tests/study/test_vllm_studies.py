"""A functional and an extraction study against real vLLM servers (CPU build), compared with the embedded run.

``servers/vllm/serve-pair-cpu.sh`` serves the tiny organism's target and reference, each server pinned
to its own core (``VLLM_CPU_OMP_THREADS_BIND``); each spec runs once with those two servers (``kind =
"openai"``) and once with both models in the ``embedded`` kind, as a real ``python -m calib study``.
Skipped, with the reason, where no vLLM venv is built (``servers/vllm/build-venv.sh``; ``.ci/run``
builds it). What must match, and why:

- generations, byte for byte (text, completed function, finish reason): both servers decode greedily
  from the same float32 weights with the same tokenizer; their log-probs differ by about 1e-6
  (tests/servers/test_vllm_integration.py), far less than the margin of a trained model's top token.
- the functional claims and the report's rates, exactly: they follow from the generations through the
  same sandbox and metrics (the input search is bounded by runs, not seconds).
- the extraction windows, exactly (cut with the target server's tokenizer: vLLM's ``/tokenize`` against
  the tokenizer in-process), and the 0/1 scores (greedy, near-verbatim greedy: argmax decisions).
- probabilities (top-k, base policy, near-verbatim mass) within 1e-4 in log10: float32 sums in different
  kernels; the operating points' claims and rates exactly (no member lies that close to a threshold).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from calib.study.spec import load_spec
from tests._served import ROOT, VllmPair

ROLES = ("target", "reference")
LOG10_TOLERANCE = 1e-4


def _servers(kind: str, urls: dict[str, str]) -> str:
    if kind == "embedded":
        return "".join(f'[servers.{r}]\nkind = "embedded"\nmodel_dir = "organism:{r}"\nthreads = 1\n\n' for r in ROLES)
    return "".join(f'[servers.{r}]\nkind = "openai"\nbase_url = "{urls[r]}"\n\n' for r in ROLES)


def _functional(cache_dir: Path, servers: str) -> str:
    return f"""[study]
name = "functional-tiny"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

{servers}[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 12

[generation]
max_tokens = 300
stop = ["\\ndef ", "\\nclass ", "\\n@", "\\nif __name__"]

[execute]
budget_seconds = 120.0

[measure]
metrics = ["exact", "bleu"]
"""


def _extraction(cache_dir: Path, servers: str) -> str:
    return f"""[study]
name = "extraction-tiny"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"
extra_controls = 60

{servers}[models]
target = "target"
reference = "reference"

[data]
source = "organism"
kinds = ["verbatim"]

[extraction]
prefix_tokens = 32
suffix_tokens = [16, 32]

[analyze]
alpha = 0.05
"""


def _study(root: Path, name: str, spec: str) -> Path:
    (root / f"{name}.toml").write_text(spec)
    proc = subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", name, "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=1800,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, f"calib study {name}.toml exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return root / name


SPECS: dict[str, Callable[[Path, str], str]] = {"functional": _functional, "extraction": _extraction}


@pytest.fixture(scope="module")
def pair(vllm_pair: VllmPair) -> VllmPair:
    """The session's vLLM pair (tests/_served.py), started before the embedded runs and not waited for."""
    return vllm_pair


@pytest.fixture(scope="module")
def embedded(pair: VllmPair, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both specs with the embedded kind, run while vLLM starts (so its slow start-up overlaps them)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    cache = pair.organism.root.parent.parent
    return {name: _study(tmp_path_factory.mktemp(name), "embedded", spec(cache, _servers("embedded", {})))
            for name, spec in SPECS.items()}


def _both(pair: VllmPair, embedded: dict[str, Path], name: str) -> dict[str, Path]:
    run = embedded[name]
    spec = SPECS[name](pair.organism.root.parent.parent, _servers("vllm", pair.urls()))
    return {"embedded": run, "vllm": _study(run.parent, "vllm", spec)}


@pytest.fixture(scope="module")
def functional(pair: VllmPair, embedded: dict[str, Path]) -> dict[str, Path]:
    return _both(pair, embedded, "functional")


@pytest.fixture(scope="module")
def extraction(pair: VllmPair, embedded: dict[str, Path]) -> dict[str, Path]:
    return _both(pair, embedded, "extraction")


def test_the_demo_vllm_spec_is_the_demo_with_serve_pair_cpu_servers():
    """studies/demo-vllm.toml (the recipe servers/vllm/README.md points to) stays the demo but for its servers."""
    demo, vllm = (load_spec(ROOT / "studies" / f"{name}.toml") for name in ("demo", "demo-vllm"))
    skip = {"study", "servers"}
    assert vllm.model_dump(exclude=skip) == demo.model_dump(exclude=skip)
    assert (vllm.study.kind, vllm.study.seed) == (demo.study.kind, demo.study.seed)
    assert vllm.servers == {"target": {"kind": "openai", "base_url": "http://127.0.0.1:8001"},
                            "reference": {"kind": "openai", "base_url": "http://127.0.0.1:8002"}}
    script = (ROOT / "servers" / "vllm" / "serve-pair-cpu.sh").read_text()
    assert '"${TARGET_PORT:-8001}"' in script and '"${REFERENCE_PORT:-8002}"' in script
    assert "servers/vllm/serve-pair-cpu.sh" in (ROOT / "studies" / "demo-vllm.toml").read_text()


def _table(run: Path, name: str, key: list[str]) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet").sort(key)


def test_the_run_records_the_vllm_servers_it_used(functional, pair):
    version = re.search(r'^version="(.+)"$', (ROOT / "servers" / "vllm" / "build-venv.sh").read_text(), re.M)
    servers = json.loads((functional["vllm"] / "manifest.json").read_text())["provenance"]["servers"]
    for role in ROLES:
        record = servers[role]
        assert (record["kind"], record["server_version"]) == ("openai", version.group(1)), record
        assert record["model"] == str(getattr(pair.organism, role)), record  # vLLM names a model by its path


def test_functional_generations_are_byte_identical(functional):
    columns = ["sample_id", "role", "text", "function", "finish_reason", "error"]
    embedded, vllm = (_table(functional[k], "generations", ["sample_id", "role"]).select(columns)
                      for k in ("embedded", "vllm"))
    # 12 samples x 2 roles, every request answered (a failed one has no text; "error" also notes unparsable ones)
    assert vllm.height == 24 and vllm["text"].null_count() == 0
    assert vllm.to_dicts() == embedded.to_dicts()


def test_functional_claims_and_rates_are_identical(functional):
    embedded, vllm = (_table(functional[k], "claims", ["sample_id"]) for k in ("embedded", "vllm"))
    assert vllm.to_dicts() == embedded.to_dicts()
    # Not vacuous: the target reproduces planted members that the reference does not.
    assert vllm.filter(pl.col("verdict").is_in(["textual", "functional"])
                       & (pl.col("membership") == "member")).height >= 1
    summaries = [json.loads((functional[k] / "report" / "summary.json").read_text()) for k in ("embedded", "vllm")]
    assert summaries[1]["headline"] == summaries[0]["headline"]
    assert summaries[1]["groups"] == summaries[0]["groups"]


def test_extraction_windows_and_scores_agree(extraction):
    key = ["window_id", "role", "procedure"]
    windows = [_table(extraction[k], "windows", ["window_id"]) for k in ("embedded", "vllm")]
    assert windows[1].to_dicts() == windows[0].to_dicts()
    embedded, vllm = (_table(extraction[k], "scores", key) for k in ("embedded", "vllm"))
    assert vllm["window_id"].to_list() == embedded["window_id"].to_list() and vllm.height > 0
    assert vllm["error"].null_count() == vllm.height and embedded["error"].null_count() == embedded.height
    binary = {"greedy", "near_verbatim_greedy"}
    for a, b in zip(embedded.iter_rows(named=True), vllm.iter_rows(named=True), strict=True):
        assert (a["role"], a["procedure"]) == (b["role"], b["procedure"])
        x, y = a["log10_value"], b["log10_value"]
        if a["procedure"] in binary or math.isinf(x):
            assert x == y, (a, b)
        else:
            assert y == pytest.approx(x, abs=LOG10_TOLERANCE), (a, b)
        if a["procedure"].startswith("near_verbatim"):
            assert json.loads(a["detail"])["generation"] == json.loads(b["detail"])["generation"]


def test_extraction_rates_are_identical(extraction):
    key = ["role", "procedure", "suffix_tokens", "pool", "alpha"]
    exact = ["role", "procedure", "suffix_tokens", "pool", "alpha", "n_controls", "k", "certified_alpha",
             "certifiable", "n_members", "claims", "member_rate", "calibrated_rate", "low", "high"]
    embedded, vllm = (_table(extraction[k], "operating_points", key) for k in ("embedded", "vllm"))
    assert vllm.select(exact).to_dicts() == embedded.select(exact).to_dicts()
    # Not vacuous: the target's verbatim members are claimed at the study's level.
    primary = vllm.filter((pl.col("role") == "target") & ((pl.col("alpha") - 0.05).abs() < 1e-12))
    assert primary["claims"].fill_null(0).max() >= 1
    for a, b in zip(embedded["log10_threshold"].to_list(), vllm["log10_threshold"].to_list(), strict=True):
        assert a == b if a is None or math.isinf(a) else b == pytest.approx(a, abs=LOG10_TOLERANCE)


def test_each_server_is_pinned_to_its_own_half_of_the_cores(pair):
    pair.urls()
    n = len(os.sched_getaffinity(0))
    half = n // 2

    def cores(first: int, last: int) -> str:
        return str(first) if first == last else f"{first}-{last}"

    target, reference = cores(0, half - 1), cores(half, n - 1)  # on 2 cores: "0" and "1"
    text = pair.log.read_text()
    assert f"serve-pair-cpu.sh: target on cores {target}, reference on cores {reference}" in text
    # vLLM's own account of each engine's binding
    assert f"VLLM_CPU_OMP_THREADS_BIND='{target}'" in text and f"VLLM_CPU_OMP_THREADS_BIND='{reference}'" in text
