"""docs/report.md documents every key of summary.json and every section of the report (STYLE.md rule 10)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from calib.report import write_report
from tests.report._fake_run import make_run

DOC = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()

# Dicts whose keys are data (roles, metrics, figure names), not layout: their keys are not checked.
# methods.organism and methods.manifest_counts are the manifest's, copied as written.
DYNAMIC = {"reasons.generation_errors", "reasons.similarity_failures", "examples.similarities",
           "examples.executions", "examples.generation", "figures", "methods.organism", "methods.manifest_counts"}


def _keys(value: Any, path: str = "") -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if path in DYNAMIC:
                found |= _keys(inner, path)
                continue
            found.add(key)
            found |= _keys(inner, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for inner in value:
            found |= _keys(inner, path)
    return found


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    paths = write_report(make_run(tmp_path_factory.mktemp("run"), examples=2))
    return {"summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text()}


def test_every_summary_key_is_documented(rendered):
    missing = sorted(k for k in _keys(rendered["summary"]) if f"`{k}`" not in DOC)
    assert not missing, f"summary.json keys not documented in docs/report.md: {missing}"


def test_every_section_is_documented(rendered):
    for heading in re.findall(r"^## (.+)$", rendered["md"], re.M):
        assert f"**{heading}**" in DOC, heading
