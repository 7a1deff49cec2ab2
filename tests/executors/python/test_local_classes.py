"""The methods of a class x defines and returns are called after x (issue 24 §2, thirty-fourth round).

x that declares a class in its body and returns an instance of it (efilter's ``user_func`` returns
``UserFunction()``, a subclass with ``__call__`` and two class methods) or the class itself (a class
factory) has most of its lines in methods nothing called: coverage 0.67 for ``user_func`` whatever the
input. Now :func:`returned.methods` calls each of the class's own methods once on what x returned, the
way the returned-closure probe calls a closure, and each outcome enters the output state under
``probes`` (docs/executors.md, "Returned closures and classes")."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon, returned, scaffold
from calib.executors.sandbox.harness.values import decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# efilter 1.5's api.user_func, its docstring left out; the base class comes from a withheld module
USER_FUNC_CONTEXT = "from efilter.stdlib import core as std_core\n"
USER_FUNC = (
    "def user_func(func, arg_types=None, return_type=None):\n"
    "    class UserFunction(std_core.TypedFunction):\n"
    "        name = func.__name__\n"
    "\n"
    "        def __call__(self, *args, **kwargs):\n"
    "            return func(*args, **kwargs)\n"
    "\n"
    "        @classmethod\n"
    "        def reflect_static_args(cls):\n"
    "            return arg_types\n"
    "\n"
    "        @classmethod\n"
    "        def reflect_static_return(cls):\n"
    "            return return_type\n"
    "\n"
    "    return UserFunction()\n"
)
# a candidate whose class answers the return type for the argument types
USER_FUNC_WRONG = USER_FUNC.replace("            return arg_types\n", "            return return_type\n")

COUNTER = (
    "def counter_class(start, limit):\n"
    "    class Counter:\n"
    "        def __init__(self, step):\n"
    "            self.value = start\n"
    "            self.step = step\n"
    "\n"
    "        def bump(self):\n"
    "            if self.value + self.step > limit:\n"
    "                raise OverflowError(limit)\n"
    "            self.value += self.step\n"
    "            return self.value\n"
    "\n"
    "        @property\n"
    "        def left(self):\n"
    "            return limit - self.value\n"
    "\n"
    "        def __del__(self):\n"
    "            print('gone')\n"
    "\n"
    "    return Counter\n"
)

# mutagen 1.46's _util.enum, its docstring left out: a class made by type() whose methods x sets
ENUM = (
    "def enum(cls):\n"
    "    assert cls.__bases__ == (object,)\n"
    "    d = dict(cls.__dict__)\n"
    "    new_type = type(cls.__name__, (int,), d)\n"
    "    new_type.__module__ = cls.__module__\n"
    "    map_ = {}\n"
    "    for key, value in d.items():\n"
    "        if key.upper() == key and isinstance(value, int):\n"
    "            value_instance = new_type(value)\n"
    "            setattr(new_type, key, value_instance)\n"
    "            map_[value] = key\n"
    "\n"
    "    def str_(self):\n"
    "        if self in map_:\n"
    "            return '%s.%s' % (type(self).__name__, map_[self])\n"
    "        return '%d' % int(self)\n"
    "\n"
    "    def repr_(self):\n"
    "        if self in map_:\n"
    "            return '<%s.%s: %d>' % (type(self).__name__, map_[self], int(self))\n"
    "        return '%d' % int(self)\n"
    "\n"
    "    setattr(new_type, '__repr__', repr_)\n"
    "    setattr(new_type, '__str__', str_)\n"
    "    return new_type\n"
)


def _x_lines(source: str) -> tuple[int, int, int]:
    return (1, 1, source.count("\n"))


def _defined(source: str, *args: object) -> object:
    """Our own test source run here, as the scaffold names it (the probe knows x's code by its file)."""
    namespace: dict[str, object] = {"__name__": "module_of_x"}
    exec(compile(source, scaffold.FILENAME, "exec"), namespace)  # noqa: S102 - the test's own source
    name = source.split("(")[0].removeprefix("def ")
    return namespace[name](*args)  # type: ignore[operator]


def test_the_methods_of_a_returned_instance_are_called_once_each() -> None:
    class Base:  # what the withheld TypedFunction stands for
        pass

    namespace: dict[str, object] = {"__name__": "module_of_x", "std_core": type("core", (), {"TypedFunction": Base})}
    exec(compile(USER_FUNC, scaffold.FILENAME, "exec"), namespace)  # noqa: S102 - the test's own source
    instance = namespace["user_func"](len, ("a",), "b")  # type: ignore[operator]
    out = returned.methods(instance, _x_lines(USER_FUNC))
    # the class's own methods by name; __call__ gets one plain value (it takes only *args)
    assert out == [["r.__call__(2)", {"exception": "TypeError"}],  # len(2)
                   ["r.reflect_static_args()", {"return": {"tuple": ["a"]}}],
                   ["r.reflect_static_return()", {"return": "b"}]]
    # a value of a class defined outside x, or a class of x's module, is not probed
    assert returned.methods(Base(), _x_lines(USER_FUNC)) is None
    assert returned.methods([instance], _x_lines(USER_FUNC)) is None
    assert returned.methods(instance, (1, 1, 1)) is None  # the class's code is not within x's lines


def test_a_returned_class_is_made_from_its_own_init_and_probed(capsys: pytest.CaptureFixture[str]) -> None:
    cls = _defined(COUNTER, 10, 13)
    out = returned.methods(cls, _x_lines(COUNTER))
    # Counter(2): value 10, step 2; bump() 12; the property read after it: 13 - 12; __del__ is not called
    assert out == [["r(2)", {"return": {"object": "module_of_x.counter_class.<locals>.Counter",
                                        "state": [["step", 2], ["value", 10]]}}],
                   ["r(2).bump()", {"return": 12}],
                   ["r(2).left", {"return": 1}]]
    cls = _defined(COUNTER, 10, 11)
    assert returned.methods(cls, _x_lines(COUNTER))[1:] == [["r(2).bump()", {"exception": "OverflowError"}],
                                                            ["r(2).left", {"return": 1}]]
    capsys.readouterr()


@needs_bwrap
def test_a_returned_instance_of_a_local_class_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        result = asyncio.run(executor.compare(USER_FUNC, [USER_FUNC, USER_FUNC_WRONG], context=USER_FUNC_CONTEXT))
    finally:
        executor.close()
    # before: coverage 0.67 (the three method bodies never ran), inconclusive on every input
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    told_apart = checked = 0
    same, wrong = result.candidates
    for i, item in enumerate(result.inputs):
        if not item.valid:
            continue
        assert same.matches[i]
        output = json.loads(item.output)
        if "probes" not in output:  # x raised (``func`` without a __name__): nothing was returned
            assert "exception" in output
            continue
        probes = dict(output["probes"])
        checked += 1
        args = {k: decode(v) for k, v in item.state["args"].items()}
        # what the class methods answer is the input's own argument (None where it was left to its default)
        for method, param in (("reflect_static_args", "arg_types"), ("reflect_static_return", "return_type")):
            assert probes[f"r.{method}()"] == {"return": canon.canonical(args.get(param))}, (method, args)
        told_apart += not wrong.matches[i]
    assert checked >= 3
    assert told_apart >= 1  # the candidate whose reflect_static_args answers the return type


@needs_bwrap
def test_a_class_factory_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        result = asyncio.run(executor.compare(COUNTER, []))
    finally:
        executor.close()
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    labels = {label for item in result.inputs if item.valid for label, _ in json.loads(item.output)["probes"]}
    assert labels == {"r(2)", "r(2).bump()", "r(2).left"}


def test_the_methods_x_sets_on_a_class_it_makes_are_called() -> None:
    class Color:
        RED = 0
        BLUE = 3

    cls = _defined(ENUM, Color)
    out = returned.methods(cls, _x_lines(ENUM))
    # Color() is 0, RED's value: both methods find it in map_ (methods in name order: __repr__, __str__)
    assert [label for label, _ in out] == ["r()", "r().__repr__()", "r().__str__()"]
    assert out[1:] == [["r().__repr__()", {"return": "<Color.RED: 0>"}], ["r().__str__()", {"return": "Color.RED"}]]


@needs_bwrap
def test_a_class_made_by_type_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        result = asyncio.run(executor.compare(ENUM, []))
    finally:
        executor.close()
    # before: coverage 0.71 (neither str_ nor repr_ ever ran)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.9
    reached = set(range(1, ENUM.count("\n") + 1)) - set(result.uncovered_lines)
    assert {14, 16, 19, 21} <= reached  # both methods ran: ``if self in map_:`` and the ``'%d'`` return
