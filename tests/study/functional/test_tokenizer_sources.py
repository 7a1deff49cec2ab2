"""Tokenizer sources (issue "hosted"): a corpus study's prompts are cut without the host's ``/tokenize``.

``[prompt] tokenizer`` = ``file`` (a local tokenizer.json), ``hub`` (a Hub repository's tokenizer.json at a
pinned revision, read here from a prepared offline cache) or ``chars`` (a character budget). The host is
``calib serve`` (the session's tiny model) behind tests/_hosted.py's proxy: ``direct`` for the reference
run cut by the server's own tokenizer, ``no_tokenize`` for the others.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.study.spec import load_spec
from tests._hosted import HostedProxy

# A module with a long context before each function, so that P = 24 tokens cuts it.
CODE = "\n".join(f"SETTING_{i} = {{'name': 'item{i}', 'weight': {i * 7}, 'tags': ['a', 'b']}}" for i in range(12)) + '''


def scale(values, factor=3):
    out = []
    for v in values:
        out.append(v * factor)
    return out


LIMITS = {"low": 0, "high": 10, "step": 2}


def clamp(x, low=0, high=10):
    if x < low:
        return low
    if x > high:
        return high
    return x
'''

REVISION = "0123456789abcdef0123456789abcdef01234567"


def _spec(url: str, corpus: Path, prompt: str) -> str:
    return f"""[study]
name = "tokenizers"

[servers.target]
kind = "openai"
base_url = "{url}"
model = "tiny"
max_retries = 0

[servers.reference]
kind = "openai"
base_url = "{url}"
model = "tiny"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "corpus"
paths = ["{corpus}"]
min_lines = 2

[prompt]
max_context_tokens = 24
{prompt}
"""


def _prompts(tmp_path: Path, name: str, url: str, prompt: str, env: dict[str, str] | None = None) -> Path:
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        corpus.mkdir()
        (corpus / "mod.py").write_text(CODE)
    (tmp_path / f"{name}.toml").write_text(_spec(url, corpus, prompt))
    done = subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", name, "--stage",
                           "prompt", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})})
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / name


def _samples(run: Path) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / "samples.parquet").sort("sample_id")


def test_a_local_or_hub_tokenizer_cuts_the_same_prompts_as_the_servers_own(served_model, tiny_model_dir, tmp_path):
    with HostedProxy(served_model, "direct") as host:
        direct = _prompts(tmp_path, "direct", host.url, "")
    # the Hub cache as huggingface_hub lays it out, with the served model's tokenizer.json at a pinned revision
    snapshot = tmp_path / "hf" / "models--calib-tests--tiny" / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    shutil.copy(tiny_model_dir / "tokenizer.json", snapshot / "tokenizer.json")
    with HostedProxy(served_model, "no_tokenize") as host:
        local = _prompts(tmp_path, "local", host.url, f'tokenizer = "file"\ntokenizer_file = '
                                                      f'"{tiny_model_dir / "tokenizer.json"}"')
        hub = _prompts(tmp_path, "hub", host.url, f'tokenizer = "hub"\ntokenizer_repo = "calib-tests/tiny"\n'
                                                  f'tokenizer_revision = "{REVISION}"',
                       env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf")})
    for run in (local, hub):  # the host had no tokenizer route (its probe found none), and the prompts were cut
        assert json.loads((run / "manifest.json").read_text())["servers"]["target"]["tokenize"] is False
    reference = _samples(direct)
    assert reference["prompt_context_tokens"].max() <= 24  # P = 24 cut every long context
    assert (reference["prompt_context_tokens"] > 0).all() and reference["context"].str.len_chars().min() > 100
    assert _samples(local).equals(reference) and _samples(hub).equals(reference)  # prompts and counts, cell for cell
    facts = json.loads((local / "manifest.json").read_text())["prompt_tokenizer"]
    assert facts["source"] == "file" and facts["path"] == str(tiny_model_dir / "tokenizer.json")
    assert len(facts["sha256"]) == 64
    hub_facts = json.loads((hub / "manifest.json").read_text())["prompt_tokenizer"]
    assert hub_facts["source"] == "hub" and hub_facts["repo"] == "calib-tests/tiny"
    assert hub_facts["revision"] == REVISION
    assert json.loads((direct / "manifest.json").read_text())["prompt_tokenizer"]["source"] == "server"


def test_a_character_budget_keeps_whole_lines_within_p_times_the_ratio(served_model, tmp_path):
    with HostedProxy(served_model, "no_tokenize") as host:
        run = _prompts(tmp_path, "chars", host.url, 'tokenizer = "chars"\nchars_per_token = 3.0')
    samples = _samples(run)
    for r in samples.to_dicts():
        kept = r["prompt"][:len(r["prompt"]) - len(r["signature"])]
        assert r["context"].endswith(kept) and len(kept) <= 24 * 3 == 72  # the budget: 24 tokens x 3 characters
        assert kept == "" or r["context"][len(r["context"]) - len(kept) - 1] == "\n"  # whole lines
        assert r["prompt_context_tokens"] == len(kept)
    assert (samples["prompt_context_tokens"] > 0).any()
    facts = json.loads((run / "manifest.json").read_text())["prompt_tokenizer"]
    assert facts == {"source": "chars", "chars_per_token": 3.0}


def test_a_hub_tokenizer_that_is_not_cached_offline_is_one_line(served_model, tmp_path):
    with HostedProxy(served_model, "no_tokenize") as host:
        (tmp_path / "corpus").mkdir()
        (tmp_path / "corpus" / "mod.py").write_text(CODE)
        (tmp_path / "s.toml").write_text(_spec(host.url, tmp_path / "corpus", 'tokenizer = "hub"\ntokenizer_repo = '
                                               f'"calib-tests/absent"\ntokenizer_revision = "{REVISION}"'))
        done = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "run", "--stage",
                               "prompt", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf")})
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "prompt.tokenizer_repo = 'calib-tests/absent'" in errors[0]
    assert REVISION in errors[0] and "neither in the Hub cache nor reachable" in errors[0]


@pytest.mark.parametrize("prompt,message", [
    ('tokenizer = "file"', "tokenizer = 'file' needs tokenizer_file"),
    ('tokenizer = "hub"\ntokenizer_repo = "org/name"', "needs tokenizer_revision (a commit hash or tag"),
    ('tokenizer_file = "t.json"', "tokenizer_file is read only with tokenizer = 'file'"),
    ('chars_per_token = 3.5', "chars_per_token is read only with tokenizer = 'chars'"),
    ('tokenizer = "file"\ntokenizer_file = "absent.json"', "prompt.tokenizer_file: 'absent.json' is not a file"),
    ('tokenizer = "words"', "prompt.tokenizer"),
])
def test_bad_tokenizer_keys_are_one_line_errors(tmp_path, prompt, message):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "s.toml").write_text(_spec("http://127.0.0.1:9/v1", tmp_path / "corpus", prompt))
    with pytest.raises(InputError) as caught:
        load_spec(tmp_path / "s.toml")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_study_cut_by_a_local_tokenizer_does_not_need_the_hosts(tmp_path):
    from calib.study.functional.check import needs

    (tmp_path / "corpus").mkdir()
    (tmp_path / "t.json").write_text("{}")
    (tmp_path / "s.toml").write_text(_spec("http://127.0.0.1:9/v1", tmp_path / "corpus",
                                           'tokenizer = "file"\ntokenizer_file = "t.json"'))
    assert needs(load_spec(tmp_path / "s.toml"))["target"] == ["complete"]
    (tmp_path / "s.toml").write_text(_spec("http://127.0.0.1:9/v1", tmp_path / "corpus", ""))
    assert needs(load_spec(tmp_path / "s.toml"))["target"] == ["complete", "tokenize"]
