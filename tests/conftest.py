"""Session-wide fixtures: the model organism's ``tiny`` preset, ``calib serve`` of a tiny chat model and of the
organism's target and chat target, and the organism's pair of real vLLM servers.

Each is built once per test session and shared by every folder. The two modules on the vLLM pair run last
(see :func:`pytest_collection_modifyitems`).
"""

from __future__ import annotations

import pytest

from tests._ray import ray_cluster
from tests._served import (
    served_model,
    served_organism_chat_target,
    served_organism_target,
    tiny_model_dir,
    vllm_pair,
)

__all__ = ["organism_tiny", "organism_tiny_chat", "pytest_collection_modifyitems", "ray_cluster", "served_model",
           "served_organism_chat_target", "served_organism_target", "tiny_model_dir", "vllm_pair"]

#: The modules on the session's vLLM pair (tests/_served.py :func:`vllm_pair`), in the order they run, last: the
#: studies start the pair and run their embedded halves while it starts; the conformance checks then find it up.
VLLM_LAST = ("tests/study/test_vllm_studies.py", "tests/servers/test_vllm_integration.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of :data:`VLLM_LAST` to the end (a stable sort: every other test keeps its order), so that
    the pair's two servers start once and are stopped at the session's end, right after their last user."""
    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return VLLM_LAST.index(module) + 1 if module in VLLM_LAST else 0

    items.sort(key=rank)


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
