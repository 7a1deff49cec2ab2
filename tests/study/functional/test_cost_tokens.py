"""The executions table's token columns for the ``llm`` and ``agent`` executors: each sample's rows carry the
tokens its own chat requests reported, counted per sample while samples run concurrently.

The loopback server of tests/study/functional/test_execute_kinds.py answers every request with a recorded
answer whose usage is 400 input and 120 output tokens; the requests it received are attributed to samples
here by the function x they show, so the expected tokens are 400 and 120 times that sample's requests.
"""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from tests.study.functional.test_execute_kinds import RECORDED, _Garbage, _run

USAGE = json.loads((RECORDED / "llm_garbage.json").read_text())["body"]["usage"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_each_sample_records_the_tokens_of_its_own_requests(organism_tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")  # the loopback server ignores it
    run = _run(organism_tiny, tmp_path, "agent")
    executions = pl.read_parquet(run / "tables" / "executions.parquet")
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    requests = [json.dumps(r) for r in _Garbage.requests]
    assert executions["input_tokens"].null_count() == 0
    for sample_id, function in samples.select("sample_id", "function").iter_rows():
        shown = json.dumps(function)[1:-1].splitlines()[0][:60]  # x as it appears inside a JSON request
        count = sum(shown in r for r in requests)
        assert count == 2  # the first answer and the one after the nudge
        rows = executions.filter(pl.col("sample_id") == sample_id)
        assert rows["input_tokens"].to_list() == [count * USAGE["input_tokens"]] * rows.height
        assert rows["output_tokens"].to_list() == [count * USAGE["output_tokens"]] * rows.height
        assert rows["runs"].n_unique() == 1
