"""The control screen of an extraction report (``[extraction.screen]``; extraction paper App. D.2, E.1), by hand.

The hand run (``_synthetic.write_run``): ℓ_s = 10, ``base`` members log10 −1, −1.5, −2.5, −2.9, −3, −5, −8,
−10, −15, −30 and 19 controls c000..c018 scoring −20, −19, ..., −2. The screen flagged c017 and c018 (the
two highest controls, as contaminants are); ``analyze.decontaminate`` lists c000. At α = 0.1 the full
pool has N = 19, K = floor(0.1 · 20) = 2, τ = −3 (the 2nd largest), 4 members above (−3 ties τ): calibrated
rate 4/10 − 2/20 = 0.3. The decontaminated pool has N = 16 (−19 … −4), K = floor(0.1 · 17) = 1, τ = −4,
5 members above: calibrated rate 5/10 − 1/17.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from calib import InputError
from calib.report import write_report
from calib.study.tables import CONTROL_SCREEN_SCHEMA
from tests.report.extraction._synthetic import write_run

CONTROLS = [float(v) for v in range(-20, -1)]
MEMBERS = [-1.0, -1.5, -2.5, -2.9, -3.0, -5.0, -8.0, -10.0, -15.0, -30.0]
FLAGGED, LISTED = ["c017", "c018"], ["c000"]
SCREEN = {"enabled": True, "source": "members", "paths": [], "format": None, "content_column": "content",
          "extensions": [], "max_file_bytes": 1_000_000, "ngram_tokens": 13, "overlap": 0.5, "shingle_tokens": 5,
          "jaccard": 0.5, "num_perm": 128}


def _screen_rows() -> list[dict[str, Any]]:
    rows = []
    for i in range(len(CONTROLS)):
        sid = f"c{i:03d}"
        flagged = sid in FLAGGED
        overlap, jaccard = (0.9, 0.8) if flagged else (i / 100, i / 200)  # c016 is the nearest miss
        rows.append({"sample_id": sid, "source": f"doc-{sid}", "ngrams": 40, "overlap": overlap,
                     "overlap_match": "member:m001", "jaccard": jaccard, "jaccard_match": "member:m001",
                     "minhash_jaccard": jaccard, "flagged": flagged,
                     "reason": "0.900 of its 13-token n-grams are in member:m001 (>= 0.5)" if flagged else None})
    return rows


def _run(root: Path, *, screen: dict[str, Any] | None, table: bool = True) -> Path:
    drop = (FLAGGED if screen else []) + LISTED
    run = write_run(root, {("target", "base", 10): (MEMBERS, CONTROLS)}, alpha=0.1, alphas=[0.05, 0.1, 0.2],
                    decontaminate=drop)
    spec = json.loads((run / "spec.json").read_text())
    spec["analyze"]["decontaminate"] = LISTED  # the manual list; the screen's flags come from its table
    spec["extraction"]["screen"] = screen
    (run / "spec.json").write_text(json.dumps(spec))
    if table:
        frame = pl.DataFrame(_screen_rows(), schema=CONTROL_SCREEN_SCHEMA)
        frame.write_parquet(run / "tables" / "control_screen.parquet")
    return run


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    paths = write_report(_run(tmp_path_factory.mktemp("screen"), screen=SCREEN))
    return {"summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text()}


def test_the_summary_states_what_the_screen_flagged(rendered):
    screen = rendered["summary"]["control_screen"]
    assert screen["settings"] == SCREEN and screen["source"] == "members"
    assert (screen["controls"], screen["flagged"], screen["listed"]) == (19, 2, 1)
    assert screen["screened_against_members"] == len(MEMBERS)
    assert [r["sample_id"] for r in screen["rows"]] == FLAGGED
    assert all(not r["also_listed"] and r["reason"].startswith("0.900") for r in screen["rows"])
    assert screen["removed_samples"] == sorted(FLAGGED + LISTED)
    # near misses: the unflagged controls by max(overlap, Jaccard), highest first
    assert [r["sample_id"] for r in screen["near_misses"]] == ["c016", "c015", "c014", "c013", "c012"]
    assert "10 member samples" in screen["method"] and "13-token n-grams" in screen["method"]


def test_both_pools_at_the_primary_alpha_equal_the_hand_computation(rendered):
    summary = rendered["summary"]
    assert summary["settings"]["primary_pool"] == "decontaminated"
    pools = summary["control_screen"]["pools"]
    assert len(pools) == 1 and pools[0]["procedure"] == "base"
    full, screened = pools[0]["all"], pools[0]["decontaminated"]
    assert (full["n_controls"], full["k"], full["log10_threshold"], full["claims"]) == (19, 2, -3.0, 4)
    assert full["calibrated_rate"] == pytest.approx(4 / 10 - 2 / 20, abs=1e-12)
    assert (screened["n_controls"], screened["k"], screened["log10_threshold"], screened["claims"]) == (16, 1, -4.0, 5)
    assert screened["calibrated_rate"] == pytest.approx(5 / 10 - 1 / 17, abs=1e-12)
    head = summary["headline"][0]
    assert head["pool"] == "decontaminated" and head["operating_point"] == screened


def test_the_section_shows_findings_and_both_pools_once(rendered):
    md = rendered["md"]
    assert "## Control screen" in md and "flagged **2 of 19**" in md
    assert "`c017`" in md and "`c018`" in md
    assert "full control pool" in md and "N = 16, K = 1" in md and "N = 19, K = 2" in md
    assert "### Full and decontaminated control pools" not in md  # the screen's table replaces the headline's


def test_without_a_screen_there_is_no_section_and_the_list_alone_decontaminates(tmp_path):
    paths = write_report(_run(tmp_path, screen=None, table=False))
    summary = json.loads(paths["summary"].read_text())
    assert summary["control_screen"] is None and summary["settings"]["screen"] is None
    md = paths["markdown"].read_text()
    assert "## Control screen" not in md and "### Full and decontaminated control pools" in md


def test_a_disabled_screen_is_no_screen(tmp_path):
    paths = write_report(_run(tmp_path, screen={**SCREEN, "enabled": False}, table=False))
    assert json.loads(paths["summary"].read_text())["control_screen"] is None


def test_a_missing_control_screen_table_is_one_line_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"no control_screen table; run `calib study SPEC` again") as err:
        write_report(_run(tmp_path, screen=SCREEN, table=False))
    assert "\n" not in str(err.value) and "control_screen.parquet" in str(err.value)
