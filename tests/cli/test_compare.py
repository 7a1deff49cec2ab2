"""``calib compare`` as a user runs it: ``python -m calib compare ...`` in real subprocesses.

The runs start together once per module (each one builds a sandbox and runs TRUTH and the candidates
in it) and the tests read their exit codes, stdout and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cli._helpers import Outcome

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

TRUTH = '''def clamp_score(n, bonus=0):
    if n < 0:
        raise ValueError("negative")
    total = n * SCALE + bonus
    return min(total, LIMIT)
'''
CONTEXT = "SCALE = 3\nLIMIT = 100\n\n"
SAME = '''def clamp_score(n, bonus=0):
    if n < 0:
        raise ValueError("n")
    return min(SCALE * n + bonus, LIMIT)
'''
WRONG = "def clamp_score(n, bonus=0):\n    return n * SCALE + bonus\n"
INPUTS = [{"args": {"n": "5", "bonus": "1"}}, {"args": {"n": 50, "bonus": 0}}, {"args": {"n": "-2"}},
          {"args": {"n": "0", "bonus": "-3"}}]
BAD_INPUTS = {
    "bad_json": '[{"args": {"n": "1"}',
    "unknown_key": json.dumps([{"args": {"n": "1"}, "environment": {"HOME": "/"}}]),
    "eval_like": json.dumps([{"args": {"n": "__import__('os').system('true')"}}]),
    "unhashable": json.dumps([{"args": {"n": "{[1]: 2}"}}]),
    "bad_probe": json.dumps([{"args": {"n": "1"}, "probe": ["1", "open('x')"]}]),
    "probe_not_list": json.dumps([{"args": {"n": "1"}, "probe": "1"}]),
}
FAST = ["--budget-seconds", "1"]

RUNS = {
    "json": ["{truth}", "{same}", "{wrong}", "--context", "{context}", "--json", *FAST],
    "human": ["{truth}", "{same}", "--context", "{context}", *FAST],
    "inputs": ["{truth}", "{same}", "{wrong}", "--context", "{context}", "--inputs", "{inputs}",
               "--n-inputs", "4", "--min-valid", "4", "--json"],
    **{name: ["{truth}", "{same}", "--inputs", "{%s}" % name, "--json"] for name in BAD_INPUTS},
    "missing_truth": ["{missing}", "{same}", "--json"],
    "min_valid": ["{truth}", "{same}", "--n-inputs", "5", "--min-valid", "6", "--json"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("compare")
    paths = {"truth": TRUTH, "same": SAME, "wrong": WRONG, "context": CONTEXT, "inputs": json.dumps(INPUTS),
             **BAD_INPUTS}
    out = {}
    for name, text in paths.items():
        path = tmp / (f"{name}.json" if name in BAD_INPUTS or name == "inputs" else f"{name}.py")
        path.write_text(text)
        out[name] = str(path)
    out["missing"] = str(tmp / "no-such-truth.py")
    out["dir"] = str(tmp)
    return out


@pytest.fixture(scope="module")
def runs(files: dict[str, str]) -> dict[str, Outcome]:
    """Every entry of RUNS, run concurrently as ``python -m calib compare ...``."""
    env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    started = {}
    for name, args in RUNS.items():
        argv = [sys.executable, "-m", "calib", "compare", *(a.format(**files) for a in args)]
        started[name] = subprocess.Popen(argv, cwd=files["dir"], env=env, text=True, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE)
    done = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=120)
        done[name] = Outcome(code=proc.returncode, out=out, err=err)
    return done


def test_json_prints_exactly_one_object_with_the_documented_keys(runs, files):
    data = runs["json"].json()  # exit 0, nothing on stderr, one line of JSON
    for key in ("conclusive", "reason", "valid_inputs", "coverage", "distinct_outputs", "inputs", "candidates"):
        assert key in data, key
    assert data["conclusive"] is True and data["reason"] == ""
    assert data["valid_inputs"] == 10 and len(data["inputs"]) == 10
    assert data["coverage"] == 1.0 and data["distinct_outputs"] >= 2
    assert [c["path"] for c in data["candidates"]] == [files["same"], files["wrong"]]
    same, wrong = data["candidates"]
    assert same["sim_func"] == 1.0 and same["matches"] == [True] * 10
    assert 0 <= wrong["sim_func"] < 1
    assert wrong["sim_func"] == pytest.approx(sum(wrong["matches"]) / 10)
    for item in data["inputs"]:
        assert set(item) >= {"index", "state", "valid", "status", "reason"}
        assert "output" not in item  # only with --show-outputs


def test_without_json_a_short_summary_is_printed(runs, files):
    result = runs["human"]
    assert result.code == 0, result.err
    assert result.out.startswith("conclusive: yes\n")
    assert f"{files['same']}: sim_func 1.00 (>= tau_func)" in result.out


def test_the_inputs_of_an_inputs_file_are_used_and_echoed(runs):
    data = runs["inputs"].json()
    # JSON numbers become the expression of that number; a missing "files" is an empty one
    assert [item["state"] for item in data["inputs"]] == [
        {"args": {"n": "5", "bonus": "1"}, "files": {}}, {"args": {"n": "50", "bonus": "0"}, "files": {}},
        {"args": {"n": "-2"}, "files": {}}, {"args": {"n": "0", "bonus": "-3"}, "files": {}}]
    assert [item["status"] for item in data["inputs"]] == ["ok", "ok", "raised", "ok"]
    assert data["conclusive"] is True
    same, wrong = data["candidates"]
    assert same["matches"] == [True, True, True, True]
    # 5*3+1 = 16 either way; 50*3 = 150 is clipped to 100 only by TRUTH; -2 raises only in TRUTH
    assert wrong["matches"] == [True, False, False, True]
    assert wrong["sim_func"] == 0.5


@pytest.mark.parametrize("name,words", [("bad_json", "not valid JSON"), ("unknown_key", "unknown key"),
                                        ("eval_like", "are allowed"),
                                        ("unhashable", "cannot be built"), ("bad_probe", "input 0, probe 1"),
                                        ("probe_not_list", "probe must be a list")])
def test_a_bad_inputs_file_is_one_line_naming_the_file(runs, files, name, words):
    line = runs[name].one_line_error()  # exit 2, nothing on stdout, one line on stderr, no traceback
    assert line.startswith("calib: error: ")
    assert files[name] in line
    assert words in line


def test_a_missing_truth_file_is_one_line(runs, files):
    line = runs["missing_truth"].one_line_error()
    assert files["missing"] in line and "cannot read the truth file" in line


def test_min_valid_above_n_inputs_is_rejected(runs):
    line = runs["min_valid"].one_line_error()
    assert "--min-valid" in line and "--n-inputs" in line


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_language_c_compiles_and_compares_with_the_native_executor(tmp_path):
    (tmp_path / "x.c").write_text("int add3(int a, int b) {\n    return a + b + 3;\n}\n")
    (tmp_path / "same.c").write_text("int add3(int a, int b) {\n    int s = b;\n    s += a;\n    return s + 3;\n}\n")
    (tmp_path / "other.c").write_text("int add3(int a, int b) {\n    return a * b + 3;\n}\n")
    run = subprocess.run([sys.executable, "-m", "calib", "compare", "x.c", "same.c", "other.c", "--language", "c",
                          "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    # both lines of add3 with code run on every input
    assert result["conclusive"] and result["coverage"] == 1.0 and result["language"] == "c"
    same, other = result["candidates"]
    assert same["sim_func"] == 1.0 and other["sim_func"] < 1.0
    text = subprocess.run([sys.executable, "-m", "calib", "compare", "x.c", "other.c", "--language", "c"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert text.returncode == 0 and "line coverage 100%" in text.stdout
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps([{"args": {"a": "1", "b": "2"}}]))
    bad = subprocess.run([sys.executable, "-m", "calib", "compare", "x.c", "same.c", "--language", "c", "--inputs",
                          str(inputs)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bad.returncode == 2 and "--inputs is Python only" in bad.stderr


def test_an_inputs_file_gives_environment_variables_and_stdin(tmp_path):
    """docs/executors.md, "The --inputs file": `env` and `stdin` are input state, replayed on the candidates."""
    (tmp_path / "context.py").write_text("import os\nimport sys\n")
    (tmp_path / "x.py").write_text("def mode():\n    v = os.environ.get('APP_MODE')\n    if v is None:\n"
                                   "        return 'unset'\n    return v.upper() + sys.stdin.read()\n")
    (tmp_path / "ignores.py").write_text("def mode():\n    return 'unset'\n")
    states = [{"args": {}, "env": {"APP_MODE": "prod"}, "stdin": "!"}, {"args": {}, "env": {"APP_MODE": "dev"}},
              {"args": {}}]
    (tmp_path / "in.json").write_text(json.dumps(states))
    run = subprocess.run([sys.executable, "-m", "calib", "compare", "x.py", "ignores.py", "--inputs", "in.json",
                          "--context", "context.py", "--n-inputs", "3", "--min-valid", "3", "--json", "--show-outputs"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert [item["state"].get("env") for item in result["inputs"]] == [{"APP_MODE": "prod"}, {"APP_MODE": "dev"}, None]
    assert result["conclusive"] and result["candidates"][0]["matches"] == [False, False, True]
    assert ["PROD!" in item["output"] for item in result["inputs"]] == [True, False, False]
    (tmp_path / "bad.json").write_text(json.dumps([{"args": {}, "env": {"APP=MODE": "x"}}]))
    bad = subprocess.run([sys.executable, "-m", "calib", "compare", "x.py", "ignores.py", "--inputs", "bad.json"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    (line,) = bad.stderr.strip().splitlines()
    assert "bad.json" in line and "input 0" in line and "APP=MODE" in line


def test_an_inputs_file_may_give_a_returned_closures_probe_arguments(tmp_path):
    from calib.cli.compare import load_inputs

    path = tmp_path / "inputs.json"
    path.write_text(json.dumps([{"args": {"kind": "'int'"}, "probe": ["'root'", "[1, None]"]}]))
    assert load_inputs(path) == [{"args": {"kind": "'int'"}, "files": {}, "probe": ["'root'", "[1, None]"]}]


def test_an_inputs_file_may_ask_stand_ins_to_fail_inside_try_bodies(tmp_path):
    from calib._exceptions import InputError
    from calib.cli.compare import load_inputs

    path = tmp_path / "inputs.json"
    path.write_text(json.dumps([{"args": {"x": "1"}, "standins": "raise_in_try"}]))
    assert load_inputs(path)[0]["standins"] == "raise_in_try"
    path.write_text(json.dumps([{"args": {"x": "1"}, "standins": "raise_in_loop"}]))
    with pytest.raises(InputError, match="raise_in_try"):  # the message lists the modes there are
        load_inputs(path)
