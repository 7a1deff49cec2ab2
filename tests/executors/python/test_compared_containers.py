"""Containers a parameter is compared with, and path objects asked for by ``isinstance`` (issue 24 §2).

furl's ``remove_path_segments(segments, remove)`` starts with ``if segments == ['']:``; no pool drew ``['']``
(coverage 0.78 on the third package list's seeds 1-5, 0.83 now). filetype's ``get_bytes(obj)`` checks
``isinstance(obj, pathlib.PurePath)``; its pool held paths as texts only (0.79, 0.84 now).
"""

from __future__ import annotations

import ast
import asyncio
import pathlib
import random

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, synth
from tests.executors.sandbox.test_forkserver import needs_bwrap

SEGMENTS = (
    "def trimmed(segments):\n"
    "    if segments == ['']:\n"
    "        return None\n"
    "    if segments == ('', 'index.html'):\n"
    "        return 'root'\n"
    "    return '/'.join(str(s) for s in segments)\n"
)


def test_a_container_a_parameter_is_compared_with_is_in_its_pool() -> None:
    info = hints.analyse(ast.parse(SEGMENTS).body[0], skip_first=False)
    assert info.params[0].equals == [[""], ("", "index.html")]
    pool = synth.Pools(info, random.Random(0)).by_param["segments"]
    assert [""] in pool and ("", "index.html") in pool


@needs_bwrap
def test_a_branch_on_an_equal_container_is_reached() -> None:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(ex.compare(SEGMENTS, [], context=""))
    finally:
        ex.close()
    assert result.conclusive and result.coverage == 1.0, result.reason  # before: 0.60
    assert {i.state["args"]["segments"] for i in result.inputs if i.valid} >= {"['']", "('', 'index.html')"}


def test_isinstance_with_a_path_class_asks_for_path_objects() -> None:
    func = ast.parse("def size(obj):\n    if isinstance(obj, pathlib.PurePath):\n        return obj.stat().st_size\n"
                     "    return len(obj)\n").body[0]
    info = hints.analyse(func, skip_first=False)
    assert "pathobj" in info.params[0].types
    assert any(isinstance(v, pathlib.PurePath) for v in synth.Pools(info, random.Random(0)).by_param["obj"])
