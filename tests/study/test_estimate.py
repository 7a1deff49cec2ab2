"""``calib check --estimate`` (issue "hosted"): requests and tokens per stage and server, cost at [budget.prices],
the [budget] caps it exceeds — checked against what real runs then send and record.

The functional target is the tiny organism's target model behind ``calib serve`` and tests/_hosted.py's proxy
(openai kind, whose answers report usage), the reference the organism's reference model in-process; the
extraction and probes estimates are checked against the windows and prompts their runs cut and build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from calib.study import check_study, run_study
from calib.study.runner import RunOptions
from tests._hosted import HostedProxy

PRICES = "[budget.prices.target]\ninput = 2.0\noutput = 10.0\n"


def _functional(cache_dir: Path, url: str, extra: str = "") -> str:
    return f"""[study]
name = "estimate"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 0
batch_size = 1

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 6

[generation]
max_tokens = 24

{extra}
"""


def _check(tmp_path: Path, spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "s.toml").write_text(spec)
    return subprocess.run([sys.executable, "-m", "calib", "check", "s.toml", "--estimate", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _line(estimate: dict[str, Any], stage: str, server: str) -> dict[str, Any]:
    (found,) = [e for e in estimate["stages"] if e["stage"] == stage and e["server"] == server]
    return found


def test_the_generate_estimate_is_what_the_run_then_sends(organism_tiny, served_organism_target, tmp_path):
    cache = organism_tiny.root.parent.parent
    with HostedProxy(served_organism_target, "direct") as host:
        spec = _functional(cache, host.url, PRICES)
        checked = _check(tmp_path, spec, "--json")
        probe_requests = sum(host.requests.values())
        probe_usage = dict(host.usage)
        # the estimate asked for no generation: only the capability probe's one-token completions
        asked = host.bodies["/v1/completions"]  # every completion request's body, in order
        assert asked and all(b.get("max_tokens") is not None and b["max_tokens"] <= 1 for b in asked)
        asked_before = len(asked)
        run_study(tmp_path / "s.toml", run_dir=tmp_path / "run", options=RunOptions(until="generate", progress=False))
        generations = [b.get("max_tokens") for b in host.bodies["/v1/completions"][asked_before:]]
        generations = [m for m in generations if m is not None and m > 1]
    assert checked.returncode == 0, checked.stderr
    found = json.loads(checked.stdout)
    estimate = found["estimate"]
    assert set(estimate) == {"stages", "servers", "total", "currency", "notes", "budget"}
    target, reference = _line(estimate, "generate", "target"), _line(estimate, "generate", "reference")
    assert target["counted"] and not reference["counted"] and reference["cost"] is None
    # batch_size = 1: one completion request per sample, exact; the prompt's budget is counted by /tokenize first
    assert target["requests"] == 6 and {"requests", "tokenizer_requests"} <= set(target["exact"])
    assert target["tokenizer_requests"] == 6
    assert "input_tokens" not in target["exact"] and "output_tokens" not in target["exact"]
    assert target["output_tokens"] == 6 * 24
    # what the run sent: its generation requests, and its spending = the probe + the estimate's requests
    assert len(generations) == target["requests"]
    spending = json.loads((tmp_path / "run" / "manifest.json").read_text())["spending"]["servers"]["target"]
    assert spending["requests"] == probe_requests + target["requests"] + target["tokenizer_requests"]
    used_input = spending["input_tokens"] - probe_usage.get("prompt_tokens", 0)
    used_output = spending["output_tokens"] - probe_usage.get("completion_tokens", 0)
    assert 0 < used_input <= target["input_tokens"] and 0 < used_output <= target["output_tokens"]
    # cost: tokens x price per million, by hand
    cost = (target["input_tokens"] * 2.0 + target["output_tokens"] * 10.0) / 1e6
    assert target["cost"] == pytest.approx(cost) and estimate["total"]["cost"] == pytest.approx(cost)
    assert estimate["servers"] == {"target": {k: v for k, v in estimate["total"].items() if k != "tokens"}}
    assert estimate["total"]["tokens"] == target["input_tokens"] + target["output_tokens"]
    assert estimate["currency"] == "USD" and estimate["budget"] == []


def test_the_text_marks_exact_figures_and_bounds_and_names_the_stage_a_cap_stops(organism_tiny, tmp_path):
    cache = organism_tiny.root.parent.parent
    budget = "[budget]\nrequests = 4\ntokens = 100000\ncost = 0.0001\ncurrency = \"EUR\"\n\n" + PRICES
    checked = _check(tmp_path, _functional(cache, "http://127.0.0.1:9", budget), "--no-probe")
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert "  estimate ('=' exact, '<=' an upper bound; retries, context refusals and probes not counted):" in lines
    # not probed: whether the host batches prompts or counts budgets by its tokenizer is unknown, so bounds
    target = next(line for line in lines if line.startswith("    generate target: "))
    assert "requests <= 6, tokenizer requests <= 6" in target and "output tokens <= 144" in target
    assert "cost <= " in target and target.endswith(" EUR")
    reference = next(line for line in lines if line.startswith("    generate reference: "))
    assert reference.endswith("(in-process: not counted by [budget])") and "cost" not in reference
    assert "    note: server target was not probed: at most one completion request per sample" in lines
    over = [line for line in lines if line.startswith("    budget: ")]
    # 12 requests (6 completions, 6 tokenize) > 4; the input and output bounds at 2 and 10 EUR per million > 0.0001
    assert over[0] == ("    budget: the estimate (an upper bound) exceeds budget.requests = 4 (12 requests): the "
                       "study will stop at about stage generate")
    assert over[1].startswith("    budget: the estimate (an upper bound) exceeds budget.cost = 0.0001 (0.00")
    assert over[1].endswith(" EUR): the study will stop at about stage generate") and len(over) == 2


def test_without_the_option_there_is_no_estimate(organism_tiny, tmp_path):
    (tmp_path / "s.toml").write_text(_functional(organism_tiny.root.parent.parent, "http://127.0.0.1:9"))
    found = check_study(tmp_path / "s.toml", probe=False)
    assert "estimate" not in found
    assert check_study(tmp_path / "s.toml", probe=False, estimate=True)["estimate"]["stages"]


def _embedded(cache_dir: Path, kind: str, body: str) -> str:
    return f"""[study]
name = "{kind}-estimate"
kind = "{kind}"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

{body}
"""


def test_the_extraction_estimate_bounds_the_windows_the_run_cuts(organism_tiny, tmp_path):
    body = ("[data]\nsource = \"organism\"\nkinds = [\"verbatim\"]\n\n[extraction]\nprefix_tokens = 16\n"
            "suffix_tokens = [8, 16]\nprocedures = [\"greedy\", \"top_k\", \"near_verbatim\"]\n")
    (tmp_path / "x.toml").write_text(_embedded(organism_tiny.root.parent.parent, "extraction", body))
    estimate = check_study(tmp_path / "x.toml", probe=False, estimate=True)["estimate"]
    run_study(tmp_path / "x.toml", run_dir=tmp_path / "run", options=RunOptions(until="windows", progress=False))
    samples = pl.read_parquet(tmp_path / "run" / "tables" / "samples.parquet")
    windows = pl.read_parquet(tmp_path / "run" / "tables" / "windows.parquet").filter(pl.col("error").is_null())
    assert windows.height > 0
    score = _line(estimate, "score", "target")
    # per window and model: one scoring pass, one greedy generation of l_s tokens, at most one more scoring pass
    real = windows.height * 3
    assert real <= score["requests"] and score["requests"] % 3 == 0 and score["exact"] == []
    bound = score["requests"] // 3
    assert f"windows: at most {bound:,} (cut by the window tokenizer; counted here as one token per byte of the " \
           f"{samples.height:,} samples)" in estimate["notes"]
    # generations read l_p tokens and write l_s; scoring passes read l_p + l_s and write at most one
    per_length = windows.group_by("suffix_tokens").len()
    assert set(per_length["suffix_tokens"]) <= {8, 16}
    assert score["output_tokens"] >= sum(n * (2 + length) for length, n in per_length.iter_rows())
    assert _line(estimate, "score", "reference")["requests"] == score["requests"]


def test_the_extraction_estimate_names_procedures_it_does_not_know(organism_tiny, tmp_path):
    from calib.study.extraction.estimate import generations_per_window
    from calib.study.spec import load_spec

    body = "[data]\nsource = \"organism\"\nkinds = [\"verbatim\"]\n"
    (tmp_path / "x.toml").write_text(_embedded(organism_tiny.root.parent.parent, "extraction", body))
    spec = load_spec(tmp_path / "x.toml")
    extraction = spec.extraction.model_copy(update={"procedures": ("greedy", "sampled", "greedy_prefix", "novel")})
    made, unknown = generations_per_window(spec.model_copy(update={"extraction": extraction}))
    # [extraction] samples (100 by default) generations, up to 32 per request where the module says so
    samples = getattr(spec.extraction, "samples", 100)
    assert made["greedy"] == (1, 1) and made["sampled"][1] == samples and unknown == ["novel"]  # one greedy generation
    assert made["sampled"][0] in (samples, -(-samples // 32)) and set(made) == {"greedy", "sampled"}


def test_the_probes_estimate_bounds_the_prompts_the_run_sends(organism_tiny, tmp_path):
    body = "[probes]\ntasks = \"organism:business\"\nn = 2\nmax_tokens = 64\nbootstrap = 200\n"
    (tmp_path / "p.toml").write_text(_embedded(organism_tiny.root.parent.parent, "probes", body))
    estimate = check_study(tmp_path / "p.toml", probe=False, estimate=True)["estimate"]
    run_study(tmp_path / "p.toml", run_dir=tmp_path / "run", options=RunOptions(until="prompts", progress=False))
    prompts = pl.read_parquet(tmp_path / "run" / "tables" / "prompts.parquet").filter(pl.col("applicable"))
    sent = prompts.filter(pl.col("reference_passed"))
    for model in ("target", "reference"):
        line = _line(estimate, "generate", model)
        # every applicable prompt, whether or not the sandbox's checks keep it; n completions of max_tokens each
        assert line["requests"] == prompts.height >= sent.height > 0
        assert line["output_tokens"] == prompts.height * 2 * 64
        assert line["input_tokens"] >= int(prompts["prompt_tokens"].sum())
