"""Lookups by name as comparison feedback (issue 24 §2, nineteenth round).

While x is explored, ``getattr(obj, name[, default])``, ``hasattr(obj, name)`` and ``import_module(name)`` are
recorded (:func:`calib.executors.sandbox.harness.cmplog.lookup`, ``has``, ``imports``): a text name that ``obj``
lacks is paired with the names it has that share the longest prefix with it (and the rest of the name after that
prefix with theirs), so ``getattr(self, "visit_" + kind)`` gets ``kind`` written as a ``visit_*`` method's suffix;
a text that names no module is paired with modules every sandbox can import. What x sees is unchanged.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

VISITOR = (
    "class Visitor:\n"
    "    def visit_Name(self, node):\n"
    "        return 'name ' + str(node)\n"
    "\n"
    "    def visit_Call(self, node):\n"
    "        return 'call ' + str(node)\n"
    "\n"
    "    def generic(self, node):\n"
    "        return 'generic'\n"
)
VISIT = (
    "    def visit(self, kind, node):\n"
    "        method = getattr(self, 'visit_' + kind, None)\n"
    "        if method is None:\n"
    "            return self.generic(node)\n"
    "        result = method(node)\n"
    "        return result.upper()\n"
)
# dynaconf's ``import_settings``: a dotted path to an attribute of a module
LOAD = (
    "def load(path):\n"
    "    if '.' not in path:\n"
    "        raise ValueError(path)\n"
    "    module_name, attribute = path.rsplit('.', 1)\n"
    "    try:\n"
    "        module = import_module(module_name)\n"
    "    except ImportError:\n"
    "        return None\n"
    "    if not hasattr(module, attribute):\n"
    "        raise LookupError(attribute)\n"
    "    found = getattr(module, attribute)\n"
    "    kind = type(found).__name__\n"
    "    described = kind + ' ' + attribute\n"
    "    return described\n"
)


class _Handlers:
    visit_Name = visit_Call = None

    def __init__(self) -> None:
        self.count = 0


def test_a_missing_attribute_is_paired_with_the_names_that_share_its_prefix() -> None:
    cmplog.take_pairs()
    handlers = _Handlers()
    assert cmplog.lookup(handlers, "visit_abc", "fallback") == "fallback"
    with pytest.raises(AttributeError):
        cmplog.lookup(handlers, "visit_abc")
    assert cmplog.lookup(handlers, "count") == 0  # found: nothing kept
    assert cmplog.has(handlers, "zz") is False  # no common prefix: the first public names
    assert cmplog.take_pairs() == [("key", "abc", "Call"), ("key", "visit_abc", "visit_Call"), ("key", "abc", "Name"),
                                   ("key", "visit_abc", "visit_Name"), ("key", "zz", "count"),
                                   ("key", "zz", "visit_Call"), ("key", "zz", "visit_Name")]


def test_a_module_that_does_not_import_is_paired_with_ones_that_do() -> None:
    cmplog.take_pairs()
    with pytest.raises(ImportError):
        cmplog.imports(importlib.import_module, "no_such_module_here")
    assert cmplog.imports(importlib.import_module, "json").__name__ == "json"
    assert cmplog.take_pairs() == [("key", "no_such_module_here", module) for module in cmplog.MODULES]
    for module in cmplog.MODULES:
        importlib.import_module(module)


def test_lookups_are_rewritten_unless_x_binds_the_name() -> None:
    node = ast.parse(LOAD).body[0]
    cmplog.instrument(node, None)
    recorded = {n.func.attr for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id == cmplog.NAME}
    assert {"imports", "has", "lookup"} <= recorded
    shadowed = ast.parse("def f(x, getattr):\n    return getattr(x, 'a')\n").body[0]
    cmplog.instrument(shadowed, None)
    assert not any(isinstance(n, ast.Attribute) and n.attr == "lookup" for n in ast.walk(shadowed))


@needs_bwrap
@pytest.mark.parametrize(("function", "context"), [(VISIT, VISITOR), (LOAD, "from importlib import import_module\n")],
                         ids=["getattr-dispatch", "import-module"])
def test_the_branches_behind_a_lookup_by_name_are_reached(function: str, context: str) -> None:
    # before this round: 0.60 (no kind named a visit_ method), 0.50 (no path named a module)
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(executor.compare(function, [], context=context))
    finally:
        executor.close()
    assert result.coverage == 1.0, result.uncovered_lines
    assert result.conclusive, result.reason
