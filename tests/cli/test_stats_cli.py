"""``calib stats``: every subcommand's JSON keys and values, human summaries, score files and errors.

Reference values come from sources independent of calib: scipy.stats, statsmodels'
``proportion_confint(method="beta")``, closed forms (with the arithmetic in a comment), 50-digit mpmath,
brute-force scans, and the numbers printed in the extraction paper (App. C.1, C.4, C.5, §6).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import polars as pl
import pytest
from scipy import stats as st
from statsmodels.stats.proportion import proportion_confint

from tests.cli._helpers import mentions

LAW_KEYS = {"n", "alpha", "k", "certified_alpha", "mean", "interval", "upper", "prob_exceeds_certified"}
UPPER_KEYS = {"0.9", "0.95", "0.99"}
CONFORMAL_KEYS = {"n_controls", "k", "certified_alpha", "threshold", "in_sample_fpr", "alpha_dagger", "fpr_law"}
MEMBER_KEYS = {"n", "claims", "member_rate", "calibrated_rate", "low", "high"}
CENSUS_KEYS = {"threshold", "coverage", "coverage_within_budget", "windows_above"}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def write_scores(path: Path, scores: np.ndarray) -> Path:
    # repr round-trips a double exactly, so the file holds the very scores the reference uses.
    return write_lines(path, [repr(float(x)) for x in scores])


def beta_law_reference(n: int, k: int, confidence: float) -> dict:
    """The law of the realized FPR, Beta(K, N-K+1), from scipy.stats.beta (order statistics)."""
    law = st.beta(k, n - k + 1)
    return {
        "mean": law.mean(),
        "interval": [law.ppf((1 - confidence) / 2), law.ppf((1 + confidence) / 2)],
        "upper": {"0.9": law.ppf(0.9), "0.95": law.ppf(0.95), "0.99": law.ppf(0.99)},
        "prob_exceeds_certified": law.sf(k / (n + 1)),
    }


def assert_law_matches(law: dict, n: int, k: int, confidence: float) -> None:
    assert LAW_KEYS <= law.keys()
    assert set(law["upper"]) == UPPER_KEYS
    ref = beta_law_reference(n, k, confidence)
    assert law["n"] == n and law["k"] == k
    assert law["certified_alpha"] == pytest.approx(k / (n + 1), rel=1e-15)
    assert law["mean"] == pytest.approx(ref["mean"], rel=1e-12)
    assert law["interval"] == pytest.approx(ref["interval"], rel=1e-9)
    for q in UPPER_KEYS:
        assert law["upper"][q] == pytest.approx(ref["upper"][q], rel=1e-9)
    # Beta-binomial identity (David & Nagaraja 2003, §2.2): P(Beta(K, N-K+1) > x) = P(Bin(N, x) <= K-1).
    assert law["prob_exceeds_certified"] == pytest.approx(st.binom.cdf(k - 1, n, k / (n + 1)), rel=1e-9)


# --- interval ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "confidence"),
    [(3, 10, 0.95), (0, 10, 0.95), (10, 10, 0.95), (1, 1, 0.9), (37, 250, 0.99), (5, 5001, 0.95)],
)
def test_interval_matches_statsmodels(calib, k, n, confidence):
    r = calib("stats", "interval", "--k", k, "--n", n, "--confidence", confidence, "--json").json()
    assert {"k", "n", "estimate", "low", "high", "method"} <= r.keys()
    # statsmodels.stats.proportion.proportion_confint(k, n, alpha=1 - confidence, method="beta")
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    assert (r["k"], r["n"]) == (k, n)
    assert r["estimate"] == pytest.approx(k / n, rel=1e-15)
    assert r["low"] == pytest.approx(low, rel=1e-9, abs=1e-15)
    assert r["high"] == pytest.approx(high, rel=1e-9, abs=1e-15)
    assert "clopper" in r["method"].lower()


def test_interval_edges_in_closed_form(calib):
    # k = 0: high solves (1 - p)^n = 0.025, i.e. 1 - 0.025^(1/n); k = n: low = 0.025^(1/n).
    zero = calib("stats", "interval", "--k", "0", "--n", "10", "--json").json()
    assert zero["low"] == 0.0
    assert zero["high"] == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-12)
    full = calib("stats", "interval", "--k", "10", "--n", "10", "--json").json()
    assert full["high"] == 1.0
    assert full["low"] == pytest.approx(0.025 ** (1 / 10), rel=1e-12)


def test_interval_summary_mentions_the_numbers(calib):
    r = calib("stats", "interval", "--k", "3", "--n", "10")
    assert r.code == 0 and r.err == ""
    low, high = proportion_confint(3, 10, alpha=0.05, method="beta")  # statsmodels, method="beta"
    assert "3 of 10" in r.out
    assert mentions(r.out, 0.3) and mentions(r.out, low) and mentions(r.out, high)
    assert "95%" in r.out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--k", "11", "--n", "10"], "k"),
        (["--k", "0", "--n", "0"], "n"),
        (["--k", "-1", "--n", "10"], "k"),
        (["--k", "1", "--n", "10", "--confidence", "1"], "confidence"),
        (["--k", "1", "--n", "10", "--confidence", "0"], "confidence"),
    ],
)
def test_interval_rejects_bad_values(calib, args, needle):
    err = calib("stats", "interval", *args).one_line_error()
    # a value the option's type refuses names the option; one only the statistic refuses names its parameter
    assert f"Invalid value for '--{needle}'" in err or needle in err.removeprefix("calib: error: ").split()[0]


# --- beta-law ---------------------------------------------------------------------------------------


def test_beta_law_reproduces_the_extraction_paper(calib):
    r = calib("stats", "beta-law", "--n", "5000", "--alpha", "0.001", "--json").json()
    assert LAW_KEYS <= r.keys() and set(r["upper"]) == UPPER_KEYS
    # Extraction paper App. C.1: N = 5000 and alpha = 0.1 % give K = floor(0.001 * 5001) = 5,
    # certified alpha_N = 5/5001.
    assert r["n"] == 5000 and r["alpha"] == 0.001
    assert r["k"] == 5
    assert r["certified_alpha"] == pytest.approx(5 / 5001, rel=1e-15)
    assert r["mean"] == pytest.approx(5 / 5001, rel=1e-12)  # Beta(5, 4996) mean 5/5001
    # App. C.4: Beta(5, 4996), 95 % central interval [0.032 %, 0.205 %].
    assert round(100 * r["interval"][0], 3) == 0.032
    assert round(100 * r["interval"][1], 3) == 0.205
    # App. C.4: 90 % and 95 % upper bounds 0.16 % and 0.18 %; P(alpha* > alpha_N) ~ 44 %.
    assert round(100 * r["upper"]["0.9"], 2) == 0.16
    assert round(100 * r["upper"]["0.95"], 2) == 0.18
    assert round(r["prob_exceeds_certified"], 2) == 0.44
    assert_law_matches(r, 5000, 5, 0.95)


def test_beta_law_summary_mentions_the_paper_numbers(calib):
    r = calib("stats", "beta-law", "--n", "5000", "--alpha", "0.001")
    assert r.code == 0 and r.err == ""
    ref = beta_law_reference(5000, 5, 0.95)  # scipy.stats.beta(5, 4996)
    assert "K=5" in r.out and "5/5001" in r.out and "Beta(5, 4996)" in r.out
    assert mentions(r.out, 5 / 5001)
    assert mentions(r.out, ref["interval"][0]) and mentions(r.out, ref["interval"][1])
    for q in UPPER_KEYS:
        assert mentions(r.out, ref["upper"][q])
    assert mentions(r.out, ref["prob_exceeds_certified"], rel=2e-3)  # printed as 0.441


@pytest.mark.parametrize("alpha", ["6/5001", "6/(5000+1)", "0.0011997600479904018"])
def test_alpha_as_a_fraction_or_its_rounded_decimal_gives_k_6(calib, alpha):
    # 6/5001 = 0.00119976004799040191...; its 17-digit decimal times 5001 is 6 up to rounding (docs/architecture.md
    # tolerance 1e-9), so K = 6 and alpha_N = 6/5001 for 5000 controls.
    r = calib("stats", "beta-law", "--n", "5000", "--alpha", alpha, "--json").json()
    assert r["k"] == 6
    assert r["certified_alpha"] == pytest.approx(6 / 5001, rel=1e-15)
    assert_law_matches(r, 5000, 6, 0.95)


def test_a_truncated_decimal_below_the_grid_point_gives_k_5(calib):
    # 0.0011997 * 5001 = 5.99969..., well outside the 1e-9 tolerance, so K = floor(...) = 5.
    r = calib("stats", "beta-law", "--n", "5000", "--alpha", "0.0011997", "--json").json()
    assert r["k"] == 5


def test_beta_law_with_one_control_is_uniform(calib):
    # N = 1, alpha = 0.5: K = floor(0.5 * 2) = 1, law Beta(1, 1) = Uniform(0, 1): mean 1/2, central 95 %
    # interval [0.025, 0.975], quantiles equal their level, P(alpha* > 1/2) = 1/2.
    r = calib("stats", "beta-law", "--n", "1", "--alpha", "0.5", "--json").json()
    assert r["k"] == 1 and r["certified_alpha"] == 0.5
    assert r["mean"] == pytest.approx(0.5)
    assert r["interval"] == pytest.approx([0.025, 0.975], rel=1e-12)
    assert r["upper"] == pytest.approx({"0.9": 0.9, "0.95": 0.95, "0.99": 0.99}, rel=1e-12)
    assert r["prob_exceeds_certified"] == pytest.approx(0.5, rel=1e-12)


def test_beta_law_with_k_equal_to_n(calib):
    # N = 4, alpha = 0.99: K = floor(0.99 * 5) = 4 = N, law Beta(4, 1) with cdf x^4: central interval
    # [0.025^(1/4), 0.975^(1/4)], P(alpha* > 4/5) = 1 - (4/5)^4 = 0.5904.
    r = calib("stats", "beta-law", "--n", "4", "--alpha", "0.99", "--json").json()
    assert r["k"] == 4 and r["certified_alpha"] == pytest.approx(0.8)
    assert r["interval"] == pytest.approx([0.025 ** 0.25, 0.975 ** 0.25], rel=1e-12)
    assert r["upper"]["0.99"] == pytest.approx(0.99 ** 0.25, rel=1e-12)
    assert r["prob_exceeds_certified"] == pytest.approx(1 - 0.8**4, rel=1e-12)


def test_beta_law_confidence_sets_the_interval(calib):
    r = calib("stats", "beta-law", "--n", "2000", "--alpha", "0.01", "--confidence", "0.8", "--json").json()
    # K = floor(0.01 * 2001) = 20; central 80 % interval of scipy.stats.beta(20, 1981).
    assert r["k"] == 20
    assert_law_matches(r, 2000, 20, 0.8)


def test_beta_law_k_zero_is_a_result_not_an_error(calib):
    # N = 10, alpha = 0.01: K = floor(0.01 * 11) = 0, no threshold exists.
    r = calib("stats", "beta-law", "--n", "10", "--alpha", "0.01", "--json").json()
    assert r["k"] == 0 and r["certifiable"] is False
    assert r["mean"] is None and r["interval"] is None and r["upper"] is None
    assert r["prob_exceeds_certified"] is None
    human = calib("stats", "beta-law", "--n", "10", "--alpha", "0.01")
    assert human.code == 0 and "cannot certify" in human.out and "K" in human.out


ALPHA_COMMANDS = {
    "beta-law": ["stats", "beta-law", "--n", "100"],
    "conformal": ["stats", "conformal", "--controls", "{controls}"],
    "plan": ["stats", "plan", "--upper", "0.5"],
}


@pytest.mark.parametrize("command", sorted(ALPHA_COMMANDS))
@pytest.mark.parametrize("alpha", ["0", "1", "1.5", "-0.1", "abc", "nan", "1/0"])
def test_alpha_outside_the_open_unit_interval_is_rejected(calib, tmp_path, command, alpha):
    controls = write_scores(tmp_path / "c.txt", np.linspace(0, 1, 50))
    args = [a.format(controls=controls) for a in ALPHA_COMMANDS[command]]
    err = calib(*args, f"--alpha={alpha}").one_line_error()
    assert "alpha" in err
    assert repr(alpha) in err  # the message quotes the bad value


# --- conformal --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scores() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240501)
    # 5000 continuous null controls (no ties) and 400 members skewed towards high scores.
    return {"controls": rng.random(5000), "members": rng.random(400) ** 0.05}


def kth_largest(values: np.ndarray, k: int) -> float:
    return float(np.sort(values)[values.size - k])


@pytest.mark.parametrize(
    ("alpha", "k"),
    [
        ("0.001", 5),  # App. C.1: floor(0.001 * 5001) = 5
        ("6/5001", 6),
        ("0.0011997600479904018", 6),  # 6/5001 as a rounded decimal
        ("0.05", 250),  # floor(0.05 * 5001) = floor(250.05) = 250
    ],
)
def test_conformal_operating_point(calib, tmp_path, scores, alpha, k):
    controls = write_scores(tmp_path / "controls.txt", scores["controls"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", alpha, "--json").json()
    assert CONFORMAL_KEYS <= r.keys()
    assert r["n_controls"] == 5000
    assert r["k"] == k
    assert r["certified_alpha"] == pytest.approx(k / 5001, rel=1e-15)
    assert r["threshold"] == kth_largest(scores["controls"], k)
    # Distinct scores: exactly K - 1 controls lie strictly above the K-th largest, so the in-sample FPR
    # is (K - 1)/N; App. C.1 prints 4/5000 for K = 5.
    assert r["in_sample_fpr"] == pytest.approx((k - 1) / 5000, rel=1e-15)
    assert r["alpha_dagger"] == 1.0  # no atom: the lowest score is unique
    assert r["certifiable"] is True
    assert_law_matches(r["fpr_law"], 5000, k, 0.95)
    assert "members" not in r


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_conformal_members_give_the_calibrated_rate(calib, tmp_path, scores, confidence):
    controls = write_scores(tmp_path / "controls.txt", scores["controls"])
    members = write_scores(tmp_path / "members.txt", scores["members"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "6/5001", "--members", members,
              "--confidence", confidence, "--json").json()
    m = r["members"]
    assert MEMBER_KEYS <= m.keys()
    threshold = kth_largest(scores["controls"], 6)
    claims = int(np.sum(scores["members"] > threshold))  # strict ">" claims
    assert 0 < claims < 400  # the fixture makes this a non-trivial case
    certified = 6 / 5001
    # App. D.1: calibrated rate = member rate - alpha_N; band = Clopper-Pearson shifted down by alpha_N.
    low, high = proportion_confint(claims, 400, alpha=1 - confidence, method="beta")  # statsmodels
    assert m["n"] == 400 and m["claims"] == claims
    assert m["member_rate"] == pytest.approx(claims / 400, rel=1e-15)
    assert m["calibrated_rate"] == pytest.approx(claims / 400 - certified, rel=1e-12)
    assert m["low"] == pytest.approx(low - certified, rel=1e-9)
    assert m["high"] == pytest.approx(high - certified, rel=1e-9)
    assert_law_matches(r["fpr_law"], 5000, 6, confidence)


@pytest.mark.parametrize("alpha", ["0.001", "6/5001", "0.05"])
@pytest.mark.parametrize("atom", [False, True])
def test_conformal_json_is_the_records_of_conformal_test(calib, tmp_path, scores, alpha, atom):
    """One code path: every number ``calib stats conformal --json`` prints is ``conformal_test``'s."""
    from calib.stats import conformal_test

    control_scores = np.where(scores["controls"] < 0.3, 0.0, scores["controls"]) if atom else scores["controls"]
    controls = write_scores(tmp_path / "controls.txt", control_scores)
    members = write_scores(tmp_path / "members.txt", scores["members"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", alpha, "--members", members,
              "--confidence", "0.9", "--json").json()
    expected = json.loads(json.dumps(conformal_test(control_scores, alpha, scores["members"], confidence=0.9)))
    assert r["at_atom"] is expected["at_atom"]
    law = r.pop("fpr_law")
    assert law == {key: expected["fpr_law"][key] for key in law}
    assert LAW_KEYS <= law.keys()
    assert r == {key: expected[key] for key in r}
    assert set(expected) - set(r) == {"method", "fpr_law"}  # the CLI leaves out only the method's name


def test_conformal_summary_mentions_the_key_numbers(calib, tmp_path, scores):
    controls = write_scores(tmp_path / "controls.txt", scores["controls"])
    members = write_scores(tmp_path / "members.txt", scores["members"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "6/5001", "--members", members)
    assert r.code == 0 and r.err == ""
    threshold = kth_largest(scores["controls"], 6)
    claims = int(np.sum(scores["members"] > threshold))
    low, high = proportion_confint(claims, 400, alpha=0.05, method="beta")
    assert "K=6" in r.out and "5000 controls" in r.out
    assert mentions(r.out, 6 / 5001)  # certified alpha_N
    assert mentions(r.out, threshold, rel=1e-5)
    assert f"{claims} of 400" in r.out
    assert mentions(r.out, claims / 400 - 6 / 5001)
    assert mentions(r.out, low - 6 / 5001) and mentions(r.out, high - 6 / 5001)


def test_conformal_k_zero_is_a_clear_result(calib, tmp_path, scores):
    # 50 controls at alpha = 0.001: K = floor(0.001 * 51) = 0. Certifying 0.001 at all needs
    # alpha (N + 1) >= 1, i.e. N >= 999.
    controls = write_scores(tmp_path / "controls.txt", scores["controls"][:50])
    members = write_scores(tmp_path / "members.txt", scores["members"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "0.001", "--members", members,
              "--json").json()
    assert r["k"] == 0 and r["certifiable"] is False
    assert r["threshold"] is None and r["in_sample_fpr"] is None
    assert r["certified_alpha"] == 0
    assert r["members"] is None
    assert r["fpr_law"]["mean"] is None and r["fpr_law"]["interval"] is None
    assert "999" in r["note"]
    human = calib("stats", "conformal", "--controls", controls, "--alpha", "0.001", "--members", members)
    assert human.code == 0 and human.err == ""
    assert "K=0" in human.out and "cannot certify" in human.out and "999" in human.out


def test_conformal_with_one_control(calib, tmp_path):
    # N = 1, alpha = 0.5: K = floor(0.5 * 2) = 1, threshold = the only score, alpha_N = 1/2, and no
    # control lies above it (in-sample FPR 0); the law is Beta(1, 1).
    controls = write_lines(tmp_path / "one.txt", ["0.3"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "0.5", "--json").json()
    assert (r["n_controls"], r["k"], r["threshold"], r["in_sample_fpr"]) == (1, 1, 0.3, 0.0)
    assert r["certified_alpha"] == 0.5
    assert_law_matches(r["fpr_law"], 1, 1, 0.95)


def test_conformal_all_scores_tied(calib, tmp_path):
    # 20 controls all 0.5, alpha = 0.1: K = floor(0.1 * 21) = 2, threshold 0.5; no control is strictly
    # above it (in-sample FPR 0). The lowest score is an atom with nothing above: alpha_dagger = 0/20,
    # so alpha_N = 2/21 > alpha_dagger and the threshold sits on the atom.
    controls = write_lines(tmp_path / "tied.txt", ["0.5"] * 20)
    members = write_lines(tmp_path / "members.txt", ["0.5", "0.5", "0.6"])
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "0.1", "--members", members,
              "--json").json()
    assert r["k"] == 2 and r["threshold"] == 0.5 and r["in_sample_fpr"] == 0.0
    assert r["alpha_dagger"] == 0.0
    assert r["at_atom"] is True and r["fpr_law"]["exact"] is False
    assert r["members"]["claims"] == 1  # ties with the threshold are not claims (strict ">")


def test_conformal_alpha_dagger_with_an_atom_of_zeros(calib, tmp_path):
    # 10 zeros and 90 distinct positive scores: the lowest score 0 is an atom, alpha_dagger = 90/100.
    values = np.concatenate([np.zeros(10), np.arange(1, 91) / 100])
    controls = write_scores(tmp_path / "atom.txt", values)
    below = calib("stats", "conformal", "--controls", controls, "--alpha", "0.5", "--json").json()
    # K = floor(0.5 * 101) = 50; the 50th largest of 0.01..0.90 is 0.41; 49 controls lie above it.
    assert below["alpha_dagger"] == pytest.approx(0.9)
    assert below["k"] == 50 and below["threshold"] == pytest.approx(0.41)
    assert below["in_sample_fpr"] == pytest.approx(0.49)
    assert below["at_atom"] is False and below["fpr_law"]["exact"] is True
    above = calib("stats", "conformal", "--controls", controls, "--alpha", "0.95", "--json").json()
    # K = floor(0.95 * 101) = 95 > 90 positives, so the threshold is 0 (on the atom); alpha_N = 95/101
    # = 0.9406 > 0.9 = alpha_dagger; the 90 positive controls lie above it.
    assert above["k"] == 95 and above["threshold"] == 0.0
    assert above["in_sample_fpr"] == pytest.approx(0.9)
    assert above["at_atom"] is True and above["fpr_law"]["exact"] is False


# --- score files ------------------------------------------------------------------------------------


def _txt(path: Path, values: np.ndarray) -> list[str]:
    # Blank lines and comments are skipped anywhere in a plain-text score file.
    lines = ["# controls, one per line", ""]
    for i, x in enumerate(values):
        lines.append(repr(float(x)))
        if i % 7 == 0:
            lines.extend(["", "  # a comment  "])
    write_lines(path, lines)
    return []


def _csv(path: Path, values: np.ndarray) -> list[str]:
    pl.DataFrame({"id": [f"s{i}" for i in range(values.size)], "score": values}).write_csv(path)
    return []


def _csv_other(path: Path, values: np.ndarray) -> list[str]:
    # The 'score' column holds text, so only --column other can succeed.
    pl.DataFrame({"score": ["not a score"] * values.size, "other": values}).write_csv(path)
    return ["--column", "other"]


def _tsv(path: Path, values: np.ndarray) -> list[str]:
    pl.DataFrame({"score": values}).write_csv(path, separator="\t")
    return []


def _parquet(path: Path, values: np.ndarray) -> list[str]:
    pl.DataFrame({"score": values, "label": ["c"] * values.size}).write_parquet(path)
    return []


def _jsonl(path: Path, values: np.ndarray) -> list[str]:
    path.write_text("".join(json.dumps({"score": float(x), "id": i}) + "\n" for i, x in enumerate(values)))
    return []


WRITERS = {
    "controls.txt": _txt,
    "controls.csv": _csv,
    "other.csv": _csv_other,
    "controls.tsv": _tsv,
    "controls.parquet": _parquet,
    "controls.jsonl": _jsonl,
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_every_score_file_format_gives_the_same_calibration(calib, tmp_path, name):
    values = np.random.default_rng(7).normal(size=999)
    path = tmp_path / name
    extra = WRITERS[name](path, values)
    r = calib("stats", "conformal", "--controls", path, "--alpha", "0.01", *extra, "--json").json()
    # K = floor(0.01 * 1000) = 10; threshold the 10th largest of the 999 scores.
    assert r["n_controls"] == 999
    assert r["k"] == 10
    assert r["threshold"] == kth_largest(values, 10)


def test_member_file_formats_can_differ_from_the_controls(calib, tmp_path):
    controls = write_scores(tmp_path / "c.txt", np.arange(1, 100) / 100)  # 0.01 .. 0.99
    members = tmp_path / "m.parquet"
    pl.DataFrame({"score": [0.5, 0.95, 0.96, 0.99]}).write_parquet(members)
    r = calib("stats", "conformal", "--controls", controls, "--alpha", "0.05", "--members", members,
              "--json").json()
    # K = floor(0.05 * 100) = 5, threshold = 5th largest of 0.01..0.99 = 0.95; claims: 0.96, 0.99.
    assert r["threshold"] == pytest.approx(0.95)
    assert r["members"]["claims"] == 2 and r["members"]["n"] == 4


BAD_FILES = [
    # (file name, lines of the file, the line holding the bad value)
    ("nan.txt", ["0.1", "", "# a comment", "0.2", "nan", "0.3"], "nan"),
    ("inf.txt", ["0.1", "inf"], "inf"),
    ("minus_inf.txt", ["# scores", "-inf", "0.2"], "-inf"),
    ("overflow.txt", ["0.1", "0.2", "1e400"], "1e400"),  # float("1e400") is inf
    ("word.txt", ["0.1", "0.2", "", "abc", "0.3"], "abc"),
    ("nan.csv", ["id,score", "a,0.1", "b,0.2", "c,nan"], "c,nan"),
    ("inf.csv", ["id,score", "a,0.1", "b,inf", "c,0.3"], "b,inf"),
    ("empty_value.csv", ["id,score", "a,0.1", "b,", "c,0.3"], "b,"),
    ("word.csv", ["id,score", "a,0.1", "b,0.2", "c,0.3", "d,x"], "d,x"),
    ("nan.tsv", ["id\tscore", "a\t0.1", "b\tNaN"], "b\tNaN"),
    ("null.jsonl", ['{"score": 0.1}', '{"score": null}', '{"score": 0.3}'], '{"score": null}'),
    ("word.jsonl", ['{"score": 0.1}', '{"score": 0.2}', '{"score": "x"}'], '{"score": "x"}'),
]


@pytest.mark.parametrize("role", ["--controls", "--members"])
@pytest.mark.parametrize(("name", "lines", "bad"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_values_name_the_file_and_the_line(calib, tmp_path, role, name, lines, bad):
    path = write_lines(tmp_path / name, lines)
    line = lines.index(bad) + 1  # 1-based; for CSV the header is line 1, so data row i is line i + 2
    good = write_scores(tmp_path / "good.txt", np.linspace(0, 1, 100))
    files = {"--controls": good, "--members": good, role: path}
    err = calib("stats", "conformal", "--controls", files["--controls"], "--members", files["--members"],
                "--alpha", "0.1").one_line_error()
    assert f"{path}:{line}:" in err


def test_csv_line_is_row_plus_two(calib, tmp_path):
    # A 200-row CSV with the NaN in 0-based data row 150: line 150 + 2 = 152 (header on line 1).
    rows = [f"{i},{i / 1000}" for i in range(200)]
    rows[150] = "150,nan"
    path = write_lines(tmp_path / "long.csv", ["id,score", *rows])
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert f"{path}:152:" in err


def test_parquet_bad_value_names_the_row(calib, tmp_path):
    path = tmp_path / "nan.parquet"
    pl.DataFrame({"score": [0.1, 0.2, float("nan"), 0.4]}).write_parquet(path)
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert str(path) in err and "row 3" in err  # the third row (1-based) holds the NaN


def test_non_finite_table_value_is_written_plainly(calib, tmp_path):
    path = write_lines(tmp_path / "controls.csv", ["id,score", "a,0.1", "b,nan"])
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    # docs/cli.md: "calib: error: controls.csv:19: score nan in column 'score' is not finite; ..."
    assert f"{path}:3: score nan in column 'score' is not finite" in err


def test_jsonl_line_counts_blank_lines(calib, tmp_path):
    lines = ['{"score": 0.1}', "", '{"score": "x"}']
    path = write_lines(tmp_path / "blank.jsonl", lines)
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert f"{path}:3:" in err  # "x" is on the third line of the file


def _empty_parquet(path: Path) -> None:
    pl.DataFrame({"score": []}, schema={"score": pl.Float64}).write_parquet(path)


EMPTY_FILES = {
    "empty.txt": lambda p: p.write_text(""),
    "comments_only.txt": lambda p: p.write_text("# nothing yet\n\n   \n"),
    "header_only.csv": lambda p: p.write_text("id,score\n"),
    "zero_bytes.csv": lambda p: p.write_text(""),
    "empty.parquet": _empty_parquet,
    "empty.jsonl": lambda p: p.write_text(""),
}


@pytest.mark.parametrize("name", sorted(EMPTY_FILES))
def test_empty_files_are_rejected(calib, tmp_path, name):
    path = tmp_path / name
    EMPTY_FILES[name](path)
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert str(path) in err


@pytest.mark.parametrize("name", ["missing.txt", "missing.csv", "missing.parquet", "missing.jsonl"])
def test_missing_files_are_rejected(calib, tmp_path, name):
    path = tmp_path / name
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert str(path) in err


def test_missing_members_file_is_rejected(calib, tmp_path):
    controls = write_scores(tmp_path / "c.txt", np.linspace(0, 1, 100))
    err = calib("stats", "conformal", "--controls", controls, "--members", tmp_path / "nope.txt",
                "--alpha", "0.1").one_line_error()
    assert "nope.txt" in err


def test_missing_column_names_the_column_and_the_choices(calib, tmp_path):
    path = write_lines(tmp_path / "c.csv", ["id,value", "a,0.1"])
    err = calib("stats", "conformal", "--controls", path, "--alpha", "0.1").one_line_error()
    assert "'score'" in err and "'value'" in err and "--column" in err


# --- budget -----------------------------------------------------------------------------------------


def test_budget_reproduces_the_extraction_paper(calib):
    r = calib("stats", "budget", "--p", "1e-21", "--confidence", "0.95", "--json").json()
    assert {"p", "confidence", "attempts"} <= r.keys()
    assert r["p"] == 1e-21 and r["confidence"] == 0.95
    # Extraction paper §6 / App. F.1: p = 10^-21 needs about 3 x 10^21 attempts for 95 %.
    assert r["attempts"] == pytest.approx(3e21, rel=2e-3)
    # 50-digit mpmath: ceil(ln(1 - c) / ln(1 - p)).
    with mpmath.workdps(50):
        exact = mpmath.ceil(mpmath.log(1 - mpmath.mpf("0.95")) / mpmath.log1p(-mpmath.mpf("1e-21")))
    assert r["attempts"] == pytest.approx(float(exact), rel=1e-12)
    # "nearly seven times the age of the universe at 1,000 queries per second" (13.8e9 years,
    # 365.25 days a year).
    universes = r["attempts"] / 1000 / (365.25 * 86400) / 13.8e9
    assert 6.5 < universes < 7


def test_budget_attempts_are_the_fewest_that_reach_the_confidence(calib):
    r = calib("stats", "budget", "--p", "0.5", "--confidence", "0.9", "--json").json()
    # Brute force: the smallest n with 1 - 0.5^n >= 0.9 (1 - 1/16 = 0.9375 at n = 4, 0.875 at n = 3).
    n = next(n for n in range(1, 100) if 1 - 0.5**n >= 0.9)
    assert r["attempts"] == n == 4
    assert isinstance(r["attempts"], int)


@pytest.mark.parametrize(
    ("p", "attempts", "expected"),
    [
        ("0.5", "3", 0.875),  # 1 - 0.5^3
        ("1e-21", "1e21", 1 - math.exp(-1)),  # 1 - (1 - 1/n)^n -> 1 - e^-1
        ("1e-300", "1e299", -math.expm1(-0.1)),  # 1 - exp(n ln(1 - p)) = 1 - e^-0.1; 1 - p rounds to 1
        ("1", "5", 1.0),
    ],
)
def test_budget_probability_in_closed_form(calib, p, attempts, expected):
    r = calib("stats", "budget", "--p", p, "--attempts", attempts, "--json").json()
    assert {"p", "attempts", "probability"} <= r.keys()
    assert r["p"] == float(p) and r["attempts"] == float(attempts)
    assert r["probability"] == pytest.approx(expected, rel=1e-12)


def test_budget_summaries_mention_the_numbers(calib):
    needed = calib("stats", "budget", "--p", "1e-21", "--confidence", "0.95")
    assert needed.code == 0 and needed.err == ""
    assert mentions(needed.out, -math.log(0.05) / 1e-21, rel=1e-5)  # 2.99573e21, closed form -ln(0.05)/p
    assert mentions(needed.out, 1e-21) and "95%" in needed.out
    prob = calib("stats", "budget", "--p", "1e-21", "--attempts", "1e21")
    assert prob.code == 0
    assert mentions(prob.out, 1 - math.exp(-1), rel=1e-5) and mentions(prob.out, 1e21)


@pytest.mark.parametrize(
    "args",
    [
        ["--p", "1e-21"],  # neither
        ["--p", "1e-21", "--confidence", "0.95", "--attempts", "100"],  # both
    ],
)
def test_budget_needs_exactly_one_of_confidence_and_attempts(calib, args):
    err = calib("stats", "budget", *args).one_line_error()
    assert "--confidence" in err and "--attempts" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--p", "0", "--confidence", "0.95"], "p"),
        (["--p", "1.5", "--confidence", "0.95"], "p"),
        (["--p", "0.1", "--confidence", "1"], "confidence"),
        (["--p", "0.1", "--attempts", "0.5"], "attempts"),
        (["--p", "0.1", "--attempts", "inf"], "attempts"),
    ],
)
def test_budget_rejects_bad_values(calib, args, needle):
    err = calib("stats", "budget", *args).one_line_error()
    # a value the option's type refuses names the option; one only the statistic refuses names its parameter
    assert f"Invalid value for '--{needle}'" in err or err.removeprefix("calib: error: ").startswith(needle)


# --- plan -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("controls", "fwer", "expected"),
    [
        (5000, "0.05", 250),  # App. C.5: floor(0.05 * 5001) = 250 candidates at 5 % FWER
        (5000, "0.001", 5),  # App. C.5: floor(0.001 * 5001) = 5 at 0.1 %
        (10, "0.01", 0),  # floor(0.01 * 11) = 0: not even one candidate
    ],
)
def test_plan_max_candidates(calib, controls, fwer, expected):
    r = calib("stats", "plan", "--controls", controls, "--fwer", fwer, "--json").json()
    assert "max_candidates" in r
    assert r["max_candidates"] == expected == math.floor(Fraction(fwer) * (controls + 1))
    assert r["n_controls"] == controls and r["fwer"] == float(fwer)
    if expected:
        assert r["per_candidate_alpha"] == pytest.approx(float(fwer) / expected, rel=1e-15)
        assert r["per_candidate_alpha"] >= 1 / (controls + 1)  # each candidate's level is certifiable
    else:
        assert r["per_candidate_alpha"] is None


@pytest.mark.parametrize(
    ("candidates", "fwer"),
    [(5000, "0.001"), (250, "0.05"), (1, "0.05")],
)
def test_plan_min_controls(calib, candidates, fwer):
    r = calib("stats", "plan", "--candidates", candidates, "--fwer", fwer, "--json").json()
    assert "min_controls" in r
    # The fewest N with 1/(N+1) <= fwer/m: N = ceil(m / fwer) - 1, in exact rational arithmetic.
    expected = math.ceil(candidates / Fraction(fwer)) - 1
    assert r["min_controls"] == expected
    assert r["per_candidate_alpha"] == pytest.approx(float(fwer) / candidates, rel=1e-15)


def test_plan_min_controls_matches_the_paper(calib):
    # App. C.5: 0.1 % FWER across 5,000 candidates needs about five million controls: 5000/0.001 - 1.
    r = calib("stats", "plan", "--candidates", "5000", "--fwer", "0.001", "--json").json()
    assert r["min_controls"] == 4_999_999


def test_plan_summaries_mention_the_numbers(calib):
    most = calib("stats", "plan", "--controls", "5000", "--fwer", "0.05")
    assert most.code == 0 and "250" in most.out and "5000" in most.out and mentions(most.out, 0.05)
    fewest = calib("stats", "plan", "--candidates", "5000", "--fwer", "0.001")
    assert fewest.code == 0 and "4999999" in fewest.out.replace(",", "")


def brute_force_min_controls(alpha: str, upper: float, confidence: float, limit: int) -> int:
    """Scan N = 1..limit for the first N with K = floor(alpha (N+1)) >= 1 and P(alpha* <= upper) >= c.

    P(Beta(K, N-K+1) <= u) = P(Binomial(N, u) >= K) (the Beta-binomial identity), from scipy.stats.binom.
    """
    a = Fraction(alpha)
    n = np.arange(1, limit + 1, dtype=np.int64)
    k = (n + 1) * a.numerator // a.denominator  # exact floor(alpha (N+1))
    ok = (k >= 1) & (st.binom.sf(k - 1, n, upper) >= confidence)
    return int(n[np.argmax(ok)])


@pytest.mark.parametrize(
    ("alpha", "upper", "confidence"),
    [("0.001", 0.002, 0.95), ("0.01", 0.02, 0.9), ("0.05", 0.06, 0.95)],
)
def test_plan_beta_law_mode_matches_a_brute_force_scan(calib, alpha, upper, confidence):
    r = calib("stats", "plan", "--alpha", alpha, "--upper", upper, "--confidence", confidence, "--json").json()
    assert {"alpha", "upper", "confidence", "min_controls", "k", "certified_alpha", "achieved_upper"} <= r.keys()
    n = brute_force_min_controls(alpha, upper, confidence, limit=40_000)
    assert r["min_controls"] == n
    k = (n + 1) * Fraction(alpha).numerator // Fraction(alpha).denominator
    assert r["k"] == k
    assert r["certified_alpha"] == pytest.approx(k / (n + 1), rel=1e-15)
    assert r["achieved_upper"] == pytest.approx(st.beta.ppf(confidence, k, n - k + 1), rel=1e-9)
    assert r["achieved_upper"] <= upper


def test_plan_beta_law_example_in_closed_form(calib):
    # K = 1 for N in 999..1998 and Beta(1, N) has cdf 1 - (1 - x)^N; 1 - 0.998^N >= 0.95 first holds at
    # N = 1497 (0.998^1496 = 0.05003, 0.998^1497 = 0.04993).
    r = calib("stats", "plan", "--alpha", "0.001", "--upper", "0.002", "--json").json()
    assert r["min_controls"] == 1497 and r["k"] == 1
    human = calib("stats", "plan", "--alpha", "0.001", "--upper", "0.002")
    assert human.code == 0 and "1497" in human.out and "K=1" in human.out


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--fwer", "0.05"],
        ["--controls", "5000"],
        ["--candidates", "5000"],
        ["--controls", "5000", "--candidates", "10", "--fwer", "0.05"],
        ["--alpha", "0.001"],
        ["--upper", "0.002"],
        ["--alpha", "0.001", "--upper", "0.002", "--fwer", "0.05"],
        ["--alpha", "0.001", "--upper", "0.002", "--controls", "5000"],
        ["--alpha", "0.001", "--upper", "0.002", "--candidates", "5000"],
        ["--alpha", "0.001", "--upper", "0.0005"],  # upper must exceed alpha
        ["--controls", "5000", "--fwer", "1.5"],
        ["--controls", "0", "--fwer", "0.05"],
        ["--candidates", "0", "--fwer", "0.05"],
    ],
)
def test_plan_rejects_wrong_combinations(calib, args):
    err = calib("stats", "plan", *args).one_line_error()
    assert err.startswith(("calib: error: ", "calib stats plan: error: Invalid value for '--"))


@pytest.mark.parametrize(
    ("command", "args", "needle"),
    [
        # counts beyond 10^12: scipy's Beta law returns NaN quantiles past about 10^15 (fpr_law(10**18, ...)
        # gives interval (nan, nan)), and planning 10^14 candidates takes tens of seconds
        ("beta-law", ["--n", "1e22", "--alpha", "0.1"], "'--n': '1e22' is above 1e12"),
        ("beta-law", ["--n", "10000000000000000000000", "--alpha", "0.1"], "'--n'"),
        ("interval", ["--k", "1", "--n", str(10**12 + 1)], "'--n'"),
        ("plan", ["--candidates", "1e23", "--fwer", "0.05"], "'--candidates'"),
        ("plan", ["--controls", "2e12", "--fwer", "0.05"], "'--controls'"),
        ("census", ["--scores", "s.csv", "--controls", "c.txt", "--length", "1e13"], "'--length'"),
        ("beta-law", ["--n", "2.5e0", "--alpha", "0.1"], "'2.5e0' is not a whole number"),
        ("beta-law", ["--n", "nan", "--alpha", "0.1"], "'nan' is not a whole number"),
        ("interval", ["--k", "1", "--n", "10", "--confidence", "nan"], "'--confidence': 'nan' is not in (0, 1)"),
        ("budget", ["--p", "nan", "--attempts", "10"], "'--p': 'nan' is not in (0, 1]"),
        ("plan", ["--controls", "100", "--fwer", "inf"], "'--fwer': 'inf'"),
    ],
)
def test_counts_and_probabilities_are_bounded_by_the_option_types(calib, command, args, needle):
    err = calib("stats", command, *args).one_line_error()
    assert err.startswith(f"calib stats {command}: error: Invalid value for ")
    assert needle in err


def test_counts_may_be_written_in_e_notation_up_to_the_bound(calib):
    assert calib("stats", "beta-law", "--n", "5e3", "--alpha", "0.001", "--json").json()["n"] == 5000
    assert calib("stats", "interval", "--k", "0", "--n", "1e12", "--json").json()["n"] == 10**12


def test_plan_refuses_candidates_needing_more_than_the_bound_of_controls(calib):
    # 10^11 candidates at FWER 0.05 need about 2e12 controls (Bonferroni: N = ceil(m/delta) - 1)
    err = calib("stats", "plan", "--candidates", "1e11", "--fwer", "0.05").one_line_error()
    assert err.startswith("calib: error: --candidates 100000000000 at --fwer 0.05 needs about 2e+12 controls")
    assert "lower --candidates or raise --fwer" in err


# --- census -----------------------------------------------------------------------------------------

# A hand-built document: half-open character windows [start, end) with probabilities.
WINDOWS = [
    (0, 10, 5e-4),  # above 1e-4
    (5, 15, 3e-4),  # above, overlaps the first: together they cover [0, 15), 15 characters
    (20, 30, 1e-4),  # equal to the threshold: not above (strict >)
    (40, 50, 2e-3),  # above: [40, 50), 10 characters
    (45, 48, 0.5),  # above, nested inside [40, 50): adds nothing to coverage
    (60, 70, 0.01),  # above: [60, 70), 10 characters
    (80, 90, 1e-6),  # below
]
# The control's largest window score 3e-5 has log10 -4.52; rounded up to the next power of ten the
# threshold is 1e-4.
CONTROLS = [1e-6, 3e-5, 2.5e-5]


def write_windows(path: Path, windows: list[tuple[int, int, float]], column: str = "score") -> Path:
    starts, ends, values = zip(*windows)
    frame = pl.DataFrame({"start": list(starts), "end": list(ends), column: list(values)})
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_csv(path)
    return path


def covered(windows: list[tuple[int, int, float]], keep) -> int:
    """Characters inside at least one kept window, by marking each character."""
    marks = np.zeros(max(e for _, e, _ in windows), dtype=bool)
    for s, e, v in windows:
        if keep(v):
            marks[s:e] = True
    return int(marks.sum())


@pytest.mark.parametrize("order", ["as listed", "reversed"])
def test_census_threshold_and_coverage(calib, tmp_path, order):
    # Windows may come in any order; the coverage of their union does not depend on it.
    scores = write_windows(tmp_path / "doc.csv", WINDOWS if order == "as listed" else WINDOWS[::-1])
    controls = write_scores(tmp_path / "control.txt", np.array(CONTROLS))
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--length", "100",
              "--json").json()
    assert CENSUS_KEYS <= r.keys()
    assert r["threshold"] == 1e-4  # 3e-5 rounded up to the next power of ten
    assert r["log10_threshold"] == -4
    assert r["max_control_score_log10"] == pytest.approx(math.log10(3e-5), rel=1e-12)
    assert r["windows_above"] == 5  # every window but the tie at 1e-4 and the 1e-6 one
    # [0, 15) + [40, 50) + [60, 70) = 15 + 10 + 10 = 35 of 100 characters.
    assert covered(WINDOWS, lambda v: v > 1e-4) == 35
    assert r["covered_characters"] == 35 and r["coverage"] == pytest.approx(0.35)
    assert r["max_margin"] == pytest.approx(math.log10(0.5 / 1e-4), rel=1e-12)  # log10(5000)
    assert r["coverage_within_budget"] is None and r["budget"] is None


def test_census_length_defaults_to_the_largest_window_end(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.csv", WINDOWS)
    controls = write_scores(tmp_path / "control.txt", np.array(CONTROLS))
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--json").json()
    assert r["document_length"] == 90  # the last window ends at 90
    assert r["coverage"] == pytest.approx(35 / 90)


def test_census_coverage_within_a_budget(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.csv", WINDOWS)
    controls = write_scores(tmp_path / "control.txt", np.array(CONTROLS))
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--length", "100",
              "--budget", "1000", "--json").json()
    # Generated at least once in n = 1000 queries with probability 0.95 when 1 - (1 - p)^1000 >= 0.95,
    # i.e. p >= 1 - 0.05^(1/1000) = 0.0029914: of the windows above 1e-4 only 0.5 on [45, 48) and
    # 0.01 on [60, 70) qualify (2e-3 does not), covering 3 + 10 = 13 of 100 characters.
    p_min = 1 - 0.05 ** (1 / 1000)
    assert 2e-3 < p_min < 0.01
    assert covered(WINDOWS, lambda v: v > 1e-4 and v >= p_min) == 13
    assert r["windows_within_budget"] == 2
    assert r["coverage_within_budget"] == pytest.approx(0.13)
    assert r["min_log10_score_within_budget"] == pytest.approx(math.log10(p_min), rel=1e-9)
    assert r["budget"] == 1000 and r["budget_confidence"] == 0.95
    assert r["coverage"] == pytest.approx(0.35)  # the budget does not change the plain coverage


def test_census_budget_counts_only_windows_above_the_threshold(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.csv", WINDOWS)
    controls = write_lines(tmp_path / "control.txt", ["0.05"])  # threshold: 0.05 rounded up to 0.1
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--length", "100",
              "--budget", "1000", "--json").json()
    # Above 0.1: only 0.5 on [45, 48). The window at 0.01 on [60, 70) would be generated within 1000
    # queries (0.01 >= 0.0029914) but is below the threshold, so it counts in neither coverage.
    assert r["windows_above"] == 1 and r["covered_characters"] == 3
    assert r["windows_within_budget"] == 1
    assert r["coverage_within_budget"] == pytest.approx(0.03)


def test_census_summary_mentions_the_key_numbers(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.csv", WINDOWS)
    controls = write_scores(tmp_path / "control.txt", np.array(CONTROLS))
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--length", "100",
              "--budget", "1000")
    assert r.code == 0 and r.err == ""
    assert "1e-4" in r.out  # the threshold
    assert "5 of 7 windows" in r.out
    assert "35 of 100 characters" in r.out and mentions(r.out, 0.35)
    assert mentions(r.out, 0.13) and "2 windows" in r.out


@pytest.mark.parametrize(
    ("control", "exponent"),
    [
        ("1e-4", -4),  # already a power of ten: stays
        ("1.0000001e-4", -3),  # just above 1e-4: up to 1e-3
        ("9.9e-5", -4),
        ("1", 0),
    ],
)
def test_census_threshold_rounds_up_to_a_power_of_ten(calib, tmp_path, control, exponent):
    scores = write_windows(tmp_path / "doc.csv", WINDOWS)
    controls = write_lines(tmp_path / "control.txt", [control])
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--json").json()
    assert r["log10_threshold"] == exponent
    assert r["threshold"] == float(f"1e{exponent}")
    above = sum(1 for _, _, v in WINDOWS if v > float(f"1e{exponent}"))
    assert r["windows_above"] == above


# Scores at the scale of the paper's books (App. E.1): log10 probabilities.
LOG10_WINDOWS = [
    (0, 100, -20.5),  # above 1e-21
    (50, 150, -21.0),  # equal to the threshold: not above
    (120, 200, -19.0),  # above; with [0, 100) covers 100 + 80 = 180 characters
    (300, 400, -25.0),  # below
]


def test_census_with_a_log10_score_table(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.parquet", LOG10_WINDOWS, column="log10_score")
    controls = tmp_path / "control.csv"
    # The largest control window is 10^-21.2; rounded up, the threshold is 10^-21.
    pl.DataFrame({"log10_score": [-23.5, -21.2, -22.0]}).write_csv(controls)
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--budget", "1e20",
              "--json").json()
    assert r["log10_threshold"] == -21 and r["threshold"] == 1e-21
    assert r["windows_above"] == 2
    assert r["document_length"] == 400
    assert covered(LOG10_WINDOWS, lambda v: v > -21) == 180
    assert r["coverage"] == pytest.approx(180 / 400)
    # n = 1e20 queries at 95 %: p >= -expm1(ln(0.05)/n) = 2.9957e-20, log10 -19.52; only the window at
    # 10^-19 on [120, 200) qualifies: 80 of 400 characters.
    p_min = -math.expm1(math.log(0.05) / 1e20)
    assert r["min_log10_score_within_budget"] == pytest.approx(math.log10(p_min), rel=1e-9)
    assert r["windows_within_budget"] == 1
    assert r["coverage_within_budget"] == pytest.approx(80 / 400)


def test_census_plain_log10_controls_need_the_flag(calib, tmp_path):
    scores = write_windows(tmp_path / "doc.csv", LOG10_WINDOWS, column="log10_score")
    controls = write_lines(tmp_path / "control.txt", ["-23.5", "-21.2"])
    r = calib("stats", "census", "--scores", scores, "--controls", controls, "--log10", "--json").json()
    assert r["log10_threshold"] == -21 and r["windows_above"] == 2
    # Without --log10 the plain file holds probabilities while the table holds log10 scores.
    err = calib("stats", "census", "--scores", scores, "--controls", controls).one_line_error()
    assert "control.txt" in err


@pytest.mark.parametrize("direction", ["log10 document, probability controls", "probability document, "
                                       "log10 controls"])
def test_census_with_mismatched_scales_is_rejected(calib, tmp_path, direction):
    if direction.startswith("log10"):
        scores = write_windows(tmp_path / "doc.csv", LOG10_WINDOWS, column="log10_score")
        controls = write_lines(tmp_path / "control.txt", ["1e-22"])
    else:
        scores = write_windows(tmp_path / "doc.csv", WINDOWS)
        controls = tmp_path / "control.csv"
        pl.DataFrame({"log10_score": [-5.0]}).write_csv(controls)
    err = calib("stats", "census", "--scores", scores, "--controls", controls, "--json").one_line_error()
    assert "log10" in err


def test_census_bad_window_value_names_the_line(calib, tmp_path):
    path = write_lines(tmp_path / "doc.csv", ["start,end,score", "0,10,0.5", "5,15,nan", "20,30,0.1"])
    controls = write_lines(tmp_path / "control.txt", ["1e-6"])
    err = calib("stats", "census", "--scores", path, "--controls", controls).one_line_error()
    assert f"{path}:3:" in err  # the NaN is on data row 1, line 1 + 2


@pytest.mark.parametrize(
    ("lines", "extra"),
    [
        (["start,score", "0,0.5"], []),  # no 'end' column
        (["start,end,value", "0,10,0.5"], []),  # no score column
        (["start,end,score", "0,10,0.5"], ["--length", "5"]),  # window ends past the document
        (["start,end,score", "10,10,0.5"], []),  # empty window
        (["start,end,score", "0,10,0.5"], ["--budget", "0.5"]),  # a budget is a whole number >= 1
        (["start,end,score", "0,10,1.5"], []),  # probabilities lie in (0, 1]
    ],
)
def test_census_rejects_bad_tables_and_options(calib, tmp_path, lines, extra):
    path = write_lines(tmp_path / "doc.csv", lines)
    controls = write_lines(tmp_path / "control.txt", ["1e-6"])
    calib("stats", "census", "--scores", path, "--controls", controls, *extra).one_line_error()


def test_census_missing_files_are_rejected(calib, tmp_path):
    controls = write_lines(tmp_path / "control.txt", ["1e-6"])
    err = calib("stats", "census", "--scores", tmp_path / "none.csv", "--controls", controls).one_line_error()
    assert "none.csv" in err
    doc = write_windows(tmp_path / "doc.csv", WINDOWS)
    err = calib("stats", "census", "--scores", doc, "--controls", tmp_path / "none.txt").one_line_error()
    assert "none.txt" in err
