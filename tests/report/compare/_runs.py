"""Three synthetic functional runs for ``calib compare-runs`` and the expected per-sample flags of each.

Run ``a`` is :data:`tests.report._fake_run.DEFAULT`; run ``b`` audits the same samples with other verdicts
(some flipped each way, one sample unscored, one missing, one id naming another function); run ``c`` holds
b's verdicts under other sample ids, so it shares no sample with a or b. :func:`expected_flags` derives each
sample's flags from the :class:`FakeSample` definitions (``claim``), not from calib's report code.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from tests.report._fake_run import DEFAULT, TAU_TEXT, FakeSample, _x, claim, make_run

__all__ = ["CONFLICT", "expected_flags", "samples_b", "samples_c", "write_runs"]

#: The sample of run b whose function x differs from run a's (a control).
CONFLICT = "s38"


def samples_b() -> list[FakeSample]:
    """Run b: DEFAULT with verdicts flipped both ways, s28 unscored and s29 left out."""
    out = []
    for s in DEFAULT:
        if s.index in (0, 1):  # functionally memorized in a, not in b
            s = replace(s, matched=(5, 1))
        elif s.index in (23, 24, 25, 26):  # not in a, functionally memorized in b
            s = replace(s, text=(0.3, 0.1), matched=(s.valid, 0))
        elif s.index == 27:  # textually memorized in b only
            s = replace(s, text=(0.9, 0.1))
        elif s.index == 28:  # unscored in b (no SIM_text of the target completion)
            s = replace(s, text=(None, 0.15))
        elif s.index == 29:
            continue
        elif s.index in (33, 34):  # controls functionally memorized in b
            s = replace(s, text=(0.1, 0.1), matched=(9, 0))
        out.append(s)
    return out


def samples_c() -> list[FakeSample]:
    """Run c: b's samples under the ids s100, s101, ... (no id shared with a or b)."""
    return [replace(s, index=s.index + 100) for s in samples_b()]


def _function(s: FakeSample, run: str) -> str:
    return _x(s) + "# another function\n" if run == "b" and s.sample_id == CONFLICT else _x(s)


def expected_flags(samples: list[FakeSample], run: str = "") -> dict[str, dict[str, Any]]:
    """sample_id -> membership, x, scored, conclusive (scored too) and the three flags, from the definitions."""
    out = {}
    for s in samples:
        c = claim(s)
        scored = c["text_target"] is not None and c["text_reference"] is not None
        out[s.sample_id] = {"membership": s.membership, "x": _function(s, run), "scored": scored,
                            "conclusive": scored and c["conclusive"],
                            "reproduced": scored and c["text_target"] >= TAU_TEXT,
                            "textual": c["textually_memorized"], "functional": c["functionally_memorized"]}
    return out


def write_runs(root: Path) -> dict[str, Path]:
    """Write runs a, b and c under ``root``; b's samples table gets the conflicting function."""
    runs = {"a": make_run(root / "a"), "b": make_run(root / "b", samples_b()), "c": make_run(root / "c", samples_c())}
    path = runs["b"] / "tables" / "samples.parquet"
    frame = pl.read_parquet(path)
    other = pl.col("function") + "# another function\n"
    frame = frame.with_columns(pl.when(pl.col("sample_id") == CONFLICT).then(other).otherwise(pl.col("function"))
                               .alias("function"))
    frame.write_parquet(path)
    return runs
