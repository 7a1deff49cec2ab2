"""The ``extraction`` and ``census`` study kinds: matched-control conformal tests and single-document census.

The second method of docs/architecture.md ("The three methods" 2; Cooper et al., "Extractable Memorization From
First Principles"): a generation counts as evidence of memorization only when its score beats a
threshold calibrated on matched non-members scored by exactly the same procedure.

``extraction`` (populations): samples → [control_screen] → windows → scores → operating_points →
extraction_claims → budgets → paired → report. With ``[extraction.screen]`` the offline ``screen`` stage
(:mod:`calib.study.extraction.screen`) compares every control with the members (and a training corpus) and
the analysis stages read its flags (:func:`extraction_stages`).

Every member and control is cut, with the target server's tokenizer, into a prefix of ℓ_p tokens (at a
token offset) and suffixes of ℓ_s tokens; every model scores each window by teacher forcing (one scoring
pass gives greedy, top-k and base-policy scores) and, for the near-verbatim procedures, by one greedy
generation of ℓ_s tokens. The conformal test then runs at a
grid of target levels per (model, procedure, suffix length).

``census`` (single documents): samples → windows → scores → census → report. Every window of a
candidate document and of its matched control document is scored; the threshold is the largest
(decontaminated) control-window score rounded up to a power of ten, and the census is the share of the
document's characters covered by windows above it.

Stages meet only through the run directory's tables (:mod:`calib.study.tables`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from calib.study.extraction.analysis import budgets_stage, calibrate_stage, claims_stage, paired_stage
from calib.study.extraction.census import census_stage
from calib.study.extraction.samples import census_samples_stage, samples_stage
from calib.study.extraction.scoring import scores_stage, windows_stage
from calib.study.extraction.screen import screen_stage
from calib.study.report_stage import report_done, write_report_stage
from calib.study.runner import RunOptions, Stage
from calib.study.spec import StudySpec

__all__ = ["CENSUS_STAGES", "EXTRACTION_STAGES", "extraction_stages"]


# --- report -------------------------------------------------------------------------------------
def _report_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json"), "report": spec.report.model_dump(mode="json"),
            "study": spec.study.model_dump(mode="json"), "extraction": spec.extraction.model_dump(mode="json")}



EXTRACTION_STAGES: tuple[Stage, ...] = (
    samples_stage,
    windows_stage,
    scores_stage,
    calibrate_stage,
    claims_stage,
    budgets_stage,
    paired_stage,
    Stage("report", ("samples", "windows", "scores", "operating_points", "extraction_claims", "budgets", "paired"),
          None, "1", _report_settings, write_report_stage, done=report_done),
)

CENSUS_STAGES: tuple[Stage, ...] = (
    census_samples_stage,
    windows_stage,
    scores_stage,
    census_stage,
    Stage("report", ("samples", "windows", "scores", "census"), None, "1", _report_settings, write_report_stage,
          done=report_done),
)


def extraction_stages(spec: StudySpec) -> tuple[Stage, ...]:
    """The extraction study's stages; with ``[extraction.screen]`` the screen after samples, read by the analysis."""
    if not spec.extraction.screening():
        return EXTRACTION_STAGES
    readers = {"calibrate", "claims", "budgets", "paired", "report"}
    samples, *rest = EXTRACTION_STAGES
    return (samples, screen_stage, *(replace(s, reads=(*s.reads, "control_screen")) if s.name in readers else s
                                     for s in rest))
