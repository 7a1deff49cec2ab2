"""A parameter x keeps on self (``self.error = error``) is described by what x does with the attribute (issue 24 §2).

mako's ``RichTraceback.__init__`` stores its ``error`` argument and then checks ``isinstance(self.error,
(CompileException, SyntaxException))``, two classes of its own file: the check described a self attribute
that x overwrites, so ``error`` never got instances of those classes (coverage 0.79 on the second package
list's seeds 16-20, the thirteenth round's tuning sample).
"""

from __future__ import annotations

import ast
import asyncio
import random

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, synth
from calib.executors.sandbox.harness.values import New
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class CompileError(Exception):\n"
    "    def __init__(self, message='', source='', lineno=0):\n"
    "        super().__init__(message)\n"
    "        self.source = source\n"
    "        self.lineno = lineno\n"
    "\n\n"
    "class Trace:\n"
)
INIT = (
    "    def __init__(self, error=None, limit=3):\n"
    "        self.source, self.lineno = '', 0\n"
    "        self.error = error\n"
    "        self.limit = limit\n"
    "        if isinstance(self.error, CompileError):\n"
    "            self.source = self.error.source\n"
    "            self.lineno = self.error.lineno\n"
    "            self.has_source = True\n"
    "        self.message = str(self.error)[:self.limit]\n"
)


def test_a_check_of_the_stored_attribute_describes_the_parameter() -> None:
    node = ast.parse("class Trace:\n" + INIT).body[0].body[0]
    info = hints.analyse(node, skip_first=True)
    error = next(p for p in info.params if p.name == "error")
    assert error.classes == ["CompileError"] and "source" in error.attrs and "lineno" in error.attrs
    # self.error is still an attribute x sets (not an input it reads): nothing describes it
    assert [p.types for p in info.self_params if p.name == "error"] == [[]]
    pool = synth.Pools(info, random.Random(0)).by_param["error"]
    assert any(isinstance(v, New) and v.cls == "CompileError" for v in pool)


@needs_bwrap
def test_an_initialiser_checking_a_stored_argument_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(INIT, [INIT.replace("[:self.limit]", "[:self.limit + 1]")],
                                          context=CONTEXT))
    assert result.conclusive, result.reason  # N=10, N_in=8, C=0.8, N_out=2 (unchanged)
    assert result.coverage == 1.0  # 0.62 before: the isinstance branch was never taken
    assert any("CompileError" in i.state["args"]["error"] for i in result.inputs)
    (candidate,) = result.candidates
    assert candidate.sim_func is not None
