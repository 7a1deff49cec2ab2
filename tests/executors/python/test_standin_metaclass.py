"""A class whose metaclass is withheld is built without it (issue 24 §2).

``class AbstractDateTime(metaclass=AtomicTypeMeta)`` with the metaclass from x's own (withheld) package:
calling the stand-in metaclass made the class itself a stand-in, so a method of it was "not defined" and
every input failed (elementpath's ``AbstractDateTime.fromstring``: valid_inputs 0, mostly call_failed, on
the second package list's seeds 16-20, the thirteenth round's tuning sample; 0.43 of its lines now).
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "import re\n"
    "\n"
    "from shapes.meta import Registry\n"
    "\n"
    "\n"
    "class Shape(dict, metaclass=Registry):\n"
    "    pattern = re.compile(r'^(?P<name>[a-z]+):(?P<sides>\\d+)$')\n"
    "\n"
)
PARSE = (
    "    @classmethod\n"
    "    def fromstring(cls, text):\n"
    "        if not isinstance(text, str):\n"
    "            raise TypeError('not a text: %r' % type(text))\n"
    "        match = cls.pattern.match(text.strip())\n"
    "        if match is None:\n"
    "            raise ValueError('no shape: %r' % text)\n"
    "        shape = cls(name=match.group('name'), sides=int(match.group('sides')))\n"
    "        if shape['sides'] < 3:\n"
    "            shape['kind'] = 'degenerate'\n"
    "        return shape\n"
)


@needs_bwrap
def test_a_classmethod_of_a_class_with_a_withheld_metaclass_runs() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(PARSE, [PARSE.replace("< 3", "<= 3")], context=CONTEXT))
    assert result.conclusive, result.reason  # N=10, N_in=8, C=0.8, N_out=2 (unchanged)
    assert not any(i.reason == "call_failed" for i in result.inputs)
    # the class keeps its base (a dict), without the metaclass, and the report says so
    assert any("class Shape built without its keywords" in w for w in result.warnings)
    assert any('"dict"' in str(i.output) or "sides" in str(i.output) for i in result.inputs if i.valid)
    (candidate,) = result.candidates
    assert candidate.sim_func is not None
