"""The suffix-length sweep of an extraction report (extraction paper App. D.3): one figure across ℓ_s and
the summary's ``suffix_sweep`` table, consistent with the per-length numbers the summary already holds.

The run (``_synthetic.write_run``, seeded numpy): 60 members and 199 controls scored at ℓ_s = 2, 8 and
32 by ``base`` (continuous log10 scores; members drift above the controls as ℓ_s grows) and ``greedy``
(0/1: fewer generations at longer suffixes), primary α = 0.05 (K = floor(0.05 · 200) = 10).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from statsmodels.stats.proportion import confint_proportions_2indep

from calib.report import write_report
from tests.report.extraction._synthetic import write_run
from tests.report.extraction.test_members_vs_controls import CONTROLS, MEMBERS

LENGTHS = (2, 8, 32)
N_MEMBERS, N_CONTROLS, ALPHA = 60, 199, 0.05


def _scores(rng: np.random.Generator) -> dict[tuple[str, str, int], tuple[list[float], list[float]]]:
    out = {}
    for length in LENGTHS:
        controls = rng.normal(-0.6 * length, 1.0 + 0.05 * length, N_CONTROLS)
        members = rng.normal(-0.6 * length + 0.08 * length, 1.0 + 0.05 * length, N_MEMBERS)
        out[("target", "base", length)] = (np.minimum(members, -1e-3).tolist(), np.minimum(controls, -1e-3).tolist())
        p_member, p_control = 0.7 / math.sqrt(length), 0.5 / length
        out[("target", "greedy", length)] = (
            np.where(rng.random(N_MEMBERS) < p_member, 0.0, -math.inf).tolist(),
            np.where(rng.random(N_CONTROLS) < p_control, 0.0, -math.inf).tolist())
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    scores = _scores(np.random.default_rng(11))
    root = write_run(tmp_path_factory.mktemp("sweep"), scores, alpha=ALPHA, alphas=[0.01, ALPHA, 0.2])
    paths = write_report(root)
    return {"root": root, "scores": scores, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text()}


def test_one_row_per_procedure_and_length_at_the_primary_alpha(swept):
    rows = swept["summary"]["suffix_sweep"]
    assert [(r["procedure"], r["suffix_tokens"]) for r in rows] == [
        (p, n) for p in ("greedy", "base") for n in LENGTHS]
    assert all(r["alpha"] == ALPHA for r in rows if r["procedure"] == "base")
    assert all(r["alpha"] is None and r["calibrated_rate"] is None for r in rows if r["procedure"] == "greedy")


def test_the_table_equals_the_per_length_values_of_the_summary(swept):
    summary = swept["summary"]
    heads = {(h["procedure"], h["suffix_tokens"]): h for h in summary["headline"]}
    for r in summary["suffix_sweep"]:
        head = heads[(r["procedure"], r["suffix_tokens"])]
        if r["binary"]:
            gen = head["generation"]
            assert (r["member_rate"], r["control_rate"]) == (gen["members"]["estimate"], gen["controls"]["estimate"])
            assert (r["member_low"], r["member_high"]) == (gen["members"]["low"], gen["members"]["high"])
            assert (r["difference"], r["difference_low"], r["difference_high"]) == (
                gen["difference"], gen["difference_low"], gen["difference_high"])
            continue
        op = head["operating_point"]
        assert (r["k"], r["certified_alpha"], r["n_controls"], r["member_flags"]) == (
            op["k"], op["certified_alpha"], op["n_controls"], op["claims"])
        assert (r["member_rate"], r["control_rate"]) == (op["member_rate"], op["in_sample_fpr"])
        assert (r["calibrated_rate"], r["calibrated_low"], r["calibrated_high"]) == (
            op["calibrated_rate"], op["low"], op["high"])
        point = next(p for s in summary["sweep"] if (s["procedure"], s["suffix_tokens"]) == ("base", r["suffix_tokens"])
                     for p in s["points"] if p["alpha"] == ALPHA)
        assert point["calibrated_rate"] == r["calibrated_rate"]


def test_the_rates_recomputed_from_the_scores(swept):
    for r in swept["summary"]["suffix_sweep"]:
        members, controls = (np.asarray(v) for v in swept["scores"][("target", r["procedure"], r["suffix_tokens"])])
        if r["binary"]:
            mk, ck = int((members == 0).sum()), int((controls == 0).sum())
        else:
            k = math.floor(ALPHA * (N_CONTROLS + 1))
            tau = np.sort(controls)[::-1][k - 1]
            mk, ck = int((members > tau).sum()), int((controls > tau).sum())
            assert r["certified_alpha"] == pytest.approx(k / (N_CONTROLS + 1))
            assert r["calibrated_rate"] == pytest.approx(mk / N_MEMBERS - k / (N_CONTROLS + 1))
        assert (r["member_flags"], r["control_flags"]) == (mk, ck)
        low, high = confint_proportions_2indep(mk, N_MEMBERS, ck, N_CONTROLS, method="newcomb", compare="diff")
        assert (r["difference_low"], r["difference_high"]) == pytest.approx((low, high))


def test_one_figure_across_lengths_is_written_and_referenced(swept):
    summary, root = swept["summary"], swept["root"]
    assert summary["figures"]["suffix-sweep"] == "figures/suffix-sweep.svg"
    svg = (root / "report" / "figures" / "suffix-sweep.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "suffix length" in svg and "greedy (binary: generation)" in svg
    md = swept["md"]
    section = md[md.index("## Suffix lengths"):md.index("## Score distributions")]
    assert "figures/suffix-sweep.svg" in section
    for n in LENGTHS:
        assert f"| `base` | {n} |" in section


def test_a_single_length_says_so_in_one_line(tmp_path: Path):
    root = write_run(tmp_path, {("target", "base", 10): (MEMBERS, CONTROLS)}, alpha=0.1, alphas=[0.1])
    paths = write_report(root)
    md = paths["markdown"].read_text()
    section = md[md.index("## Suffix lengths"):md.index("## Score distributions")]
    body = [line for line in section.splitlines()[1:] if line.strip()]
    assert body == ["The run scored one suffix length (ℓ_s = 10; `extraction.suffix_tokens`): no suffix-length "
                    "sweep."]
    summary = json.loads(paths["summary"].read_text())
    assert "suffix-sweep" not in summary["figures"] and not (root / "report" / "figures" / "suffix-sweep.svg").exists()
    assert [r["suffix_tokens"] for r in summary["suffix_sweep"]] == [10]
