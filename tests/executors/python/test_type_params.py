"""A parameter compared with ``type(...)`` is a class (issue 24 §2): ``type(value) != type_`` says ``type_`` is a type,
and the search gives it builtin classes and the file's own, as it does to ``isinstance(v, p)``'s ``p``.

typedload's ``_basicload(l, value, type_)`` casts with ``type_(value)`` where ``type(value) != type_`` and has a
handler for each way the cast fails; ``type_`` only ever got stand-ins, which cast anything, and the handlers'
lines were never reached (coverage 0.78, tuning sample).
"""

from __future__ import annotations

import ast
import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints

COERCE = '''def coerce(value, kind, strict=False):
    if type(value) != kind:
        if strict:
            raise ValueError("expected %s" % kind)
        try:
            return kind(value)
        except ValueError:
            return None
        except TypeError:
            return "not castable"
    return value
'''


def _params(source: str) -> dict[str, hints.Param]:
    info = hints.analyse(ast.parse(source).body[0], skip_first=False)
    return {p.name: p for p in info.params}


def test_the_other_side_of_a_type_comparison_is_a_class() -> None:
    params = _params(COERCE)
    assert "class" in params["kind"].types
    assert "class" not in params["value"].types and "class" not in params["strict"].types
    for source in ("def f(v, t):\n    return type(v) is t\n", "def f(v, t):\n    return t == type(v)\n"):
        got = _params(source)
        assert "class" in got["t"].types and "class" not in got["v"].types
    # ``type(v) is str`` still types v itself, and gives it no class
    got = _params("def f(v):\n    return type(v) is str\n")
    assert got["v"].types == ["str"]


def test_a_cast_whose_handlers_need_real_types_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(executor.compare(COERCE, [COERCE]))
    finally:
        executor.close()
    assert result.conclusive, result.reason
    assert result.uncovered_lines == ()
    states = [i.state["args"].get("kind", "") for i in result.inputs]
    assert any(s.startswith("Global(") for s in states), states  # a builtin class, not a stand-in
