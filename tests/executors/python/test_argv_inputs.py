"""Command-line arguments as inputs of the sandbox executor (issue 24 §2).

A ``main()`` that reads ``sys.argv`` or calls ``parse_args()`` with no arguments gets input states
carrying ``argv`` (``sys.argv[1:]``; ``sys.argv[0]`` is fixed) chosen by the search from the parser x
builds, replayed identically on the candidates. Before, such a function ran once with an empty command
line: one output state (argparse's usage error), inconclusive.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import random
import sys

from calib.executors.python import _well_formed_state
from calib.executors.sandbox.harness import ambient, inputs
from tests.executors.python.test_env_stdin_inputs import _compare, needs_bwrap

CONVERT = """\
def main():
    parser = argparse.ArgumentParser(prog="conv")
    parser.add_argument("number", type=int)
    parser.add_argument("-x", "--hex", action="store_true")
    parser.add_argument("--mode", choices=["up", "down"], default="up")
    args = parser.parse_args()
    if args.hex:
        return hex(args.number)
    if args.mode == "down":
        return -args.number
    return args.number
"""


def _reference(argv: list[str]) -> object:
    """CONVERT run here, on the real argparse, with ``sys.argv`` = ["prog", *argv]: the expected return,
    or the name of the exception (argparse's usage error is ``SystemExit``)."""
    ns: dict[str, object] = {"argparse": argparse}
    exec(CONVERT, ns)  # noqa: S102 - the test's own code
    saved = sys.argv
    sys.argv = ["prog", *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return ns["main"]()  # type: ignore[operator]
    except BaseException as e:  # noqa: BLE001 - SystemExit from argparse
        return type(e).__name__
    finally:
        sys.argv = saved


@needs_bwrap
def test_an_argparse_main_is_conclusive_with_synthesized_command_lines() -> None:
    ignores_hex = CONVERT.replace("if args.hex:", "if False:")
    result = _compare(CONVERT, [CONVERT, ignores_hex], context="import argparse\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert result.config["n_inputs"] == 10 and result.config["min_valid"] == 8  # the criteria stay the paper's
    for i in result.inputs:  # each input's output is what argparse makes of its argv
        argv = i.state["argv"]
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        out = json.loads(i.output)
        assert out.get("return", out.get("exception")) == _reference(argv), (argv, out)
    returns = [json.loads(i.output).get("return") for i in result.inputs if i.valid]
    assert any(isinstance(r, str) and r.startswith(("0x", "-0x")) for r in returns)  # --hex reached
    same, ignoring = result.candidates
    assert same.sim_func == 1.0
    assert ignoring.sim_func is not None and ignoring.sim_func < 1.0


@needs_bwrap
def test_the_command_line_of_one_input_never_reaches_the_next() -> None:
    leaky = """\
def main():
    seen = list(sys.argv)
    sys.argv.append("--leak")
    return seen
"""
    given = [{"argv": ["-v", "a b"]}, {}, {"argv": []}, {"argv": ["--help"]}]
    result = _compare(leaky, [leaky], context="import sys\n", inputs_=given, n_inputs=4, min_valid=4)
    assert all(i.valid for i in result.inputs), [i.reason for i in result.inputs]
    seen = [json.loads(i.output)["return"]["list"] for i in result.inputs]  # canonical form of a list
    assert seen == [["prog", "-v", "a b"], ["prog"], ["prog"], ["prog", "--help"]]


@needs_bwrap
def test_a_malformed_command_line_is_refused_with_one_line() -> None:
    result = _compare(CONVERT, [CONVERT], context="import argparse\n", inputs_=[{"argv": "--help"}])
    assert not result.conclusive
    assert result.reason.startswith("invalid input state 0: argv must be a list"), result.reason
    assert "\n" not in result.reason


def test_argv_states_are_bounded() -> None:
    assert _well_formed_state({"args": {}, "argv": ["-v", "--to-roman", "12"]})
    assert _well_formed_state({"args": {}, "argv": []})
    for bad in ("-v", ["-v", 3], ["a\0b"], ["x" * (ambient.MAX_ARG + 1)], ["-v"] * (ambient.MAX_ARGV + 1)):
        problem = ambient.check(None, None, bad)
        assert problem.startswith("argv must be a list of at most") and "\n" not in problem, bad
        assert not _well_formed_state({"args": {}, "argv": bad}), bad


def _scan(source: str, name: str = "main") -> inputs.Uses:
    tree = ast.parse(source)
    node = next(d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == name)
    return inputs.scan(node, tree, {a.arg for a in node.args.args})


def test_the_scan_finds_command_line_readers_and_the_parser_they_build() -> None:
    # the parser built in a helper x calls, as roman.py's main does
    roman = """\
def parse_args():
    parser = argparse.ArgumentParser(prog="roman")
    parser.add_argument("number", help="the value to convert")
    parser.add_argument("-r", "--reverse", action="store_true", default=False)
    return parser.parse_args()

def main():
    args = parse_args()
    return args.number
"""
    uses = _scan(roman)
    assert uses.argv
    assert uses.options == [(["number"], "str", [], True), (["-r", "--reverse"], "flag", [], False)]
    assert _scan("def main(argv=None):\n    return parser.parse_args(argv)\n").argv
    assert _scan("def main():\n    opts, rest = getopt.getopt(sys.argv[1:], 'v')\n").argv
    assert not _scan("def main(items):\n    return parser.parse_args(['-v'])\n").argv  # its own command line
    assert not _scan("def f(self):\n    return self.argv\n", "f").argv


def test_the_pools_are_command_lines_the_parser_accepts_and_rejects() -> None:
    uses = _scan("def main():\n" + "\n".join("    " + line for line in CONVERT.splitlines()[1:]) + "\n")
    pool = ambient.argv_pool(uses, [], [7], random.Random(0))
    assert [] in pool and ["--help"] in pool
    parser = argparse.ArgumentParser(prog="conv", exit_on_error=False)
    parser.add_argument("number", type=int)
    parser.add_argument("-x", "--hex", action="store_true")
    parser.add_argument("--mode", choices=["up", "down"], default="up")
    parsed = []
    for argv in pool:
        with contextlib.suppress(SystemExit, argparse.ArgumentError), contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()):
            parsed.append(parser.parse_args(argv))
    assert len(parsed) >= len(pool) // 2  # most parse (argparse itself is the judge)
    assert {p.mode for p in parsed} == {"up", "down"} and {p.hex for p in parsed} == {True, False}
    assert 7 in {p.number for p in parsed}  # a mined number
