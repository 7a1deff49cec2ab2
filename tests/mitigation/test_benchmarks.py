"""The benchmark protocols of the mitigation study (paper App. H.2) on planted completions, run in the real sandbox:
HumanEval's prompt is the dataset's own (code up to the docstring's end), a completion is cut at the function's
end and run after the prompt's preamble; MBPP is 3-shot with the first three tasks as exemplars, cut at [DONE]."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calib.probes.tasks import Task, load_tasks
from calib.probes.testrun import run_tests
from calib.study.mitigation.benchmarks import benchmark_prompts, passed_row, program_of, protocol_of

# A task in the layout of HumanEval/0 (imports, a helper, the entry point with its docstring), written for this test.
HUMANEVAL_CODE = '''from typing import List


def _gap(a: float, b: float) -> float:
    return abs(a - b)


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    """
    for i, a in enumerate(numbers):
        for j, b in enumerate(numbers):
            if i != j and _gap(a, b) < threshold:
                return True
    return False
'''
TESTS = ("assert has_close_elements([1.0, 2.0, 3.9, 4.0], 0.3) == True",
         "assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False")
FIXTURE = Path(__file__).parents[1] / "probes" / "fixtures" / "tasks.jsonl"


def _run(sandbox, program, task):
    return asyncio.run(run_tests(sandbox, program, task.tests, setup=task.setup))


def test_humaneval_prompt_is_the_code_through_the_docstring_and_the_solution_passes(sandbox):
    task = Task("HumanEval/0", "Check ...", HUMANEVAL_CODE, "has_close_elements", TESTS)
    (p,) = benchmark_prompts("humaneval", [task])
    assert protocol_of("humaneval") == "completion" and p.stop == ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
    assert HUMANEVAL_CODE.startswith(p.prompt) and p.prompt.endswith('    """\n')
    solution = HUMANEVAL_CODE[len(p.prompt):]
    # the first out-of-function token ends the program: what follows is cut away, helpers come from the prompt
    program, why = program_of(p, solution + "\n\nprint(has_close_elements([], 1.0))\ndef broken(:\n")
    assert why is None and "broken" not in program and "print(" not in program and "def _gap" in program
    run = _run(sandbox, program, task)
    assert run.all_passed and run.status == "ok"
    wrong, _ = program_of(p, "    return False\n")
    run = _run(sandbox, wrong, task)
    assert run.passed == (False, True) and not run.all_passed
    row = passed_row("npo@1", p, wrong, run, None)
    assert (row["passed"], row["tests_passed"], row["tests_total"], row["status"]) == (False, 1, 2, "ok")
    # no function in the completion: a failed task (never unscored); no completion at all: unscored
    program, why = program_of(p, "")
    assert program is None and passed_row("t", p, None, None, why)["passed"] is False
    assert passed_row("t", p, None, None, None)["passed"] is None


def test_a_task_without_docstring_gets_its_statement_as_the_docstring(sandbox):
    tasks = list(load_tasks(str(FIXTURE)))
    for p in benchmark_prompts(str(FIXTURE), tasks):
        at = p.task.code.index(f"def {p.task.entry_point}(")
        assert p.prompt.endswith('"""\n') and p.signature.startswith(f"def {p.task.entry_point}(")
        assert p.task.prompt.split()[0] in p.prompt and p.preamble == p.prompt[:p.prompt.index("def ")]
        body = p.task.code[at:].split("\n", 1)[1]
        program, why = program_of(p, body)
        assert why is None
        assert _run(sandbox, program, p.task).all_passed, p.task.task_id


def test_mbpp_is_three_shot_on_the_first_three_tasks(sandbox):
    tasks = list(load_tasks(str(FIXTURE)))
    assert len(tasks) > 3
    prompts = benchmark_prompts("mbpp", tasks)
    assert protocol_of("mbpp:sanitized:test") == "mbpp-3shot" and protocol_of("mbpp-like.jsonl") == "completion"
    # 427 - 3 = 424 in the paper: the exemplars are not scored
    assert [p.task.task_id for p in prompts] == [t.task_id for t in tasks[3:]]
    p = prompts[0]
    for shot in tasks[:3]:
        assert f"[BEGIN]\n{shot.code.strip()}\n[DONE]" in p.prompt
    assert p.prompt.endswith("[BEGIN]\n") and p.task.tests[0] in p.prompt and p.stop == ("[DONE]",)
    assert p.prompt.count("You are an expert Python programmer, and here is your task: ") == 4
    program, why = program_of(p, p.task.code + "[DONE]\nassert False\n")
    assert why is None and "assert False" not in program
    assert _run(sandbox, program, p.task).all_passed
    with pytest.raises(ValueError, match="3-shot"):
        benchmark_prompts("mbpp", tasks[:3])
