"""Never a success that measured nothing (issue "hosted"): the extraction, census and probes reports open with
the cause when no window was scored or no generation tested, as the functional report does, and
``calib study`` exits 3 with the same sentence (``StudyKind.empty``).

The runs are the report tests' synthetic ones (tests/report/extraction, tests/report/probes) with every
request failed: each score cell of the scores table carries an error instead of a value, and the
probes run's test results are gone.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from calib.report import write_report
from calib.study.kinds import study_kind
from tests.report.extraction.test_census_report import build_run as census_run
from tests.report.extraction.test_extraction_report import build_run as extraction_run
from tests.report.probes.test_probes_report import build_run as probes_run

FAILURE = "request failed: HTTP 500: quota exceeded"


def _fail_every_score(run: Path) -> pl.DataFrame:
    path = run / "tables" / "scores.parquet"
    scores = pl.read_parquet(path)
    scores = scores.with_columns(pl.lit(FAILURE).alias("error"),
                                 *[pl.lit(None, dtype=scores.schema[c]).alias(c) for c in ("value", "log10_value",
                                                                                             "detail")])
    scores.write_parquet(path)
    return scores


def _headline(markdown: str, heading: str) -> str:
    return markdown.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]


def test_an_extraction_report_whose_every_score_failed_says_so_first(tmp_path):
    run = extraction_run(tmp_path / "run")
    scores = _fail_every_score(run)
    paths = write_report(run)
    summary = json.loads(paths["summary"].read_text())
    per_group = scores.group_by("role", "procedure").len()["len"].to_list()
    assert len(set(per_group)) == 1  # the same windows in every group: the most frequent failure counts one group
    expected = (f"no window was scored by any model and procedure; most often: {FAILURE} ({per_group[0]})")
    assert study_kind("extraction").empty(summary) == expected
    headline = _headline(paths["markdown"].read_text(), "Headline")
    assert headline.lstrip().startswith(f"**Nothing was measured**: {expected}. Every rate below is undefined")


def test_a_census_report_whose_every_score_failed_says_so_first(tmp_path):
    run = census_run(tmp_path / "run")
    scores = _fail_every_score(run)
    paths = write_report(run)
    summary = json.loads(paths["summary"].read_text())
    expected = f"no window was scored ({scores.height} unscored, 0 windows could not be cut)"
    assert study_kind("census").empty(summary) == expected
    section = _headline(paths["markdown"].read_text(), "Census")
    assert section.lstrip().startswith(f"**Nothing was measured**: {expected}.")


def test_a_probes_report_without_a_tested_generation_says_so_first(tmp_path):
    run = probes_run(tmp_path / "run")
    path = run / "tables" / "test_results.parquet"
    pl.read_parquet(path).clear().write_parquet(path)
    paths = write_report(run)
    summary = json.loads(paths["summary"].read_text())
    why = study_kind("probes").empty(summary)
    assert why is not None and why.startswith("no generation was tested (")
    section = _headline(paths["markdown"].read_text(), "pass@k")
    assert section.lstrip().startswith(f"**Nothing was measured**: {why}. Every pass@k below is undefined")


def test_reports_that_measured_something_do_not_say_it(tmp_path):
    for name, build in (("extraction", extraction_run), ("census", census_run), ("probes", probes_run)):
        paths = write_report(build(tmp_path / name))
        assert "Nothing was measured" not in paths["markdown"].read_text()
        assert study_kind(name).empty(json.loads(paths["summary"].read_text())) is None
