"""``greedy_logprob``: the suffix's probability read off a greedy generation's output-token log-probs.

Its arithmetic against hand-computed cases (exact while the generation agrees with the suffix, an upper bound
1 − listed departing mass at the first departure); then a real extraction study on the tiny organism's target
in-process, where the same windows are also scored by teacher forcing (``base``: log p(suffix) at T = 1 from
prompt log-probs, an independent computation by the server's scoring route): a window whose greedy generation
reproduces the suffix must score the same under both, every other window at least ``base`` (a bound). And what
a study through chat asks of its servers.
"""

from __future__ import annotations

import json
import math
import tomllib

import polars as pl
import pytest
from pydantic import ValidationError

from calib.servers import TokenLogprob
from calib.study import run_study
from calib.study.extraction.check import needs
from calib.study.extraction.generated import suffix_logprob
from calib.study.runner import RunOptions
from calib.study.spec import StudySpec


def _tok(text: str, p: float, *top: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(token_id=None, token=text, logprob=math.log(p),
                        top=tuple((None, t, math.log(q)) for t, q in top))


def test_exact_while_the_generation_agrees_with_the_suffix():
    tokens = [_tok("return", 0.9), _tok(" x", 0.5), _tok("\n", 0.8), _tok("def", 0.3)]
    log_p, exact, chars = suffix_logprob(tokens, "return x\n")
    assert exact and chars == 9
    assert log_p == pytest.approx(math.log(0.9 * 0.5 * 0.8))  # the token after the suffix is not counted
    # a last token that runs past the suffix's end still carries the suffix (one tokenization: the generated one)
    log_p, exact, _ = suffix_logprob([_tok("return", 0.9), _tok(" x\n\n", 0.4)], "return x\n")
    assert exact and log_p == pytest.approx(math.log(0.9 * 0.4))


def test_an_upper_bound_from_the_first_departure():
    # the generation writes " y" where the suffix goes on " x": p(" x" or any token that continues the suffix)
    # <= 1 - p(" y") - p(listed departing alternatives); " x" itself (listed) is not departing
    tokens = [_tok("return", 0.9), _tok(" y", 0.5, (" y", 0.5), (" x", 0.2), (" z", 0.1)), _tok("\n", 0.9)]
    log_p, exact, chars = suffix_logprob(tokens, "return x\n")
    assert not exact and chars == 6
    assert log_p == pytest.approx(math.log(0.9 * (1 - 0.5 - 0.1)))
    # no alternatives listed: the bound is 1 - p(generated token)
    log_p, _, _ = suffix_logprob([_tok("pass", 0.7)], "return x\n")
    assert log_p == pytest.approx(math.log(0.3))
    # a generation that stopped before the suffix ends: the product of what it has (a bound)
    log_p, exact, chars = suffix_logprob([_tok("return", 0.9)], "return x\n")
    assert not exact and chars == 6 and log_p == pytest.approx(math.log(0.9))
    # listed departing mass that leaves nothing: probability 0
    assert suffix_logprob([_tok("a", 0.6, ("b", 0.4))], "c")[0] == -math.inf


def _spec(procedures: list[str], *, route: str = "complete", rule: str | None = None,
          kind: str = "extraction") -> StudySpec:
    generation = f'[generation]\nroute = "{route}"\n' + (f'rule = "{rule}"\n' if rule else "")
    if kind == "census":
        generation += '[[census.pairs]]\nname = "a"\ndocument = "organism:member:0"\ncontrol = "organism:control:0"\n'
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
[prompt]
tokenizer = "chars"
[extraction]
procedures = {json.dumps(procedures)}
{generation}"""
    return StudySpec.model_validate(tomllib.loads(text))


def test_what_a_study_asks_of_its_servers():
    assert needs(_spec(["greedy_logprob"])) == {"host": ["complete", "output_logprobs"]}
    assert needs(_spec(["greedy_prefix", "sampled"], route="chat", rule="continue")) == {"host": ["chat"]}
    assert needs(_spec(["greedy_logprob"], route="chat")) == {"host": ["chat", "chat_logprobs"]}
    # through chat only the generation procedures: teacher forcing needs the completion route
    with pytest.raises(ValidationError, match=r"\['top_k'\] need teacher-forced log-probs"):
        _spec(["greedy_prefix", "top_k"], route="chat")
    # a census through chat: sampled estimates a probability from generations alone
    assert needs(_spec(["sampled"], route="chat", kind="census")) == {"host": ["chat"]}
    with pytest.raises(ValidationError, match="need teacher-forced log-probs"):
        _spec(["base"], route="chat", kind="census")
    # greedy_logprob reads the reply's own tokens: a rule that reads a code block back cannot carry them
    with pytest.raises(ValidationError, match="greedy_logprob through chat .* not 'continue'"):
        _spec(["greedy_logprob"], route="chat", rule="continue")


def test_greedy_logprob_equals_teacher_forcing_where_the_generation_reproduces_the_suffix(organism_tiny, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""[study]
name = "greedy-logprob"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{organism_tiny.root.parent.parent}"
extra_controls = 8

[servers.target]
kind = "embedded"
model_dir = "organism:target"
threads = 1

[models]
target = "target"

[data]
source = "organism"
kinds = ["verbatim"]

[extraction]
prefix_tokens = 32
suffix_tokens = [16]
procedures = ["base", "greedy_logprob"]
""")
    run = tmp_path / "run"
    result = run_study(spec, run_dir=run, options=RunOptions(progress=False))
    assert result.empty is None
    scores = pl.read_parquet(run / "tables" / "scores.parquet")
    assert scores["error"].null_count() == scores.height  # every window scored
    wide = (scores.select("window_id", "procedure", "log10_value", "detail")
            .pivot(on="procedure", index="window_id", values=["log10_value", "detail"]))
    exact = 0
    for row in wide.iter_rows(named=True):
        detail = json.loads(row["detail_greedy_logprob"])
        got, forced = row["log10_value_greedy_logprob"], row["log10_value_base"]
        assert detail["top_logprobs"] == 20  # the server's most, capped at 20
        if detail["exact"]:
            exact += 1
            assert got == pytest.approx(forced, abs=1e-4)  # the same tokens, the same model: the same probability
        else:
            assert got >= forced - 1e-6  # an upper bound
    assert exact >= 1  # the target reproduces its planted members
    assert exact < wide.height  # and not every control
