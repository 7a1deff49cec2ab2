"""What x does with a property that returns another attribute of ``self`` describes that attribute (issue 24 §2).

ruamel.yaml's and strictyaml's scanners read characters through ``self.reader.peek()``, where ``reader`` is a
property returning ``self._scanner_reader`` (set from the loader the first time). The property is the class's
own, not input, so what x did with ``self.reader`` described nothing the search varies: ``_scanner_reader``
got plain values, and every input raised ``AttributeError: 'int' object has no attribute 'peek'`` or compared
a bare stand-in. Now ``_scanner_reader`` is an object whose ``peek`` answers with the texts x compares it to
(``callees._alias``): ruamel.yaml's ``Scanner.check_plain`` went from coverage 0.33 to conclusive on the second
package list's seeds 21-25 (the fourteenth round's tuning sample).
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import callees, hints, scaffold
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class Scanner:\n"
    "    def __init__(self, loader=None):\n"
    "        self.loader = loader\n"
    "\n"
    "    @property\n"
    "    def reader(self):\n"
    "        try:\n"
    "            return self._reader\n"
    "        except AttributeError:\n"
    "            self._reader = self.loader.reader\n"
    "            return self._reader\n"
    "\n"
)
X = (
    "    def scan_sign(self):\n"
    "        ch = self.reader.peek()\n"
    "        if ch == '-':\n"
    "            sign = -1\n"
    "        elif ch == '+':\n"
    "            sign = 1\n"
    "        else:\n"
    "            return None\n"
    "        self.reader.forward()\n"
    "        return sign\n"
)


def _described(context: str, function: str) -> dict[str, hints.Param]:
    placed = scaffold.place(context, function)
    info = hints.analyse(placed.node, skip_first=True)
    callees.add_callees(info, placed)
    return {p.name: p for p in info.self_params}


def test_the_attribute_a_property_returns_takes_what_x_does_with_the_property() -> None:
    params = _described(CONTEXT, X)
    kept = params["_reader"]  # described by the property's body alone, it had no use at all
    assert {"peek", "forward"} <= set(kept.attrs) and {"peek", "forward"} <= set(kept.children)
    assert "object" in kept.types and kept.children["peek"].types == ["callable"]
    # a property that returns something else (or one of two attributes) aliases nothing
    other = CONTEXT.replace("return self._reader\n        except", "return self._reader.copy()\n        except")
    assert "peek" not in _described(other, X)["_reader"].attrs


@needs_bwrap
def test_a_scanner_reading_through_a_property_gets_answers_to_compare() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        result = asyncio.run(ex.compare(X, [X.replace("'+'", "'*'")], context=CONTEXT))
    finally:
        ex.close()
    assert result.conclusive and result.coverage == 1.0
    # peek answers '-' and '+' themselves (not only stand-ins that compare equal by a draw), so the near-copy
    # that looks for '*' instead differs; before, both gave the same outputs (SIM_func 1.0, 4 distinct outputs)
    assert result.distinct_outputs >= 6
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
