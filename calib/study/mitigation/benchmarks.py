"""Benchmark pass@1 for the mitigation study: HumanEval, MBPP or a task file, with the paper's protocols.

The functional-memorization paper's Appendix H.2 measures each point's code-generation utility with greedy
decoding on two benchmarks suited to a base model (docs/mitigation.md#utility):

- **completion** (HumanEval, Chen et al. 2021, and any task file or ``organism:business``): the prompt is the task's
  code up to the end of its entry point's docstring (for HumanEval exactly the dataset's prompt: imports, helpers,
  signature and docstring), or, for a task whose function has no docstring, its signature with the statement as the
  docstring. The completion is cut at the first out-of-function token (parse-back of the function), the program is
  the completed function after the prompt's preamble, and it runs on every test;
- **MBPP 3-shot** (Austin et al. 2021; the ``mbpp`` sources): the first three tasks of the set are the exemplars
  (and are not scored: 427 - 3 = 424 on the sanitized test split), each shown as the MBPP paper's prompt (the
  statement, "Your code should pass these tests:", three tests, then the code between ``[BEGIN]`` and ``[DONE]``);
  the task follows the same way up to ``[BEGIN]``, the completion is cut at ``[DONE]`` and run with the task's
  imports and all of its tests.

A task is solved when every test passes in the sandbox (calib.probes.testrun); pass@1 is the share solved.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from calib.probes.prompting import MBPP_INSTRUCTION, TESTS_MARKER, extract_program, signature_of
from calib.probes.tasks import Task

__all__ = ["COMPLETION_STOP", "MBPP_SHOTS", "BenchmarkPrompt", "benchmark_prompts", "passed_row", "program_of",
           "protocol_of"]

#: The completion protocol's stop sequences (HumanEval's, Chen et al. 2021): a new top-level statement ends the
#: function; parse-back cuts what is left over.
COMPLETION_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
#: MBPP's exemplars: the first three tasks of the set.
MBPP_SHOTS = 3
_MBPP_STOP = ("[DONE]",)


@dataclass(frozen=True)
class BenchmarkPrompt:
    """One scored task of a benchmark: its prompt, what the completion continues, and its tests."""

    benchmark: str
    task: Task
    protocol: str  # completion | mbpp-3shot
    prompt: str
    stop: tuple[str, ...]
    preamble: str  # completion: the prompt before the entry point's def (imports, helpers); mbpp: ""
    signature: str  # completion: the prompt from the entry point's def on, which the completion continues


def protocol_of(source: str) -> str:
    """``mbpp-3shot`` for the MBPP sources, else ``completion``."""
    return "mbpp-3shot" if source == "mbpp" or source.startswith(("mbpp:", "mbpp@")) else "completion"


def _mbpp_shot(task: Task) -> str:
    tests = "\n".join(task.tests[:3])
    return f"{MBPP_INSTRUCTION}{task.prompt} {TESTS_MARKER}\n\n{tests}\n[BEGIN]\n"


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    return None


def _completion_prompt(task: Task) -> tuple[str, str, str]:
    """(prompt, preamble, signature) of the completion protocol (module docstring)."""
    try:
        tree = ast.parse(task.code)
    except SyntaxError:
        tree = None
    node = _entry(tree, task.entry_point) if tree is not None else None
    if node is not None and node.body and isinstance(node.body[0], ast.Expr) \
            and isinstance(getattr(node.body[0], "value", None), ast.Constant) \
            and isinstance(node.body[0].value.value, str) and node.body[0].end_lineno is not None:
        lines = task.code.splitlines(keepends=True)
        start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        prompt = "".join(lines[:node.body[0].end_lineno]).rstrip("\n") + "\n"
        return prompt, "".join(lines[:start]), prompt[len("".join(lines[:start])):]
    from calib.probes.prompting import build_prompt

    built = build_prompt(task, "original", style="completion", bijection=None, contract_bijection=None,  # type: ignore[arg-type]
                         seed=0, shown_tests=0)
    signature = signature_of(task.code, task.entry_point)
    at = built.prompt.index(signature)
    return built.prompt, built.prompt[:at], built.prompt[at:]


def benchmark_prompts(name: str, tasks: list[Task]) -> list[BenchmarkPrompt]:
    """The scored tasks of benchmark ``name`` (its source) with their prompts, in the set's order."""
    if protocol_of(name) == "mbpp-3shot":
        if len(tasks) <= MBPP_SHOTS:
            raise ValueError(f"{name}: {len(tasks)} tasks; the 3-shot protocol needs more than {MBPP_SHOTS} (the first "
                             "three are the exemplars)")
        shots = "".join(_mbpp_shot(t) + t.code.strip("\n") + "\n[DONE]\n\n" for t in tasks[:MBPP_SHOTS])
        return [BenchmarkPrompt(name, t, "mbpp-3shot", shots + _mbpp_shot(t), _MBPP_STOP, "", "")
                for t in tasks[MBPP_SHOTS:]]
    out = []
    for t in tasks:
        prompt, preamble, signature = _completion_prompt(t)
        out.append(BenchmarkPrompt(name, t, "completion", prompt, COMPLETION_STOP, preamble, signature))
    return out


def program_of(p: BenchmarkPrompt, text: str) -> tuple[str | None, str | None]:
    """The program a completion gives (run on the task's tests), or ``(None, why)``."""
    if p.protocol == "mbpp-3shot":
        return extract_program(text.split("[DONE]")[0], style="mbpp", signature="", entry_point=p.task.entry_point)
    program, why = extract_program(text, style="completion", signature=p.signature, entry_point=p.task.entry_point)
    return (None, why) if program is None else (p.preamble + program, None)


def passed_row(point: str, p: BenchmarkPrompt, program: str | None, run: Any, why: str | None) -> dict[str, Any]:
    """One row of the ``benchmark_results`` table."""
    base = {"point": point, "benchmark": p.benchmark, "task_id": p.task.task_id, "program": program,
            "tests_total": len(p.task.tests)}
    if run is None:
        return {**base, "status": why or "no_completion", "passed": None if why is None else False,
                "tests_passed": None if why is None else 0}
    return {**base, "status": run.status, "passed": run.all_passed, "tests_passed": run.n_passed}
