"""``calib check --estimate`` for extraction and census studies: the windows and score stages' requests and tokens.

The samples are counted by running the ``samples`` stage (offline) without a run directory. Windows are
cut by the window tokenizer (the target's, or ``[prompt] tokenizer``) in the ``windows`` stage, so their
number is bounded here by counting a sample's UTF-8 bytes as its tokens (a token covers at least one
byte): a population sample has at most one window per suffix length (none when even its bytes are too
few for ``offset + prefix + suffix``), a census document at most one every ``stride`` tokens. Every
model then, per window:

* scores it by teacher forcing once (ℓ_p + ℓ_s input tokens, at most 1 output token) when any scoring
  procedure is asked (``greedy``, ``top_k``, ``base`` and the near-verbatim ones share the pass);
* ``near_verbatim_greedy`` / ``near_verbatim``: one greedy generation of ℓ_s tokens (shared), and
  ``near_verbatim`` at most one more scoring pass (of a generation within ε edits);
* ``greedy_prefix``, ``greedy_logprob``: one greedy generation of ℓ_s tokens (shared); ``sampled``:
  ``[extraction] samples`` generations of ℓ_s tokens each, up to ``REQUEST_SAMPLES`` (32) per request.

Through chat (``[generation] route = "chat"``) every generation is one request; its input is bounded by
the rule's messages (the prefix, and the suffix under a rule that shows it, in bytes, plus
``CHAT_TEMPLATE_TOKENS`` per message) and its output by the rule's budget
(:func:`calib.study.extraction.asking.chat_budget`: a code reply may repeat the prefix).

A procedure not listed here is named in a note and left out of the figures.
"""

from __future__ import annotations

import math
from typing import Any

from calib._exceptions import CalibError
from calib.study.estimate import SPECIAL_TOKENS, Estimate, Line, offline_context, organism_built
from calib.study.extraction.common import scored_roles
from calib.study.spec import ORGANISM_MODEL_PREFIX

__all__ = ["SCORING", "estimate", "generations_per_window"]

#: Procedures read off the one teacher-forced scoring pass of a window.
SCORING = frozenset({"greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim"})


def _request_samples() -> int:
    """Generations ``sampled`` asks per completion request (1 where that module is not there: a bound)."""
    try:
        from calib.study.extraction.asking import REQUEST_SAMPLES
    except ImportError:
        return 1
    return int(REQUEST_SAMPLES)


def generations_per_window(spec: Any) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Procedure -> (completion requests, generations of ℓ_s tokens) per window and model (the near-verbatim
    pair shares one), and the procedures this estimate does not know."""
    out: dict[str, tuple[int, int]] = {}
    unknown: list[str] = []
    for procedure in spec.extraction.procedures:
        if procedure in ("near_verbatim_greedy", "near_verbatim"):
            out["near_verbatim"] = (1, 1)
        elif procedure in ("greedy_prefix", "greedy_logprob"):
            out["greedy"] = (1, 1)  # one greedy generation serves both
        elif procedure == "sampled":
            n = int(getattr(spec.extraction, "samples", 100))
            chat = spec.generation.route == "chat"  # a chat request is one generation
            out[procedure] = (n if chat else math.ceil(n / _request_samples()), n)
        elif procedure not in SCORING:
            unknown.append(procedure)
    return out, unknown


def _needs_organism(spec: Any) -> bool:
    refs = [r for p in spec.census.pairs for r in (p.document, *p.control)] if spec.census is not None else []
    return spec.data.source == "organism" or any(r.startswith(ORGANISM_MODEL_PREFIX) for r in refs)


async def _samples(spec: Any, resources: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    from calib.study.extraction.samples import census_samples_stage, samples_stage

    if spec.organism is not None and _needs_organism(spec) and not organism_built(spec):
        return None, "the organism is not built yet (its first stage builds it): samples unknown, nothing estimated"
    if spec.data.hub is not None and spec.study.kind != "census":
        return None, "data.hub: the corpus is downloaded by the samples stage; samples unknown, nothing estimated"
    stage = census_samples_stage if spec.study.kind == "census" else samples_stage
    try:
        frame = await stage.run(offline_context(spec, resources))
    except CalibError as exc:
        return None, f"samples: {' '.join(str(exc).split())}"
    return frame.to_dicts(), None


def _windows(spec: Any, rows: list[dict[str, Any]]) -> dict[int, int]:
    """At most how many windows of each suffix length the windows stage cuts (a sample's bytes as its tokens)."""
    e = spec.extraction
    census = spec.study.kind == "census"
    out = {}
    for length in e.suffix_tokens:
        n = 0
        for r in rows:
            tokens = len(r["function"].encode("utf-8", "surrogatepass"))
            last = tokens - e.prefix_tokens - length - (0 if census else e.offset)
            if last >= 0:
                n += last // e.stride + 1 if census else 1
        out[length] = n
    return out


def _chat_sizes(spec: Any) -> tuple[int, int, int]:
    """Through chat: (input tokens of a request besides a shown suffix, output tokens besides the suffix's, 1
    when the rule shows the suffix else 0), from the rule's messages with an empty prefix and the prefix's tokens."""
    from calib.data.rules import load_rule
    from calib.study.estimate import CHAT_TEMPLATE_TOKENS
    from calib.study.extraction.asking import chat_budget

    rule = load_rule(spec.generation.chat_rule)
    messages = rule.messages("", language="python", suffix="" if rule.shows_suffix else None)
    frame = sum(len(m["content"].encode("utf-8")) + CHAT_TEMPLATE_TOKENS for m in messages) + SPECIAL_TOKENS
    prefix = spec.extraction.prefix_tokens
    return frame + prefix, chat_budget(rule, 0, prefix), int(rule.shows_suffix)


async def estimate(spec: Any, resources: Any, caps: dict[str, dict[str, Any] | None]) -> Estimate:
    """The windows and score stages' requests, tokenizer requests and token bounds per model (see the module)."""
    found = Estimate()
    rows, why = await _samples(spec, resources)
    if rows is None:
        found.notes.append(str(why))
        return found
    e = spec.extraction
    windows = _windows(spec, rows)
    total = sum(windows.values())
    generations, unknown = generations_per_window(spec)
    if unknown:
        found.notes.append(f"procedure(s) {', '.join(unknown)}: not known to the estimate, left out of the figures")
    found.notes.append(f"windows: at most {total:,} (cut by the window tokenizer; counted here as one token per "
                       f"byte of the {len(rows):,} samples)")
    if getattr(spec.prompt, "tokenizer", "server") == "completions":
        found.notes.append(f"windows: the target's completions route tokenizes (echo, nothing generated, billed as "
                           f"prompt tokens): at most {len(rows) + 2 * total:,} requests, counted as tokenizer "
                           "requests")
        found.lines.append(Line("windows", spec.models.target, requests=0, input_tokens=0, output_tokens=0,
                                tokenizer_requests=len(rows) + 2 * total, exact={"output_tokens"}))
    if getattr(spec.prompt, "tokenizer", "server") == "server":
        # the windows stage: one tokenize per sample, per window at most 3 decoded cuts and 2 re-tokenized halves
        found.lines.append(Line("windows", spec.models.target, requests=0, input_tokens=0, output_tokens=0,
                                tokenizer_requests=len(rows) + 5 * total,
                                exact={"requests", "input_tokens", "output_tokens"}))
    scoring = any(p in SCORING for p in e.procedures)
    nv = "near_verbatim" in e.procedures
    asked = sum(r for r, _ in generations.values())
    made = sum(g for _, g in generations.values())
    # a scoring pass tokenizes prompt, continuation and both; a near-verbatim generation is tokenized and
    # decoded; the generation-only procedures tokenize the suffix and at most one matched prefix
    tokenized = 3 * ((1 if scoring else 0) + (1 if nv else 0)) + (2 if "near_verbatim" in generations else 0) + \
        (2 if {"greedy", "sampled"} & set(generations) else 0)
    chat = _chat_sizes(spec) if spec.generation.route == "chat" else None
    for _, name in scored_roles(spec):
        line = Line("score", name, requests=0, input_tokens=0, output_tokens=0)
        for length, n in windows.items():
            passes = n * ((1 if scoring else 0) + (1 if nv else 0))
            line.requests += passes + n * asked
            line.input_tokens += passes * (e.prefix_tokens + length + SPECIAL_TOKENS) + \
                n * asked * (e.prefix_tokens + SPECIAL_TOKENS if chat is None else chat[0] + length * chat[2])
            line.output_tokens += passes + n * made * (length if chat is None else length + chat[1])
            line.tokenizer_requests += n * tokenized
        found.lines.append(line)
    if spec.models.reference is not None:
        found.notes.append("score: input tokens are in the target's tokens (ℓ_p + ℓ_s per window); a reference "
                           "with another tokenizer may read more")
    return found
