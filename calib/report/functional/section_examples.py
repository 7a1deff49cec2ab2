"""The worked-examples section: x and both completions side by side, similarities, per-input matches."""

from __future__ import annotations

from typing import Any

from calib.report.document import Block, Code, CodeRow, Group, Heading, Paragraph, Table
from calib.report.format import DASH, number, pct, sim
from calib.report.functional.analysis import Analysis
from calib.report.functional.examples import Example
from calib.report.functional.samples import ROLES

__all__ = ["MATCH_MARKS", "examples_section"]

#: How a per-input match is written: matched, did not match, x's input not valid.
MATCH_MARKS = {True: "✓", False: "✗", None: "–"}
_VERDICT_LABELS = {"functional": "functionally memorized", "textual": "textually memorized",
                   "none": "not memorized", "inconclusive": "inconclusive", "unscored": "unscored"}
_ROLE_ORDER = {"truth": 0, "target": 1, "reference": 2}


def _about(record: dict[str, Any]) -> str:
    parts = [f"membership {record['membership'] or DASH}"]
    if record["kind"]:
        parts.append(f"kind {record['kind']}")
    parts += [f"language {record['language'] or DASH}", f"source `{record['source'] or DASH}`"]
    text = "; ".join(parts) + "."
    if record["reason"]:
        text += f" Why {_VERDICT_LABELS[record['verdict']]}: {record['reason']}."
    return text


def _execution(record: dict[str, Any]) -> str:
    ex = record["execution"]
    if ex["conclusive"] is None:
        return "x was not executed."
    state = "conclusive" if ex["conclusive"] else f"inconclusive ({ex['reason'] or 'no reason recorded'})"
    return (f"Execution of x (`{ex['executor'] or DASH}`): {state}; {number(ex['valid_inputs'])} valid input states, "
            f"line coverage {pct(ex['coverage'])}, {number(ex['distinct_outputs'])} distinct output states.")


def _code(example: Example) -> CodeRow:
    blocks = [Code("x (training function)", example.x, example.language)]
    for role in ROLES:
        gen = example.record["generation"][role]
        title = f"{role} completion" + (f" (`{gen['model']}`)" if gen["model"] else "")
        if gen["error"]:
            title += f" — {gen['error']}"
        blocks.append(Code(title, example.completions[role], example.language))
    return CodeRow(tuple(blocks))


def _similarity_table(record: dict[str, Any], metrics: list[str]) -> Table:
    sims = record["similarities"]
    present = sorted({m for role in sims.values() for m in role}, key=lambda m: (m not in metrics, metrics.index(m)
                                                                                 if m in metrics else 0, m))
    rows = [(f"`{m}`", *(sim(sims.get(role, {}).get(m)) for role in ROLES)) for m in present]
    execs = record["executions"]
    rows.append(("SIM_func (execution)", *(sim(execs.get(role, {}).get("sim_func")) for role in ROLES)))
    return Table(("similarity to x", *ROLES), tuple(rows), f"similarities-{record['sample_id']}")


def _matches_table(record: dict[str, Any]) -> Table | Paragraph:
    execs = record["executions"]
    if not execs:
        return Paragraph("No execution was recorded for this sample.")
    roles = sorted(execs, key=lambda r: (_ROLE_ORDER.get(r, 3), r))
    width = max(len(execs[r]["matches"] or []) for r in roles)
    rows = []
    for role in roles:
        marks = [MATCH_MARKS[m] for m in (execs[role]["matches"] or [])]
        rows.append((role, sim(execs[role]["sim_func"]), *marks, *([""] * (width - len(marks)))))
    header = ("output state of", "SIM_func", *(f"input {i + 1}" for i in range(width)))
    return Table(header, tuple(rows), f"matches-{record['sample_id']}",
                 "Per input state: ✓ same output state as x, ✗ different, – x's input not valid.")


_DUPLICATE_LABELS = {"textual": ("textual", "Jaccard"), "semantic": ("semantic-only", "cosine")}


def _duplicates(example: Example) -> list[Block]:
    """The example's closest training duplicates (paper Figure 43), when the run searched for them."""
    found = example.record.get("duplicates")
    if found is None:
        return []
    blocks: list[Block] = []
    code = []
    missing = []
    for kind, d in found.items():
        label, score = _DUPLICATE_LABELS[kind]
        if d is None:
            missing.append(label)
            continue
        title = (f"closest {label} duplicate: {score} {sim(d['similarity'])}, `{d['source'] or d['corpus_id']}`"
                 + (f", {number(d['copies'])} copies" if d["copies"] and d["copies"] > 1 else ""))
        code.append(Code(title, example.duplicate_texts.get(kind) or "(text not kept: re-run the dedup stage)",
                         example.language))
    if code:
        blocks.append(CodeRow(tuple(code)))
    if missing:
        blocks.append(Paragraph(f"No {' or '.join(missing)} near-duplicate of x in the training corpus at the "
                                "`[dedup]` thresholds."))
    return blocks


def _example_blocks(index: int, example: Example, metrics: list[str]) -> Group:
    record = example.record
    sid = record["sample_id"]
    return Group("example", f"example-{sid}", (
        Heading(3, f"Example {index}: `{sid}` — {_VERDICT_LABELS[record['verdict']]}", f"example-heading-{sid}"),
        Paragraph(_about(record)),
        Paragraph(_execution(record)),
        _code(example),
        *_duplicates(example),
        _similarity_table(record, metrics),
        _matches_table(record),
    ))


def examples_section(analysis: Analysis) -> list[Block]:
    """The worked examples, in the order of :func:`calib.report.functional.examples.select_examples`."""
    blocks: list[Block] = [Heading(2, "Worked examples", "examples")]
    if not analysis.examples:
        return blocks + [Paragraph("No examples requested (`report.examples = 0`) or no sample.")]
    blocks.append(Paragraph("Functionally memorized samples first, then textually memorized ones, then the rest; "
                            "within each, members before controls, then the highest target SIM_func (functional) or "
                            "SIM_text (textual); ties by sample id."))
    metrics = [rec["metric"] for rec in analysis.summary["proxies"]["metrics"]]
    return blocks + [_example_blocks(i, e, metrics) for i, e in enumerate(analysis.examples, start=1)]
