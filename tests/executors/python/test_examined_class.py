"""A class handed alone to a stand-in while x runs is examined, not decorated (issue 24 §2).

A stand-in called with one function or class hands it back, so that ``@app.route("/")`` or a withheld
class decorator leaves the definition as it is. pint's ``check_implemented`` wraps its arithmetic methods
with ``if is_upcast_type(type(other)): return NotImplemented``, ``is_upcast_type`` imported from the
withheld ``.compat``: the stand-in handed back ``type(other)``, which is always true, so x's body never ran
(``Quantity._mul_div`` and ``Quantity.__rpow__``: coverage 0.00 with ten valid inputs on the second package
list's seeds 26-30, the fifteenth round's tuning sample; 0.53 and 0.75 now). While x runs, a class it did
not define itself is now answered as any other call is, by the input's stand-in mode
(``standins._examined``); one x's own ``class`` statement makes, and every one at module level, is still
handed back.
"""

from __future__ import annotations

import asyncio
import json

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "from .compat import is_upcast_type, register\n"
    "\n"
    "def check_implemented(f):\n"
    "    def wrapped(self, *args, **kwargs):\n"
    "        other = args[0]\n"
    "        if is_upcast_type(type(other)):\n"
    "            return NotImplemented\n"
    "        return f(self, *args, **kwargs)\n"
    "    return wrapped\n"
    "\n"
    "@register\n"
    "class Quantity:\n"
    "    def __init__(self, magnitude):\n"
    "        self.magnitude = magnitude\n"
    "\n"
)
X = (
    "    @check_implemented\n"
    "    def scaled(self, other, limit):\n"
    "        if other > limit:\n"
    "            return self.magnitude * limit\n"
    "        if other < -limit:\n"
    "            return -self.magnitude\n"
    "        return self.magnitude * other\n"
)
# x's own class statement, decorated by a withheld decorator: the class is still handed back
LOCAL = (
    "def make(value):\n"
    "    @register\n"
    "    class Box:\n"
    "        size = 2\n"
    "    if value > 3:\n"
    "        return Box.size * value\n"
    "    return Box.__name__\n"
)


@needs_bwrap
def test_a_stand_in_asked_about_a_class_answers_by_the_mode() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        near = X.replace("self.magnitude * limit", "self.magnitude + limit")
        result = asyncio.run(ex.compare(X, [near], context=CONTEXT))
        local = asyncio.run(ex.compare(LOCAL, [], context="from .compat import register\n"))
    finally:
        ex.close()
    # before: every input returned NotImplemented from the wrapper (coverage 0.00, x's lines never ran)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8
    assert any('"return":{"object":"NotImplementedType"' in (i.output or "") for i in result.inputs)
    assert any('"return":{"object":"NotImplementedType"' not in (i.output or "") for i in result.inputs)
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
    # a class x defines and decorates: handed back, so Box.size and Box.__name__ are the class's own
    assert local.conclusive, local.reason
    returns = [json.loads(i.output)["return"] for i in local.inputs if i.output and '"return"' in i.output]
    assert "Box" in returns  # a stand-in in its place would have no __name__ of its own
    assert any(isinstance(r, int) and r >= 8 and r % 2 == 0 for r in returns)  # Box.size * value, value > 3
