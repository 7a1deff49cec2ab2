"""The report of an ``extraction`` study (population conformal test) against numbers computed by hand.

The synthetic run (seeded numpy; tables computed with calib.stats the way the study's stages do):

  40 members and 300 controls, one suffix length (ℓ_s = 50), roles target and reference, procedures
  greedy (0/1), top_k (an atom of zeros) and base (continuous). Controls c000 and c001 are reused
  member text: they score at the top of the target's controls and the spec's decontaminate list names
  them, so the full pool has N = 300 and the decontaminated pool N = 298. The primary level is
  α = 0.01: K = floor(0.01·301) = 3 (full pool), floor(0.01·299) = 2 (decontaminated).
  One more member (m-err) has a window whose every score request failed (unscored), one sample (short)
  has no window at all, and control c002's suffix holds HTML that must be escaped.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from calib._exceptions import InputError
from calib.cli import main
from calib.report import load_run, write_report
from calib.report.run import RunTables
from calib.stats import (
    benjamini_hochberg,
    log10_min_probability_within,
    p_values,
    paired_difference,
    parse_alpha,
    sweep,
)
from calib.study.tables import EXTRACTION_TABLES
from tests.cli._helpers import Outcome

ALPHAS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]
PROCEDURES = ("greedy", "top_k", "base")
ROLES = ("target", "reference")
N_MEMBERS, N_CONTROLS, LENGTH = 40, 300, 50
CONTAMINATED = ["c000", "c001"]
BUDGETS = [1e2, 1e5, 1e8]
HTML_SUFFIX = '<script>alert("x")</script> & more'


def _scores(rng: np.random.Generator) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """(role, procedure) -> {"member": probabilities, "control": probabilities} (controls in id order)."""
    out = {}
    for role in ROLES:
        boost = 1.0 if role == "target" else 0.3
        # greedy: 0/1; members reproduced more often by the target
        members = (rng.random(N_MEMBERS) < 0.25 * boost).astype(float)
        controls = np.zeros(N_CONTROLS)
        controls[[5, 17]] = 1.0
        out[(role, "greedy")] = {"member": members, "control": controls}
        # top_k: most controls score 0 (a suffix token leaves the top 40)
        members = np.where(rng.random(N_MEMBERS) < 0.4, 0.0, 10 ** rng.uniform(-20, -1 + boost, N_MEMBERS))
        controls = np.where(rng.random(N_CONTROLS) < 0.85, 0.0, 10 ** rng.uniform(-30, -6, N_CONTROLS))
        out[(role, "top_k")] = {"member": members, "control": controls}
        # base: continuous
        members = 10 ** np.minimum(rng.normal(-30 + 12 * boost, 9, N_MEMBERS), -0.01)
        controls = 10 ** np.minimum(rng.normal(-40, 5, N_CONTROLS), -0.01)
        out[(role, "base")] = {"member": members, "control": controls}
        if role == "target":  # reused member text among the controls: the top scores
            for proc in ("top_k", "base"):
                out[(role, proc)]["control"][[0, 1]] = [0.5, 0.2]
            out[(role, "greedy")]["control"][[0, 1]] = 1.0
    return out


def _log10(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log10(values)


def _window_id(sample_id: str) -> str:
    return f"w-{sample_id}-{LENGTH}"


def build_run(root: Path, *, alpha: float | str = 0.01, decontaminate: list[str] | None = None,
              reference: bool = True, seed: int = 7) -> Path:
    """Write the synthetic extraction run under ``root`` (see the module docstring); returns ``root``."""
    rng = np.random.default_rng(seed)
    decontaminate = CONTAMINATED if decontaminate is None else decontaminate
    roles = ROLES if reference else ("target",)
    scores = _scores(rng)
    member_ids = [f"m{i:03d}" for i in range(N_MEMBERS)]
    control_ids = [f"c{i:03d}" for i in range(N_CONTROLS)]
    samples = [{"sample_id": s, "language": "text", "membership": "control" if s[0] == "c" else "member",
                "function": f"text of {s}"} for s in [*member_ids, "m-err", *control_ids, "short"]]
    windows = []
    for s in [*member_ids, "m-err", *control_ids]:
        suffix = HTML_SUFFIX if s == "c002" else f"the suffix of {s}\nsecond line"
        windows.append({"window_id": _window_id(s), "sample_id": s, "membership": "member" if s[0] == "m" else
                        "control", "prefix_tokens": 50, "suffix_tokens": LENGTH, "start_token": 0, "char_start": 100,
                        "char_end": 100 + len(suffix), "prefix": f"prefix of {s}", "suffix": suffix})
    windows.append({"sample_id": "short", "membership": "member", "error": "too short for a window (31 tokens)"})
    score_rows, op_rows, claim_rows, budget_rows = [], [], [], []
    alphas = sorted(set(ALPHAS) | {parse_alpha(alpha)})
    claims_at: dict[tuple[str, str], np.ndarray] = {}
    for role in roles:
        for proc in PROCEDURES:
            sc = scores[(role, proc)]
            for ids, values in ((member_ids, sc["member"]), (control_ids, sc["control"])):
                for s, v in zip(ids, values):
                    score_rows.append({"window_id": _window_id(s), "sample_id": s, "role": role,
                                       "model": f"tiny-{role}", "procedure": proc, "suffix_tokens": LENGTH,
                                       "value": float(v), "log10_value": float(_log10(np.array(v)))})
            score_rows.append({"window_id": _window_id("m-err"), "sample_id": "m-err", "role": role,
                               "model": f"tiny-{role}", "procedure": proc, "suffix_tokens": LENGTH,
                               "error": "request failed: HTTP 503 after 5 retries"})
            keep = np.array([c not in decontaminate for c in control_ids])
            pools = {"all": sc["control"], **({"decontaminated": sc["control"][keep]} if decontaminate else {})}
            for pool, controls in pools.items():
                table = sweep(controls, alphas, members=sc["member"], confidence=0.95)
                dagger = _dagger(controls)
                for row in table.to_dicts():
                    t = row.pop("threshold")
                    op_rows.append({**row, "role": role, "model": f"tiny-{role}", "procedure": proc,
                                    "suffix_tokens": LENGTH, "pool": pool, "n_controls": controls.size,
                                    "alpha_dagger": dagger, "log10_threshold": None if t is None else
                                    float(_log10(np.array(t)))})
            primary = sc["control"][keep] if decontaminate else sc["control"]
            table = sweep(primary, [alpha])
            tau = table["threshold"][0]
            member_p = p_values(primary, sc["member"])
            claim = sc["member"] > tau if tau is not None else np.zeros(N_MEMBERS, bool)
            claims_at[(role, proc)] = claim
            bh = benjamini_hochberg(member_p, 0.05).rejected
            for i, s in enumerate(member_ids):
                margin = None
                if tau is not None and proc != "greedy" and claim[i]:
                    margin = float(_log10(np.array(sc["member"][i])) - _log10(np.array(tau)))
                claim_rows.append({"window_id": _window_id(s), "sample_id": s, "membership": "member", "role": role,
                                   "procedure": proc, "suffix_tokens": LENGTH,
                                   "log10_value": float(_log10(np.array(sc["member"][i]))),
                                   "p_value": float(member_p[i]), "margin": margin,
                                   "claim": None if tau is None else bool(claim[i]), "bh": bool(bh[i]),
                                   "bonferroni": bool(member_p[i] <= 0.05 / N_MEMBERS), "contaminated": False})
            for j, s in enumerate(control_ids):
                claim_rows.append({"window_id": _window_id(s), "sample_id": s, "membership": "control", "role": role,
                                   "procedure": proc, "suffix_tokens": LENGTH,
                                   "log10_value": float(_log10(np.array(sc["control"][j]))),
                                   "p_value": float(p_values(primary, [sc["control"][j]])[0]), "margin": None,
                                   "claim": None if tau is None else bool(sc["control"][j] > tau),
                                   "contaminated": s in decontaminate})
            if proc != "greedy":
                for n in BUDGETS:
                    floor = log10_min_probability_within(n, 0.95)
                    m_gen = _log10(sc["member"]) >= floor
                    c_gen = _log10(primary) >= floor
                    budget_rows.append({"role": role, "procedure": proc, "suffix_tokens": LENGTH, "budget": n,
                                        "confidence": 0.95, "log10_min_probability": floor, "n_members": N_MEMBERS,
                                        "members_generated": int(m_gen.sum()), "n_controls": primary.size,
                                        "controls_generated": int(c_gen.sum()),
                                        "members_extractable": int((m_gen & claim).sum()),
                                        "member_rate": m_gen.mean(), "control_rate": c_gen.mean(),
                                        "extractable_rate": (m_gen & claim).mean()})
    paired_rows = []
    if reference:
        for proc in PROCEDURES:
            t, r = claims_at[("target", proc)], claims_at[("reference", proc)]
            n11, n10, n01 = int((t & r).sum()), int((t & ~r).sum()), int((~t & r).sum())
            diff = paired_difference(n11, n10, n01, N_MEMBERS - n11 - n10 - n01)
            paired_rows.append({"procedure": proc, "suffix_tokens": LENGTH, "alpha": parse_alpha(alpha), "n": N_MEMBERS,
                                "certified_alpha_target": 0.0, "certified_alpha_reference": 0.0, "both": n11,
                                "target_only": n10, "reference_only": n01, "neither": diff.n00,
                                "difference": diff.estimate, "low": diff.low, "high": diff.high})
    frames = {"samples": samples, "windows": windows, "scores": score_rows, "operating_points": op_rows,
              "extraction_claims": claim_rows, "budgets": budget_rows, "paired": paired_rows}
    (root / "tables").mkdir(parents=True, exist_ok=True)
    for name, rows in frames.items():
        if name == "paired" and not reference:
            continue
        schema = EXTRACTION_TABLES[name]
        pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).write_parquet(
            root / "tables" / f"{name}.parquet")
    spec = {"study": {"name": "wiki-pop", "kind": "extraction", "seed": seed, "description": "Synthetic population."},
            "servers": {"tgt": {"kind": "embedded", "model_dir": "organism:target"},
                        "ref": {"kind": "openai", "model": "ref-model", "api_key_env": "SECRET_ENV_NAME"}},
            "models": {"target": "tgt", "reference": "ref" if reference else None},
            "extraction": {"prefix_tokens": 50, "suffix_tokens": [LENGTH], "procedures": list(PROCEDURES),
                           "top_k": 40, "temperatures": [1.0], "epsilon": 5, "offset": 0, "stride": 1},
            "analyze": {"alpha": alpha, "alphas": ALPHAS, "confidence": 0.95, "fdr": 0.05, "fwer": 0.05,
                        "budgets": BUDGETS, "budget_confidence": 0.95, "decontaminate": decontaminate, "review": 5}}
    manifest = {"calib_version": "0.1.0.dev0", "started_at": "2026-01-02T03:04:05+00:00",
                "finished_at": "2026-01-02T04:04:05+00:00", "roles": {"target": "tgt", "reference": "ref"},
                "servers": {"tgt": {"kind": "embedded", "model": "tiny-target"},
                            "ref": {"kind": "openai", "model": "tiny-reference"}},
                "counts": {"samples": len(samples)}}
    (root / "spec.json").write_text(json.dumps(spec, indent=2))
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def _dagger(controls: np.ndarray) -> float:
    """α† by hand: the share of controls above a lowest score shared by two or more, else 1."""
    low = controls.min()
    return float((controls > low).mean()) if (controls == low).sum() >= 2 else 1.0


def _head(summary: dict[str, Any], role: str, proc: str) -> dict[str, Any]:
    return next(h for h in summary["headline"] if h["role"] == role and h["procedure"] == proc)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = build_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "paths": paths, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text(),
            "scores": _scores(np.random.default_rng(7))}


def test_the_run_is_read_as_an_extraction_study(rendered):
    run = load_run(rendered["run"])
    assert isinstance(run, RunTables) and run.kind == "extraction"
    assert set(run.tables) == set(EXTRACTION_TABLES)
    assert rendered["summary"]["kind"] == "extraction"
    assert rendered["summary"]["study"]["name"] == "wiki-pop"


@pytest.mark.parametrize("proc", ["top_k", "base"])
def test_headline_equals_the_conformal_test_by_hand(rendered, proc):
    sc = rendered["scores"][("target", proc)]
    controls = np.sort(sc["control"][2:])[::-1]  # decontaminated: c000 and c001 removed
    n = controls.size
    k = math.floor(0.01 * (n + 1))
    assert (n, k) == (298, 2)
    tau = controls[k - 1]
    claims = int((sc["member"] > tau).sum())
    head = _head(rendered["summary"], "target", proc)
    op = head["operating_point"]
    assert head["pool"] == "decontaminated" and op["pool"] == "decontaminated"
    assert (op["n_controls"], op["k"], op["claims"], op["n_members"]) == (n, k, claims, N_MEMBERS)
    assert op["certified_alpha"] == pytest.approx(k / (n + 1))
    assert op["log10_threshold"] == pytest.approx(math.log10(tau))
    # calibrated rate: member Clopper–Pearson (scipy beta quantiles) shifted down by α_N
    low = stats.beta.ppf(0.025, claims, N_MEMBERS - claims + 1) if claims else 0.0
    high = stats.beta.ppf(0.975, claims + 1, N_MEMBERS - claims)
    assert op["calibrated_rate"] == pytest.approx(claims / N_MEMBERS - k / (n + 1))
    assert op["low"] == pytest.approx(low - k / (n + 1)) and op["high"] == pytest.approx(high - k / (n + 1))
    # the Beta law of the realized FPR: Beta(K, N − K + 1)
    law = stats.beta(k, n - k + 1)
    assert op["fpr_low"] == pytest.approx(law.ppf(0.025)) and op["fpr_high"] == pytest.approx(law.ppf(0.975))
    assert op["prob_exceeds_certified"] == pytest.approx(law.sf(k / (n + 1)))
    assert op["alpha_dagger"] == pytest.approx(_dagger(sc["control"][2:]))
    assert f"{k}/{n + 1}" in rendered["html"]


def test_both_pools_are_shown_side_by_side(rendered):
    head = _head(rendered["summary"], "target", "base")
    pools = {p["pool"]: p for p in head["pools"]}
    assert (pools["all"]["n_controls"], pools["all"]["k"]) == (300, 3)
    assert (pools["decontaminated"]["n_controls"], pools["decontaminated"]["k"]) == (298, 2)
    # the contaminated controls set the full pool's threshold: it is one of their scores
    assert pools["all"]["log10_threshold"] <= math.log10(0.2)
    assert pools["decontaminated"]["claims"] >= pools["all"]["claims"]
    assert "Full and decontaminated control pools" in rendered["md"]
    assert "300 / 298" in rendered["html"] and "3 / 2" in rendered["html"]


def test_k_zero_says_no_claim_is_possible(tmp_path):
    summary = json.loads(write_report(build_run(tmp_path, alpha=0.001))["summary"].read_text())
    op = _head(summary, "target", "base")["operating_point"]
    assert op["k"] == 0 and op["log10_threshold"] is None and op["threshold"] is None and op["claims"] is None
    assert "no claim possible at α = 0.001 with N = 298 controls" in op["note"]
    assert "at least 999 controls" in op["note"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "none (K = 0)" in md and "no claim possible" in md


def test_alpha_written_as_a_fraction(tmp_path):
    summary = json.loads(write_report(build_run(tmp_path, alpha="3/299"))["summary"].read_text())
    op = _head(summary, "target", "base")["operating_point"]
    assert op is not None and op["k"] == 3 and op["certified_alpha"] == pytest.approx(3 / 299)
    assert summary["settings"]["alpha_as_written"] == "3/299"


def test_binary_procedures_report_generation_rates(rendered):
    head = _head(rendered["summary"], "target", "greedy")
    sc = rendered["scores"][("target", "greedy")]
    assert head["binary"] and head["generation"]["pool"] == "decontaminated"
    gen = head["generation"]
    assert (gen["members"]["k"], gen["members"]["n"]) == (int(sc["member"].sum()), N_MEMBERS)
    assert (gen["controls"]["k"], gen["controls"]["n"]) == (2, 298)  # c005 and c017; c000/c001 removed
    assert gen["difference"] == pytest.approx(sc["member"].mean() - 2 / 298)
    assert "one operating point" in head["operating_point"]["note"]
    assert "Binary procedures" in rendered["md"]
    assert not any(m["procedure"] == "greedy" for m in rendered["summary"]["margins"])


def test_sweep_lists_every_level_and_pool(rendered):
    series = [s for s in rendered["summary"]["sweep"] if s["role"] == "target" and s["procedure"] == "top_k"]
    assert sorted(s["pool"] for s in series) == ["all", "decontaminated"]
    points = next(s for s in series if s["pool"] == "all")["points"]
    assert [p["alpha"] for p in points] == sorted(ALPHAS)
    assert [p["k"] for p in points] == [math.floor(a * 301 + 1e-9) for a in sorted(ALPHAS)]
    assert points[0]["k"] == 0 and "no claim possible" in points[0]["note"]


def test_margins_and_multiple_testing(rendered):
    summary = rendered["summary"]
    sc = rendered["scores"][("target", "base")]
    op = _head(summary, "target", "base")["operating_point"]
    tau = 10 ** op["log10_threshold"]
    claimed = sc["member"][sc["member"] > tau]
    margins = np.log10(claimed) - op["log10_threshold"]
    rec = next(m for m in summary["margins"] if m["role"] == "target" and m["procedure"] == "base")
    assert rec["n_claims"] == claimed.size
    assert rec["median"] == pytest.approx(np.median(margins)) and rec["max"] == pytest.approx(margins.max())
    assert rec["at_least"][0] == {"delta": 1.0, "count": int((margins >= 1).sum())}
    mt = next(m for m in summary["multiple_testing"] if m["role"] == "target" and m["procedure"] == "base")
    # Bonferroni at δ = 0.05 over m = 40 members needs δ/m ≥ 1/(N+1): N + 1 ≥ 800
    assert (mt["m"], mt["n_controls"], mt["bonferroni_max_candidates"]) == (40, 298, math.floor(0.05 * 299))
    assert mt["bonferroni_feasible"] is False and mt["bonferroni_min_controls"] == 799
    p = p_values(sc["control"][2:], sc["member"])
    assert mt["bonferroni_rejections"] == int((p <= 0.05 / 40).sum())
    assert mt["bh_rejections"] == benjamini_hochberg(p, 0.05).n_rejected


def test_paired_and_budgets(rendered):
    summary = rendered["summary"]
    paired = {r["procedure"]: r for r in summary["paired"]}
    assert set(paired) == set(PROCEDURES) and all(r["primary"] for r in paired.values())
    assert paired["base"]["n"] == N_MEMBERS
    rows = [b for b in summary["budgets"] if b["role"] == "target" and b["procedure"] == "base"]
    assert [b["budget"] for b in rows] == BUDGETS
    sc = rendered["scores"][("target", "base")]
    floor = math.log10(-math.expm1(math.log1p(-0.95) / 1e5))  # 1 − (1 − p)^n = c solved for p
    b = rows[1]
    assert b["log10_min_probability"] == pytest.approx(floor)
    assert b["member_interval"]["k"] == int((np.log10(sc["member"]) >= floor).sum())
    assert "## Query budgets" in rendered["md"] and "## Target vs reference" in rendered["md"]


def test_contamination_review_lists_the_top_controls(rendered):
    review = next(r for r in rendered["summary"]["review"] if r["role"] == "target" and r["procedure"] == "base")
    controls = review["controls"]
    assert len(controls) == 5
    assert [c["sample_id"] for c in controls[:2]] == ["c000", "c001"]
    assert controls[0]["decontaminated"] and controls[1]["decontaminated"] and not controls[2]["decontaminated"]
    assert controls[0]["log10_value"] == pytest.approx(math.log10(0.5))
    assert [c["log10_value"] for c in controls] == sorted((c["log10_value"] for c in controls), reverse=True)
    assert controls[0]["suffix"] == "the suffix of c000\nsecond line"
    # controls scoring 0 are never listed (the top_k atom)
    topk = next(r for r in rendered["summary"]["review"] if r["role"] == "target" and r["procedure"] == "top_k")
    assert all(c["log10_value"] is not None for c in topk["controls"])


def test_html_escapes_generated_text(tmp_path):
    run = build_run(tmp_path, decontaminate=[])
    review = 300  # every control with a positive score is listed: c002 among them
    spec = json.loads((run / "spec.json").read_text())
    spec["analyze"]["review"] = review
    (run / "spec.json").write_text(json.dumps(spec))
    html = write_report(run)["html"].read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["settings"]["primary_pool"] == "all" and summary["headline"][0]["pools"] == []
    assert "Full and decontaminated" not in html


def test_procedure_statement_states_the_null(rendered):
    statement = rendered["summary"]["procedure"]
    assert [m["model"] for m in statement["models"]] == ["tiny-target", "tiny-reference"]
    assert statement["tokenizer"] == "tgt" and statement["prefix_tokens"] == 50 and statement["suffix_tokens"] == [50]
    assert [p["procedure"] for p in statement["procedures"]] == list(PROCEDURES)
    assert [p["binary"] for p in statement["procedures"]] == [True, False, False]
    md = rendered["md"]
    assert md.index("## Procedure") < md.index("## Headline")
    for phrase in ("K-th largest", "α_N = K/(N+1)", "**marginal**", "exchangeability",
                   "a non-rejection is **not** evidence of non-memorization", "top-k sampling, k = 40"):
        assert phrase in md, phrase
    assert "SECRET_ENV_NAME" not in rendered["html"] and "SECRET_ENV_NAME" not in json.dumps(rendered["summary"])


def test_counts_and_consistency(rendered):
    counts = rendered["summary"]["counts"]
    assert counts["samples"] == {"members": N_MEMBERS + 2, "controls": N_CONTROLS}
    assert counts["windows"]["members"] == N_MEMBERS + 1 and counts["windows"]["samples_without_window"] == 1
    scored = next(g for g in counts["scores"] if g["role"] == "target" and g["procedure"] == "base")
    assert (scored["scored"], scored["unscored"]) == (N_MEMBERS + N_CONTROLS, 1)
    assert scored["errors"] == [{"reason": "request failed: HTTP 503 after 5 retries", "count": 1}]
    assert rendered["summary"]["consistency"] == []


def test_figures_are_svg_files(rendered):
    run, summary = rendered["run"], rendered["summary"]
    expected = {"calibration-top-k", "calibration-base", "scores-top-k", "scores-base", "margins", "budgets"}
    assert set(summary["figures"]) == expected
    for name, rel in summary["figures"].items():
        text = (run / "report" / rel).read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text, name
        assert f'id="figure-{name}"' in rendered["html"]
        assert f"figures/{name}.svg" in rendered["md"]


def test_rendering_again_gives_the_same_bytes(tmp_path):
    run = build_run(tmp_path)
    first = {k: p.read_bytes() for k, p in write_report(run).items()}
    figures = {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()}
    assert {k: p.read_bytes() for k, p in write_report(run).items()} == first
    assert {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()} == figures


def test_without_a_reference_there_is_no_paired_table(tmp_path):
    run = build_run(tmp_path, reference=False)
    assert not (run / "tables" / "paired.parquet").exists()
    summary = json.loads(write_report(run)["summary"].read_text())
    assert summary["paired"] is None and {h["role"] for h in summary["headline"]} == {"target"}
    assert "No reference model" in (run / "report" / "report.md").read_text()
    # the study writes an empty paired table when there is no reference model: the same statement
    pl.DataFrame(schema=EXTRACTION_TABLES["paired"]).write_parquet(run / "tables" / "paired.parquet")
    assert json.loads(write_report(run)["summary"].read_text())["paired"] is None


@pytest.mark.parametrize("table", ["operating_points", "extraction_claims", "budgets", "windows"])
def test_a_missing_table_is_a_one_line_input_error(tmp_path, table):
    run = build_run(tmp_path)
    (run / "tables" / f"{table}.parquet").unlink()
    with pytest.raises(InputError) as caught:
        write_report(run)
    message = str(caught.value)
    assert f"no {table} table" in message and "\n" not in message


def test_a_missing_column_is_named(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "operating_points.parquet"
    pl.read_parquet(path).drop("alpha_dagger").write_parquet(path)
    with pytest.raises(InputError, match="operating_points table lacks column.s. alpha_dagger"):
        write_report(run)


def test_an_unknown_study_kind_is_an_input_error(tmp_path):
    run = build_run(tmp_path)
    spec = json.loads((run / "spec.json").read_text())
    spec["study"]["kind"] = "telemetry"
    (run / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(InputError, match="study.kind = 'telemetry' is not a study kind the report renders"):
        write_report(run)


def _calib(capsys: pytest.CaptureFixture[str], *args: object) -> Outcome:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    return Outcome(code=int(exited.value.code or 0), out=captured.out, err=captured.err)


def test_cli_report_json(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("CALIB_DEBUG", raising=False)
    run = build_run(tmp_path)
    data = _calib(capsys, "report", run, "--json").json()
    assert data["summary"] == str(run / "report" / "summary.json")
    assert json.loads(Path(data["summary"]).read_text())["kind"] == "extraction"
    shutil.rmtree(run / "report")
    (run / "tables" / "paired.parquet").unlink()
    line = _calib(capsys, "report", run, "--json").one_line_error()
    assert "no paired table" in line and "paired.parquet" in line


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
    section = doc[doc.index("## Extraction report"):doc.index("## Census report")]
    missing = sorted(k for k in _keys(rendered["summary"]) if f"`{k}`" not in section)
    assert not missing, f"summary.json keys not documented under Extraction report in docs/report.md: {missing}"
    for heading in re.findall(r"^## (.+)$", rendered["md"], re.M):
        assert f"**{heading}**" in section, heading
    for name in rendered["summary"]["figures"]:
        assert f"figures/{name}.svg" in section or f"figures/{name.split('-')[0]}-PROC.svg" in section, name
