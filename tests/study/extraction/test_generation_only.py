"""The generation-only extraction procedures' arithmetic (docs/extraction.md "Scores without log-probs").

``greedy_prefix``'s matched-prefix count against hand-computed cases (a character tokenizer and a real
``tokenizer.json`` read by the ``tokenizers`` library); ``sampled``'s Clopper–Pearson interval and query
budget against scipy's Beta quantiles and the closed form of the extraction paper (§6, App. F.1:
n = ln(1 − c) / ln(1 − p)); what ``calib check`` asks of the servers; the spec's new keys.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from pydantic import ValidationError
from scipy import stats as sps

from calib.data.tokenizers import CharTokenizer, FileTokenizer
from calib.study.extraction.check import needs
from calib.study.extraction.generated import matched_prefix, matched_tokens, query_budget, sampled_detail
from calib.study.sections.extraction import ExtractionSection
from calib.study.spec import StudySpec


def _run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("generated,target,expected", [
    ([1, 2, 3], [1, 2, 3], 3),      # verbatim
    ([1, 2, 9, 4], [1, 2, 3, 4], 2),  # the third token differs: a later agreement does not count
    ([9, 2, 3], [1, 2, 3], 0),      # the first token differs
    ([1, 2], [1, 2, 3, 4], 2),      # a generation that stopped early
    ([], [1, 2], 0),
    ([1, 2, 3, 4, 5], [1, 2, 3], 3),  # tokens after the suffix are ignored
])
def test_matched_prefix_counts_the_leading_tokens_reproduced(generated, target, expected):
    assert matched_prefix(generated, target) == expected


def test_matched_tokens_by_characters():
    chars = CharTokenizer()  # one unit per character: the count is the shared prefix's length
    suffix = "return x + 1\n"
    target = _run(chars.tokenize(suffix))
    assert _run(matched_tokens(chars, suffix, suffix, target)) == 13
    assert _run(matched_tokens(chars, suffix + "def f():", suffix, target)) == 13  # trailing text is ignored
    assert _run(matched_tokens(chars, "return x - 1\n", suffix, target)) == 9  # "return x " then '-' != '+'
    assert _run(matched_tokens(chars, "pass", suffix, target)) == 0


def test_matched_tokens_counts_only_whole_tokens_before_the_first_difference(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "return": 1, "x": 2, "+": 3, "1": 4, "xy": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    words = FileTokenizer(tmp_path / "tokenizer.json")
    suffix = "return xy + 1"
    target = _run(words.tokenize(suffix))
    assert target == [1, 5, 3, 4]
    assert _run(matched_tokens(words, "return xy + 1", suffix, target)) == 4
    # "return x" is shared, but the token "xy" is cut at its second character: only "return" counts
    assert _run(matched_tokens(words, "return x + 1", suffix, target)) == 1
    assert _run(matched_tokens(words, "return xy - 1", suffix, target)) == 2


@pytest.mark.parametrize("hits,n", [(0, 16), (1, 16), (13, 16), (16, 16), (3, 100), (50, 100)])
def test_sampled_interval_and_query_budget_match_scipy_and_the_closed_form(hits, n):
    detail = sampled_detail(hits, n, 1.0)
    # Clopper–Pearson (1934): low = Beta(0.025; k, n−k+1), high = Beta(0.975; k+1, n−k)  (scipy.stats.beta.ppf)
    low = 0.0 if hits == 0 else sps.beta.ppf(0.025, hits, n - hits + 1)
    high = 1.0 if hits == n else sps.beta.ppf(0.975, hits + 1, n - hits)
    assert detail["p_low"] == pytest.approx(low, rel=1e-9, abs=1e-15)
    assert detail["p_high"] == pytest.approx(high, rel=1e-9)
    assert (detail["hits"], detail["samples"], detail["confidence"]) == (hits, n, 0.95)
    if hits == 0:  # p_lo = 0: no finite budget (stored as null)
        assert detail["queries_95"] is None
    else:  # the extraction paper, §6 / App. F.1: n = ln(δ) / ln(1 − p), rounded up, δ = 0.05
        expected = math.ceil(math.log(0.05) / math.log(1.0 - low))
        assert detail["queries_95"] == expected
        # ... and it is the fewest: one query fewer leaves the miss probability above 5 %
        assert (1 - low) ** expected <= 0.05 + 1e-12 and (expected == 1 or (1 - low) ** (expected - 1) > 0.05)


def test_query_budget_is_about_three_over_p():
    assert query_budget(0.0) == math.inf
    assert query_budget(1.0) == 1
    assert query_budget(0.01) == 299  # ln 0.05 / ln 0.99 = 298.07
    assert query_budget(1e-6) == pytest.approx(3e6, rel=2e-3)  # ≈ 3/p (−ln 0.05 = 2.996)


def _spec(procedures: list[str], prompt: str = "", kind: str = "extraction") -> StudySpec:
    import tomllib

    census = ('[[census.pairs]]\nname = "a"\ndocument = "organism:member:0"\ncontrol = "organism:control:0"\n'
              if kind == "census" else "")
    text = f"""[study]
name = "x"
kind = "{kind}"
[servers.host]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[organism]
preset = "tiny"
[models]
target = "host"
[extraction]
procedures = {json.dumps(procedures)}
[prompt]
{prompt}
{census}"""
    return StudySpec.model_validate(tomllib.loads(text))


def test_generation_only_procedures_need_only_completions(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    local = f'tokenizer = "file"\ntokenizer_file = "{tmp_path / "tokenizer.json"}"'
    assert needs(_spec(["greedy_prefix", "sampled"], local)) == {"host": ["complete"]}
    assert needs(_spec(["sampled"], 'tokenizer = "chars"')) == {"host": ["complete"]}
    # the server's own tokenizer cuts the windows: then it needs /tokenize too
    assert needs(_spec(["greedy_prefix"])) == {"host": ["tokenize", "complete"]}
    # a log-prob procedure brings scoring back
    assert needs(_spec(["greedy_prefix", "top_k"], local)) == {"host": ["scoring", "tokenize", "complete"]}


def test_spec_keys_of_the_sampled_procedure():
    section = ExtractionSection()
    assert "sampled" not in section.procedures and "greedy_prefix" not in section.procedures  # not defaults
    assert (section.samples, section.sample_temperature) == (100, 1.0)
    for bad in ({"samples": 0}, {"samples": 10_001}, {"sample_temperature": 0.0}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            ExtractionSection(**bad)
    # a census scores probabilities: sampled estimates one, greedy_prefix is a share
    assert _spec(["sampled"], kind="census").extraction.procedures == ("sampled",)
    with pytest.raises(ValidationError, match="greedy_prefix"):
        _spec(["greedy_prefix"], kind="census")


def test_the_report_names_the_source_that_cut_the_windows():
    from calib.report.procedure import tokenizer_text
    from calib.study.tokenizer_source import token_units

    assert tokenizer_text({"tokenizer": "t"}) == "the target server's tokenizer (`t`)"  # runs before the fact
    file = tokenizer_text({"window_tokenizer": {"source": "file", "path": "/m/tokenizer.json", "sha256": "ab" * 32}})
    assert file.startswith("the local tokenizer file `/m/tokenizer.json` (SHA-256 `abababababababab…`")
    hub = tokenizer_text({"window_tokenizer": {"source": "hub", "repo": "org/m", "revision": "v1"}})
    assert "Hub repository `org/m` at revision `v1`" in hub
    assert "3 characters per token" in tokenizer_text({"window_tokenizer": {"source": "chars", "chars_per_token": 3.0}})
    echoed = tokenizer_text({"window_tokenizer": {"source": "completions", "server": "t", "via": "echo"}})
    assert echoed.startswith("the target server's own tokenizer read through its completions route (`t`, its "
                             "echoed prompt tokens")
    # a character budget cuts ℓ × chars_per_token characters; a tokenizer cuts ℓ tokens
    assert token_units(CharTokenizer(3.0), 12) == 36 and token_units(CharTokenizer(0.1), 2) == 1
    assert token_units(object(), 12) == 12
