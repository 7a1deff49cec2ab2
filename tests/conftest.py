"""Session-wide fixtures: the model organism's ``tiny`` preset, built once per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def organism_tiny(tmp_path_factory: pytest.TempPathFactory):
    """The ``tiny`` organism (reference and target models with known members), built once (~40 s)."""
    from calib.organism.build import build_organism

    return build_organism("tiny", seed=0, cache_dir=tmp_path_factory.mktemp("calib-cache"))
