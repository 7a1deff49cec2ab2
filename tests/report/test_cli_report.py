"""``calib report RUN_DIR``: prints the paths (or one JSON object), exit 2 with one line on a bad run dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from calib.cli import cli, main
from calib.cli.report import report
from tests.cli._helpers import Outcome
from tests.report._fake_run import make_run


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``report`` in the ``calib`` group (a no-op once calib/cli/main.py registers it)."""
    monkeypatch.delenv("CALIB_DEBUG", raising=False)
    added = "report" not in cli.commands
    if added:
        cli.add_command(report)
    yield
    if added:
        cli.commands.pop("report", None)


def run_calib(capsys: pytest.CaptureFixture[str], *args: object) -> Outcome:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    return Outcome(code=int(exited.value.code or 0), out=captured.out, err=captured.err)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("run"), examples=2)


def test_json_prints_the_three_paths(capsys, run_dir):
    data = run_calib(capsys, "report", run_dir, "--json").json()
    assert data == {"html": str(run_dir / "report" / "report.html"),
                    "markdown": str(run_dir / "report" / "report.md"),
                    "summary": str(run_dir / "report" / "summary.json")}
    assert all(Path(p).is_file() for p in data.values())


def test_human_output_lists_the_paths(capsys, run_dir):
    outcome = run_calib(capsys, "report", run_dir)
    assert outcome.code == 0 and outcome.err == ""
    assert outcome.out.splitlines() == [f"html: {run_dir / 'report' / 'report.html'}",
                                        f"markdown: {run_dir / 'report' / 'report.md'}",
                                        f"summary: {run_dir / 'report' / 'summary.json'}"]


def test_a_missing_run_dir_is_one_line_exit_2(capsys, tmp_path):
    line = run_calib(capsys, "report", tmp_path / "nope").one_line_error()
    assert line.startswith("calib: error: ") and "not a run directory" in line and "calib study SPEC" in line


def test_a_missing_table_is_one_line_exit_2(capsys, tmp_path):
    make_run(tmp_path)
    (tmp_path / "tables" / "claims.parquet").unlink()
    line = run_calib(capsys, "report", tmp_path, "--json").one_line_error()
    assert "claims.parquet" in line and "no claims table" in line and "calib study SPEC" in line


def test_python_m_calib_report_json(run_dir):
    # A real subprocess, as a user runs it (needs `report` registered in calib/cli/main.py).
    env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    done = subprocess.run([sys.executable, "-m", "calib", "report", str(run_dir), "--json"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"] == str(run_dir / "report" / "summary.json")
    bad = subprocess.run([sys.executable, "-m", "calib", "report", str(run_dir / "missing")], capture_output=True,
                         text=True, env=env, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
