"""The ``nthK`` stand-in mode: the K-th call of a stand-in holds, every other one fails (issue 24 §2).

pylatexenc's ``LatexNodes2Text.node_to_text`` asks ``node.isNodeType(latexwalker.X)`` for eight node classes in
turn, ``latexwalker`` withheld. A stand-in's answer is truthy (the first branch), falsy in the falsy modes (the
last), and drawn per call site in the mixed modes, which seldom make the first K-1 answers falsy and the K-th
truthy: coverage 0.78 on the third package list's seeds 1-5 (0.83 now). An input whose run in a falsy mode
called stand-ins K ≥ 2 times is retried in the modes ``nth1`` … ``nthK`` (K ≤ 8, two such inputs per search).
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.calls import standin_default
from calib.executors.sandbox.harness.pools import STANDIN_MODES
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn
from tests.executors.sandbox.test_forkserver import needs_bwrap

KINDS = ["Chars", "Comment", "Group", "Macro", "Environment", "Specials", "Math", "Verbatim"]
X = "def to_text(node, width):\n    if node is None:\n        return ''\n" + "".join(
    f"    if node.isNodeType(lw.Latex{k}Node):\n        text = '{k.lower()}'\n        return text[:width]\n"
    for k in KINDS) + "    return 'unknown'\n"


def test_in_the_nth_mode_only_the_kth_call_holds() -> None:
    assert "nth3" in STANDIN_MODES and "nth12" in STANDIN_MODES
    assert "nth0" not in STANDIN_MODES and "nth" not in STANDIN_MODES and "nthx" not in STANDIN_MODES
    LOG.reset(standin_default("nth3"))
    try:
        check = CalibStandIn("node.isNodeType")
        assert [check(k) for k in KINDS[:5]] == [False, False, True, False, False]
        assert CalibStandIn("other", ["scripted"])() == "scripted"  # a scripted answer comes first
        assert LOG.called == 6
    finally:
        LOG.reset()
    assert LOG.called == 0 and LOG.nth == 0


@needs_bwrap
def test_a_chain_of_checks_a_withheld_dependency_answers_reaches_its_branches() -> None:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(ex.compare(X, [], context="from pylatexenc import latexwalker as lw\n\n"))
    finally:
        ex.close()
    # before: coverage 0.70 after 400 runs (the mixed modes reached the first branches only)
    assert result.conclusive and result.coverage >= 0.8, result.reason
    assert any(i.state.get("standins", "").startswith("nth") for i in result.inputs if i.valid)
