"""HumanEval as probes tasks, from a fake Hugging Face cache (nothing is downloaded).

The rows follow HumanEval's column layout (task_id, prompt, canonical_solution, test, entry_point: the
dataset card's features); their content is calib's own. The converted tests are run in the sandbox
against the reference solution and against a wrong one: the conversion must keep what the tests check.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calib._exceptions import InputError, InvalidParameterError
from calib.probes.humaneval import HUMANEVAL_FILE, HUMANEVAL_REPO, HUMANEVAL_REVISION, humaneval_record
from calib.probes.isomorphism import rewrite_tests
from calib.probes.tasks import load_tasks
from calib.probes.testrun import run_tests
from calib.probes.transforms import make_bijection

SCHEMA = pa.schema([(k, pa.string()) for k in ("task_id", "prompt", "canonical_solution", "test", "entry_point")])

ASSERTS = {  # check() holds only asserts: split into one test each, candidate renamed
    "task_id": "HumanEval/0",
    "prompt": 'from typing import List\n\n\ndef total_even(values: List[int]) -> int:\n'
              '    """Return the sum of the even numbers in values.\n    >>> total_even([1, 2, 4])\n    6\n    """\n',
    "canonical_solution": "    return sum(v for v in values if v % 2 == 0)\n",
    "test": '\n\nMETADATA = {"author": "calib", "dataset": "test"}\n\n\ndef check(candidate):\n'
            "    assert candidate([1, 2, 4]) == 6\n    assert candidate([]) == 0\n"
            '    assert candidate([3, 5]) == 0, "odd only"\n',
    "entry_point": "total_even",
}
LOOP = {  # a helper in the prompt, a loop in check(): the test module is setup code, the test is check(f)
    "task_id": "HumanEval/1",
    "prompt": 'def shift(s: str) -> str:\n    """Shift each letter by one."""\n'
              '    return "".join(chr(ord(c) + 1) for c in s)\n\n\n'
              'def unshift(s: str) -> str:\n    """Undo shift: move each letter back by one."""\n',
    "canonical_solution": '    return "".join(chr(ord(c) - 1) for c in s)\n',
    "test": "import string\n\n\ndef check(candidate):\n    for word in ['abc', string.ascii_lowercase[:5]]:\n"
            "        assert candidate(shift(word)) == word\n",
    "entry_point": "unshift",
}
NO_DOCSTRING = {"task_id": "HumanEval/2", "prompt": "def f(x):\n", "canonical_solution": "    return x\n",
                "test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "f"}


@pytest.fixture
def humaneval_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache laid out as huggingface_hub writes it, with the Hub switched off."""
    cache = tmp_path / "hf-cache"
    repo = cache / f"datasets--{HUMANEVAL_REPO.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(HUMANEVAL_REVISION)
    target = repo / "snapshots" / HUMANEVAL_REVISION / HUMANEVAL_FILE
    target.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([ASSERTS, LOOP, NO_DOCSTRING], schema=SCHEMA), target)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_humaneval_rows_become_tasks_and_a_bad_row_is_a_problem(humaneval_cache):
    tasks = load_tasks("humaneval")
    assert [t.task_id for t in tasks] == ["HumanEval/0", "HumanEval/1"]
    first, second = tasks
    # the statement is the entry point's docstring, the code the whole prompt plus the solution
    assert first.prompt.startswith("Return the sum of the even numbers in values.")
    assert first.code == ASSERTS["prompt"] + ASSERTS["canonical_solution"]
    assert first.entry_point == "total_even"
    assert first.tests == ("assert total_even([1, 2, 4]) == 6", "assert total_even([]) == 0",
                           "assert total_even([3, 5]) == 0, 'odd only'")
    assert first.setup == ""  # METADATA is dropped, nothing to import
    assert second.tests == ("check(unshift)",) and second.setup == LOOP["test"].strip("\n")
    assert second.prompt == "Undo shift: move each letter back by one."
    (problem,) = load_tasks("humaneval").problems
    assert problem.row == 3 and "f() has no docstring" in problem.message
    label = f"hf:{HUMANEVAL_REPO}@{HUMANEVAL_REVISION}/{HUMANEVAL_FILE}"
    assert second.source == f"{label}#row=2"
    assert load_tasks(f"humaneval@{HUMANEVAL_REVISION}").tasks == tasks.tasks
    # split asserts are what the iso conditions rewrite; a check(...) test is not applicable to them
    affine = make_bijection("affine")
    assert rewrite_tests(first.tests, first.entry_point, "iso", affine).applicable
    assert not rewrite_tests(second.tests, second.entry_point, "iso", affine).applicable


def test_a_record_missing_a_column_names_it():
    with pytest.raises(ValueError, match="column 'test' is missing or empty"):
        humaneval_record({**ASSERTS, "test": ""})


def test_not_cached_offline_and_a_bad_revision(humaneval_cache):
    with pytest.raises(InputError, match=f"hf download {HUMANEVAL_REPO}"):
        load_tasks(f"humaneval@{'c' * 40}")
    with pytest.raises(InvalidParameterError, match="revision must be a commit hash"):
        load_tasks("humaneval@main")


def test_the_converted_tests_pass_the_reference_and_fail_a_wrong_solution(humaneval_cache, sandbox):
    for task in load_tasks("humaneval"):
        good = asyncio.run(run_tests(sandbox, task.code, task.tests, setup=task.setup))
        assert good.status == "ok" and all(good.passed), (task.task_id, good)
        # the setup runs before the program, so a helper the test module uses comes from the program (shift)
        wrong = task.code.replace("% 2 == 0", "% 2 == 1").replace("ord(c) - 1", "ord(c) + 1")
        bad = asyncio.run(run_tests(sandbox, wrong, task.tests, setup=task.setup))
        assert bad.status == "ok" and not all(bad.passed), (task.task_id, bad)
