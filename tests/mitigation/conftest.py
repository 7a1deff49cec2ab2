"""A finished functional audit of the tiny organism, shared by the mitigation tests (one `calib study`, ~20 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.probes.conftest import sandbox  # noqa: F401 - the probes' bubblewrap sandbox (a fixture)

SPEC = """[study]
name = "audit"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"
threads = 1

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"
threads = 1

[models]
target = "target"
reference = "reference"

[data]
source = "organism"

[generation]
max_tokens = 300
stop = ["\\ndef ", "\\nclass ", "\\n@", "\\nif __name__"]

[measure]
metrics = ["bleu"]
"""


@pytest.fixture(scope="package")
def audit(organism_tiny, tmp_path_factory) -> Path:
    """The run directory of the tiny organism's functional audit (its target memorizes planted members)."""
    root = tmp_path_factory.mktemp("mitigation-audit")
    (root / "audit.toml").write_text(SPEC.format(cache_dir=organism_tiny.root.parent.parent), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "calib", "study", "audit.toml", "--run-dir", "run", "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=1200,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "run"
