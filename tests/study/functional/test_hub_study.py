"""A corpus read from a Hugging Face Hub repository pinned in the spec (``[data.hub]``), offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl

from calib.study.spec import load_spec
from tests.cli._helpers import Outcome

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FUNCTION = "def area(w, h):\n    a = w * h\n    if a < 0:\n        raise ValueError(a)\n    return a\n"


def _hf_cache(root):
    """A Hugging Face cache holding one snapshot of ``org/code``, as huggingface_hub lays it out."""
    repo = root / "datasets--org--code"
    snapshot = repo / "snapshots" / COMMIT / "python"
    snapshot.mkdir(parents=True)
    rows = [{"content": FUNCTION, "path": "geo.py"}, {"content": "x = 1\n", "path": "x.py"}]
    (snapshot / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


SPEC = f"""[study]
name = "hub"

[servers.m]
kind = "openai"
base_url = "http://127.0.0.1:9"
model = "m"

[models]
target = "m"
reference = "m"

[data]
source = "corpus"
min_lines = 2

[data.hub]
repo_id = "org/code"
revision = "{COMMIT}"
allow_patterns = ["python/*.jsonl"]
"""


def test_the_extract_stage_reads_a_pinned_hub_corpus_from_the_cache(tmp_path):
    _hf_cache(tmp_path / "hf")
    (tmp_path / "s.toml").write_text(SPEC)
    assert load_spec(tmp_path / "s.toml").data.hub.revision == COMMIT
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--stage", "extract", "--quiet",
                           "--run-dir", "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    functions = pl.read_parquet(tmp_path / "run" / "tables" / "functions.parquet")
    assert [f.rstrip("\n") for f in functions["function"]] == [FUNCTION.rstrip("\n")]
    assert functions["source"][0].startswith(f"hf:org/code@{COMMIT}/python/part-0.jsonl")


def test_a_hub_revision_that_is_not_a_commit_is_refused_with_its_line(tmp_path):
    (tmp_path / "s.toml").write_text(SPEC.replace(COMMIT, "main"))
    proc = subprocess.run([sys.executable, "-m", "calib", "check", "s.toml", "--no-probe"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    line = Outcome(proc.returncode, proc.stdout, proc.stderr).one_line_error()
    assert "s.toml:19: data.hub.revision: String should match pattern '^[0-9a-f]{40}$'" in line
