"""The procedure statement of an extraction or census report: what was tested, so the null is clear.

An extraction procedure is a model, a decoding policy, a prompt-selection rule, a score and a
verification rule (extraction paper App. B.2). The statement is built from ``spec.json`` and
``manifest.json`` (and the procedures the tables hold), goes into summary.json as ``procedure`` and
opens both reports.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from calib._version import __version__
from calib.report.document import Block, Bullets, Heading, Paragraph, Table
from calib.report.format import DASH, number
from calib.report.record import run_record, run_record_blocks
from calib.report.run import RunTables, setting

__all__ = ["BINARY_PROCEDURES", "ROLES", "describe_procedure", "methods_record", "procedure_order",
           "procedure_statement", "provenance", "provenance_blocks", "statement_blocks", "study_facts",
           "tokenizer_text"]

#: Procedures whose score is 0/1: one operating point, no margin (extraction paper §4, App. D.5).
BINARY_PROCEDURES = ("greedy", "near_verbatim_greedy")

#: Roles in the order the report lists them.
ROLES = ("target", "reference")

_FAMILIES = ("greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim", "greedy_prefix", "greedy_logprob",
             "sampled")
#: The scale column of the procedures table, for the procedures whose score is neither 0/1 nor a probability.
_SCALES = {"greedy_prefix": "share of ℓ_s tokens (graded)", "sampled": "estimated probability (hits / n)",
           "greedy_logprob": "probability (exact when reproduced, else an upper bound)"}
_BASE_T = re.compile(r"^base_t(.+)$")


def procedure_order(name: str) -> tuple[int, float, str]:
    """Sort key: the spec's family order, then the temperature of ``base_t<T>``, then the name."""
    match = _BASE_T.match(name)
    if match:
        try:
            return _FAMILIES.index("base"), float(match.group(1)), name
        except ValueError:
            return len(_FAMILIES), 0.0, name
    if name in _FAMILIES:
        return _FAMILIES.index(name), 1.0, name
    return len(_FAMILIES), 0.0, name


def describe_procedure(name: str, *, top_k: int, epsilon: int, samples: int = 100,
                       sample_temperature: float = 1.0) -> dict[str, Any]:
    """The decoding policy and the score of the procedure named ``name`` as it appears in the tables."""
    match = _BASE_T.match(name)
    if name == "greedy":
        decoding = "greedy decoding (the most likely token at each step)"
        score = ("1 if the greedy generation of ℓ_s tokens reproduces the suffix exactly, else 0 (discoverable "
                 "extraction)")
    elif name == "near_verbatim_greedy":
        decoding = "greedy decoding"
        score = f"1 if the greedy generation is within ε = {epsilon} token edits of the suffix, else 0"
    elif name == "top_k":
        decoding = f"top-k sampling, k = {top_k}, temperature 1"
        score = (f"the probability that top-{top_k} sampling generates the suffix (0 when a suffix token leaves the "
                 "top k: an atom of tied zero scores)")
    elif name == "base" or match:
        temperature = match.group(1) if match else "1"
        decoding = f"sampling from the model's whole distribution at temperature {temperature} (the base policy)"
        score = f"the probability of the suffix under the base policy at T = {temperature}"
    elif name == "near_verbatim":
        decoding = "sampling from the model's whole distribution at temperature 1"
        score = (f"a lower bound on the probability of generating a sequence within ε = {epsilon} token edits of the "
                 "suffix: P(suffix) + P(greedy generation) when that generation differs and is within ε")
    elif name == "greedy_prefix":
        decoding = "greedy decoding of ℓ_s tokens (generations only: no log-probs)"
        score = ("the share of the suffix's ℓ_s tokens the greedy generation reproduces from the start, before its "
                 "first differing character (1 = verbatim; graded, not a probability)")
    elif name == "greedy_logprob":
        decoding = "greedy decoding of ℓ_s tokens with the output tokens' log-probs (no teacher forcing)"
        score = ("the suffix's probability at T = 1 read off the generation's own tokens when it reproduces the "
                 "suffix; otherwise an upper bound: the product up to the first differing token times 1 − the "
                 "listed probability of tokens that leave the suffix there")
    elif name == "sampled":
        decoding = (f"n = {samples} generations of ℓ_s tokens sampled at temperature {sample_temperature:g} "
                    "(generations only: no log-probs)")
        score = ("hits / n: the share of the generations that begin with the suffix, character for character (text "
                 "after it is ignored); an estimate of the per-query generation probability p, with its "
                 "Clopper–Pearson 95 % interval")
    else:
        decoding, score = DASH, f"the score the tables record for `{name}`"
    return {"procedure": name, "decoding": decoding, "score": score, "binary": name in BINARY_PROCEDURES,
            "scale": "0/1 (one operating point)" if name in BINARY_PROCEDURES else _SCALES.get(name, "probability")}


def _models(run: RunTables) -> list[dict[str, Any]]:
    scores = run.tables["scores"]
    out = []
    for role in ROLES:
        name = setting(run.manifest, f"roles.{role}") or setting(run.spec, f"models.{role}")
        if not name:
            continue
        caps = setting(run.manifest, f"servers.{name}", {})
        table = setting(run.spec, f"servers.{name}", {})
        used = sorted(set(scores.filter(pl.col("role") == role)["model"].drop_nulls().to_list())) \
            if "model" in scores.columns else []
        out.append({"role": role, "server": name, "kind": caps.get("kind") or table.get("kind"),
                    "model": caps.get("model") or table.get("model") or table.get("model_dir"),
                    "models_in_scores": used})
    return out


def procedure_statement(run: RunTables, procedures: list[str], suffix_tokens: list[int]) -> dict[str, Any]:
    """The ``procedure`` record of summary.json: models, prompt rule, procedures, verification rule."""
    spec = run.spec
    top_k = int(setting(spec, "extraction.top_k", 40))
    epsilon = int(setting(spec, "extraction.epsilon", 5))
    samples = int(setting(spec, "extraction.samples", 100))
    temperature = float(setting(spec, "extraction.sample_temperature", 1.0))
    models = _models(run)
    target = next((m["server"] for m in models if m["role"] == "target"), None)
    return {
        "models": models,
        "tokenizer": target,
        # which source cut the windows (the manifest's window_tokenizer; the target server's before it existed)
        "window_tokenizer": run.manifest.get("window_tokenizer") or {"source": "server", "server": target},
        "prefix_tokens": setting(spec, "extraction.prefix_tokens", 50),
        "suffix_tokens": suffix_tokens,
        "offset": setting(spec, "extraction.offset", 0),
        "stride": setting(spec, "extraction.stride", 1),
        "top_k": top_k,
        "temperatures": list(setting(spec, "extraction.temperatures", [1.0])),
        "epsilon": epsilon,
        "samples": samples,
        "sample_temperature": temperature,
        "generation": run.manifest.get("generation"),  # the chat route's prompt-selection rule, when used
        "procedures": [describe_procedure(p, top_k=top_k, epsilon=epsilon, samples=samples,
                                          sample_temperature=temperature) for p in procedures],
    }


def study_facts(run: RunTables) -> dict[str, Any]:
    """``name``, ``kind``, ``description`` and ``seed`` of the study (manifest, else spec)."""
    return {k: setting(run.manifest, f"study.{k}", setting(run.spec, f"study.{k}"))
            for k in ("name", "kind", "description", "seed")}


def provenance(run: RunTables) -> dict[str, Any]:
    """The calib versions, timestamps and the manifest's counts."""
    manifest = run.manifest
    return {"calib_version": manifest.get("calib_version"), "report_calib_version": __version__,
            "started_at": manifest.get("started_at"), "finished_at": manifest.get("finished_at"),
            "manifest_counts": manifest.get("counts")}


def _model_text(models: list[dict[str, Any]]) -> str:
    parts = [f"{m['role']} `{m['server'] or DASH}` (model `{m['model'] or DASH}`, {m['kind'] or DASH} server)"
             for m in models]
    return "; ".join(parts) if parts else DASH


def tokenizer_text(statement: dict[str, Any]) -> str:
    """Which source cut the windows, in words (the statement's ``window_tokenizer``, docs/hosted.md)."""
    described = statement.get("window_tokenizer") or {"source": "server", "server": statement.get("tokenizer")}
    source = described.get("source")
    if source == "file":
        return (f"the local tokenizer file `{described.get('path')}` (SHA-256 `{str(described.get('sha256'))[:16]}…`; "
                "the server's `/tokenize` was not used)")
    if source == "hub":
        return (f"`tokenizer.json` of Hub repository `{described.get('repo')}` at revision "
                f"`{described.get('revision')}` (the server's `/tokenize` was not used)")
    if source == "chars":
        return (f"a character budget, {described.get('chars_per_token'):g} characters per token (no tokenizer: ℓ_p "
                "and ℓ_s are counted as that many characters each)")
    if source == "completions":
        via = ("vLLM's `return_token_ids`" if described.get("via") == "return_token_ids"
               else "its echoed prompt tokens (`echo` with `logprobs`)")
        return (f"the target server's own tokenizer read through its completions route (`{described.get('server')}`, "
                f"{via}; it has no `/tokenize`)")
    return f"the target server's tokenizer (`{described.get('server') or DASH}`)"


def statement_blocks(statement: dict[str, Any], *, census: bool) -> list[Block]:
    """The procedure statement: the report's first section, so the reader knows the null hypothesis."""
    lengths = ", ".join(str(n) for n in statement["suffix_tokens"]) or DASH
    if census:
        prompt = (f"every window of each document and of its matched control document: a prefix of ℓ_p = "
                  f"{number(statement['prefix_tokens'])} tokens, then the suffix of ℓ_s = {lengths} tokens it should "
                  f"generate, windows starting every {number(statement['stride'])} token(s); tokens are cut with "
                  f"{tokenizer_text(statement)}.")
        prompt += rule_sentence(statement.get("generation"), models="The models", each="every window, of the "
                                "documents and of their controls alike", baseline="the control documents calibrate "
                                "whatever the rule itself makes the model reproduce")
        rule = ("a window is evidence of memorization when its score is strictly greater than the threshold: the "
                "largest score among the decontaminated control-document windows, rounded **up** to the next power of "
                "ten. The threshold is a measured maximum of overlapping windows, **not** a certified false-positive "
                "rate. Coverage is the share of the document's characters inside at least one window above it; the "
                "margin of a window is log10(score / threshold).")
    else:
        prompt = (f"the natural prefix of ℓ_p = {number(statement['prefix_tokens'])} tokens of each sample, starting "
                  f"at token offset {number(statement['offset'])}, and the suffix of ℓ_s = {lengths} tokens that "
                  f"follows it; tokens are cut with {tokenizer_text(statement)}."
                  " Members (in the target's training data) and matched controls (known non-members) are cut the "
                  "same way.")
        prompt += rule_sentence(statement.get("generation"), models="The models", each="every window, members and "
                                "controls alike", baseline="the matched controls calibrate whatever the rule itself "
                                "makes the model reproduce")
        rule = ("a member is a claim iff its score is strictly greater than τ, the K-th largest of the N matched "
                "control scores, K = floor(α(N+1)); the certified false-positive rate is α_N = K/(N+1). K = 0 means "
                "no claim is possible at that α with N controls. The guarantee is **marginal** (over draws of the "
                "controls and a fresh non-member), holds under exchangeability of member and control scores under "
                "the null (a non-member candidate looks like one more control), and bounds false positives only: "
                "a non-rejection is **not** evidence of non-memorization.")
    items = [f"**Models**: {_model_text(statement['models'])}.", f"**Prompts**: {prompt}",
             "**Null hypothesis**: the candidate is a matched non-member: its score is one more draw from the "
             "distribution of the control scores.", f"**Verification**: {rule}"]
    rows = tuple((f"`{p['procedure']}`", p["decoding"], p["score"], p.get("scale") or (
        "0/1 (one operating point)" if p["binary"] else "probability")) for p in statement["procedures"])
    return [Heading(2, "Procedure", "procedure"), Bullets(tuple(items)),
            Table(("procedure", "decoding policy", "score", "scale"), rows, "procedures-table",
                  "The scoring procedures: each is its own test with its own controls.")]


_REPLY = {"raw": "the reply is taken as the continuation as it is",
          "code_block": "the continuation is read from the reply's first fenced code block, after the point where "
                        "the block repeats the prompt's last line (an unfinished line: from where it stops)",
          "first_function": "the continuation is read from the reply after the prompt's last line (the signature)"}


def rule_sentence(dec: dict[str, Any] | None, *, models: str = "Both models", each: str = "every sample and both "
                  "models", baseline: str = "the reference model measures what the rule itself makes likely") -> str:
    """What the chat route changes (docs/hosted.md "Generation through chat"); "" on the completion route.

    ``dec`` holds ``route`` and ``rule`` (the run manifest's ``generation``); ``models``, ``each`` and
    ``baseline`` word the sentence for the study kind (functional: the target and its reference).
    """
    rule = (dec or {}).get("rule")
    if (dec or {}).get("route") != "chat" or not isinstance(rule, dict):
        return ""
    text = (f" {models} were asked through their chat route, the prompt turned into chat messages by the "
            f"prompt-selection rule `{rule.get('name')}` version {number(rule.get('version'))} "
            f"({rule.get('description')}; file SHA-256 {str(rule.get('sha256'))[:12]}...); "
            f"{_REPLY.get(rule.get('reply'), 'the reply is read back')}. "
            f"The rule is applied identically to {each}, so {baseline}.")
    if rule.get("shows_suffix"):
        text += (" This rule shows the model the code it should produce (the extraction paper's cautionary "
                 "experiment, §A.1 and §H.2): a reproduction under it is copying, not evidence of memorization, and "
                 "only the difference between the target and the reference model carries a claim.")
    return text


def methods_record(run: RunTables) -> dict[str, Any]:
    """Summary ``methods`` of a kind other than functional: the ``run_record``, same key and shape as functional's."""
    return {"run_record": run_record(run.manifest), "generation": run.manifest.get("generation")}


def provenance_blocks(summary: dict[str, Any]) -> list[Block]:
    """The provenance part of the methods section: calib versions and timestamps, then the run record."""
    prov = summary["provenance"]
    return [Heading(3, "Provenance", "methods-provenance"),
            Paragraph(f"Run with calib {prov['calib_version'] or DASH} from {prov['started_at'] or DASH} to "
                      f"{prov['finished_at'] or DASH}; report rendered by calib {prov['report_calib_version']}."),
            *run_record_blocks(setting(summary, "methods.run_record"))]
