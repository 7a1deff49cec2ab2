"""Matched controls: stratified, seeded, without replacement, and honest about strata it cannot fill."""

from __future__ import annotations

import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.data.controls import length_bin_labels, match_controls


def table(prefix: str, rows: list[tuple[str, int, str]]) -> pl.DataFrame:
    """A minimal functions table: (language, body_lines, repo) per row."""
    return pl.DataFrame({"function_id": [f"{prefix}{i}" for i in range(len(rows))],
                         "language": [r[0] for r in rows], "body_lines": [r[1] for r in rows],
                         "repo": [r[2] for r in rows]})


MEMBERS = table("m", [("python", 12, "a")] * 3 + [("python", 35, "a")] * 2 + [("go", 15, "b")] * 2)
CANDIDATES = table("c", [("python", 11 + i % 9, "a") for i in range(10)]  # [10,20): 10 candidates
                   + [("python", 40, "a")]  # [30,50): 1 candidate for 2 members
                   + [("python", 25, "a")] * 3  # [20,30): no members there
                   + [("go", 55, "b")] * 4)  # go [10,20): none; [50,100): 4


def test_exact_counts_per_stratum_and_unmatched_reported():
    result = match_controls(MEMBERS, CANDIDATES, seed=0, source_column="repo")
    report = {(r["language"], r["length_bin"], r["source"]): r for r in result.report.to_dicts()}
    assert report[("python", "[10,20)", "a")] == {"language": "python", "length_bin": "[10,20)", "source": "a",
                                                       "members": 3, "controls": 3, "unmatched": 0,
                                                       "fallback_controls": 0, "candidates": 10}
    assert (report[("python", "[30,50)", "a")]["controls"], report[("python", "[30,50)", "a")]["unmatched"]) == (1, 1)
    assert (report[("go", "[10,20)", "b")]["controls"], report[("go", "[10,20)", "b")]["unmatched"]) == (0, 2)
    assert result.unmatched == 3 and result.controls.height == 4
    assert not result.controls["fallback"].any()
    # Every control sits in its member's stratum.
    members = {r["function_id"]: r for r in MEMBERS.with_columns(
        pl.Series("length_bin", length_bin_labels(MEMBERS["body_lines"]))).to_dicts()}
    for c in result.controls.to_dicts():
        m = members[c["member_function_id"]]
        assert (c["language"], c["length_bin"], c["repo"]) == (m["language"], m["length_bin"], m["repo"])
    summary = {r["group"]: r for r in result.summary.to_dicts()}
    assert summary["members"]["n"] == 7 and summary["controls"]["n"] == 4
    assert summary["members"]["mean_body_lines"] == pytest.approx((36 + 70 + 30) / 7)


def test_deterministic_with_seed_and_no_control_reused():
    a = match_controls(MEMBERS, CANDIDATES, seed=7, source_column="repo", ratio=3)
    b = match_controls(MEMBERS, CANDIDATES, seed=7, source_column="repo", ratio=3)
    assert a.controls.equals(b.controls) and a.report.equals(b.report)
    assert a.controls["function_id"].is_unique().all()
    draws = {tuple(match_controls(MEMBERS, CANDIDATES, seed=s, source_column="repo").controls["function_id"])
             for s in range(10)}
    assert len(draws) > 1
    python_short = a.report.filter(pl.col("length_bin") == "[10,20)", pl.col("language") == "python")
    assert python_short["controls"].item() == 9 and python_short["unmatched"].item() == 0


def test_ratio_larger_than_stratum_leaves_members_short():
    result = match_controls(MEMBERS, CANDIDATES, seed=1, source_column="repo", ratio=4)
    row = result.report.filter(pl.col("length_bin") == "[10,20)", pl.col("language") == "python").to_dicts()[0]
    assert (row["controls"], row["unmatched"]) == (10, 1)  # 4 + 4 + 2


def test_fallback_nearest_length_only_when_asked():
    result = match_controls(MEMBERS, CANDIDATES, seed=0, source_column="repo", fallback="nearest_length")
    fb = result.controls.filter(pl.col("fallback"))
    # The python [30,50) member left over takes a python/a candidate at 25 lines (nearest to 35 after 40);
    # the go members take go/b candidates at 55 lines; nothing crosses language or repo.
    assert sorted(fb["body_lines"].to_list()) == [25, 55, 55]
    assert result.unmatched == 0
    assert result.report["fallback_controls"].sum() == 3
    assert result.controls["function_id"].is_unique().all()


def test_members_never_drawn_as_controls_and_custom_strata():
    candidates = pl.concat([CANDIDATES, MEMBERS])
    result = match_controls(MEMBERS, candidates, seed=0, strata=("language",))
    assert not set(result.controls["function_id"]) & set(MEMBERS["function_id"])
    assert result.report.columns[0] == "language" and result.unmatched == 0


def test_source_stratum_needs_a_named_column():
    with pytest.raises(InvalidParameterError, match="source_column"):
        match_controls(MEMBERS, CANDIDATES, seed=0)
    with pytest.raises(InvalidParameterError, match="period"):
        match_controls(MEMBERS, CANDIDATES, seed=0, source_column="period")
    with pytest.raises(InvalidParameterError, match="ratio"):
        match_controls(MEMBERS, CANDIDATES, seed=0, source_column="repo", ratio=0)
    with pytest.raises(InvalidParameterError, match="length_bins"):
        match_controls(MEMBERS, CANDIDATES, seed=0, source_column="repo", length_bins=(10, 5))


def test_length_bin_labels():
    assert length_bin_labels([0, 9, 10, 49, 50, 100, 10_000]) == [
        "[0,10)", "[0,10)", "[10,20)", "[30,50)", "[50,100)", "[100,inf)", "[100,inf)"]
    assert length_bin_labels([-1, 5], (0, 5)) == ["<0", ">=5"]
