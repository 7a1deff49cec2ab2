"""Benchmark tasks: task files and MBPP from a fake Hugging Face cache (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calib._exceptions import InputError, InvalidParameterError
from calib.probes.tasks import MBPP_REPO, MBPP_REVISION, Task, load_tasks

FIXTURE = Path(__file__).parent / "fixtures" / "tasks.jsonl"


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


GOOD = {"task_id": "a", "prompt": "Double a number.", "code": "def double(n):\n    return 2 * n\n",
        "test_list": ["assert double(2) == 4"]}


# --- the fixture file -----------------------------------------------------------------------------


def test_fixture_tasks_load_with_inferred_entry_points():
    tasks = load_tasks(str(FIXTURE))
    assert tasks.problems == ()
    # the function each fixture's first test calls, read off tests/probes/fixtures/tasks.jsonl by hand
    assert [(t.task_id, t.entry_point) for t in tasks] == [
        ("1", "digit_sum"), ("2", "cullen"), ("3", "greatest_common_divisor"), ("4", "count_divisors"),
        ("5", "largest"), ("6", "reverse_digits"), ("7", "count_vowels"), ("8", "running_total")]
    assert all(len(t.tests) == 3 for t in tasks)
    gcd = tasks[2]
    assert gcd.setup == "import math"  # from test_imports
    assert gcd.source == f"{FIXTURE}#row=3"
    # task 4 uses MBPP-full's "text", task 5 the "tests" key
    assert tasks[3].prompt == "Write a function that counts how many positive integers divide n exactly."
    assert tasks[4].tests[0] == "assert largest([3, 9, 2]) == 9"


def test_limit_keeps_the_first_good_tasks():
    assert [t.task_id for t in load_tasks(str(FIXTURE), limit=3)] == ["1", "2", "3"]
    with pytest.raises(InvalidParameterError, match="limit must be a positive integer"):
        load_tasks(str(FIXTURE), limit=0)


# --- keys and formats -----------------------------------------------------------------------------


def test_json_list_and_setup_keys(tmp_path):
    rows = [{**GOOD, "task_id": 7, "test_imports": ["import math"], "test_setup_code": "K = 3\r\n",
             "tests": ["assert double(K) == 6"], "test_list": None},
            {**GOOD, "task_id": "b", "setup": "import os", "entry_point": "double"}]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(rows))
    first, second = load_tasks(str(path))
    assert first == Task(task_id="7", prompt="Double a number.", code=GOOD["code"], entry_point="double",
                         tests=("assert double(K) == 6",), setup="import math\nK = 3\n", source=f"{path}#row=1")
    assert second.setup == "import os" and second.entry_point == "double"


def test_entry_point_is_the_first_called_function_the_code_defines(tmp_path):
    code = ("import math\n\nclass Pair:\n    def __init__(self, a):\n        self.a = a\n\n"
            "def longest(xs):\n    return 1\n")
    row = {**GOOD, "code": code, "test_list": ["assert set([longest([Pair(1)])]) == {1} and math.pi > 3"]}
    (task,) = load_tasks(str(write_jsonl(tmp_path / "t.jsonl", [row])))
    assert task.entry_point == "longest"  # set() is not defined by the code, Pair comes after longest


def test_parquet_task_file(tmp_path):
    path = tmp_path / "tasks.parquet"
    pq.write_table(pa.Table.from_pylist([GOOD]), path)
    (task,) = load_tasks(str(path))
    assert task.task_id == "a" and task.source == f"{path}#row=1"


# --- bad rows -------------------------------------------------------------------------------------

BAD_ROWS = [
    ({"task_id": "x", "prompt": "p", "code": "def f():\n    return 1\n"}, "key 'test_list' or 'tests' is missing"),
    ({**GOOD, "code": "def double(n:\n"}, "key 'code' does not parse (line 1:"),
    ({**GOOD, "test_list": "assert double(2) == 4"}, "key 'test_list' must be a list of strings"),
    ({**GOOD, "test_list": []}, "key 'test_list' is empty"),
    ({**GOOD, "test_list": ["assert double(2) = 4"]}, "key 'test_list[0]' does not parse"),
    ({**GOOD, "test_list": ["assert 2 * 2 == 4"]}, "no 'entry_point' given and the first test calls no function"),
    ({**GOOD, "entry_point": "triple"}, "key 'entry_point' names 'triple', which 'code' does not define"),
    ({**GOOD, "prompt": ""}, "key 'prompt' must be a non-empty string"),
    ({key: v for key, v in GOOD.items() if key != "prompt"}, "key 'prompt' or 'text' is missing"),
    ({**GOOD, "task_id": None}, "key 'task_id' is missing"),
    ({**GOOD, "task_id": True}, "key 'task_id' is True"),
    ({**GOOD, "test_imports": "import math"}, "key 'test_imports' must be a list of strings"),
    ([1, 2], "a task must be a JSON object"),
    ("{not json", "not valid JSON"),
]


@pytest.mark.parametrize("row,expected", BAD_ROWS, ids=[e for _, e in BAD_ROWS])
def test_a_bad_row_is_reported_and_the_rest_loads(tmp_path, row, expected):
    path = write_jsonl(tmp_path / "tasks.jsonl", [GOOD, "", row])  # the bad row is on line 3
    tasks = load_tasks(str(path))
    assert [t.task_id for t in tasks] == ["a"]
    ((number, message),) = tasks.problems
    assert number == 3
    assert message.startswith(f"{path}: row 3: ") and expected in message and "\n" not in message


def test_duplicate_task_ids_name_both_rows(tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [GOOD, {**GOOD, "task_id": "b"}, GOOD])
    with pytest.raises(InputError, match=r"task_id 'a' appears twice: .*tasks.jsonl row 1 and .*tasks.jsonl row 3"):
        load_tasks(str(path))


def test_no_good_task_is_an_error(tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [{**GOOD, "code": ""}])
    with pytest.raises(InputError, match=r"no usable task \(.*row 1: key 'code' must be a non-empty string"):
        load_tasks(str(path))
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no usable task"):
        load_tasks(str(tmp_path / "empty.jsonl"))


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such task file"):
        load_tasks(str(tmp_path / "missing.jsonl"))
    (tmp_path / "tasks.txt").write_text("x")
    with pytest.raises(InputError, match=r"must end in \.jsonl, \.json, \.parquet"):
        load_tasks(str(tmp_path / "tasks.txt"))
    (tmp_path / "obj.json").write_text(json.dumps(GOOD))
    with pytest.raises(InputError, match="must hold a list of task objects; got dict"):
        load_tasks(str(tmp_path / "obj.json"))


# --- MBPP through the Hugging Face cache ------------------------------------------------------------

# Rows in MBPP's column layout (the dataset card's features); the content is calib's own.
SANITIZED = pa.schema([("source_file", pa.string()), ("task_id", pa.int32()), ("prompt", pa.string()),
                       ("code", pa.string()), ("test_imports", pa.list_(pa.string())),
                       ("test_list", pa.list_(pa.string()))])
FULL = pa.schema([("task_id", pa.int32()), ("text", pa.string()), ("code", pa.string()),
                  ("test_list", pa.list_(pa.string())), ("test_setup_code", pa.string()),
                  ("challenge_test_list", pa.list_(pa.string()))])


def _snapshot(cache: Path, revision: str) -> Path:
    repo = cache / f"datasets--{MBPP_REPO.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return repo / "snapshots" / revision


@pytest.fixture
def mbpp_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache laid out as huggingface_hub writes it, with the Hub switched off."""
    cache = tmp_path / "hf-cache"
    snapshot = _snapshot(cache, MBPP_REVISION)
    (snapshot / "sanitized").mkdir(parents=True)
    (snapshot / "full").mkdir()
    pq.write_table(pa.Table.from_pylist([
        {"source_file": "a.py", "task_id": 11, "prompt": "Write a function to triple a number.",
         "code": "def triple(n):\n    return 3 * n\n", "test_imports": [], "test_list": ["assert triple(2) == 6"]},
        {"source_file": "b.py", "task_id": 12, "prompt": "Write a function to find a square root.",
         "code": "import math\ndef root(x):\n    return math.sqrt(x)\n", "test_imports": ["import math"],
         "test_list": ["assert math.isclose(root(4.0), 2.0)"]},
    ], schema=SANITIZED), snapshot / "sanitized" / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist([{"task_id": 11, "text": "Write a function to triple a number.",
                                          "code": "def triple(n):\r\n    return 3 * n", "test_setup_code": "",
                                          "test_list": ["assert triple(2) == 6"], "challenge_test_list": []}],
                                        schema=FULL), snapshot / "full" / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist([], schema=SANITIZED), snapshot / "sanitized" / "train-00000-of-00001.parquet")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_mbpp_sanitized_from_the_cache(mbpp_cache):
    tasks = load_tasks("mbpp")
    assert [(t.task_id, t.entry_point, t.setup) for t in tasks] == [("11", "triple", ""), ("12", "root", "import math")]
    label = f"hf:{MBPP_REPO}@{MBPP_REVISION}/sanitized/test-00000-of-00001.parquet"
    assert tasks[1].source == f"{label}#row=2"
    assert load_tasks("mbpp:sanitized:test").tasks == tasks.tasks


def test_mbpp_full_normalises_line_ends(mbpp_cache):
    (task,) = load_tasks("mbpp:full")
    assert task.prompt == "Write a function to triple a number." and task.code == "def triple(n):\n    return 3 * n"


def test_mbpp_pinned_revision_and_explicit_cache_dir(mbpp_cache, tmp_path, monkeypatch):
    other = "a" * 40
    snapshot = _snapshot(tmp_path / "other-cache", other)
    (snapshot / "sanitized").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"source_file": "c.py", "task_id": 99, "prompt": "Negate.",
                                          "code": "def neg(n):\n    return -n\n", "test_imports": [],
                                          "test_list": ["assert neg(1) == -1"]}], schema=SANITIZED),
                   snapshot / "sanitized" / "test-00000-of-00001.parquet")
    (task,) = load_tasks(f"mbpp@{other}", hub_cache_dir=str(tmp_path / "other-cache"))
    assert task.task_id == "99" and task.source.startswith(f"hf:{MBPP_REPO}@{other}/")


def test_mbpp_not_cached_offline_says_how_to_fetch(mbpp_cache):
    other = "b" * 40
    with pytest.raises(InputError, match=f"hf download {MBPP_REPO} --include 'sanitized/test-\\*.parquet'"):
        load_tasks(f"mbpp@{other}")
    with pytest.raises(InputError, match="no usable task .*it holds no rows"):
        load_tasks("mbpp:sanitized:train")  # an empty table


@pytest.mark.parametrize("spec,expected", [("mbpp@main", "revision must be a commit hash"),
                                           ("mbpp:tiny", "MBPP config must be one of sanitized, full"),
                                           ("mbpp:full:dev", "MBPP split must be one of test, train")])
def test_mbpp_spec_errors(spec, expected):
    with pytest.raises(InvalidParameterError, match=expected):
        load_tasks(spec)
