"""``calib similarity`` as a user runs it: ``python -m calib similarity ...`` in real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from calib.metrics import METRIC_NAMES, create_metric
from tests.cli._helpers import Outcome

REFERENCE = '''def shipping_cost(city, weight):
    rates = {"Paris": 4.5, "Lyon": 3.2, "Nice": 5.0}
    if city not in rates:
        raise KeyError(city)
    cost = rates[city] * weight
    return round(cost + 2.0, 2)
'''
CANDIDATE = '''def shipping_cost(town, kg):
    table = {"Paris": 4.5, "Lyon": 3.2, "Nice": 5.0}
    if town not in table:
        raise KeyError(town)
    total = table[town] * kg
    return round(total + 2.0, 2)
'''
RUST_REF = "fn area(w: u32, h: u32) -> u32 {\n    let a = w * h;\n    a\n}\n"
RUST_CAND = "fn area(width: u32, height: u32) -> u32 {\n    let s = width * height;\n    s\n}\n"

RUNS = {
    "all": ["x.py", "y.py", "--json"],
    "rust": ["a.rs", "b.rs", "--metrics", "bleu,tsed,codebleu_syntax", "--json"],
    "human": ["x.py", "y.py", "--metrics", "exact,bleu,judge_functional"],
    "no_ext": ["x.txt", "y.py"],
    "bad_metric": ["x.py", "y.py", "--metrics", "bleu,nonsense"],
    "no_servers_file": ["x.py", "y.py", "--server", "judge"],
    "missing_server": ["x.py", "y.py", "--server", "judge", "--servers", "servers.toml"],
    "bad_language": ["x.py", "y.py", "--language", "cobol"],
    "missing_file": ["x.py", "nope.py"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("similarity")
    for name, text in {"x.py": REFERENCE, "y.py": CANDIDATE, "x.txt": REFERENCE, "a.rs": RUST_REF,
                       "b.rs": RUST_CAND, "servers.toml": '[servers.other]\nkind = "openai"\n'}.items():
        (root / name).write_text(text)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    started = {name: subprocess.Popen([sys.executable, "-m", "calib", "similarity", *argv], cwd=root, env=env,
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for name, argv in RUNS.items()}
    done = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=300)
        done[name] = Outcome(code=proc.returncode, out=out, err=err)
    return done


def test_json_maps_every_metric_to_its_value_or_null_with_a_reason(runs):
    data = runs["all"].json()
    assert set(METRIC_NAMES) <= set(data) and data["language"] == "python"
    for name in ("exact", "bleu", "edit", "lcs", "codebleu", "tsed"):
        # The same numbers as the Python API on the same texts.
        assert data[name] == pytest.approx(create_metric(name).score(REFERENCE, CANDIDATE, "python"), abs=1e-12)
    assert data["exact"] == 0.0 and data["tsed"] == 1.0  # only identifiers differ
    for judge in ("judge_structure", "judge_semantic", "judge_functional"):
        assert data[judge] is None and "server" in data["reasons"][judge]
    for name, value in data.items():
        if name in METRIC_NAMES and value is None:
            assert data["reasons"][name]


def test_language_from_the_extension(runs):
    data = runs["rust"].json()
    assert data["language"] == "rust" and set(data) == {"bleu", "tsed", "codebleu_syntax", "language", "reasons",
                                                       "details"}
    assert data["tsed"] == 1.0 and data["codebleu_syntax"] == 1.0 and data["bleu"] < 0.6


def test_human_output_has_one_line_per_metric(runs):
    outcome = runs["human"]
    assert outcome.code == 0, outcome.err
    lines = outcome.out.splitlines()
    assert lines[0] == "x.py vs y.py (python)" and len(lines) == 4
    assert lines[1].split() == ["exact", "0.0000"]
    assert lines[3].startswith("  judge_functional") and "server" in lines[3]


@pytest.mark.parametrize("name,needle", [("no_ext", "--language"), ("bad_metric", "unknown metric 'nonsense'"),
                                         ("no_servers_file", "--servers FILE"),
                                         ("missing_server", "servers.toml: no server 'judge' (servers defined: other)"),
                                         ("bad_language", "cobol"), ("missing_file", "nope.py")])
def test_mistakes_end_with_one_line_and_exit_2(runs, name, needle):
    assert needle in runs[name].one_line_error()


def test_judges_and_embeddings_through_a_real_server(served_model, tmp_path):
    # calib serve runs a tiny random-weight chat model: it answers, but not in the judge's format, so
    # the judge's value is null with the reason and the raw reply kept; the server also embeds.
    # Short functions, the shortest prompt and a short reply: the tiny model's context holds 512 tokens.
    (tmp_path / "x.py").write_text("def f(a):\n    return a + 1\n")
    (tmp_path / "y.py").write_text("def f(b):\n    return 1 + b\n")
    (tmp_path / "study.toml").write_text(f'[servers.tiny]\nkind = "openai"\nbase_url = "{served_model}"\n'
                                         'model = "tiny"\n')
    proc = subprocess.run([sys.executable, "-m", "calib", "similarity", "x.py", "y.py", "--metrics",
                           "judge_structure,embedding", "--server", "tiny", "--servers", "study.toml",
                           "--judge-max-tokens", "16", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    data = Outcome(proc.returncode, proc.stdout, proc.stderr).json()
    assert data["judge_structure"] is None, data
    assert data["reasons"]["judge_structure"].startswith("judge reply unparsable")
    assert isinstance(data["details"]["judge_structure"]["raw"], str)
    assert -1.0 <= data["embedding"] <= 1.0 and "embedding" not in data["reasons"]
