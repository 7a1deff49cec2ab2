"""The matched-control conformal test (docs/architecture.md "Statistics"; extraction paper §4 and App. C).

A score counts as evidence of memorization only when it beats a threshold calibrated on N matched
non-member (control) scores produced by exactly the same procedure. With target level α:

* K = floor(α (N + 1)), with a relative tolerance of 1e-9 so that a rounded decimal of a grid point
  k/(N+1) gives k (α = 0.0011997600479904018 with N = 5000 gives K = 6);
* the certified level is α_N = K / (N + 1) (the marginal FPR bound, App. C.2);
* the threshold τ is the K-th largest control score, and a candidate is a claim iff its score > τ
  (strict: ties with τ are not claims, which is conservative);
* K = 0 means no claim is possible at that α with N controls: the result says so and has no threshold;
* the conformal p-value of a score s is (1 + #{controls ≥ s}) / (N + 1);
* the in-sample FPR is #{controls > τ} / N, a description of this control set with no guarantee;
* α† (atoms): where the lowest control score is shared by two or more controls, α† is the share of
  controls scoring above it, else 1; the Beta law of the realized FPR is exact below α†, and no level
  above α† can be certified (the threshold then sits on the atom and every larger α gives the same
  claims, App. C.4.2–C.4.4);
* the calibrated memorization rate is the share of member candidates scoring > τ minus α_N, with the
  member Clopper–Pearson interval shifted down by α_N (App. D.1).

Reference: Cooper et al., "Extractable Memorization From First Principles", App. C.1
(notation: N = 5000, α = 0.1 % gives K = 5, α_N = 5/5001, in-sample FPR 4/5000), C.2 (validity),
C.4 (the Beta law), D.1 (plotted intervals); Vovk, Gammerman & Shafer (2005), *Algorithmic Learning
in a Random World*, ch. 2 (conformal p-values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_confidence, check_finite_array
from calib.stats._levels import conformal_k, min_controls, parse_alpha
from calib.stats.beta_law import FprLaw, fpr_law
from calib.stats.intervals import clopper_pearson
from calib.stats.result import Result

__all__ = [
    "CalibratedRate",
    "ConformalCalibration",
    "alpha_dagger",
    "calibrate",
    "conformal_k",
    "conformal_test",
    "min_controls",
    "p_values",
    "parse_alpha",
    "sweep",
]

def alpha_dagger(controls: ArrayLike) -> float:
    """α†: the share of controls above the lowest control score when that score is an atom, else 1.

    The lowest score is an atom when two or more controls share it (e.g. the zeros of top-k
    scoring). The Beta law of the realized FPR is exact below α† (extraction paper App. C.4.2).
    """
    ascending = np.sort(check_finite_array("controls", controls))
    return _alpha_dagger_sorted(ascending)


def _alpha_dagger_sorted(ascending: NDArray[np.float64]) -> float:
    n = ascending.size
    if n < 2 or ascending[1] != ascending[0]:
        return 1.0
    above = n - int(np.searchsorted(ascending, ascending[0], side="right"))
    return above / n


@dataclass(frozen=True)
class CalibratedRate(Result):
    """Member claims at a calibrated threshold, and the calibrated memorization rate.

    ``calibrated_rate`` = ``member_rate`` − ``certified_alpha``; ``low``/``high`` are the member
    Clopper–Pearson interval shifted down by ``certified_alpha`` (not clipped at 0: a negative lower
    end says the rate is consistent with zero). The band holds the control set fixed; it does not
    include the variation of the threshold across control draws (extraction paper App. D.1).
    """

    n: int
    claims: int
    member_rate: float
    certified_alpha: float
    calibrated_rate: float
    low: float
    high: float
    confidence: float
    method: str = "clopper-pearson shifted by the certified alpha"


@dataclass(frozen=True)
class ConformalCalibration(Result):
    """A calibrated operating point of the conformal test.

    Attributes
    ----------
    alpha
        The requested target level.
    n_controls
        N, the number of control scores.
    k
        K = floor(α(N+1)) (with the 1e-9 tolerance).
    certified_alpha
        α_N = K/(N+1), the attained level the test certifies.
    threshold
        τ, the K-th largest control score; ``None`` when K = 0 (no claim possible).
    in_sample_fpr
        #{controls > τ}/N, descriptive only; ``None`` when K = 0.
    alpha_dagger
        α† of the control set (1 when the lowest score is no atom).
    certifiable
        False when K = 0.
    at_atom
        True when α_N > α†: τ sits on the atom, every larger α gives the same claims and the Beta law
        is no longer exact.
    note
        One sentence for a report saying what this operating point can and cannot claim.
    """

    alpha: float
    n_controls: int
    k: int
    certified_alpha: float
    threshold: float | None
    in_sample_fpr: float | None
    alpha_dagger: float
    certifiable: bool
    at_atom: bool
    note: str
    method: str = "conformal (matched controls, strict >)"

    def claims(self, scores: ArrayLike) -> NDArray[np.bool_]:
        """Which of ``scores`` are claims: score > τ. All False when K = 0."""
        arr = check_finite_array("scores", scores, allow_empty=True)
        if self.threshold is None:
            return np.zeros(arr.shape, dtype=bool)
        return arr > self.threshold

    def fpr_law(self, confidence: float = 0.95) -> FprLaw:
        """The law of the population FPR of this realized threshold (see :func:`fpr_law`)."""
        return fpr_law(self.n_controls, self.alpha, confidence, alpha_dagger=self.alpha_dagger)

    def calibrated_rate(self, member_scores: ArrayLike, confidence: float = 0.95) -> CalibratedRate | None:
        """The calibrated memorization rate of ``member_scores``; ``None`` when K = 0."""
        members = check_finite_array("member_scores", member_scores)
        if self.threshold is None:
            return None
        return _calibrated_rate(int(np.count_nonzero(members > self.threshold)), members.size,
                                self.certified_alpha, confidence)


def _calibrated_rate(claims: int, n: int, certified: float, confidence: float) -> CalibratedRate:
    ci = clopper_pearson(claims, n, confidence)
    band = ci.shifted(certified)
    return CalibratedRate(n=n, claims=claims, member_rate=ci.estimate, certified_alpha=certified,
                          calibrated_rate=band.estimate, low=band.low, high=band.high, confidence=ci.confidence)


def _note(k: int, n: int, alpha: float, certified: float, dagger: float) -> str:
    if k == 0:
        need = min_controls(alpha)
        return (
            f"cannot certify alpha={alpha:g} with N={n} controls: K=floor(alpha(N+1))=0, so no "
            f"threshold exists and no claim is possible; at least {need} controls are needed"
        )
    if certified > dagger:
        return (
            f"the certified level {certified:.6g} exceeds alpha_dagger={dagger:.6g}: the threshold sits "
            f"on the atom of tied lowest control scores, every larger alpha gives the same claims, and "
            f"the Beta law of the realized FPR is not exact"
        )
    return f"claims are scores > the {k}-th largest of {n} control scores; certified FPR {k}/{n + 1}"


def _calibration_from_sorted(ascending: NDArray[np.float64], alpha: float, dagger: float) -> ConformalCalibration:
    n = ascending.size
    k = conformal_k(alpha, n)
    certified = k / (n + 1)
    threshold: float | None = None
    in_sample: float | None = None
    if k >= 1:
        threshold = float(ascending[n - k])
        in_sample = (n - int(np.searchsorted(ascending, threshold, side="right"))) / n
    return ConformalCalibration(
        alpha=alpha,
        n_controls=n,
        k=k,
        certified_alpha=certified,
        threshold=threshold,
        in_sample_fpr=in_sample,
        alpha_dagger=dagger,
        certifiable=k >= 1,
        at_atom=k >= 1 and certified > dagger,
        note=_note(k, n, alpha, certified, dagger),
    )


def calibrate(controls: ArrayLike, alpha: float | str) -> ConformalCalibration:
    """Calibrate the conformal threshold on matched control scores at target level ``alpha``.

    Parameters
    ----------
    controls
        N ≥ 1 finite scores of matched non-members, produced by the same procedure as the candidates.
    alpha
        Target level in (0, 1), as a number or as ``"k/(N+1)"``.

    Returns
    -------
    ConformalCalibration
        K, α_N, τ (``None`` when K = 0), in-sample FPR, α† and a note for the report.
    """
    a = parse_alpha(alpha)
    ascending = np.sort(check_finite_array("controls", controls))
    return _calibration_from_sorted(ascending, a, _alpha_dagger_sorted(ascending))


def p_values(controls: ArrayLike, scores: ArrayLike) -> NDArray[np.float64]:
    """Conformal p-values p(s) = (1 + #{controls ≥ s}) / (N + 1) for each score s.

    A score is a claim at level α_N = K/(N+1) exactly when its p-value is ≤ α_N.
    """
    ascending = np.sort(check_finite_array("controls", controls))
    return _p_values_sorted(ascending, check_finite_array("scores", scores, allow_empty=True))


def _p_values_sorted(ascending: NDArray[np.float64], scores: NDArray[np.float64]) -> NDArray[np.float64]:
    n = ascending.size
    at_least = n - np.searchsorted(ascending, scores, side="left")
    return (1.0 + at_least) / (n + 1.0)


def conformal_test(
    controls: ArrayLike,
    alpha: float | str,
    members: ArrayLike | None = None,
    *,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Calibrate, state the FPR law and, given member scores, the calibrated rate, in one record.

    Returns the plain dict that ``calib stats conformal --json`` prints: ``n_controls, k,
    certified_alpha, threshold, in_sample_fpr, alpha_dagger, certifiable, at_atom, note, fpr_law``
    and, with members, ``members {n, claims, member_rate, calibrated_rate, low, high, ...}``.
    """
    conf = check_confidence(confidence)
    cal = calibrate(controls, alpha)
    record = cal.to_dict()
    record["fpr_law"] = cal.fpr_law(conf).to_dict()
    if members is not None:
        rate = cal.calibrated_rate(members, conf)
        record["members"] = None if rate is None else rate.to_dict()
    return record


SWEEP_SCHEMA = {
    "alpha": pl.Float64,
    "k": pl.Int64,
    "certified_alpha": pl.Float64,
    "threshold": pl.Float64,
    "in_sample_fpr": pl.Float64,
    "certifiable": pl.Boolean,
    "at_atom": pl.Boolean,
    "fpr_low": pl.Float64,
    "fpr_high": pl.Float64,
    "fpr_upper": pl.Float64,
    "prob_exceeds_certified": pl.Float64,
}
MEMBER_SCHEMA = {
    "n_members": pl.Int64,
    "claims": pl.Int64,
    "member_rate": pl.Float64,
    "calibrated_rate": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
}


def sweep(
    controls: ArrayLike,
    alphas: ArrayLike | list[float | str],
    *,
    members: ArrayLike | None = None,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Operating points of the conformal test over a grid of target levels, as a Polars table.

    The controls are sorted once; each level then costs a few binary searches, so a sweep over 100
    levels and 10^7 controls takes well under a second (``benchmarks/stats.py``).

    Columns: ``alpha, k, certified_alpha, threshold`` (null when K = 0), ``in_sample_fpr,
    certifiable, at_atom``, the Beta law's central interval ``fpr_low, fpr_high`` and one-sided upper
    bound ``fpr_upper`` at ``confidence``, ``prob_exceeds_certified``; with members also
    ``n_members, claims, member_rate, calibrated_rate, low, high`` (nulls when K = 0).
    """
    conf = check_confidence(confidence)
    ascending = np.sort(check_finite_array("controls", controls))
    dagger = _alpha_dagger_sorted(ascending)
    levels = [parse_alpha(a) for a in (alphas.tolist() if isinstance(alphas, np.ndarray) else alphas)]
    if not levels:
        raise ValueError("alphas is empty; give at least one target level")
    member_sorted = None
    if members is not None:
        member_sorted = np.sort(check_finite_array("members", members))
    rows: dict[str, list[Any]] = {name: [] for name in SWEEP_SCHEMA}
    if member_sorted is not None:
        rows.update({name: [] for name in MEMBER_SCHEMA})
    for a in levels:
        cal = _calibration_from_sorted(ascending, a, dagger)
        law = fpr_law(cal.n_controls, a, conf, alpha_dagger=dagger) if cal.certifiable else None
        rows["alpha"].append(a)
        rows["k"].append(cal.k)
        rows["certified_alpha"].append(cal.certified_alpha)
        rows["threshold"].append(cal.threshold)
        rows["in_sample_fpr"].append(cal.in_sample_fpr)
        rows["certifiable"].append(cal.certifiable)
        rows["at_atom"].append(cal.at_atom)
        rows["fpr_low"].append(law.low if law else None)
        rows["fpr_high"].append(law.high if law else None)
        rows["fpr_upper"].append(law.upper_quantile(conf) if law else None)
        rows["prob_exceeds_certified"].append(law.prob_exceeds_certified if law else None)
        if member_sorted is not None:
            rate = None
            if cal.threshold is not None:
                claims = member_sorted.size - int(np.searchsorted(member_sorted, cal.threshold, side="right"))
                rate = _calibrated_rate(claims, member_sorted.size, cal.certified_alpha, conf)
            rows["n_members"].append(member_sorted.size)
            for name in ("claims", "member_rate", "calibrated_rate", "low", "high"):
                rows[name].append(getattr(rate, name) if rate else None)
    schema = dict(SWEEP_SCHEMA, **(MEMBER_SCHEMA if member_sorted is not None else {}))
    return pl.DataFrame(rows, schema=schema)
