"""Imports inside x's body (issue 24 §2, nineteenth round).

An ``import`` in x's body of a module the sandbox lacks gets a stand-in module (:class:`calib.executors.sandbox.
harness.standins.StandInFinder`). Inside the body of one of x's ``try`` statements with handlers, in the stand-in
mode ``raise_in_try``, it gets ``ImportError`` instead, so ``try: import yaml`` / ``except ImportError:`` reaches
its handler; such an import asks the search for that mode, as a stand-in call there does. The stand-in modules made
while x runs leave ``sys.modules`` after each input: no input sees what an earlier one left on them.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# guessit's ``load_config``: ``try: import yaml`` / ``except ImportError: pass``
OPTIONAL = (
    "def load(text):\n"
    "    try:\n"
    "        import some_missing_parser as parser\n"
    "        kind = 'fast'\n"
    "    except ImportError:\n"
    "        parser = None\n"
    "        kind = 'slow'\n"
    "    if parser is None:\n"
    "        return kind, text.split(',')\n"
    "    return kind, parser.parse(text)\n"
)
REMEMBER = (
    "def remember(n):\n"
    "    import some_missing_store as store\n"
    "    previous = store.__dict__.get('last')\n"
    "    store.last = n\n"
    "    return previous\n"
)


def _compare(function: str, **kwargs: object) -> object:
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        return asyncio.run(executor.compare(function, [], context="import json\n", **kwargs))
    finally:
        executor.close()


@needs_bwrap
def test_an_optional_import_reaches_its_handler() -> None:
    result = _compare(OPTIONAL)
    assert result.coverage == 1.0, result.uncovered_lines  # 0.62 before: the import never failed
    assert result.conclusive, result.reason
    kinds = {json.loads(item.output)["return"]["tuple"][0] for item in result.inputs
             if item.valid and "return" in json.loads(item.output)}
    assert kinds == {"fast", "slow"}
    assert any(item.state.get("standins") == "raise_in_try" for item in result.inputs if item.valid)


@needs_bwrap
def test_no_input_sees_what_an_earlier_one_left_on_an_imported_stand_in() -> None:
    states = [{"args": {"n": "1"}}, {"args": {"n": "2"}}, {"args": {"n": "3"}}]
    result = _compare(REMEMBER, inputs=states)
    returns = [json.loads(item.output).get("return") for item in result.inputs]
    assert returns == [None, None, None]  # before: None, 1, 2 (the module stayed in sys.modules)
