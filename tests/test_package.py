"""The package's public surface: sorted ``__all__`` lists, the version, the one-way dependency rule."""

from __future__ import annotations

import ast
import importlib
from importlib.metadata import version
from pathlib import Path

import pytest

import calib
import calib.executors
import calib.metrics
import calib.probes
import calib.report
import calib.servers
import calib.stats

PACKAGE = Path(calib.__file__).parent


@pytest.mark.parametrize("module", [calib, calib.executors, calib.metrics, calib.probes, calib.report, calib.servers,
                                    calib.stats])
def test_all_is_sorted_and_importable(module):
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_stats_exports_every_public_name_of_its_modules():
    names = set()
    for path in sorted((PACKAGE / "stats").glob("[!_]*.py")):
        names |= set(importlib.import_module(f"calib.stats.{path.stem}").__all__)
    assert names == set(calib.stats.__all__)


def test_version_is_the_installed_distributions():
    assert calib.__version__ == version("calib")


def test_stats_imports_nothing_else_of_calib():
    # docs/architecture.md: "stats imports nothing of calib" (dependencies point one way: cli -> ... -> stats).
    for path in sorted((PACKAGE / "stats").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("calib"):
                assert node.module.startswith("calib.stats"), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("calib") or alias.name.startswith("calib.stats"), path.name
