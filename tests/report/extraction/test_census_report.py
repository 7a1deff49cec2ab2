"""The report of a ``census`` study (single documents against matched controls), checked by hand.

The synthetic run (seeded numpy; the census table computed with calib.stats as the census stage does):

  pair ``novel``: a 20,000-character document and an 8,000-character control document by "the same
  author". Windows: a 120-character suffix every 40 characters from character 200 on (the text before
  is the first prefix: no window covers it). Procedures base and top_k, role target only.
  Document windows score ~10^-40, except those starting in [5000, 5400) (10^-3: margin 25, generated
  within 10^5 queries), [5400, 6000) (10^-8: margin 20, beyond that budget) and [12000, 12200)
  (10^-26.5: margin 1.5). Control windows score at most ~10^-28.x, so the threshold is
  10^-28 — once control window ``cw-novel-7`` (10^-3, reused text, on the decontaminate list) is
  removed. top_k scores 0 (an atom) wherever base is below 10^-30.
  pair ``essay``: 2,000 characters, nothing above its threshold; one control window scores 10^-20.5, so
  the shared τ_global of both pairs (their decontaminated control windows pooled) is 10^-20.
  Deterministic recovery: the novel's 10^-3 windows are reproduced verbatim by their greedy generation,
  its 10^-8 windows within ε token edits (so: recovered, above τ, beyond the 10^5-query budget).
  pair ``broken``: a census row with an error and no windows.
"""

from __future__ import annotations

import html as html_module
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib._exceptions import InputError
from calib.cli import main
from calib.report import load_run, write_report
from calib.report.run import RunTables
from calib.stats import census, census_threshold, window_coverage
from calib.study.tables import CENSUS_TABLES
from tests.cli._helpers import Outcome

STEP, WIDTH, FIRST = 40, 120, 200
CONTAMINATED = "cw-novel-7"
BUDGET = 1e5
_ZERO = -400.0  # a zero score (log10 −inf) in the census arithmetic: below every threshold


def _text(rng: np.random.Generator, length: int) -> str:
    words = ["the", "river", "<b>", "night", "&", "said", "Anna", "again", "light", "house", "\n", "of", "stone"]
    out = []
    while sum(len(w) + 1 for w in out) < length:
        out.append(words[int(rng.integers(len(words)))])
    return " ".join(out)[:length]


def _starts(length: int) -> list[int]:
    return list(range(FIRST, length - WIDTH + 1, STEP))


def _doc_scores(rng: np.random.Generator, starts: list[int], memorized: bool) -> np.ndarray:
    values = rng.uniform(-45, -33, len(starts))
    if memorized:
        for i, s in enumerate(starts):
            if 5000 <= s < 5400:
                values[i] = -3.0
            elif 5400 <= s < 6000:
                values[i] = -8.0
            elif 12000 <= s < 12200:
                values[i] = -26.5
    return values


def build_run(root: Path, seed: int = 3) -> Path:
    """Write the synthetic census run under ``root`` (see the module docstring); returns ``root``."""
    rng = np.random.default_rng(seed)
    texts = {("novel", "document"): _text(rng, 20000), ("novel", "control"): _text(rng, 8000),
             ("essay", "document"): _text(rng, 2000), ("essay", "control"): _text(rng, 2000)}
    samples, windows, scores, census_rows = [], [], [], []
    for (pair, side), text in texts.items():
        sample_id = f"{pair}-{side}"
        samples.append({"sample_id": sample_id, "language": None, "membership": "candidate" if side == "document"
                        else "control", "kind": "verbatim", "source": f"books/{sample_id}.txt", "function": text,
                        "body": text})
    for pair in ("novel", "essay"):
        doc_text, ctl_text = texts[(pair, "document")], texts[(pair, "control")]
        doc_starts, ctl_starts = _starts(len(doc_text)), _starts(len(ctl_text))
        base = {"document": _doc_scores(rng, doc_starts, pair == "novel"),
                "control": rng.uniform(-46, -28.2, len(ctl_starts))}
        if pair == "novel":
            base["control"][7] = -3.0  # reused text in the control book
        else:
            base["control"][3] = -20.5  # the highest control window of every pair: τ_global = 10^-20
        for side, starts, text in (("document", doc_starts, doc_text), ("control", ctl_starts, ctl_text)):
            prefix = "dw" if side == "document" else "cw"
            for i, s in enumerate(starts):
                wid = f"{prefix}-{pair}-{i}"
                windows.append({"window_id": wid, "sample_id": f"{pair}-{side}", "membership": "candidate"
                                if side == "document" else "control", "kind": "verbatim", "document": pair,
                                "prefix_tokens": 50, "suffix_tokens": 50, "start_token": i * 10, "char_start": s,
                                "char_end": s + WIDTH, "prefix": text[max(0, s - FIRST):s],
                                "suffix": text[s:s + WIDTH]})
                for proc in ("base", "top_k"):
                    v = float(base[side][i])
                    if proc == "top_k" and v < -30:
                        v = float("-inf")
                    scores.append({"window_id": wid, "sample_id": f"{pair}-{side}", "role": "target",
                                   "model": "tiny-target", "procedure": proc, "suffix_tokens": 50,
                                   "value": 10 ** v, "log10_value": v})
        for proc in ("base", "top_k"):
            doc = np.array([r["log10_value"] for r in scores if r["procedure"] == proc
                            and r["window_id"].startswith(f"dw-{pair}-")])
            ctl_ids = [f"cw-{pair}-{i}" for i in range(len(ctl_starts))]
            ctl = np.array([r["log10_value"] for r in scores if r["procedure"] == proc and r["window_id"] in ctl_ids])
            keep = np.array([c != CONTAMINATED for c in ctl_ids])
            res = census(doc_starts, [s + WIDTH for s in doc_starts], np.where(np.isneginf(doc), _ZERO, doc),
                         np.where(np.isneginf(ctl[keep]), _ZERO, ctl[keep]), log10=True,
                         document_length=len(doc_text), budget=int(BUDGET), budget_confidence=0.95)
            census_rows.append({"document": pair, "role": "target", "procedure": proc, "suffix_tokens": 50,
                                "document_length": res.document_length, "n_windows": res.n_windows,
                                "n_control_windows": res.n_control_windows,
                                "removed_control_windows": int((~keep).sum()),
                                "log10_threshold": res.log10_threshold,
                                "max_control_score_log10": res.max_control_score_log10,
                                "windows_above": res.windows_above, "covered_characters": res.covered_characters,
                                "coverage": res.coverage, "max_margin": res.max_margin, "budget": BUDGET,
                                "budget_confidence": 0.95,
                                "min_log10_score_within_budget": res.min_log10_score_within_budget,
                                "windows_within_budget": res.windows_within_budget,
                                "coverage_within_budget": res.coverage_within_budget})
    _shared_and_recovery(census_rows, scores, windows, {p: len(texts[(p, "document")]) for p in ("novel", "essay")})
    census_rows.append({"document": "broken", "role": "target", "procedure": "base", "suffix_tokens": 50,
                        "error": "the control document has no window (too short)"})
    frames = {"samples": samples, "windows": windows, "scores": scores, "census": census_rows}
    (root / "tables").mkdir(parents=True, exist_ok=True)
    for name, rows in frames.items():
        schema = CENSUS_TABLES[name]
        pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).write_parquet(
            root / "tables" / f"{name}.parquet")
    spec = {"study": {"name": "books", "kind": "census", "seed": seed, "description": "Synthetic census."},
            "servers": {"tgt": {"kind": "openai", "model": "big-model", "base_url": "http://10.0.0.1:8000/v1"}},
            "models": {"target": "tgt", "reference": None},
            "extraction": {"prefix_tokens": 50, "suffix_tokens": [50], "procedures": ["base", "top_k"], "top_k": 40,
                           "temperatures": [1.0], "epsilon": 5, "stride": 10},
            "census": {"pairs": [{"name": p, "document": f"books/{p}.txt", "control": f"books/{p}-control.txt"}
                                 for p in ("novel", "essay", "broken")]},
            "analyze": {"budgets": [BUDGET], "budget_confidence": 0.95, "decontaminate": [CONTAMINATED], "review": 4}}
    manifest = {"calib_version": "0.1.0.dev0", "started_at": "2026-01-02T03:04:05+00:00",
                "finished_at": "2026-01-02T05:04:05+00:00", "roles": {"target": "tgt"},
                "servers": {"tgt": {"kind": "openai", "model": "big-model"}}}
    (root / "spec.json").write_text(json.dumps(spec, indent=2))
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def _shared_and_recovery(rows: list[dict[str, Any]], scores: list[dict[str, Any]], windows: list[dict[str, Any]],
                         lengths: dict[str, int]) -> None:
    """Add the τ_global and recovery columns to the census rows, as the census stage computes them."""
    span = {w["window_id"]: (w["char_start"], w["char_end"]) for w in windows}
    for row in rows:
        proc, pair = row["procedure"], row["document"]
        pooled = np.array([r["log10_value"] for r in scores if r["procedure"] == proc
                           and r["window_id"].startswith("cw-") and r["window_id"] != CONTAMINATED])
        threshold = census_threshold(pooled[np.isfinite(pooled)], log10=True)
        mine = [r for r in scores if r["procedure"] == proc and r["window_id"].startswith(f"dw-{pair}-")]
        starts = [span[r["window_id"]][0] for r in mine]
        values = np.array([r["log10_value"] for r in mine])
        wide = census(starts, [s + WIDTH for s in starts], np.where(np.isneginf(values), _ZERO, values), threshold,
                      log10=True, document_length=lengths[pair])
        base = np.array([r["log10_value"] for r in scores if r["procedure"] == "base"
                         and r["window_id"].startswith(f"dw-{pair}-")])
        verbatim, near = base == -3.0, (base == -3.0) | (base == -8.0)
        beyond = near & (base > row["log10_threshold"]) & (base < row["min_log10_score_within_budget"])

        def share(mask: np.ndarray, starts: list[int] = starts, length: int = lengths[pair]) -> float:
            chosen = np.asarray(starts)[mask]
            return window_coverage(chosen, chosen + WIDTH, document_length=length) / length

        row.update({"log10_threshold_global": wide.log10_threshold, "n_control_windows_global": pooled.size,
                    "windows_above_global": wide.windows_above, "covered_characters_global": wide.covered_characters,
                    "coverage_global": wide.coverage, "recovery_windows": len(mine),
                    "recovered_verbatim": int(verbatim.sum()), "recovered_near_verbatim": int(near.sum()),
                    "recovery_coverage_verbatim": share(verbatim), "recovery_coverage_near_verbatim": share(near),
                    "recovery_coverage_beyond_budget": share(beyond)})


def _covered_by_hand(length: int, starts: list[int], values: np.ndarray, threshold: int) -> np.ndarray:
    covered = np.zeros(length, dtype=bool)
    for s, v in zip(starts, values):
        if v > threshold:
            covered[s:s + WIDTH] = True
    return covered


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = build_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "paths": paths, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text()}


def _row(summary: dict[str, Any], document: str, procedure: str) -> dict[str, Any]:
    return next(r for r in summary["census"] if r["document"] == document and r["procedure"] == procedure)


def test_the_run_is_read_as_a_census_study(rendered):
    run = load_run(rendered["run"])
    assert isinstance(run, RunTables) and run.kind == "census" and set(run.tables) == set(CENSUS_TABLES)
    assert rendered["summary"]["kind"] == "census"


def test_threshold_and_coverage_by_hand(rendered):
    windows = pl.read_parquet(rendered["run"] / "tables" / "windows.parquet")
    scores = pl.read_parquet(rendered["run"] / "tables" / "scores.parquet").filter(pl.col("procedure") == "base")
    ctl = scores.filter(pl.col("window_id").str.starts_with("cw-novel-") & (pl.col("window_id") != CONTAMINATED))
    threshold = math.ceil(ctl["log10_value"].max())  # the largest decontaminated control score, rounded up
    assert threshold == -28
    doc = windows.filter(pl.col("window_id").str.starts_with("dw-novel-")).join(scores, on="window_id")
    covered = _covered_by_hand(20000, doc["char_start"].to_list(), doc["log10_value"].to_numpy(), threshold)
    row = _row(rendered["summary"], "novel", "base")
    assert row["log10_threshold"] == threshold and row["threshold"] == "10^-28"
    assert row["removed_control_windows"] == 1
    assert row["covered_characters"] == int(covered.sum()) and row["coverage"] == pytest.approx(covered.mean())
    assert row["max_margin"] == pytest.approx(-3.0 - threshold)
    # within 10^5 queries at 95 %: p ≥ 1 − 0.05^(1/n) ≈ 3.0e-5, only the 10^-3 windows
    floor = math.log10(-math.expm1(math.log1p(-0.95) / BUDGET))
    within = _covered_by_hand(20000, doc["char_start"].to_list(), doc["log10_value"].to_numpy(), floor)
    assert within.sum() == 5480 - 5000
    assert row["coverage_within_budget"] == pytest.approx(within.mean())
    assert row["coverage_beyond_budget"] == pytest.approx(covered.mean() - within.mean())
    essay = _row(rendered["summary"], "essay", "base")
    assert essay["covered_characters"] == 0 and essay["max_margin"] < 0
    broken = _row(rendered["summary"], "broken", "base")
    assert broken["error"] and broken["threshold"] is None
    assert "the control document has no window" in rendered["md"]


def test_the_heat_map_marks_covered_characters(rendered):
    heat = next(h for h in rendered["summary"]["heatmaps"] if h["document"] == "novel" and h["procedure"] == "base")
    assert heat["covered_characters"] == _row(rendered["summary"], "novel", "base")["covered_characters"]
    assert heat["text_source"] == "samples.function"
    # covered ranges: [5000, 5960 + 120) at margin up to 25 and [12000, 12160 + 120) at margin 1.5
    assert [(r["start"], r["end"]) for r in heat["ranges"]] == [(5000, 6080), (12000, 12280)]
    assert [r["max_margin"] for r in heat["ranges"]] == pytest.approx([25.0, 1.5])
    html = rendered["html"]
    section = html[html.index('id="heatmap-novel-target-base"'):]
    section = section[:section.index("</pre>")]
    text = pl.read_parquet(rendered["run"] / "tables" / "samples.parquet").filter(
        pl.col("sample_id") == "novel-document")["function"][0]
    spans = re.findall(r'<span style="background:[^"]+" title="[^"]+" data-bin="(\d)">(.*?)</span>', section, re.S)
    assert [(b, html_module.unescape(t)) for b, t in spans] == [("5", text[5000:6080]), ("2", text[12000:12280])]
    # runs of equal colour are merged: a 20,000-character document needs a handful of spans
    assert section.count("<span") <= 12
    assert '<span style="color:#8c959f" title="no scored window">' + html_module.escape(text[:FIRST], quote=False) \
        in section
    assert "<b>" not in section.split("</p>", 1)[1]  # the document's own markup is escaped
    assert "5000–6080 (25.00)" in rendered["md"] and "12000–12280 (1.50)" in rendered["md"]


def test_without_the_text_the_heat_map_is_rebuilt_from_the_suffixes(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "samples.parquet"
    text = pl.read_parquet(path).filter(pl.col("sample_id") == "essay-document")["function"][0]
    pl.read_parquet(path).drop("function", "body").write_parquet(path)
    html = write_report(run)["html"].read_text()
    summary = json.loads((run / "report" / "summary.json").read_text())
    heat = next(h for h in summary["heatmaps"] if h["document"] == "essay" and h["procedure"] == "base")
    assert heat["text_source"].startswith("rebuilt from the windows' suffixes")
    section = html[html.index('id="heatmap-essay-target-base"'):]
    pre = section[section.index("<pre"):section.index("</pre>")]
    shown = html_module.unescape(re.sub(r"<[^>]+>", "", pre.split(">", 1)[1]))[1:]  # the newline after <pre>
    assert shown == "·" * FIRST + text[FIRST:FIRST + len(shown) - FIRST]
    assert len(shown) == 2000


def test_zero_scores_are_below_every_threshold(rendered):
    heat = next(h for h in rendered["summary"]["heatmaps"] if h["document"] == "novel" and h["procedure"] == "top_k")
    assert [(r["start"], r["end"]) for r in heat["ranges"]] == [(5000, 6080), (12000, 12280)]
    review = next(r for r in rendered["summary"]["review"] if r["document"] == "novel" and r["procedure"] == "top_k")
    assert all(c["log10_value"] > -31 for c in review["controls"])


def test_control_window_review(rendered):
    review = next(r for r in rendered["summary"]["review"] if r["document"] == "novel" and r["procedure"] == "base")
    controls = review["controls"]
    assert len(controls) == 4 and controls[0]["window_id"] == CONTAMINATED and controls[0]["removed"]
    assert not any(c["removed"] for c in controls[1:])
    assert controls[0]["log10_value"] == -3.0
    text = pl.read_parquet(rendered["run"] / "tables" / "samples.parquet").filter(
        pl.col("sample_id") == "novel-control")["function"][0]
    assert controls[0]["suffix"] == text[FIRST + 7 * STEP:FIRST + 7 * STEP + WIDTH]
    assert "## Control-window review" in rendered["md"]


def test_procedure_statement_says_the_threshold_is_no_certified_fpr(rendered):
    md = rendered["md"]
    assert md.index("## Procedure") < md.index("## Census")
    assert "rounded **up** to the next power of ten" in md and "**not** a certified false-positive rate" in md
    assert "windows starting every 10 token(s)" in md
    statement = rendered["summary"]["procedure"]
    assert statement["models"] == [{"role": "target", "server": "tgt", "kind": "openai", "model": "big-model",
                                    "models_in_scores": ["tiny-target"]}]
    assert "10.0.0.1" not in rendered["html"]


def test_figures_are_svg_files(rendered):
    run, summary = rendered["run"], rendered["summary"]
    assert set(summary["figures"]) == {"coverage", "coverage-delta", "profile-novel", "profile-essay"}
    for rel in summary["figures"].values():
        assert (run / "report" / rel).read_text().lstrip().startswith("<?xml")
    assert rendered["summary"]["consistency"] == []


def test_rendering_again_gives_the_same_bytes(tmp_path):
    run = build_run(tmp_path)
    first = {k: p.read_bytes() for k, p in write_report(run).items()}
    figures = {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()}
    assert {k: p.read_bytes() for k, p in write_report(run).items()} == first
    assert {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()} == figures


def test_a_missing_table_is_a_one_line_input_error(tmp_path):
    run = build_run(tmp_path)
    (run / "tables" / "census.parquet").unlink()
    with pytest.raises(InputError) as caught:
        write_report(run)
    assert "no census table" in str(caught.value) and "\n" not in str(caught.value)


def test_cli_report_json(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("CALIB_DEBUG", raising=False)
    run = build_run(tmp_path)

    def calib(*args: object) -> Outcome:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main([str(a) for a in args])
        captured = capsys.readouterr()
        return Outcome(code=int(exited.value.code or 0), out=captured.out, err=captured.err)

    data = calib("report", run, "--json").json()
    assert json.loads(Path(data["summary"]).read_text())["kind"] == "census"
    path = run / "tables" / "windows.parquet"
    pl.read_parquet(path).drop("char_end").write_parquet(path)
    line = calib("report", run).one_line_error()
    assert "windows table lacks column(s) char_end" in line


def _keys(value: Any, path: str = "") -> set[str]:
    """Every key of ``value``, except those of dicts whose keys are data (figure names, the manifest's counts)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if path in ("figures", "provenance.manifest_counts"):
                continue
            found.add(key)
            found |= _keys(inner, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for inner in value:
            found |= _keys(inner, path)
    return found


def test_docs_describe_every_summary_key_and_section(rendered):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "report.md").read_text()
    section = doc[doc.index("## Census report"):]
    missing = sorted(k for k in _keys(rendered["summary"]) if f"`{k}`" not in section)
    assert not missing, f"summary.json keys not documented under Census report in docs/report.md: {missing}"
    for heading in re.findall(r"^## (.+)$", rendered["md"], re.M):
        assert f"**{heading}**" in section, heading
    for name in rendered["summary"]["figures"]:
        assert f"figures/{name}.svg" in section or name.startswith("profile-"), name


def test_shared_threshold_by_hand(rendered):
    scores = pl.read_parquet(rendered["run"] / "tables" / "scores.parquet").filter(pl.col("procedure") == "base")
    pooled = scores.filter(pl.col("window_id").str.starts_with("cw-") & (pl.col("window_id") != CONTAMINATED))
    shared = math.ceil(np.max(pooled["log10_value"].to_numpy()))  # the pooled control maximum, rounded up
    assert shared == -20
    windows = pl.read_parquet(rendered["run"] / "tables" / "windows.parquet")
    doc = windows.filter(pl.col("window_id").str.starts_with("dw-novel-")).join(scores, on="window_id")
    covered = _covered_by_hand(20000, doc["char_start"].to_list(), doc["log10_value"].to_numpy(), shared)
    row = _row(rendered["summary"], "novel", "base")
    assert row["threshold_global"] == "10^-20" and row["log10_threshold"] == -28
    assert row["covered_characters_global"] == int(covered.sum()) == 6080 - 5000  # the 10^-26.5 windows drop out
    assert row["coverage_global"] == pytest.approx(covered.mean()) and row["coverage_global"] < row["coverage"]
    assert "## Shared threshold" in rendered["md"]
    assert "| novel | target | `base` | 10^-28 | 10^-20 |" in rendered["md"]


def test_coverage_versus_delta_by_hand(rendered):
    curve = next(c for c in rendered["summary"]["coverage_curve"] if c["document"] == "novel"
                 and c["procedure"] == "base")
    windows = pl.read_parquet(rendered["run"] / "tables" / "windows.parquet")
    scores = pl.read_parquet(rendered["run"] / "tables" / "scores.parquet").filter(pl.col("procedure") == "base")
    doc = windows.filter(pl.col("window_id").str.starts_with("dw-novel-")).join(scores, on="window_id")
    for delta, covered in zip(curve["deltas"], curve["covered_characters"]):
        by_hand = _covered_by_hand(20000, doc["char_start"].to_list(), doc["log10_value"].to_numpy(), -28 + delta)
        assert covered == int(by_hand.sum()), delta
    got = dict(zip(curve["deltas"], curve["covered_characters"]))
    # margins 25 ([5000, 5480)), 20 (to 6080) and 1.5 ([12000, 12280)); a margin equal to Δ does not count
    assert (got[0.0], got[1.0], got[2.0], got[10.0], got[20.0]) == (1360, 1360, 1080, 1080, 480)
    assert all(a >= b for a, b in zip(curve["coverage"], curve["coverage"][1:]))
    assert curve["coverage"][0] == _row(rendered["summary"], "novel", "base")["coverage"]
    assert "## Coverage versus margin" in rendered["md"] and "figures/coverage-delta.svg" in rendered["md"]
    assert "| novel | target | `base` | 10^-28 | 6.8% | 6.8% | 5.4% |" in rendered["md"]


def test_deterministic_recovery_table(rendered):
    row = _row(rendered["summary"], "novel", "base")
    # verbatim: the 10^-3 windows [5000, 5480); near-verbatim adds the 10^-8 ones (to 6080), which lie above
    # τ = 10^-28 but below the 10^5-query probability ≈ 3e-5: recovered, not sampled within the budget
    assert row["recovery_coverage_verbatim"] == pytest.approx(480 / 20000)
    assert row["recovery_coverage_near_verbatim"] == pytest.approx(1080 / 20000)
    assert row["recovery_coverage_beyond_budget"] == pytest.approx((6080 - 5400) / 20000)
    assert "## Deterministic recovery" in rendered["md"]
    n = len(_starts(20000))  # every window has a greedy generation; 10 start in [5000, 5400), 15 in [5400, 6000)
    assert f"| novel | target | `base` | {n} | 10 | 25 | 2.4% | 5.4% | 6.8% | 3.4% | 100000 |" in rendered["md"]
