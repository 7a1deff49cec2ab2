"""A property with a setter that x reads is input, set through its setter (issue 24 §2).

``self.x`` that the class itself defines is context, not input: methods, constants, and properties computed
from the instance's state. A property with a setter is also the class's own way to set that state
(textfsm's ``Row.header = [...]`` sets the row's keys and pads its values): it is now varied like any
attribute x reads, and set by calling the setter, so x sees a consistent object. Before, the input's value
was dropped. (No function of the samples was seen to need it: textfsm's ``Row.Insert`` reads ``header``, whose
property is defined after it, so not in its context.)
"""

from __future__ import annotations

import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import classattrs
from calib.executors.sandbox.harness.calls import set_attributes
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class Row:\n"
    "    def __init__(self):\n"
    "        self._keys = []\n"
    "        self._slots = {}\n"
    "\n"
    "    def _get_header(self):\n"
    "        return self._keys\n"
    "\n"
    "    def _set_header(self, names):\n"
    "        if len(names) > 8:\n"
    "            raise ValueError('too many columns')\n"
    "        self._keys = list(names)\n"
    "        self._slots = {name: 'slot-%d' % i for i, name in enumerate(self._keys)}\n"
    "\n"
    "    header = property(_get_header, _set_header)\n"
    "    width = property(lambda self: len(self._keys))\n"
    "\n"
)
X = (
    "    def fill(self, value):\n"
    "        if not self.header:\n"
    "            return 'empty'\n"
    "        filled = {}\n"
    "        for name in self.header:\n"
    "            filled[self._slots[name]] = value\n"
    "        return filled\n"
)


def _row_class() -> type:
    namespace: dict = {}
    exec(CONTEXT, namespace)  # noqa: S102 - the test's own class
    return namespace["Row"]


def test_a_property_with_a_setter_is_instance_state_set_through_it() -> None:
    row = _row_class()
    assert classattrs.instance_default(row, "header")  # settable: the input's
    assert not classattrs.instance_default(row, "width")  # computed only: the class's
    built = set_attributes(row(), row, {"header": ["a", "b"], "width": 7})
    assert built._keys == ["a", "b"] and built._slots == {"a": "slot-0", "b": "slot-1"}  # the setter ran
    assert built.width == 2  # a property without a setter is left as the class computes it
    refused = set_attributes(row(), row, {"header": list(range(9))})  # the setter refuses: the input's state stays
    assert refused._keys == [] and refused.header == []


@needs_bwrap
def test_a_method_reading_a_settable_property_is_conclusive() -> None:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(ex.compare(X, [X.replace("= value", "= name")], context=CONTEXT))
    finally:
        ex.close()
    assert result.conclusive, result.reason  # (also before: the search set _keys and _slots to agree directly)
    assert result.uncovered_lines == ()
    assert any("header=" in i.state.get("self", "") for i in result.inputs)  # before: never varied
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
