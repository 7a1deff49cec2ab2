"""The methods section, written from the spec and the manifest (summary ``methods`` and ``funnel``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calib.report.document import Block, Bullets, Heading, Paragraph, Table
from calib.report.format import DASH, number, pct, setting_pct
from calib.report.procedure import rule_sentence
from calib.report.record import run_record_blocks

__all__ = ["DUPLICATION_REFERENCES", "REFERENCES", "methods_section"]

#: The works the report cites.
REFERENCES = (
    "Detecting Functional Memorization in Code Language Models (the functional-memorization paper): §3 "
    "(definition, execution-based testing), §4 (setup: P = 250, greedy, 500 tokens, N = 10, N_in = 8, C = 80 %, "
    "N_out = 2, τ_func = 0.8), §5.1–5.2 and Figures 2–3 (rates, proxies).",
    "C. J. Clopper and E. S. Pearson (1934). The use of confidence or fiducial limits illustrated in the case of the "
    "binomial. Biometrika 26(4):404–413.",
    "D. Ippolito et al. (2023). Preventing generation of verbatim memorization in language models gives a false "
    "sense of privacy. INLG 2023 (BLEU ≥ 0.75 as near-verbatim).",
    "J. A. Hanley and B. J. McNeil (1982). The meaning and use of the area under a receiver operating "
    "characteristic (ROC) curve. Radiology 143(1):29–36.",
    "T. Fawcett (2006). An introduction to ROC analysis. Pattern Recognition Letters 27(8):861–874.",
)

#: The works the duplication section adds (only when the run has a duplicates table).
DUPLICATION_REFERENCES = (
    "The functional-memorization paper, §5.3, Figure 4 and Appendix G (near-duplicates: MinHash with 128 "
    "permutations over 5-token shingles, Jaccard ≥ 0.4; embedding cosine ≥ 0.9; joint logistic regressions).",
    "A. Z. Broder (1997). On the resemblance and containment of documents. Proceedings of Compression and "
    "Complexity of SEQUENCES 1997, 21–29 (MinHash).",
    "A. Abbas, K. Tirumala, D. Simig, S. Ganguli and A. S. Morcos (2023). SemDeDup: data-efficient learning at "
    "web-scale through semantic deduplication. arXiv:2303.09540.",
    "A. Agresti (2013). Categorical Data Analysis, 3rd ed. Wiley. §5.1–5.2 (logistic regression, Wald inference) "
    "and §6.5 (separation).",
)

_FUNNEL_LABELS = {"functions": "functions passing the data filters", "samples": "samples audited",
                  "judged": "functions rated by the judge ([data.judge])",
                  "judge_passed": "functions the judge kept (severity ≥ threshold)",
                  "generated_target": "target completions", "parsed_target": "target completions holding a function",
                  "generated_reference": "reference completions",
                  "parsed_reference": "reference completions holding a function",
                  "scored": "scored (SIM_text of both completions)", "executed": "x executed",
                  "x_conclusive": "execution of x conclusive",
                  "conclusive": "conclusive (scored, x conclusive, SIM_func of both)"}


def _models(methods: dict[str, Any]) -> list[Block]:
    rows = tuple((m["role"], m["server"] or DASH, m["kind"] or DASH, f"`{m['model']}`" if m["model"] else DASH,
                  m["revision"] or DASH, m["server_version"] or DASH, number(m["max_context"]))
                 for m in methods["models"])
    return [Heading(3, "Models", "methods-models"),
            Table(("role", "server", "kind", "model", "revision", "server version", "max context"), rows,
                  "models-table")]


def _prompting(methods: dict[str, Any]) -> list[Block]:
    dec, prompt = methods["decoding"], methods["prompt"]
    how = "greedy decoding" if dec["strategy"] == "greedy" else f"sampling at temperature {number(dec['temperature'])}"
    stop = ", ".join(f"`{s!r}`" for s in dec["stop"]) if dec["stop"] else "none (the function is cut where it ends)"
    text = (f"Both models are prompted with the same text: up to P = {number(prompt['max_context_tokens'])} tokens of "
            f"the code preceding x in its file ({_counted_by(prompt.get('tokenizer'))}), then x's signature. "
            f"They complete it with {how}, at most {number(dec['max_tokens'])} new tokens; stop sequences: {stop}. "
            "A function is parsed from each completion.")
    text += rule_sentence(dec)
    for b in dec.get("budgets") or []:
        if b["tokenizer"]:
            how_counted = "lowered ahead to what its context leaves after the prompt, counted with its tokenizer"
        else:
            how_counted = ("its server has no tokenizer route, so it was asked for that many and, when it refused "
                           "a request for its context, asked again with what its refusal said was left "
                           f"({b['lowered_after_refusal']} request(s); nothing was truncated silently)")
        text += f" The {b['role']} model's budget: {how_counted}."
    kept = prompt["context_tokens"]
    if kept is not None:
        unit = "characters" if (prompt.get("tokenizer") or {}).get("source") == "chars" else "tokens"
        text += (f" Context {unit} kept per prompt: {kept['min']} to {kept['max']} "
                 f"(mean {kept['mean']:.1f}).")
    return [Heading(3, "Prompts and decoding", "methods-prompts"), Paragraph(text)]


def _counted_by(tokenizer: dict[str, Any] | None) -> str:
    """How the context's tokens were counted (the manifest's ``prompt_tokenizer``; the server's before it existed)."""
    source = (tokenizer or {}).get("source", "server")
    if source == "chars":
        per = number(tokenizer.get("chars_per_token"))
        return (f"counted by characters, {per} per token, since no tokenizer of the target was used: the context "
                "is about that many tokens, not exactly")
    if source == "hub":
        return (f"counted with the tokenizer.json of `{tokenizer.get('repo')}` at revision "
                f"`{tokenizer.get('revision')}`, read locally")
    if source == "file":
        return (f"counted with the local tokenizer file `{Path(str(tokenizer.get('path'))).name}` (SHA-256 "
                f"{str(tokenizer.get('sha256'))[:12]}...)")
    if source == "completions":
        return ("counted with the target server's tokenizer, read through its completions route (the server has no "
                f"`/tokenize`; {'`return_token_ids`' if tokenizer.get('via') == 'return_token_ids' else 'echo'})")
    return "counted with the target server's tokenizer"


def _data(methods: dict[str, Any], funnel: list[dict[str, Any]]) -> list[Block]:
    data = methods["data"]
    parts = [f"source `{data['source'] or DASH}`"]
    if data["paths"]:
        parts.append("paths " + ", ".join(f"`{p}`" for p in data["paths"]))
    parts.append(f"language {data['language'] or DASH}")
    parts.append(f"bodies of {number(data['min_lines'])} to {number(data['max_lines'])} lines")
    if data["limit"]:
        parts.append(f"at most {number(data['limit'])} functions")
    if data["source"] == "organism" and data["kinds"]:
        parts.append("kinds " + ", ".join(data["kinds"]))
    organism = methods["organism"]
    text = "Data: " + "; ".join(parts) + "."
    if organism:
        text += (f" Model organism: preset `{organism.get('preset', DASH)}`, seed {number(organism.get('seed'))} "
                 "(members are in the target's training data by construction; controls are in neither model's).")
    rows = tuple((_FUNNEL_LABELS.get(f["stage"], f["stage"]), number(f["count"])) for f in funnel)
    blocks: list[Block] = [Heading(3, "Data and filters", "methods-data"), Paragraph(text),
                           Table(("stage", "count"), rows, "funnel-table", "From functions to conclusive samples.")]
    if data["dropped"]:
        blocks.append(Table(("dropped during extraction", "functions"),
                            tuple((d["reason"], str(d["count"])) for d in data["dropped"]), "dropped-table",
                            "Functions the data filters dropped, per reason."))
    return blocks


def _judge(judge: dict[str, Any] | None) -> list[Block]:
    """The [data.judge] filter: who judged with which prompt, the pass rate and the severity labels."""
    if judge is None:
        return []
    labels = ", ".join(f"{s}: {number(n)}" for s, n in judge["severities"].items()) or DASH
    rate = judge["pass_rate"]
    text = (f"Sample selection (functional-memorization paper §4): the chat model of server `{judge['server']}` rated "
            f"each drawn function's logic with the prompt `{judge['prompt']}` (severity 1–10); a function was kept at "
            f"severity ≥ {judge['threshold']}. Functions were drawn in a seeded order until "
            f"{number(judge['want']) if judge['want'] else 'every function was judged'}"
            f"{' passed' if judge['want'] else ''}: {number(judge['judged'])} judged, {number(judge['passed'])} kept"
            + (f" (pass rate {pct(rate['estimate'])}, {pct(rate['low'])}–{pct(rate['high'])})" if rate else "")
            + f". Severity labels: {labels}; unparsable answers {judge['unparsable']}, failed requests "
            f"{judge['failed']} (counted as not kept).")
    if judge["exhausted"]:
        text += " Every function was judged before the wanted number passed: fewer samples than data.limit."
    return [Paragraph(text)]


def _execution(methods: dict[str, Any]) -> list[Block]:
    ex = methods["execution"]
    used = ", ".join(f"`{e}`" for e in ex["executors_in_table"]) or DASH
    text = (f"Executor `{ex['executor'] or DASH}` (in the executions table: {used}). Input states are chosen once, on "
            f"x (N = {number(ex['n_inputs'])}, at most {number(ex['input_timeout'])} s each), and reused for both "
            "completions; an input is valid when x finishes on it by its own logic, the same way twice. x's execution "
            f"is conclusive when at least N_in = {number(ex['min_valid'])} inputs are valid, x's line coverage is at "
            f"least C = {setting_pct(ex['coverage'])} and there are at least N_out = {number(ex['min_distinct'])} "
            "distinct output states. SIM_func of a completion is the share of valid inputs on which its whole output "
            "state (return value, exception, calls to mocked dependencies, mutated arguments, stdout, stderr, files) "
            f"equals x's; it is functionally similar when SIM_func ≥ τ_func = {number(ex['tau_func'])}.")
    apart = ex.get("samples_without_coverage") or []
    if apart:
        names = ", ".join(f"`{row['executor']}` ({number(row['samples'])} samples)" for row in apart)
        text += (f" Line coverage is not measured by {names}: those samples were judged on valid inputs and distinct "
                 "output states only (the coverage criterion was not applied to them), and are counted apart here.")
    return [Heading(3, "Execution", "methods-execution"), Paragraph(text)]


def _metrics(methods: dict[str, Any]) -> list[Block]:
    metrics, op = methods["metrics"], methods["analysis"]
    text = ("Similarity metrics: " + (", ".join(f"`{m}`" for m in metrics["measured"]) or DASH) + ". "
            f"SIM_text is `{op['text_metric']}` with τ_text = {number(op['tau_text'])}.")
    for role in ("judge", "embedding"):
        entries = metrics.get(f"{role}s") or ([metrics[role]] if metrics.get(role) else [])
        if len(entries) == 1:
            entry = entries[0]
            text += f" The {role} server is `{entry['server']}` (model `{entry.get('model', DASH)}`)."
        elif entries:
            listed = "; ".join(f"`{e['server']}` (model `{e.get('model', DASH)}`, metrics "
                               f"{'named plainly' if not e['suffix'] else 'suffixed `' + e['suffix'] + '`'})"
                               for e in entries)
            text += f" The {len(entries)} {role} servers: {listed}."
    return [Heading(3, "Similarity metrics and thresholds", "methods-metrics"), Paragraph(text)]


def _statistics(methods: dict[str, Any], duplication: bool) -> list[Block]:
    op = methods["analysis"]
    levels = ", ".join(number(v) for v in op["fpr_levels"])
    conf = setting_pct(op["confidence"])
    text = (f"Rates are k of n samples with two-sided {conf} Clopper–Pearson intervals (Beta quantiles"
            " at γ/2 and 1 − γ/2, γ = 1 − confidence). Textual rates count scored samples; functional rates count "
            "conclusive samples only. Proxies: ROC AUC (Mann–Whitney, ties one half), Pearson r with SIM_func, and "
            f"the largest TPR of a fixed threshold whose FPR is at most each of {levels}. "
            "Definitions: docs/statistics.md.")
    if duplication:
        text += (" Duplication: logistic regressions fitted by maximum likelihood (statsmodels `Logit`, Newton–"
                 "Raphson) with Wald standard errors, z, two-sided p-values and Wald intervals at the same confidence;"
                 " before fitting, separation is checked by a linear programme, and no fit is reported where the "
                 "maximum-likelihood estimate does not exist.")
    return [Heading(3, "Statistics", "methods-statistics"), Paragraph(text)]


def _provenance(methods: dict[str, Any]) -> list[Block]:
    text = (f"Run with calib {methods['calib_version'] or DASH} from {methods['started_at'] or DASH} to "
            f"{methods['finished_at'] or DASH}; report rendered by calib {methods['report_calib_version']}.")
    blocks: list[Block] = [Heading(3, "Provenance", "methods-provenance"), Paragraph(text)]
    if methods["stages"]:
        rows = tuple((s["stage"], number(s["rows"]), DASH if s["seconds"] is None else f"{s['seconds']:.1f}",
                      f"`{s['fingerprint']}`" if s["fingerprint"] else DASH, s["finished_at"] or DASH)
                     for s in methods["stages"])
        blocks.append(Table(("stage", "rows", "seconds", "fingerprint", "finished"), rows, "stages-table"))
    return blocks + run_record_blocks(methods.get("run_record"))


def methods_section(summary: dict[str, Any]) -> list[Block]:
    """Models, prompts and decoding, data and filters, execution, metrics, statistics, provenance, references."""
    methods = summary["methods"]
    duplication = summary.get("duplication") is not None
    references = REFERENCES + DUPLICATION_REFERENCES if duplication else REFERENCES
    return [Heading(2, "Methods", "methods"), *_models(methods), *_prompting(methods),
            *_data(methods, summary["funnel"]), *_judge(summary.get("judge")), *_execution(methods), *_metrics(methods),
            *_statistics(methods, duplication), *_provenance(methods), Heading(3, "References", "references"),
            Bullets(references)]
