"""The study spec: defaults, and one-line errors naming the file, the line and the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calib._exceptions import InputError
from calib.study.spec import load_spec, locate_key
from tests.cli._helpers import Outcome

ROOT = Path(__file__).resolve().parents[2]
GOOD = """[study]
name = "mini"

[organism]
preset = "tiny"

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


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_a_minimal_spec_gets_the_papers_defaults(tmp_path):
    spec = load_spec(_write(tmp_path, GOOD))
    assert spec.study.kind == "functional" and spec.prompt.max_context_tokens == 250
    assert spec.generation.max_tokens == 500 and spec.generation.temperature == 0.0
    e = spec.execute
    assert (e.n_inputs, e.min_valid, e.coverage, e.min_distinct) == (10, 8, 0.8, 2)
    assert (spec.analyze.tau_text, spec.analyze.tau_func, spec.analyze.text_metric) == (0.75, 0.8, "bleu")


def test_the_shipped_demo_spec_is_valid():
    spec = load_spec(ROOT / "studies" / "demo.toml")
    assert spec.organism.preset == "demo" and spec.data.source == "organism"


@pytest.mark.parametrize("name", ["crystalcoder", "starcoder", "olmo3"])
def test_the_shipped_real_studies_are_valid_and_name_a_target_and_a_reference(name):
    spec = load_spec(ROOT / "studies" / f"{name}.toml")
    servers = {role: spec.servers[getattr(spec.models, role)] for role in ("target", "reference")}
    assert all(table["kind"] == "openai" and table["model"] for table in servers.values())
    assert servers["target"]["base_url"] != servers["reference"]["base_url"]  # servers/vllm/serve-pair.sh
    assert "servers/vllm/serve-pair.sh" in (ROOT / "studies" / f"{name}.toml").read_text()
    # the paper's sample selection (§4): a judge keeps data.limit functions with meaningful logic
    assert spec.data.judge is not None and spec.servers[spec.data.judge.server]["kind"] == "openai"
    # one repository served twice: the revisions tell the checkpoints apart (olmo3: the paper's two steps)
    if servers["target"]["model"] == servers["reference"]["model"]:
        assert servers["target"].get("revision") and servers["reference"].get("revision")
        assert servers["target"]["revision"] != servers["reference"]["revision"]


BAD = {
    "wrong_type": (GOOD.replace('source = "organism"', 'source = "organism"\nmin_lines = "ten"'),
                   ":21: data.min_lines: Input should be a valid integer"),
    "unknown_key": (GOOD.replace('preset = "tiny"', 'preset = "tiny"\ncolour = "red"'),
                    ":6: organism.colour: unknown key 'colour' in [organism]"),
    "unknown_section": (GOOD + "\n[extras]\nx = 1\n", ":22: extras: unknown key 'extras'"),
    "missing_key": (GOOD.replace('reference = "r"\n', ""),
                    ":15: models.reference: a functional study needs a reference model"),
    "bad_server_name": (GOOD.replace('target = "t"', 'target = "tt"'),
                        ":16: models.target = 'tt' names no [servers.tt] table (servers defined: r, t)"),
    "bad_value": (GOOD.replace('preset = "tiny"', 'preset = "huge"'), ":5: organism.preset: Input should be"),
    "cross_check": (GOOD.replace('source = "organism"', 'source = "organism"\nmin_lines = 60'),
                    ":19: data: min_lines (60) exceeds max_lines (50)"),
    "missing_path": (GOOD.replace('source = "organism"', 'source = "corpus"\npaths = ["nowhere/*.py", "gone.jsonl"]'),
                     ":21: data.paths: 'gone.jsonl' does not exist"),
    "bad_toml": (GOOD.replace('name = "mini"', 'name = "mini'), ":2: not valid TOML"),
    "judge_without_server": (GOOD + '\n[measure]\nmetrics = ["bleu", "judge_functional"]\n',
                             "measure.metrics lists ['judge_functional']: set measure.judge_server"),
    "unknown_metric": (GOOD + '\n[measure]\nmetrics = ["bleu", "blue"]\n', "unknown metric(s) ['blue']"),
    # every integer is range-checked, NaN and infinities refused, with the key and the value named
    "huge_n_inputs": (GOOD + "\n[execute]\nn_inputs = 100000000000000000000\n",
                      ":23: execute.n_inputs: Input should be less than or equal to 10000 (got 100000000000000000000)"),
    "huge_seed": (GOOD.replace('name = "mini"', 'name = "mini"\nseed = 9223372036854775808'),
                  ":3: study.seed: Input should be less than or equal to 9223372036854775807"),
    "negative_limit": (GOOD + "limit = -1\n", ":21: data.limit: Input should be greater than or equal to 0 (got -1)"),
    "huge_tokens": (GOOD + "\n[generation]\nmax_tokens = 1000001\n", ":23: generation.max_tokens: Input should be"),
    "huge_bootstrap": (GOOD.replace('name = "mini"', 'name = "mini"\nkind = "probes"')
                       + "\n[probes]\nbootstrap = 100000000\n", "probes.bootstrap: Input should be less than or equal"),
    "nan_temperature": (GOOD + "\n[generation]\ntemperature = nan\n",
                        ":23: generation.temperature: Input should be a finite number (got nan)"),
    "inf_budget": (GOOD + "\n[analyze]\nbudgets = [1e5, inf]\n",
                   ":23: analyze.budgets: Input should be a finite number"),
    "min_distinct": (GOOD + "\n[execute]\nn_inputs = 3\nmin_valid = 3\nmin_distinct = 4\n",
                     "execute: min_distinct (4) exceeds n_inputs (3)"),
    # target and reference naming one checkpoint: the counterfactual would be the target itself
    "same_repo_no_revision": (
        GOOD.replace('kind = "embedded"\nmodel_dir = "organism:target"',
                     'kind = "openai"\nbase_url = "http://127.0.0.1:8001"\nmodel = "org/m"')
        .replace('kind = "embedded"\nmodel_dir = "organism:reference"',
                 'kind = "openai"\nbase_url = "http://127.0.0.1:8002"\nmodel = "org/m"'),
        "are two servers of model = 'org/m' with nothing telling their checkpoints apart: set revision in "
        "[servers.t] and [servers.r]"),
    "same_revision": (
        GOOD.replace('kind = "embedded"\nmodel_dir = "organism:target"',
                     'kind = "openai"\nbase_url = "http://127.0.0.1:8001"\nmodel = "org/m"\nrevision = "s1"')
        .replace('kind = "embedded"\nmodel_dir = "organism:reference"',
                 'kind = "openai"\nbase_url = "http://127.0.0.1:8002"\nmodel = "org/m"\nrevision = "s1"'),
        "both have revision = 's1'; give each its own checkpoint"),
    "unknown_kind": (GOOD.replace('kind = "embedded"', 'kind = "vllm"', 1),
                     ":7: [servers.t] kind = 'vllm' is not a server kind; use one of anthropic, embedded, openai, tgi"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_specs_give_one_line_with_file_line_and_key(tmp_path, name):
    text, needle = BAD[name]
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path)) and needle in message and "\n" not in message


def test_calib_study_and_check_exit_2_with_the_line(tmp_path):
    path = _write(tmp_path, BAD["wrong_type"][0])
    for command in ("study", "check"):
        proc = subprocess.run([sys.executable, "-m", "calib", command, str(path)], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        line = Outcome(proc.returncode, proc.stdout, proc.stderr).one_line_error()
        assert f"{path}:21: data.min_lines" in line
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_locate_key_finds_tables_dotted_keys_and_falls_back_to_the_table():
    text = '[a]\nx = 1\n[a.b]\ny = 2\n"c.d" = 3\ne.f = 4\n'
    assert locate_key(text, ("a", "x")) == 2
    assert locate_key(text, ("a", "b", "y")) == 4
    assert locate_key(text, ("a", "b", "e", "f")) == 6
    assert locate_key(text, ("a", "b", "zzz")) == 3
    assert locate_key(text, ("nowhere",)) is None


def test_check_probes_servers_and_fails_on_one_that_cannot_be_reached(tmp_path):
    spec = GOOD.replace('[servers.r]\nkind = "embedded"\nmodel_dir = "organism:reference"',
                        '[servers.r]\nkind = "openai"\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\nmax_retries = 0')
    spec = spec.replace('preset = "tiny"', f'preset = "tiny"\ncache_dir = "{tmp_path / "empty-cache"}"')
    path = _write(tmp_path, spec)
    proc = subprocess.run([sys.executable, "-m", "calib", "check", str(path), "--json"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    found = json.loads(proc.stdout)
    assert found["ok"] is False and found["organism"] == {"preset": "tiny", "seed": 0, "built": False}
    assert found["servers"]["t"]["probed"] is False  # its organism is built by the study's first run
    assert found["servers"]["r"]["needs"] == ["complete"] and "127.0.0.1:9" in found["servers"]["r"]["error"]
    assert found["stages"][0] == "extract" and found["stages"][-1] == "report"
    quiet = subprocess.run([sys.executable, "-m", "calib", "check", str(path), "--no-probe"], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
    assert quiet.returncode == 0 and "valid functional study 'mini'" in quiet.stdout


# --- the spec file itself --------------------------------------------------------------------------


def test_a_binary_spec_names_the_file_the_line_and_the_byte(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_bytes(b'[study]\nname = "x"\n\xff\xfe')
    with pytest.raises(InputError) as info:
        load_spec(path)
    assert str(info.value) == (f"{path}:3: not UTF-8 text (byte 0xff at offset 19); a study spec is a TOML text "
                               "file saved as UTF-8")


def test_a_fifo_or_a_folder_as_the_spec_is_refused_without_reading_it(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.toml")  # reading it would block forever: no writer
    with pytest.raises(InputError, match="pipe.toml: is not a regular file"):
        load_spec(tmp_path / "pipe.toml")
    with pytest.raises(InputError, match=f"{tmp_path}: is a folder, not a study spec"):
        load_spec(tmp_path)


def test_a_spec_may_name_a_glob_that_matches_nothing_yet_but_calib_check_refuses_it(tmp_path):
    import asyncio

    from calib.study.check import check

    text = GOOD.replace('source = "organism"', 'source = "corpus"\npaths = ["data/**/*.jsonl"]')
    spec = load_spec(_write(tmp_path, text))  # a recipe may name data still to be fetched
    with pytest.raises(InputError) as info:
        asyncio.run(check(spec, probe=False))
    assert str(info.value).startswith(f"data.paths: the glob '{tmp_path}/data/**/*.jsonl' matches no file")
    (tmp_path / "data" / "a").mkdir(parents=True)
    (tmp_path / "data" / "a" / "rows.jsonl").write_text('{"content": "x"}\n')
    assert asyncio.run(check(spec, probe=False))["ok"] is True


def test_calib_check_refuses_a_control_screen_glob_that_matches_nothing(tmp_path):
    from calib.study.check import unmatched_globs

    text = (GOOD.replace('name = "mini"', 'name = "mini"\nkind = "extraction"')
            + '\n[extraction.screen]\nsource = "corpus"\npaths = ["corpus/**/*.py"]\n')
    spec = load_spec(_write(tmp_path, text))  # the training corpus may still be fetched
    with pytest.raises(InputError) as info:
        unmatched_globs(spec)
    assert str(info.value).startswith(f"extraction.screen.paths: the glob '{tmp_path}/corpus/**/*.py' matches no file")
    (tmp_path / "corpus" / "pkg").mkdir(parents=True)
    (tmp_path / "corpus" / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    unmatched_globs(spec)


def test_calib_check_counts_the_extra_controls_of_an_extraction_study(tmp_path, organism_tiny):
    import asyncio

    import polars as pl

    from calib.study.check import check

    text = (GOOD.replace('preset = "tiny"', f'preset = "tiny"\ncache_dir = "{organism_tiny.root.parent.parent}"')
            .replace('name = "mini"', 'name = "mini"\nkind = "extraction"'))
    truth = pl.read_parquet(organism_tiny.truth)
    planted = truth.filter(pl.col("kind").is_in(["verbatim", "business_rule", "near_duplicate"])).height  # data.kinds
    plain = asyncio.run(check(load_spec(_write(tmp_path, text)), probe=False))
    assert plain["samples"] == planted
    extra = text.replace('preset = "tiny"', 'preset = "tiny"\nextra_controls = 7')
    assert asyncio.run(check(load_spec(_write(tmp_path, extra)), probe=False))["samples"] == planted + 7
    limited = extra + "limit = " + str(planted + 3) + "\n"
    assert asyncio.run(check(load_spec(_write(tmp_path, limited)), probe=False))["samples"] == planted + 3
    # a functional study draws no extra controls, whatever the key says
    functional = extra.replace('kind = "extraction"', 'kind = "functional"')
    assert asyncio.run(check(load_spec(_write(tmp_path, functional)), probe=False))["samples"] == planted
