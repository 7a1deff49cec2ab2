"""Session-wide fixtures: the model organism's ``tiny`` preset and ``calib serve`` of a tiny chat model.

Each is built once per test session and shared by every folder.
"""

from __future__ import annotations

import pytest

from tests._served import served_model, tiny_model_dir

__all__ = ["organism_tiny", "organism_tiny_chat", "served_model", "tiny_model_dir"]


@pytest.fixture(scope="session")
def organism_tiny(tmp_path_factory: pytest.TempPathFactory):
    """The ``tiny`` organism (reference and target models with known members), built once (~40 s).

    ``CALIB_TEST_CACHE=DIR`` builds it (and its chat variant) in DIR and reuses it across test sessions (a
    developer's shortcut; the cache key still decides whether a build is current). CI leaves it unset.
    """
    import os

    from calib.organism.build import build_organism

    cache = os.environ.get("CALIB_TEST_CACHE") or tmp_path_factory.mktemp("calib-cache")
    return build_organism("tiny", seed=0, cache_dir=cache)


@pytest.fixture(scope="session")
def organism_tiny_chat(organism_tiny):
    """The chat variant of :func:`organism_tiny` (chat-reference, chat-target; calib.organism.chat), built once."""
    from calib.organism.chat import build_chat_variant

    return build_chat_variant(organism_tiny)
