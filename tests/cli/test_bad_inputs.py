"""Bad inputs across commands, through the real program: one line on stderr, exit code 2, no traceback.

Each case runs ``python -m calib ...`` in a subprocess, in a folder holding the bad files (a binary
spec, a FIFO, a folder where a file belongs, NaN scores, ...), as a user would. The runs go four at a
time in one module fixture; each test then reads one result. The message must name what was wrong: the
file, the key, the option or the value (docs/cli.md, "Exit codes and errors").
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.report._fake_run import make_run

SPEC = """[study]
name = "mini"

[organism]
preset = "tiny"
cache_dir = "cache"

[servers.t]
kind = "embedded"
model_dir = "organism:target"

[servers.r]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "t"
reference = "r"

[data]
source = "organism"
"""
CORPUS_SPEC = SPEC.replace('source = "organism"', 'source = "corpus"\npaths = ["nowhere/**/*.py"]')

#: name -> (arguments, the words the one-line message must hold)
CASES: dict[str, tuple[list[str], list[str]]] = {
    # study specs (calib check, calib study)
    "spec_binary": (["check", "bin.toml"], ["bin.toml:1:", "not UTF-8 text", "byte 0x81"]),
    "spec_binary_study": (["study", "bin.toml"], ["bin.toml:1:", "not UTF-8 text"]),
    "spec_empty": (["check", "empty.toml"], ["empty.toml", "missing key study"]),
    "spec_fifo": (["check", "fifo.toml"], ["fifo.toml", "not a regular file"]),
    "spec_folder": (["check", "folder.toml"], ["folder.toml", "is a directory"]),
    "spec_missing": (["check", "missing.toml"], ["missing.toml", "does not exist"]),
    "spec_huge_count": (["check", "--no-probe", "huge.toml"],
                        ["huge.toml:", "execute.n_inputs", "less than or equal to 10000", "100000000000000000000"]),
    "spec_negative_count": (["check", "--no-probe", "negative.toml"], ["negative.toml:", "data.limit", "-3"]),
    "spec_huge_seed": (["check", "--no-probe", "seed.toml"], ["seed.toml:", "study.seed"]),
    "spec_nan": (["check", "--no-probe", "nan.toml"], ["nan.toml:", "generation.temperature", "finite"]),
    "spec_inf": (["check", "--no-probe", "inf.toml"], ["inf.toml:", "analyze.budgets", "finite"]),
    "spec_unknown_kind": (["check", "--no-probe", "kind.toml"],
                          ["kind.toml:", "[servers.t] kind = 'vllm-magic' is not a server kind", "openai"]),
    "spec_unknown_key": (["check", "--no-probe", "key.toml"], ["key.toml:", "unknown key 'n_input'"]),
    "spec_glob_matches_nothing": (["check", "--no-probe", "glob.toml"],
                                  ["data.paths", "nowhere/**/*.py", "matches no file"]),
    # calib stats: counts, probabilities and score files
    "beta_law_1e22": (["stats", "beta-law", "--n", "1e22", "--alpha", "0.1"], ["'--n'", "1e22", "above 1e12"]),
    "beta_law_10_to_22": (["stats", "beta-law", "--n", str(10**22), "--alpha", "0.1"], ["'--n'", "above 1e12"]),
    "interval_negative": (["stats", "interval", "--k", "-1", "--n", "10"], ["'--k'", "-1"]),
    "interval_nan_confidence": (["stats", "interval", "--k", "1", "--n", "10", "--confidence", "nan"],
                                ["'--confidence'", "nan"]),
    "budget_nan": (["stats", "budget", "--p", "nan", "--attempts", "10"], ["'--p'", "nan"]),
    "plan_too_many": (["stats", "plan", "--candidates", "1e11", "--fwer", "0.05"], ["--candidates", "2e+12"]),
    "scores_binary": (["stats", "conformal", "--controls", "bin.txt", "--alpha", "0.1"],
                      ["bin.txt", "not UTF-8 text"]),
    "scores_folder": (["stats", "conformal", "--controls", "folder.toml", "--alpha", "0.1"],
                      ["folder.toml", "is a folder"]),
    "scores_fifo": (["stats", "conformal", "--controls", "fifo.toml", "--alpha", "0.1"],
                    ["fifo.toml", "not a regular file"]),
    "scores_empty": (["stats", "conformal", "--controls", "empty.txt", "--alpha", "0.1"],
                     ["empty.txt", "holds no scores"]),
    "scores_nan": (["stats", "conformal", "--controls", "nan.txt", "--alpha", "0.1"], ["nan.txt:2:", "not finite"]),
    "scores_under_a_file": (["stats", "conformal", "--controls", "nan.txt/scores.txt", "--alpha", "0.1"],
                            ["nan.txt/scores.txt", "no such file"]),
    "scores_binary_csv": (["stats", "conformal", "--controls", "bin.csv", "--alpha", "0.1"],
                          ["bin.csv", "cannot read this .csv table"]),
    "census_no_columns": (["stats", "census", "--scores", "cols.csv", "--controls", "nan.txt"],
                          ["cols.csv", "'start'"]),
    # calib extract
    "extract_out_unwritable": (["extract", "code.py", "--out", "/proc/functions.parquet"],
                               ["/proc/functions.parquet", "cannot write --out"]),
    "extract_out_no_folder": (["extract", "code.py", "--out", "no/such/functions.parquet"],
                              ["no/such/functions.parquet", "does not exist"]),
    "extract_out_under_a_file": (["extract", "code.py", "--out", "code.py/functions.parquet"],
                                 ["code.py/functions.parquet", "or is a file"]),
    "extract_out_folder": (["extract", "code.py", "--out", "folder.toml"], ["'--out'", "folder.toml"]),
    "extract_glob": (["extract", "nowhere/*.py"], ["nowhere/*.py", "no file matches"]),
    "extract_fifo": (["extract", "fifo.toml", "--language", "python"], ["fifo.toml", "not a regular file"]),
    "extract_extension": (["extract", "nan.txt"], ["nan.txt", "--language"]),
    "extract_zero_cap": (["extract", "code.py", "--max-file-bytes", "0"], ["'--max-file-bytes'", "0"]),
    # calib report
    "report_run_is_a_file": (["report", "code.py"], ["code.py", "not a run directory"]),
    "report_folder_is_a_file": (["report", "run"], ["run/report", "is a file", "move or delete it"]),
}


def _workspace(root: Path) -> None:
    """The bad files the cases name, in ``root``."""
    (root / "bin.toml").write_bytes(bytes([0x81, 0xFE, 0x00, 0x12]) * 64)
    (root / "bin.txt").write_bytes(bytes([0x81, 0xFE, 0x00, 0x12]) * 64)
    (root / "bin.csv").write_bytes(b"score\n" + bytes([0x81, 0xFE, 0x00, 0x12]) * 64)
    (root / "empty.toml").write_text("")
    (root / "empty.txt").write_text("# only a comment\n\n")
    (root / "nan.txt").write_text("0.5\nnan\n")
    (root / "cols.csv").write_text("begin,finish,score\n0,10,0.5\n")
    (root / "code.py").write_text("def f(x):\n    return x + 1\n")
    (root / "folder.toml").mkdir()
    os.mkfifo(root / "fifo.toml")
    specs = {
        "huge": SPEC + "\n[execute]\nn_inputs = 100000000000000000000\n",
        "negative": SPEC + "limit = -3\n",
        "seed": SPEC.replace('name = "mini"', 'name = "mini"\nseed = 1180591620717411303424'),
        "nan": SPEC + "\n[generation]\ntemperature = nan\n",
        "inf": SPEC + "\n[analyze]\nbudgets = [1e5, inf]\n",
        "kind": SPEC.replace('kind = "embedded"', 'kind = "vllm-magic"', 1),
        "key": SPEC + "\n[execute]\nn_input = 10\n",
        "glob": CORPUS_SPEC,
    }
    for name, text in specs.items():
        (root / f"{name}.toml").write_text(text)
    make_run(root / "run", examples=1)
    (root / "run" / "report").write_text("not a folder")


def _run(root: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    # timeout: a guard against a hang (a FIFO read would block forever), not a bound on the time taken
    return subprocess.run([sys.executable, "-m", "calib", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-inputs")
    _workspace(root)
    return root


@pytest.fixture(scope="module")
def results(workspace: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_run, workspace, args) for name, (args, _) in CASES.items()}
        return {name: future.result() for name, future in futures.items()}


def test_there_are_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_input_is_one_line_naming_what_is_wrong(results, name):
    proc = results[name]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("calib"), proc.stderr
    for needle in CASES[name][1]:
        assert needle in proc.stderr, (needle, proc.stderr)


def test_the_refused_commands_left_the_files_as_they_were(results, workspace):
    assert results["report_folder_is_a_file"].returncode == 2
    assert (workspace / "run" / "report").read_text() == "not a folder"
    assert not (workspace / "run" / "figures").exists()
    assert not list(workspace.glob(".*.tmp"))  # no temporary --out file left behind
    assert (workspace / "code.py").is_file() and (workspace / "folder.toml").is_dir()
