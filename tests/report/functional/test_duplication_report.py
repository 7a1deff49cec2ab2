"""The report's "Duplication" section (functional-memorization paper §5.3, Figure 4, Appendix G).

A seeded synthetic run of 200 samples with planted near-duplicate counts: textual near-duplicates raise
the odds that the target completes x near-verbatim, semantic-only near-duplicates the odds that it
completes x functionally. Groups, counts and regressions are checked against direct numpy/statsmodels
computations made here from the planted values (not from the report's per-sample table).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import special

from calib._exceptions import InputError
from calib.dedup.counts import duplicate_counts
from calib.report import load_run, write_report
from tests.report._fake_run import FEW_VALID, N_INPUTS, TAU_FUNC, TAU_TEXT, FakeSample, duplicates_table, make_run
from tests.report.test_docs_report import DOC, _keys

N = 200


def planted(seed: int = 20260101) -> dict[str, Any]:
    """Samples, their duplicate pairs and the per-sample facts the tests compute from."""
    rng = np.random.default_rng(seed)
    textual = rng.poisson(0.9, N)
    semantic = rng.poisson(5.0, N)
    copies_t = [rng.integers(1, 4, k) for k in textual]
    copies_s = [rng.integers(1, 4, k) for k in semantic]
    text_flag = rng.random(N) < special.expit(-2.5 + 1.6 * textual)
    func_flag = rng.random(N) < special.expit(-3.5 + 0.45 * semantic)
    inconclusive = rng.random(N) < 0.1
    unscored = np.zeros(N, dtype=bool)
    unscored[[5, 77]] = True
    samples, pairs = [], []
    for i in range(N):
        tt = float(np.round(rng.uniform(0.8, 0.99) if text_flag[i] else rng.uniform(0.05, 0.6), 4))
        matched = (int(rng.integers(8, 11)) if func_flag[i] else int(rng.integers(0, 7)), int(rng.integers(0, 4)))
        kw: dict[str, Any] = {"conclusive": False, "reason": FEW_VALID, "valid": 5} if inconclusive[i] else {}
        samples.append(FakeSample(index=i, membership="member" if i < 170 else "control",
                                  text=(None if unscored[i] else tt, 0.2), matched=matched, **kw))
        pairs += [(f"s{i:02d}", f"t{i}-{j}", "textual", 0.5, int(c)) for j, c in enumerate(copies_t[i])]
        pairs += [(f"s{i:02d}", f"m{i}-{j}", "semantic", 0.93, int(c)) for j, c in enumerate(copies_s[i])]
    pairs.append(("not-a-sample", "t-x", "textual", 0.7, 1))  # left out, counted as unmatched
    text_target = np.array([np.nan if s.text[0] is None else s.text[0] for s in samples])
    func_target = np.array([np.nan if s.sim_func("target") is None else s.sim_func("target") for s in samples])
    return {"samples": samples, "pairs": duplicates_table(pairs), "textual": textual, "semantic": semantic,
            "textual_copies": np.array([c.sum() for c in copies_t]),
            "semantic_copies": np.array([c.sum() for c in copies_s]),
            "scored": ~unscored, "conclusive": ~unscored & ~inconclusive, "text_target": text_target,
            "func_target": func_target}


PLANT = planted()


def render(root: Path, *, samples: list[FakeSample] | None = None, pairs: pl.DataFrame | None = None,
           dedup: dict[str, Any] | None = None) -> dict[str, Any]:
    run = make_run(root, PLANT["samples"] if samples is None else samples, examples=1,
                   duplicates=PLANT["pairs"] if pairs is None else pairs, dedup=dedup)
    paths = write_report(run)
    return {"run": run, "summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text(),
            "html": paths["html"].read_text()}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return render(tmp_path_factory.mktemp("dup"))


def expected_groups(t: np.ndarray, s: np.ndarray) -> dict[str, np.ndarray]:
    """The paper's groups from the planted values: masks over the samples."""
    scored, conclusive = PLANT["scored"], PLANT["conclusive"]
    with np.errstate(invalid="ignore"):
        textual = scored & (PLANT["text_target"] >= TAU_TEXT)
        functional = conclusive & ~textual & (PLANT["func_target"] >= TAU_FUNC)
    others = conclusive & ~textual & ~functional
    return {"textual": textual, "functional": functional, "others": others}


def check_stats(stats: dict[str, Any], values: np.ndarray) -> None:
    assert stats["mean"] == pytest.approx(values.mean(), rel=1e-12)
    assert stats["median"] == pytest.approx(np.median(values))
    assert stats["max"] == values.max()
    assert stats["n_with_any"] == int((values > 0).sum())
    assert stats["share_with_any"] == pytest.approx((values > 0).mean())


def test_groups_equal_a_direct_computation(rendered):
    dup = rendered["summary"]["duplication"]
    masks = expected_groups(PLANT["textual"], PLANT["semantic"])
    assert dup["n_pairs"] == {"textual": int(PLANT["textual"].sum()) + 1, "semantic": int(PLANT["semantic"].sum())}
    assert dup["unmatched_pairs"] == 1
    assert (dup["n_samples"], dup["n_scored"], dup["n_conclusive"]) == (
        N, int(PLANT["scored"].sum()), int(PLANT["conclusive"].sum()))
    ungrouped = PLANT["scored"] & ~masks["textual"] & ~PLANT["conclusive"]
    assert dup["n_ungrouped_inconclusive"] == int(ungrouped.sum()) > 0
    assert list(dup["groups"]) == ["textual", "functional", "others"]
    for key, mask in masks.items():
        group = dup["groups"][key]
        assert group["n"] == int(mask.sum()) > 5
        check_stats(group["textual_dups"], PLANT["textual"][mask])
        check_stats(group["semantic_dups"], PLANT["semantic"][mask])
    # the planted effects show in the means, as in the paper's Figure 4
    g = dup["groups"]
    assert g["textual"]["textual_dups"]["mean"] > g["others"]["textual_dups"]["mean"]
    assert g["functional"]["semantic_dups"]["mean"] > g["others"]["semantic_dups"]["mean"]
    assert dup["settings"] == {"source": "organism", "jaccard": 0.4, "cosine": 0.9, "num_perm": 128,
                               "shingle_tokens": 5, "semantic": True, "count_copies": False, "embedding_server": None}


def statsmodels_fit(flags: np.ndarray, columns: list[np.ndarray]) -> Any:
    """Independent reference: statsmodels' Logit with a constant, fitted directly."""
    design = sm.add_constant(np.column_stack(columns).astype(float), has_constant="add")
    return sm.Logit(flags.astype(float), design).fit(disp=0)


def check_fit(record: dict[str, Any], flags: np.ndarray, columns: dict[str, np.ndarray]) -> None:
    ref = statsmodels_fit(flags, list(columns.values()))
    assert record["fitted"] and record["converged"] and record["note"] is None
    assert (record["n"], record["n_positive"]) == (flags.size, int(flags.sum()))
    assert [c["name"] for c in record["coefficients"]] == ["intercept", *columns]
    low, high = np.asarray(ref.conf_int(alpha=0.05)).T
    for j, coef in enumerate(record["coefficients"]):
        assert coef["estimate"] == pytest.approx(ref.params[j], rel=1e-6)
        assert coef["std_error"] == pytest.approx(ref.bse[j], rel=1e-6)
        assert coef["z"] == pytest.approx(ref.tvalues[j], rel=1e-6)
        assert coef["p_value"] == pytest.approx(ref.pvalues[j], rel=1e-5, abs=1e-300)
        assert (coef["ci_low"], coef["ci_high"]) == (pytest.approx(low[j], rel=1e-6), pytest.approx(high[j], rel=1e-6))
    assert record["log_likelihood"] == pytest.approx(ref.llf, rel=1e-9)
    assert record["pseudo_r2"] == pytest.approx(ref.prsquared, rel=1e-6)


def test_regressions_equal_statsmodels_logit(rendered):
    regs = rendered["summary"]["duplication"]["regressions"]
    scored, conclusive = PLANT["scored"], PLANT["conclusive"]
    t, s = PLANT["textual"], PLANT["semantic"]
    text_flags = PLANT["text_target"][scored] >= TAU_TEXT
    check_fit(regs["textual"], text_flags, {"textual_dups": t[scored], "semantic_dups": s[scored]})
    func_flags = PLANT["func_target"][conclusive] >= TAU_FUNC
    check_fit(regs["functional"], func_flags, {"textual_dups": t[conclusive], "semantic_dups": s[conclusive]})
    assert (regs["textual"]["population"], regs["functional"]["population"]) == ("scored", "conclusive")
    # the planted dissociation is found: textual follows textual near-duplicates, functional semantic ones
    text_coef = {c["name"]: c for c in regs["textual"]["coefficients"]}
    func_coef = {c["name"]: c for c in regs["functional"]["coefficients"]}
    assert text_coef["textual_dups"]["estimate"] > 0 and text_coef["textual_dups"]["p_value"] < 1e-4
    assert func_coef["semantic_dups"]["estimate"] > 0 and func_coef["semantic_dups"]["p_value"] < 1e-4


def test_the_section_states_definitions_numbers_and_the_figure(rendered):
    md, summary = rendered["md"], rendered["summary"]
    section = md.split("## Duplication\n", 1)[1].split("\n## ", 1)[0]
    assert md.index("## Proxy metrics") < md.index("## Duplication") < md.index("## Methods")
    for text in ("128 permutations", "5-token shingles", "≥ 0.4", "≥ 0.9", "not a textual one", "Each document counts "
                 "once", "in no group", "the paper (OLMo-3-32B, Python)", "not causal"):
        assert text in section, text
    g = summary["duplication"]["groups"]["textual"]
    assert f"{g['textual_dups']['mean']:.2f} / " in section
    coef = summary["duplication"]["regressions"]["textual"]["coefficients"][1]
    assert f"{coef['estimate']:.4f}" in section
    assert summary["figures"]["duplication"] == "figures/duplication.svg"
    svg = (rendered["run"] / "report" / "figures" / "duplication.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "semantic-only near-duplicates" in svg
    assert "![" in section and "figures/duplication.svg" in section
    assert 'id="duplication"' in rendered["html"] and 'id="figure-duplication"' in rendered["html"]
    assert "Broder" in md and "SemDeDup" in md


def test_every_duplication_key_is_documented(rendered):
    missing = sorted(k for k in _keys(rendered["summary"]["duplication"]) if f"`{k}`" not in DOC)
    assert not missing, f"summary.json duplication keys not documented in docs/report.md: {missing}"
    assert "**Duplication**" in DOC and "figures/duplication.svg" in DOC


def test_copies_are_counted_when_asked_and_settings_are_the_specs(tmp_path):
    out = render(tmp_path, dedup={"count_copies": True, "jaccard": 0.5, "cosine": 0.85, "num_perm": 64,
                                  "shingle_tokens": 3})
    dup = out["summary"]["duplication"]
    assert dup["settings"]["count_copies"] is True
    masks = expected_groups(PLANT["textual"], PLANT["semantic"])
    for key, mask in masks.items():
        check_stats(dup["groups"][key]["textual_dups"], PLANT["textual_copies"][mask])
        check_stats(dup["groups"][key]["semantic_dups"], PLANT["semantic_copies"][mask])
    # the counts are calib.dedup's
    ids = [s.sample_id for s in PLANT["samples"]]
    counts = duplicate_counts(PLANT["pairs"], ids, count_copies=True)
    assert counts["textual_dups"].to_list() == PLANT["textual_copies"].tolist()
    scored = PLANT["scored"]
    check_fit(dup["regressions"]["textual"], PLANT["text_target"][scored] >= TAU_TEXT,
              {"textual_dups": PLANT["textual_copies"][scored], "semantic_dups": PLANT["semantic_copies"][scored]})
    section = out["md"].split("## Duplication\n", 1)[1].split("\n## ", 1)[0]
    for text in ("64 permutations", "3-token shingles", "≥ 0.5", "≥ 0.85", "as often as it occurs"):
        assert text in section, text


def test_one_class_gives_a_note_and_no_fit(tmp_path):
    # nothing reaches tau_text any more: the textual regression has one class
    samples = [FakeSample(index=s.index, membership=s.membership, text=(None if s.text[0] is None else 0.3, 0.2),
                          matched=s.matched, conclusive=s.conclusive, reason=s.reason, valid=s.valid)
               for s in PLANT["samples"]]
    out = render(tmp_path, samples=samples)
    reg = out["summary"]["duplication"]["regressions"]["textual"]
    assert not reg["fitted"] and reg["coefficients"] == [] and reg["n_positive"] == 0
    assert reg["note"] == ("not fitted: no scored sample has SIM_text(x, x_T) ≥ τ_text, so the outcome has one "
                           "class only")
    assert out["summary"]["duplication"]["groups"]["textual"]["n"] == 0
    assert out["summary"]["duplication"]["groups"]["textual"]["textual_dups"]["mean"] is None
    assert out["summary"]["duplication"]["regressions"]["functional"]["fitted"]
    assert reg["note"] in out["md"]


def test_separation_gives_its_reason(tmp_path):
    # functional similarity exactly when a sample has 7 or more semantic near-duplicates: separated
    samples = [FakeSample(index=s.index, membership=s.membership, text=s.text,
                          matched=(N_INPUTS if PLANT["semantic"][s.index] >= 7 else 2, 1), conclusive=s.conclusive,
                          reason=s.reason, valid=s.valid) for s in PLANT["samples"]]
    reg = render(tmp_path, samples=samples)["summary"]["duplication"]["regressions"]["functional"]
    assert not reg["fitted"] and reg["coefficients"] == []
    assert reg["note"].startswith("not fitted: predictor 'semantic_dups' separates the flags")


def test_a_constant_predictor_is_left_out(tmp_path):
    pairs = PLANT["pairs"].filter(pl.col("kind") == "textual")
    out = render(tmp_path, pairs=pairs, dedup={"semantic": False})
    dup = out["summary"]["duplication"]
    assert dup["n_pairs"]["semantic"] == 0
    reg = dup["regressions"]["textual"]
    assert reg["predictors"] == ["textual_dups"] and reg["dropped"] == ["semantic_dups"]
    assert reg["note"] == "semantic_dups is 0 for every scored sample and is left out of the model"
    scored = PLANT["scored"]
    ref = statsmodels_fit(PLANT["text_target"][scored] >= TAU_TEXT, [PLANT["textual"][scored]])
    assert [c["estimate"] for c in reg["coefficients"]] == pytest.approx(list(ref.params), rel=1e-6)
    assert "Semantic search was off" in out["md"]


def test_an_empty_duplicates_table_counts_zeros(tmp_path):
    out = render(tmp_path, pairs=duplicates_table([]))
    dup = out["summary"]["duplication"]
    assert dup["n_pairs"] == {"textual": 0, "semantic": 0} and dup["unmatched_pairs"] == 0
    for group in dup["groups"].values():
        assert group["textual_dups"]["max"] == group["semantic_dups"]["max"] == 0
        assert group["textual_dups"]["share_with_any"] == 0.0
    for key, population in (("textual", "scored"), ("functional", "conclusive")):
        reg = dup["regressions"][key]
        assert not reg["fitted"] and reg["dropped"] == ["textual_dups", "semantic_dups"]
        assert reg["note"] == ("not fitted: neither count varies (textual_dups is 0 and semantic_dups is 0 for every "
                               f"{population} sample)")
    assert (out["run"] / "report" / "figures" / "duplication.svg").is_file()


def test_no_duplicates_table_no_section(tmp_path):
    summary_md = {}
    for name, pairs in (("with", PLANT["pairs"]), ("without", None)):
        run = make_run(tmp_path / name, PLANT["samples"], examples=1, duplicates=pairs)
        paths = write_report(run)
        summary_md[name] = (json.loads(paths["summary"].read_text()), paths["markdown"].read_text())
    summary, md = summary_md["without"]
    assert "duplication" in summary and summary["duplication"] is None
    assert "## Duplication" not in md and "duplication" not in summary["figures"]
    assert not (tmp_path / "without" / "report" / "figures" / "duplication.svg").exists()
    assert "SemDeDup" not in md
    assert load_run(tmp_path / "without").duplicates is None
    # removing the table and rendering again removes the section and its figure
    (tmp_path / "with" / "tables" / "duplicates.parquet").unlink()
    write_report(tmp_path / "with")
    assert not (tmp_path / "with" / "report" / "figures" / "duplication.svg").exists()


def test_rendering_again_gives_the_same_bytes(tmp_path):
    run = render(tmp_path)["run"]
    first = {p.name: p.read_bytes() for p in (run / "report").rglob("*") if p.is_file()}
    shutil.rmtree(run / "report")
    write_report(run)
    assert {p.name: p.read_bytes() for p in (run / "report").rglob("*") if p.is_file()} == first


@pytest.mark.parametrize("broken", ["missing_column", "bad_kind", "bad_copies", "unreadable"])
def test_a_broken_duplicates_table_is_an_input_error(tmp_path, broken):
    pairs = PLANT["pairs"]
    if broken == "missing_column":
        pairs = pairs.drop("copies")
    elif broken == "bad_kind":
        pairs = pairs.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(pl.lit("exact"))
                                   .otherwise(pl.col("kind")).alias("kind"))
    elif broken == "bad_copies":
        pairs = pairs.with_columns(pl.lit(0, dtype=pl.Int64).alias("copies"))
    run = make_run(tmp_path, PLANT["samples"], examples=1, duplicates=pairs)
    if broken == "unreadable":
        (run / "tables" / "duplicates.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError) as err:
        write_report(run)
    assert "duplicates" in str(err.value)
    message = {"missing_column": "lacks column(s) copies", "bad_kind": "'exact'", "bad_copies": "copies must be",
               "unreadable": "cannot read the duplicates table"}[broken]
    assert message in str(err.value)
    assert re.search(r"re-run `calib study SPEC`", str(err.value))
