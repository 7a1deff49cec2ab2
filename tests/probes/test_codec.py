"""CoDeC (calib.probes.codec): the AUC, the score and its interval, the context draws, and the probe run
end to end on the model organism's embedded server.

Reference values come from independent sources: ``scipy.stats.mannwhitneyu`` (the U statistic, whose
ties count one half), ``scipy.stats.beta.ppf`` and the Clopper–Pearson closed forms at k = 0 and k = n,
hand counts written in the tests, and the organism's model run directly with transformers (one
forward pass, ``torch.log_softmax``) for the log-likelihoods.
"""

from __future__ import annotations

import asyncio
import json
import math
import random

import numpy as np
import pytest
from scipy import stats

from calib.probes.codec import CodecSample, codec_auc, codec_probe, codec_score, draw_context

SEP = "\n\n"


def run(coro):
    return asyncio.run(coro)


def sample(dataset: str, sample_id: str, delta: float, error: str | None = None) -> CodecSample:
    ll_without = -2.0
    return CodecSample(dataset, sample_id, 10, ll_without, ll_without + delta, delta, ("x",), error)


# --- codec_auc ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n1,n2,seed", [(1, 1, 0), (2, 2, 1), (3, 5, 2), (7, 4, 3), (20, 30, 4)])
def test_auc_is_the_mann_whitney_u_over_n1_n2(n1, n2, seed):
    # scipy.stats.mannwhitneyu(x, y).statistic is U1 = R1 - n1(n1+1)/2 over average ranks (scipy docs,
    # "Notes"), i.e. #{x > y} + 0.5 #{x = y}: the paper's §5.3 sum. Scores on a coarse grid force ties.
    rng = np.random.default_rng(seed)
    seen = (rng.integers(0, 6, n1) / 5).tolist()
    unseen = (rng.integers(0, 6, n2) / 5).tolist()
    expected = stats.mannwhitneyu(seen, unseen).statistic / (n1 * n2)
    assert codec_auc(seen, unseen) == pytest.approx(expected, abs=1e-12)


def test_auc_hand_cases():
    assert codec_auc([0.75, 0.71], [0.24, 0.17]) == 1.0  # Pythia-like: every seen above every unseen
    assert codec_auc([0.3, 0.3], [0.3]) == 0.5  # all tied
    assert codec_auc([0.08, 0.075], [0.09, 0.2]) == 0.0  # every seen below every unseen
    # Pairs (0.5, 0.3) 1, (0.5, 0.1) 1, (0.3, 0.3) 0.5, (0.3, 0.1) 1: 3.5 of 4.
    assert codec_auc([0.5, 0.3], [0.3, 0.1]) == 0.875
    # One pair of four won: the paper's Table 4 AUC of 25 % with two datasets a side.
    assert codec_auc([0.085, 0.06], [0.09, 0.08]) == 0.25  # only 0.085 > 0.08
    assert codec_auc(np.array([0.5]), (np.float32(0.25),)) == 1.0


@pytest.mark.parametrize("seen,unseen,word", [([], [0.1], "seen_scores"), ([0.1], [], "unseen_scores"),
                                              ([math.nan], [0.1], r"seen_scores\[0\]"),
                                              ([0.1], [0.2, math.inf], r"unseen_scores\[1\]")])
def test_auc_refuses_empty_and_non_finite(seen, unseen, word):
    with pytest.raises(ValueError, match=word):
        codec_auc(seen, unseen)


# --- codec_score --------------------------------------------------------------------------------

def test_score_counts_decreases_ties_are_not_decreases_and_failures_are_left_out():
    samples = [sample("a", "1", -0.5), sample("a", "2", -0.1), sample("a", "3", 0.0), sample("a", "4", 0.2),
               sample("a", "5", -1e-9), sample("a", "6", math.nan, error="RequestFailed: 503"),
               sample("b", "1", 0.3)]
    scores = codec_score(samples)
    assert list(scores) == ["a", "b"]
    a = scores["a"]
    # By hand: decreases are -0.5, -0.1, -1e-9 (0.0 is a tie, not a decrease); 5 scored, 1 failed.
    assert (a.k, a.n, a.n_failed) == (3, 5, 1)
    assert a.score == 3 / 5
    assert a.mean_delta == pytest.approx((-0.5 - 0.1 + 0.0 + 0.2 - 1e-9) / 5, abs=1e-15)
    # Clopper-Pearson at 95 %: Beta(0.025; k, n-k+1) and Beta(0.975; k+1, n-k).
    assert a.low == pytest.approx(stats.beta.ppf(0.025, 3, 3), abs=1e-12)
    assert a.high == pytest.approx(stats.beta.ppf(0.975, 4, 2), abs=1e-12)
    assert a.confidence == 0.95 and a.method == "clopper-pearson"
    b = scores["b"]
    assert (b.k, b.n, b.score) == (0, 1, 0.0)
    assert json.loads(json.dumps(a.to_dict()))["k"] == 3


@pytest.mark.parametrize("n", [1, 4, 30])
def test_score_interval_closed_forms_at_the_ends(n):
    # k = n: low = (gamma/2)^(1/n), high = 1; k = 0: low = 0, high = 1 - (gamma/2)^(1/n) (the Beta(k, 1)
    # and Beta(1, n) quantiles in closed form), here at 90 % so gamma/2 = 0.05.
    every = codec_score([sample("all", str(i), -0.1) for i in range(n)], confidence=0.90)["all"]
    none = codec_score([sample("none", str(i), 0.1) for i in range(n)], confidence=0.90)["none"]
    assert (every.score, every.high) == (1.0, 1.0)
    assert every.low == pytest.approx(0.05 ** (1 / n), abs=1e-12)
    assert (none.score, none.low) == (0.0, 0.0)
    assert none.high == pytest.approx(1 - 0.05 ** (1 / n), abs=1e-12)


def test_score_of_a_dataset_with_nothing_scored_is_vacuous():
    s = codec_score([sample("a", "1", math.nan, "x"), sample("a", "2", math.nan, "y")])["a"]
    assert (s.k, s.n, s.n_failed, s.low, s.high) == (0, 0, 2, 0.0, 1.0)
    assert math.isnan(s.score) and math.isnan(s.mean_delta)
    assert s.to_dict()["score"] is None


def test_score_refuses_a_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        codec_score([sample("a", "1", 0.1)], confidence=1.0)


# --- context draws ------------------------------------------------------------------------------

IDS = [f"s{i:02d}" for i in range(12)]


def test_context_draw_is_deterministic_excludes_the_sample_and_ignores_order():
    shuffled = IDS[::-1]
    for sid in IDS:
        ctx = draw_context("d", sid, IDS, n_context=3, seed=7)
        assert len(ctx) == 3 and len(set(ctx)) == 3
        assert sid not in ctx and set(ctx) <= set(IDS)
        assert draw_context("d", sid, IDS, n_context=3, seed=7) == ctx
        assert draw_context("d", sid, shuffled, n_context=3, seed=7) == ctx
    draws = {seed: [draw_context("d", sid, IDS, n_context=3, seed=seed) for sid in IDS] for seed in (7, 8)}
    assert draws[7] != draws[8]


def test_context_draw_is_uniform_over_the_other_samples():
    # 4 other samples, 2 drawn: each appears with probability 1/2; over 4000 seeds a chi-square test of
    # the counts against 2000 each (3 degrees of freedom; the draw is deterministic given the seeds).
    ids = ["a", "b", "c", "d", "e"]
    counts = dict.fromkeys("bcde", 0)
    for seed in range(4000):
        for c in draw_context("d", "a", ids, n_context=2, seed=seed):
            counts[c] += 1
    assert stats.chisquare(list(counts.values())).pvalue > 0.001


@pytest.mark.parametrize("kwargs,match", [
    ({"n_context": 3}, "dataset 'small' has 3 samples, too few for n_context=3"),
    ({"n_context": 0}, "n_context"),
    ({"n_context": 1, "separator": ""}, "separator"),
    ({"n_context": 1, "concurrency": 0}, "concurrency"),
])
def test_probe_validates_before_any_request(kwargs, match):
    class Never:
        async def score(self, *args, **kwargs):
            raise AssertionError("no request may be sent")

    data = {"big": [(str(i), "x") for i in range(5)], "small": [("a", "x"), ("b", "y"), ("c", "z")]}
    with pytest.raises(ValueError, match=match):
        run(codec_probe(Never(), data, seed=0, **kwargs))
    with pytest.raises(ValueError, match="appears twice"):
        run(codec_probe(Never(), {"d": [("a", "x"), ("a", "y")]}, n_context=1, seed=0))
    with pytest.raises(ValueError, match="cannot score"):
        run(codec_probe(object(), data, n_context=1, seed=0))


# --- end to end on the model organism -----------------------------------------------------------

def _hf():
    """torch and transformers, or a skip naming the extra that brings them."""
    torch = pytest.importorskip("torch", reason="the embedded server needs the 'embedded' extra")
    transformers = pytest.importorskip("transformers", reason="the embedded server needs the 'embedded' extra")
    return torch, transformers


def _datasets(organism) -> dict[str, list[tuple[str, str]]]:
    """The target's members by kind (seen) and the never-trained controls by kind (unseen)."""
    import polars as pl

    truth = pl.read_parquet(organism.truth).sort("item_id")
    out: dict[str, list[tuple[str, str]]] = {}
    for row in truth.iter_rows(named=True):
        side = "seen" if row["membership"] == "member" else "unseen"
        out.setdefault(f"{side}:{row['kind']}", []).append((row["item_id"], row["audited"]))
    return out


def _direct_mean(model, tokenizer, prompt: str, text: str) -> float:
    """Mean log-prob of ``text``'s tokens after ``prompt``, straight from transformers."""
    torch, _ = _hf()
    p = tokenizer.encode(prompt, add_special_tokens=True)
    c = tokenizer.encode(text, add_special_tokens=False)
    with torch.inference_mode():
        logits = model(torch.tensor([p + c])).logits[0].float()
    logprobs = torch.log_softmax(logits[len(p) - 1:-1], dim=-1)
    return float(logprobs.gather(1, torch.tensor(c)[:, None]).mean())


async def _mean(server, prompt: str, text: str) -> float:
    scored = await server.score(prompt, text)
    return math.fsum(t.logprob for t in scored.tokens) / len(scored.tokens)


@pytest.fixture(scope="module")
def probed(organism_tiny):
    _hf()
    from calib.servers.embedded.kind import embedded

    data = _datasets(organism_tiny)
    # The same datasets with both the datasets and their samples in reverse order.
    reordered = {name: pairs[::-1] for name, pairs in reversed(list(data.items()))}

    async def go():
        server = embedded("target", {"model_dir": str(organism_tiny.target), "threads": 1})
        try:
            samples = await codec_probe(server, data, n_context=2, seed=0)
            again = await codec_probe(server, reordered, n_context=2, seed=0, concurrency=1)
            checks = {}
            for s in samples:
                if s.error is None:
                    text = dict(data[s.dataset])[s.sample_id]
                    checks[s.dataset, s.sample_id] = await _mean(server, SEP, text)
            return samples, again, checks, (await server.capabilities()).max_context
        finally:
            await server.aclose()

    samples, again, checks, max_context = run(go())
    return data, samples, again, checks, max_context


def test_every_log_likelihood_matches_a_direct_score(probed, organism_tiny):
    _, transformers = _hf()
    data, samples, again, checks, max_context = probed
    # Neither the order of datasets and samples nor the concurrency changes a draw or a value.
    assert sorted(samples, key=lambda s: (s.dataset, s.sample_id)) == sorted(again, key=lambda s: (s.dataset,
                                                                                                 s.sample_id))
    assert [(s.dataset, s.sample_id) for s in samples] == [(d, i) for d, pairs in data.items() for i, _ in pairs]
    tokenizer = transformers.AutoTokenizer.from_pretrained(organism_tiny.target)
    assert len(samples) == sum(map(len, data.values()))
    for s in samples:
        text = dict(data[s.dataset])[s.sample_id]
        fits = len(tokenizer.encode(SEP + text)) <= max_context
        # A sample too long for the model's context alone is recorded, not fatal; every other is scored.
        assert (s.error is None) == fits, (s.sample_id, s.error)
        assert s.sample_id not in s.context_ids and len(s.context_ids) == 2
        assert set(s.context_ids) <= {i for i, _ in data[s.dataset]}
        if s.error is not None:
            assert "maximum context length" in s.error and math.isnan(s.delta)
            continue
        assert s.tokens == len(tokenizer.encode(text))
        assert s.ll_without == checks[s.dataset, s.sample_id]
        assert s.delta == s.ll_with - s.ll_without
        assert s.prompt_tokens + s.tokens <= max_context
    assert any(s.error is not None for s in samples) and any(s.truncated for s in samples)
    assert any(not s.truncated and s.error is None for s in samples)


def test_untruncated_and_truncated_contexts_are_scored_as_documented(probed, organism_tiny):
    from calib.servers.embedded.kind import embedded

    torch, transformers = _hf()
    data, samples, _, _, max_context = probed
    model = transformers.AutoModelForCausalLM.from_pretrained(organism_tiny.target, dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(organism_tiny.target)
    whole = [s for s in samples if s.error is None and not s.truncated]
    cut = [s for s in samples if s.truncated][:2]
    for s in whole[:3]:
        texts = dict(data[s.dataset])
        prompt = SEP.join(texts[c] for c in s.context_ids) + SEP
        assert s.ll_without == pytest.approx(_direct_mean(model, tokenizer, SEP, texts[s.sample_id]), abs=1e-5)
        assert s.ll_with == pytest.approx(_direct_mean(model, tokenizer, prompt, texts[s.sample_id]), abs=1e-5)
        assert s.prompt_tokens == len(tokenizer.encode(prompt))

    async def left_cut_matches(server, s) -> bool:
        # The prompt of a truncated sample is the tail of the joined context, cut at a token boundary,
        # then the separator; it fills the context up to a few tokens (re-tokenizing a cut may differ).
        texts = dict(data[s.dataset])
        ids = tokenizer.encode(SEP.join(texts[c] for c in s.context_ids))
        assert max_context - s.tokens - 4 <= s.prompt_tokens
        guess = s.prompt_tokens - len(tokenizer.encode(SEP))
        for keep in range(max(1, guess - 4), min(len(ids), guess + 4) + 1):
            prompt = tokenizer.decode(ids[-keep:]) + SEP
            if len(tokenizer.encode(prompt)) + s.tokens <= max_context:
                if await _mean(server, prompt, texts[s.sample_id]) == s.ll_with:
                    return True
        return False

    async def go():
        server = embedded("target", {"model_dir": str(organism_tiny.target), "threads": 1})
        try:
            return [await left_cut_matches(server, s) for s in cut]
        finally:
            await server.aclose()

    assert cut and all(run(go()))


def test_scores_and_auc_on_the_organism(probed, capsys):
    _, samples, _, _, _ = probed
    scores = codec_score(samples)
    for name, s in scores.items():
        assert s.n + s.n_failed == sum(1 for x in samples if x.dataset == name)
        # The signs of the deltas are the score.
        assert s.k == sum(1 for x in samples if x.dataset == name and x.error is None and x.delta < 0)
        assert 0.0 <= s.low <= s.score <= s.high <= 1.0
    seen = [s.score for name, s in scores.items() if name.startswith("seen:")]
    unseen = [s.score for name, s in scores.items() if name.startswith("unseen:")]
    auc = codec_auc(seen, unseen)
    assert 0.0 <= auc <= 1.0
    with capsys.disabled():
        print("\nCoDeC on the tiny organism's target (n_context=2, seed=0):",
              {k: (round(v.score, 3), v.n, round(v.mean_delta, 3)) for k, v in scores.items()}, f"AUC={auc:.3f}")


def test_a_failed_request_is_recorded_and_the_probe_goes_on(organism_tiny):
    """The ``openai`` kind against the embedded server's own HTTP app, with 503s injected for one sample."""
    _hf()
    from aiohttp import web

    from calib.servers.embedded.app import make_app
    from calib.servers.embedded.model import EmbeddedModel
    from calib.servers.registry import create_server
    from tests._loopback import serve_app

    marker = "# codec-fault-marker"
    short = [pair for pairs in _datasets(organism_tiny).values() for pair in pairs if len(pair[1]) < 400][:6]
    assert len(short) == 6
    ids = [i for i, _ in short]
    contexts = {i: draw_context("d", i, ids, n_context=2, seed=0) for i in ids}
    marked = next(i for i in ids if any(i in c for c in contexts.values()))
    data = {"d": [(i, text + marker + "\n" if i == marked else text) for i, text in short]}
    model = EmbeddedModel(organism_tiny.target, threads=1)

    @web.middleware
    async def faults(request, handler):
        if request.path == "/v1/completions":
            prompt = json.loads(await request.read()).get("prompt")
            text = model.detokenize(prompt) if isinstance(prompt, list) else str(prompt)
            if marker in text:
                return web.json_response({"error": {"message": "injected fault"}}, status=503)
        return await handler(request)

    app = make_app(model, served_name="target")
    app.middlewares.append(faults)

    async def go():
        async with serve_app(app) as url:
            server = create_server("faulty", {"kind": "openai", "base_url": url, "max_retries": 1})
            try:
                return await codec_probe(server, data, n_context=2, seed=0)
            finally:
                await server.aclose()

    samples = run(go())
    # The marked sample fails as the scored text, and so do the samples it is context for.
    expected = {marked} | {i for i, c in contexts.items() if marked in c}
    assert len(expected) >= 2
    failed = {s.sample_id for s in samples if s.error is not None}
    assert failed == expected
    for s in samples:
        assert s.context_ids == contexts[s.sample_id]
        if s.error is not None:
            assert s.error.startswith("RequestFailed") and "503" in s.error and "2 attempt(s)" in s.error
            assert math.isnan(s.ll_with)
        else:
            assert math.isfinite(s.delta) and not s.truncated
    score = codec_score(samples)["d"]
    assert (score.n, score.n_failed) == (6 - len(expected), len(expected))


def test_seeded_draws_match_a_fresh_generator():
    # The draw is random.Random(int of the first 8 bytes of a SHA-256).sample(sorted others, n): the
    # same construction written out here, for one seed, so a change of the rule cannot go unnoticed.
    import hashlib

    blob = json.dumps(["calib.probes.codec", 5, "d", "s03"], ensure_ascii=True).encode()
    rng = random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:8], "big"))
    assert draw_context("d", "s03", IDS, n_context=4, seed=5) == tuple(rng.sample([i for i in IDS if i != "s03"], 4))
