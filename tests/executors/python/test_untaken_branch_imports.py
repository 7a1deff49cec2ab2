"""x defined in a branch the module does not take uses that branch's imports (issue 24 §2).

Python 2 backports sit in ``except ImportError:`` blocks that Python 3 never enters (distlib's ``compat``:
``try: from collections import OrderedDict`` / ``except ImportError:`` then ``from thread import
get_ident as _get_ident`` and the backport class). The scaffold defines x's class after the block, but the
names the block imports were never bound: every input raised ``NameError`` (distlib's
``OrderedDict.__repr__``: valid_inputs 0, mostly missing_name, on the second package list's seeds 16-20,
the thirteenth round's tuning sample). The block's imports now run first, with stand-ins for what fails.
"""

from __future__ import annotations

import ast
import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import trees
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "import sys\n"
    "\n"
    "try:\n"
    "    from collections import OrderedDict\n"
    "except ImportError:\n"
    "    try:\n"
    "        from thread import get_ident as _get_ident\n"
    "    except ImportError:\n"
    "        from dummy_thread import get_ident as _get_ident\n"
    "    import keyword\n"
    "    LIMIT = 3\n"
    "\n"
    "    class OrderedDict(dict):\n"
)
REPR = (
    "        def __repr__(self, _repr_running=None):\n"
    "            if not _repr_running:\n"
    "                _repr_running = {}\n"
    "            call_key = id(self), _get_ident()\n"
    "            if call_key in _repr_running:\n"
    "                return '...'\n"
    "            _repr_running[call_key] = 1\n"
    "            try:\n"
    "                if not self:\n"
    "                    return '%s()' % (self.__class__.__name__,)\n"
    "                return '%s(%r)' % (self.__class__.__name__, sorted(self.items()))\n"
    "            finally:\n"
    "                del _repr_running[call_key]\n"
)


def test_the_imports_before_a_definition_in_its_block_are_found() -> None:
    tree = ast.parse(CONTEXT + REPR)
    backport = tree.body[1].handlers[0].body[-1]
    assert isinstance(backport, ast.ClassDef) and backport.name == "OrderedDict"
    found = trees.imports_before(tree, backport)
    # the try of imports and the plain import; not the assignment (code the module would run, not an import)
    assert [type(s).__name__ for s in found] == ["Try", "Import"]
    assert trees.imports_before(tree, tree.body[0]) == []  # the module's first statement: nothing before it


@needs_bwrap
def test_a_method_of_a_backport_class_gets_stand_ins_for_its_branchs_imports() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(REPR, [REPR.replace("'...'", "'…'")], context=CONTEXT))
    assert result.conclusive, result.reason  # N=10, N_in=8, C=0.8, N_out=2 (unchanged)
    assert not any(i.reason == "missing_name" for i in result.inputs)
    assert any("_get_ident" in w for w in result.warnings)  # a stand-in, and the report says so
    (candidate,) = result.candidates
    assert candidate.sim_func is not None
