"""``[data.judge]``: a functional study audits only the functions a judge rates as meaningful logic (paper §4).

The target and reference are ``calib serve`` running the tiny model (the session fixture ``served_model``).
The judge is a loopback chat server of the test's own with SCRIPTED answers (no chat model that can rate code
runs here): it gives severity 2 to a one-line getter and 8 to anything else, and one answer it garbles. What is
tested is calib's part: the seeded draw until data.limit pass, every verdict recorded, only passing functions
audited, the funnel and the report, one-line refusals of a bad [data.judge].
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from aiohttp import web

from tests._hosted import LoopbackProxy

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

GETTERS = [f'def get_{name}(record):\n    return record["{name}"]\n' for name in ("name", "email", "city", "zip")]
LOGIC = ['''def shipping_fee(weight, zone):
    if zone == "EU":
        base = 4.5
    elif zone == "US":
        base = 6.0
    else:
        base = 9.75
    if weight > 20:
        return base + 1.25 * (weight - 20)
    return base
''', '''def loyalty_discount(total, years):
    rate = 0.0
    if years >= 5:
        rate = 0.12
    elif years >= 2:
        rate = 0.05
    if total > 500:
        rate += 0.03
    return round(total * (1 - rate), 2)
''', '''def risk_band(score, late_payments):
    if late_payments > 3:
        return "high"
    if score < 580:
        return "high"
    if score < 670:
        return "medium"
    return "low"
''', '''def garbled_answer_here(values):
    out = []
    for v in values:
        if v % 3 == 0:
            out.append(v // 3)
    return out
''']


class ScriptedJudge(LoopbackProxy):
    """Answers every chat request itself (SCRIPTED): severity 2 for a one-line getter, 8 otherwise, garbage once."""

    def answer(self, path: str, body: dict | None) -> web.Response | None:
        if path != "/v1/chat/completions" or body is None:
            return None
        text = body["messages"][-1]["content"]
        found = re.search(r"def (\w+)\(", text)
        if found is None:
            content = "yes"  # the capability probe
        elif found.group(1) == "garbled_answer_here":
            content = "I cannot rate this."
        elif found.group(1).startswith("get_"):
            content = '{"severity": 2, "reason": "a plain getter"}'
        else:
            content = '{"severity": 8, "reason": "business rules"}'
        return web.json_response({"id": "j", "object": "chat.completion", "model": "judge", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def _spec(url: str, judge_url: str, corpus: Path, extra: str = "") -> str:
    server = f'kind = "openai"\nbase_url = "{url}"\nmodel = "tiny"\nmax_retries = 0\ntimeout = 60\n'
    return f"""[study]
name = "judged"
seed = 3

[servers.target]
{server}
[servers.reference]
{server}
[servers.judge]
kind = "openai"
base_url = "{judge_url}"
model = "judge"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "corpus"
paths = ["{corpus}"]
min_lines = 1
limit = 2

[data.judge]
server = "judge"
threshold = 5
{extra}
[prompt]
max_context_tokens = 40

[generation]
max_tokens = 24

[execute]
budget_seconds = 60.0
"""


def _study(tmp_path: Path, spec: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "s.toml").write_text(spec)
    return subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "run", "--quiet", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def test_the_judge_draws_until_the_limit_passes_and_only_kept_functions_are_audited(served_model, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mod.py").write_text("\n\n".join(GETTERS + LOGIC))
    with ScriptedJudge(served_model) as judge:
        (tmp_path / "s.toml").write_text(_spec(served_model, judge.url, corpus))
        checked = subprocess.run([sys.executable, "-m", "calib", "check", "s.toml", "--estimate", "--json"],
                                 cwd=tmp_path, capture_output=True, text=True, timeout=600)
        proc = _study(tmp_path, _spec(served_model, judge.url, corpus))
        chats = list(judge.bodies.get("/v1/chat/completions", []))
        # a second run redoes nothing: the judge is not asked again
        again = _study(tmp_path, _spec(served_model, judge.url, corpus))
        asked_again = judge.bodies.get("/v1/chat/completions", [])[len(chats):]
    assert proc.returncode == 0, proc.stderr
    assert again.returncode == 0, again.stderr
    assert [c for c in asked_again if "def " in c["messages"][-1]["content"]] == []
    run = tmp_path / "run"
    functions = pl.read_parquet(run / "tables" / "functions.parquet")
    assert functions.height == 8  # no limit before the judge: it draws from every extracted function
    judgments = pl.read_parquet(run / "tables" / "judgments.parquet")
    # The draw is numpy's permutation seeded by study.seed (calib.data.judge), recomputed here: the judge sees
    # functions in that order, in waves of at most (limit - passes so far), until 2 pass.
    order = functions["sample_id"].gather(np.random.default_rng(3).permutation(functions.height)).to_list()
    assert judgments["sample_id"].to_list() == order[:judgments.height]
    assert judgments["order"].to_list() == list(range(judgments.height))
    names = dict(zip(functions["sample_id"], functions["signature"]))
    for row in judgments.iter_rows(named=True):
        signature = names[row["sample_id"]]
        if "garbled_answer_here" in signature:
            assert row["severity"] is None and row["error"] == "judge_unparsable" and not row["passed"]
        elif signature.startswith("def get_"):
            assert (row["severity"], row["passed"], row["reason"]) == (2, False, "a plain getter")
        else:
            assert (row["severity"], row["passed"], row["reason"]) == (8, True, "business rules")
    assert int(judgments["passed"].sum()) == 2 and judgments["passed"][-1]  # stopped at the second pass
    asked = [c for c in chats if "def " in c["messages"][-1]["content"]]
    assert len(asked) == judgments.height and all(c["max_tokens"] == 256 for c in asked)
    # calib check --estimate: at most one judge request per extracted function (8, an upper bound: the run
    # judged fewer), at most 256 answer tokens each; the generate lines count the data.limit = 2 samples kept
    assert checked.returncode == 0, checked.stderr
    stages = json.loads(checked.stdout)["estimate"]["stages"]
    (line,) = [e for e in stages if e["stage"] == "judge"]
    assert (line["server"], line["requests"], line["output_tokens"]) == ("judge", 8, 8 * 256)
    assert "requests" not in line["exact"] and judgments.height <= line["requests"]
    generate = [e for e in stages if e["stage"] == "generate"]
    assert {e["server"] for e in generate} == {"target", "reference"}
    assert all(e["requests"] <= 2 and e["output_tokens"] == 2 * 24 for e in generate)
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    kept = judgments.filter(pl.col("passed"))["sample_id"].to_list()
    assert samples["sample_id"].to_list() == kept  # in the order drawn
    assert not any(s.startswith("def get_") for s in samples["signature"])
    summary = json.loads((run / "report" / "summary.json").read_text())
    funnel = {row["stage"]: row["count"] for row in summary["funnel"]}
    assert (funnel["functions"], funnel["judged"], funnel["judge_passed"], funnel["samples"]) == (
        8, judgments.height, 2, 2)
    judge_summary = summary["judge"]
    severities = judgments.filter(pl.col("severity").is_not_null())["severity"].value_counts()
    assert judge_summary["severities"] == {str(s): n for s, n in severities.sort("severity").iter_rows()}
    assert (judge_summary["judged"], judge_summary["passed"], judge_summary["want"]) == (judgments.height, 2, 2)
    # Clopper-Pearson of the pass rate, against scipy's beta quantiles (Clopper & Pearson 1934)
    from scipy.stats import beta

    k, n = 2, judgments.height
    rate = judge_summary["pass_rate"]
    assert rate["low"] == pytest.approx(beta.ppf(0.025, k, n - k + 1), abs=1e-12)
    assert rate["high"] == pytest.approx(1.0 if k == n else beta.ppf(0.975, k + 1, n - k), abs=1e-12)
    assert judge_summary["prompt"].startswith("judge_meaningful_logic")
    markdown = (run / "report" / "report.md").read_text()
    assert "functions the judge kept (severity ≥ threshold)" in markdown
    assert f"{n} judged, 2 kept" in markdown


def test_a_judge_that_passes_nothing_stops_the_study_with_one_line_and_keeps_the_verdicts(served_model, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mod.py").write_text("\n\n".join(GETTERS))
    with ScriptedJudge(served_model) as judge:
        proc = _study(tmp_path, _spec(served_model, judge.url, corpus))
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()[-1]
    assert "data.judge: none of the 4 judged functions reached severity 5" in line
    assert "lower data.judge.threshold" in line
    judgments = pl.read_parquet(tmp_path / "run" / "tables" / "judgments.parquet")
    assert judgments.height == 4 and judgments["severity"].to_list() == [2, 2, 2, 2]


@pytest.mark.parametrize(("extra", "kind", "needle"), [
    ('prompt = "missing.txt"\n', "functional", "data.judge.prompt: 'missing.txt' is not a file"),
    ("concurrency = 0\n", "functional", "data.judge.concurrency: Input should be greater than or equal to 1"),
    ("", "extraction", "[data.judge] is read only by functional studies (kind is 'extraction')"),
])
def test_a_bad_judge_section_is_one_line_naming_the_key(tmp_path, extra, kind, needle):
    spec = _spec("http://127.0.0.1:9", "http://127.0.0.1:9", tmp_path, extra)
    spec = spec.replace('name = "judged"', f'name = "judged"\nkind = "{kind}"')
    (tmp_path / "s.toml").write_text(spec)
    proc = subprocess.run([sys.executable, "-m", "calib", "check", "s.toml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_bad_prompt_file_is_refused_naming_it(tmp_path):
    (tmp_path / "judge.txt").write_text("Rate {language} code.\n")  # no header lines, no {function}
    spec = _spec("http://127.0.0.1:9", "http://127.0.0.1:9", tmp_path, 'prompt = "judge.txt"\n')
    (tmp_path / "s.toml").write_text(spec)
    proc = subprocess.run([sys.executable, "-m", "calib", "check", "s.toml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "data.judge.prompt: judge prompt" in proc.stderr and "judge.txt" in proc.stderr
    assert "# name:" in proc.stderr
