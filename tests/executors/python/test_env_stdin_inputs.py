"""Environment variables, stdin and synthesized files as inputs of the sandbox executor (issue 24 §2).

A function that reads ``os.environ``, ``input()``/``sys.stdin``, a configuration file or a folder gets
input states carrying ``env``, ``stdin`` and ``files`` chosen by the search, replayed identically on the
candidates; before this, every one of the functions below was inconclusive (one output state, or
coverage < 0.8). End-to-end tests run the real sandbox; the units run the harness's pure pieces here.
"""

from __future__ import annotations

import ast
import asyncio
import configparser
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor, _well_formed_state
from calib.executors.sandbox.harness import ambient, hints, inputs, pools

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = "", inputs_=None, **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0, **config))  # type: ignore[arg-type]
    try:
        return asyncio.run(executor.compare(truth, candidates, context=context, inputs=inputs_))
    finally:
        executor.close()


def _returns(result) -> list[object]:
    return [json.loads(i.output).get("return") for i in result.inputs if i.valid]


MODE = """\
def mode():
    v = os.environ.get("APP_MODE")
    if v == "prod":
        return "strict"
    elif v == "staging":
        return "careful"
    return "dev"
"""


@needs_bwrap
def test_an_environment_variable_is_an_input_the_search_varies() -> None:
    ignores = "def mode():\n    return 'dev'\n"
    result = _compare(MODE, [MODE, ignores], context="import os\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert result.config["n_inputs"] == 10 and result.config["min_valid"] == 8  # the criteria stay the paper's
    assert all("env" in i.state for i in result.inputs)
    assert {"strict", "careful", "dev"} <= set(_returns(result))
    same, ignoring = result.candidates
    assert same.sim_func == 1.0
    assert ignoring.sim_func is not None and ignoring.sim_func < 1.0


@needs_bwrap
def test_stdin_is_an_input_read_whole_or_by_input() -> None:
    total = "def total():\n    return sum(int(x) for x in sys.stdin.read().split())\n"
    first_line = "def total():\n    return sum(int(x) for x in sys.stdin.readline().split())\n"
    result = _compare(total, [total, first_line], context="import sys\n")
    assert result.conclusive, result.reason
    assert all(isinstance(i.state.get("stdin"), str) for i in result.inputs)
    same, partial = result.candidates
    assert same.sim_func == 1.0
    assert partial.sim_func is not None and partial.sim_func < 1.0
    ask = "def ask():\n    n = int(input())\n    if n > 10:\n        return 'big'\n    return 'small'\n"
    result = _compare(ask, [])
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and {"big", "small"} <= set(_returns(result))


@needs_bwrap
def test_configuration_files_get_contents_their_parser_accepts() -> None:
    loader = """\
def load():
    with open("settings.json") as f:
        cfg = json.load(f)
    if cfg["debug"]:
        return "debug"
    return cfg["db"]["host"]
"""
    result = _compare(loader, [], context="import json\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    parsed = [json.loads(i.state["files"]["settings.json"]) for i in result.inputs
              if i.valid and i.state["files"].get("settings.json")]
    assert any(p.get("debug") is False and "host" in p.get("db", {}) for p in parsed)
    ini = """\
def port():
    config = configparser.ConfigParser()
    config.read("app.ini")
    if config.getboolean("server", "debug"):
        return 0
    return config.getint("server", "port")
"""
    result = _compare(ini, [], context="import configparser\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert 0 in _returns(result) and any(isinstance(r, int) and r > 0 for r in _returns(result))


@needs_bwrap
def test_a_credential_loader_of_a_path_parameter_gets_files_of_the_keys_it_reads() -> None:
    # in the style of the paper's appendix: a loader that only opens a file (its name a parameter's default)
    loader = """\
def load_credentials(path="credentials.json"):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    user = data.get("username")
    if not user:
        raise ValueError("no user")
    return user, data.get("password", "")
"""
    lenient = loader.replace('        raise ValueError("no user")\n', "        return None\n")
    result = _compare(loader, [lenient], context="import json\nimport os\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


@needs_bwrap
def test_a_listed_folder_is_synthesized() -> None:
    listing = """\
def listing():
    names = os.listdir("data")
    if not names:
        return None
    return sorted(n for n in names if n.endswith(".csv"))
"""
    result = _compare(listing, [], context="import os\n")
    assert result.conclusive, result.reason
    assert None in _returns(result) and any(r for r in _returns(result))


@needs_bwrap
def test_environment_and_stdin_do_not_leak_from_one_input_to_the_next() -> None:
    # every input sees the sandbox's own environment plus its own variables, and its own stdin only,
    # whatever the input before it set, deleted, read or replaced
    leaky = """\
def peek():
    seen = sorted(os.environ)
    os.environ["LEAK"] = "1"
    os.environ.pop("LANG", None)
    first, second = sys.stdin.read(), sys.stdin.read()
    sys.stdin = io.StringIO("planted")
    return seen, first, second
"""
    given = [{"env": {"A": "1"}, "stdin": "one\n"}, {}, {"stdin": "two"}, {"env": {"LANG": None}}]
    result = _compare(leaky, [leaky], context="import io\nimport os\nimport sys\n", inputs_=given, n_inputs=4,
                      min_valid=4)
    outs = [json.loads(i.output) for i in result.inputs]
    assert all(i.valid for i in result.inputs), [i.reason for i in result.inputs]
    seen = [o["return"]["tuple"][0]["list"] for o in outs]  # canonical form: a tuple of a list and two texts
    read = [o["return"]["tuple"][1:] for o in outs]
    base = seen[1]
    assert "LEAK" not in base and "A" not in base and "LANG" in base
    assert seen[0] == sorted([*base, "A"]) and read[0] == ["one\n", ""]
    assert read[1] == ["", ""] and read[2] == ["two", ""] and seen[2] == base
    assert seen[3] == [n for n in base if n != "LANG"]
    # what the code changed in os.environ is part of its output state: the names set and deleted
    assert outs[1]["env"] == {"LEAK": "1", "LANG": None}
    assert outs[3]["env"] == {"LEAK": "1"}
    assert result.conclusive, result.reason
    assert result.candidates[0].sim_func == 1.0  # replayed identically in the candidate's own batch


@needs_bwrap
def test_a_given_state_with_a_malformed_environment_is_refused_before_anything_runs() -> None:
    result = _compare(MODE, [MODE], context="import os\n", inputs_=[{"env": {"APP=MODE": "prod"}}])
    assert not result.conclusive
    assert result.reason.startswith("invalid input state 0: env name 'APP=MODE'"), result.reason


# --- units: the harness's pieces on the host -----------------------------------------------------------


def _pools(source: str) -> pools.Pools:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("x"))
    info = hints.analyse(node, skip_first=False)
    hints.mine_module(tree, info)
    return pools.Pools(info, random.Random(0))


def test_scan_finds_variables_stdin_files_and_folders_named_by_literals() -> None:
    p = _pools("""\
import os, sys, glob, json
from pathlib import Path
KEY = "TOKEN"
def helper():
    return os.getenv("HELPER_VAR")
def x_main(path):
    a = os.environ["A"]
    b = os.environ.get("B", "d")
    if "C" in os.environ or os.environ.setdefault("D", "1"):
        pass
    t = os.getenv(KEY)
    line = input()
    rest = sys.stdin.readlines()
    cfg = json.load(open("conf/app.json"))
    port = cfg["server"]["port"]
    logs = glob.glob("logs/*.log")
    docs = list(Path("docs").iterdir())
    return helper(), cfg.get("name")
""")
    u = p.uses
    assert sorted(u.env) == ["A", "B", "C", "D", "HELPER_VAR", "TOKEN"]
    assert u.stdin and u.stdin_lines == 1
    assert u.files == ["conf/app.json"] and u.dirs == {"logs": ".log", "docs": ""}
    assert ("server", "port") in u.keys and ("name",) in u.keys
    assert {f"env.{n}" for n in u.env} | {"<stdin>", "file:conf/app.json", "dir:logs", "dir:docs"} <= set(p.names)
    assert p.by_param["env.A"][0] is None  # unset comes first
    content = p.by_param["file:conf/app.json"]
    assert json.loads(content[0])["server"]["port"] != json.loads(content[1])["server"]["port"]
    assert content[-1] is None  # the file may be absent


def test_synthesized_ini_and_csv_parse_with_the_stdlib_parsers() -> None:
    u = inputs.scan(*_node("""\
import configparser, csv
def x(path):
    c = configparser.ConfigParser()
    c.read("app.ini")
    if c.getboolean("server", "debug") and c["db"]["user"]:
        return c.get("server", "host")
    for row in csv.DictReader(open("rows.csv")):
        print(row["name"], row["score"])
"""))
    assert u.ini == {"server": ["debug", "host"], "db": ["user"]}
    parser = configparser.ConfigParser()  # the reference: the stdlib's own parser
    parser.read_string(inputs.content("app.ini", u, 0, ["alpha"], [7]))
    assert parser.getboolean("server", "debug") is True and parser["db"]["user"]
    flipped = configparser.ConfigParser()
    flipped.read_string(inputs.content("app.ini", u, 1, ["alpha"], [7]))
    assert flipped.getboolean("server", "debug") is False
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(inputs.content("rows.csv", u, 0, ["alpha"], [7]))))
    assert rows and {"name", "score"} <= set(rows[0])


def _node(source: str) -> tuple[ast.AST, ast.Module, set[str]]:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    return node, tree, {a.arg for a in node.args.args}


def test_states_with_env_and_stdin_are_checked_on_the_host() -> None:
    ok = {"args": {}, "env": {"APP_MODE": "prod", "GONE": None}, "stdin": "1 2\n"}
    assert _well_formed_state(ok)
    for bad in ({"env": {"A=B": "1"}}, {"env": {"A": 3}}, {"env": ["A"]}, {"stdin": 5},
                {"stdin": "x" * (ambient.MAX_STDIN + 1)}, {"env": {"A": "v" * (ambient.MAX_ENV_VALUE + 1)}},
                {"env": {f"V{i}": "1" for i in range(ambient.MAX_ENV + 1)}}, {"environment": {}}):
        assert not _well_formed_state({"args": {}, **bad}), bad


def test_a_number_compared_after_reading_it_from_text_is_rewritten_in_the_text() -> None:
    from calib.executors.sandbox.harness import synth

    # ``int(os.environ["PORT"]) > 1024`` on "80": the boundary and its neighbours, written where 80 was
    found = synth.replacements({"env.PORT": "80", "n": 80}, [("order", 80, 1024)])
    assert [v["env.PORT"] for v in found if v["env.PORT"] != "80"] == ["1024", "1025", "1023"]
    found = synth.replacements({"<stdin>": "5\n15\n"}, [("eq", 15, 7)])
    assert [v["<stdin>"] for v in found] == ["5\n7\n"]  # the whole number only: "5" inside "15" is not it
    assert synth.replacements({"args_text": "80"}, [("order", 80, 1024)]) == []  # arguments keep their rules


def test_what_the_code_leaves_in_the_environment_is_bounded_and_digested() -> None:
    import hashlib  # the reference digest

    out = ambient._bounded({"A": "x" * 5000, "B": None})
    assert out["B"] is None
    assert out["A"] == "x" * ambient.MAX_ENV_VALUE + (
        f"<... {5000 - ambient.MAX_ENV_VALUE} more characters, sha256 "
        f"{hashlib.sha256(('A=' + 'x' * 5000).encode()).hexdigest()}>")
    many = {f"V{i:03d}": "1" for i in range(ambient.MAX_ENV + 36)}
    out = ambient._bounded(many)
    rest = "\n".join(f"V{i:03d}=1" for i in range(ambient.MAX_ENV, ambient.MAX_ENV + 36))
    assert len(out) == ambient.MAX_ENV + 1 and out["<... 36 more>"] == hashlib.sha256(rest.encode()).hexdigest()
