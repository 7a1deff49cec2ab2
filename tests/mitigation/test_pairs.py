"""Preference pairs (calib/mitigation/pairs.py): the paper's acceptance rule on planted candidates, run in the real
sandbox, and pairs from a real audit of the tiny organism with its real target and chat servers."""

from __future__ import annotations

import asyncio
import json

import polars as pl
import pytest

from calib.executors.base import ExecutorConfig, create_executor
from calib.metrics.textual import Bleu
from calib.mitigation.pairs import (
    MAX_BLEU,
    MAX_SIM_FUNC,
    REWRITE_SYSTEM,
    REWRITE_TEMPERATURES,
    REWRITE_USER,
    TARGET_ROUNDS,
    Memorized,
    build_pairs,
    check_candidate,
    memorized_set,
    rewrite_body,
)
from calib.servers import create_server

SIG = "def clamp_scale(value, low, high, factor):"
BODY = ("\n    if value < low:\n        value = low\n    elif value > high:\n        value = high\n"
        "    return value * factor\n")
PLANTED = Memorized("s1", "textual", None, "python", "import math\n\n" + SIG, SIG, BODY, "import math\n\n",
                    "\n    return None\n")


def _check(body: str):
    executor = create_executor("sandbox", ExecutorConfig(seed=0))
    return asyncio.run(check_candidate(PLANTED, body, executor))


def test_the_memorized_body_itself_is_refused_for_textual_overlap():
    found = _check(BODY)
    assert (found.accepted, found.reason, found.bleu) == (False, "textual_overlap", 1.0)


def test_a_one_token_change_is_still_textual_overlap():
    found = _check(BODY.replace("value * factor", "value * factor * 2"))
    assert not found.accepted and found.reason == "textual_overlap" and found.bleu > MAX_BLEU


def test_an_equivalent_rewrite_is_refused_on_execution():
    # other names and structure (BLEU far below 0.3), the same outputs wherever low <= high
    found = _check("\n    bounded = min(max(value, low), high)\n    scaled = factor * bounded\n    return scaled\n")
    assert found.reason == "functional_overlap" and found.bleu <= MAX_BLEU and found.sim_func > MAX_SIM_FUNC
    assert not found.accepted


def test_a_different_valid_function_is_accepted_with_its_measures():
    found = _check("\n    total = 0\n    for item in (low, high, factor):\n        total += item\n"
                   "    return total - value\n")
    assert found.accepted and found.reason == ""
    assert found.bleu <= MAX_BLEU and found.sim_func is not None and found.sim_func <= MAX_SIM_FUNC
    assert found.bleu == pytest.approx(Bleu().score(BODY, found.body, "python"))


def test_an_unparsable_body_is_refused_before_anything_runs():
    found = _check("\n    return (value *\n")
    assert (found.accepted, found.reason, found.bleu, found.sim_func) == (False, "unparsable", None, None)


def test_rewrite_replies_keep_the_exact_signature_or_give_nothing():
    body = "\n    return low\n"
    assert rewrite_body(SIG, f"Sure:\n```python\n{SIG}{body}```\nDone.") == body
    assert rewrite_body(SIG, f"{SIG}{body}") == body  # no fence: the whole reply
    assert rewrite_body(SIG, "```python\ndef clamp_scale(value, low, high, factor=1):\n    return low\n```") is None
    assert rewrite_body(SIG, f"```python\n{SIG}\n```") is None  # a signature without a body


def test_the_paper_numbers_are_the_defaults():
    # Appendix H.1: BLEU <= 0.3, execution similarity <= 0.2, K = 10 rewrites over T in [0.6, 1.0],
    # target samples at 1.0 then 1.4
    assert (MAX_BLEU, MAX_SIM_FUNC) == (0.3, 0.2)
    assert len(REWRITE_TEMPERATURES) == 10 and REWRITE_TEMPERATURES[0] == 0.6 and REWRITE_TEMPERATURES[-1] == 1.0
    assert [t for t, _ in TARGET_ROUNDS] == [1.0, 1.4]


def _tables(run):
    return {name: pl.read_parquet(run / "tables" / f"{name}.parquet") for name in ("samples", "generations", "claims")}


def test_ref_pairs_are_the_memorized_members_with_the_reference_completion(audit):
    t = _tables(audit)
    memorized = memorized_set(t["samples"], t["generations"], t["claims"])
    claims = t["claims"].filter((pl.col("membership") == "member") & pl.col("verdict").is_in(["textual", "functional"]))
    assert sorted(m.sample_id for m in memorized) == sorted(claims["sample_id"]) and memorized
    pairs = asyncio.run(build_pairs(memorized, "ref"))
    samples = {r["sample_id"]: r for r in t["samples"].iter_rows(named=True)}
    generations = t["generations"].filter(pl.col("role") == "reference")
    reference = {r["sample_id"]: r for r in generations.iter_rows(named=True)}
    for row in pairs.iter_rows(named=True):
        s = samples[row["sample_id"]]
        assert row["prompt"] == s["prompt"] and row["rejected"] == s["body"]
        assert s["prompt"].endswith(s["signature"]) and s["function"] == s["signature"] + s["body"]
        g = reference[row["sample_id"]]
        want = g["function"][len(s["signature"]):] if g["function"] else g["text"]
        assert row["chosen"] == want and row["chosen_from"] == "reference" and not row["fallback"]


def test_target_pairs_keep_only_qualifying_samples_and_count_the_fall_backs(audit, organism_tiny):
    t = _tables(audit)
    memorized = memorized_set(t["samples"], t["generations"], t["claims"])
    executor = create_executor("sandbox", ExecutorConfig(seed=0))

    async def make():
        server = create_server("target", {"kind": "embedded", "model_dir": str(organism_tiny.target), "threads": 1})
        try:
            return await build_pairs(memorized, "target", target=server, executor=executor, max_tokens=300,
                                     stop=("\ndef ", "\nclass "))
        finally:
            await server.aclose()

    pairs = asyncio.run(make())
    by_id = {m.sample_id: m for m in memorized}
    assert pairs.height == len(memorized)
    accepted = pairs.filter(pl.col("chosen_from") == "target")
    fell_back = pairs.filter(pl.col("fallback"))
    assert accepted.height + fell_back.height == pairs.height
    assert accepted.height and fell_back.height  # the tiny target reproduces some members at T = 1.4 as well
    for row in accepted.iter_rows(named=True):
        m = by_id[row["sample_id"]]
        # re-check each kept candidate independently: BLEU against the memorized body and SIM_func in the sandbox
        assert Bleu().score(m.body, row["chosen"], "python") == pytest.approx(row["chosen_bleu"])
        assert row["chosen_bleu"] <= MAX_BLEU
        again = asyncio.run(executor.compare(m.function, [m.signature + row["chosen"]], context=m.context))
        assert again.candidates[0].sim_func == row["chosen_sim_func"] <= MAX_SIM_FUNC
    for row in fell_back.iter_rows(named=True):
        assert row["chosen"] == by_id[row["sample_id"]].reference and row["chosen_from"] == "reference"
        reasons = json.loads(row["rejections"])
        assert sum(reasons.values()) == row["candidates"] >= 1
        assert set(reasons) <= {"unparsable", "textual_overlap", "functional_overlap", "not_measured"}


class _Recording:
    """A real chat server whose requests are kept (the test checks the prompt and temperatures sent)."""

    def __init__(self, server):
        self.server, self.sent = server, []

    async def chat(self, messages, *, tools=(), params=None):
        self.sent.append((messages, params))
        return await self.server.chat(messages, tools=tools, params=params)


def test_rewrite_pairs_send_the_paper_prompt_at_ten_temperatures(audit, organism_tiny_chat):
    t = _tables(audit)
    # the two shortest: the tiny chat model's context (512 tokens) holds the prompt of few members
    memorized = sorted(memorized_set(t["samples"], t["generations"], t["claims"]),
                       key=lambda m: len(m.prompt + m.body))[:2]
    executor = create_executor("sandbox", ExecutorConfig(seed=0))

    async def make():
        server = create_server("rewriter", {"kind": "embedded", "model_dir": str(organism_tiny_chat.chat_target),
                                            "threads": 1})
        recording = _Recording(server)
        try:
            return await build_pairs(memorized, "rewrite", rewriter=recording, executor=executor,
                                     max_tokens=64), recording.sent
        finally:
            await server.aclose()

    pairs, sent = asyncio.run(make())
    assert len(sent) == 10 * len(memorized) or pairs.filter(pl.col("chosen_from") == "rewrite").height
    m = memorized[0]
    messages, _ = sent[0]
    assert [msg.role for msg in messages] == ["system", "user"] and messages[0].content == REWRITE_SYSTEM
    assert messages[1].content == REWRITE_USER.format(code=(m.prompt + m.body).rstrip("\n"), signature=m.signature)
    assert "Keep the EXACT same signature line and the original indentation." in messages[1].content
    temperatures = [params.temperature for msgs, params in sent if msgs[1].content == messages[1].content]
    if len(temperatures) == 10:
        assert temperatures == list(REWRITE_TEMPERATURES)
    # the chat model answered (its replies were judged), not only failed requests
    assert any(set(json.loads(r)) - {"request_failed"} for r in pairs["rejections"]) or not pairs["fallback"].all()
    for row in pairs.iter_rows(named=True):
        if row["fallback"]:
            reasons = json.loads(row["rejections"])
            assert sum(reasons.values()) >= row["candidates"] and row["chosen_from"] == "reference"
