"""Benchmark tasks with tests: MBPP from the Hugging Face Hub, or a task file of the same shape.

A :class:`Task` is a natural-language statement, a reference solution, the name of the function the
tests call and a list of assert statements (MBPP: Austin et al., 2021, "Program Synthesis with Large
Language Models", arXiv:2108.07732). :func:`load_tasks` reads them from

- a task file: JSONL (one object per line) or JSON (a list of objects), or Parquet, with the keys of
  docs/probes-tasks.md (MBPP's own column names are accepted);
- ``"humaneval"`` (optionally ``@<commit>``) — HumanEval's 164 problems from the ``openai/openai_humaneval``
  dataset repository at a pinned revision, turned into this shape by :mod:`calib.probes.humaneval`;
- ``"mbpp"`` — MBPP sanitized, test split (257 tasks, the set the scale-aware diagnostics paper
  evaluates) — or ``"mbpp:sanitized"``, ``"mbpp:full"``, ``"mbpp:<config>:<split>"``, each optionally
  ``@<commit>``: the Parquet files of the ``google-research-datasets/mbpp`` dataset repository, fetched
  into the Hugging Face cache at a pinned revision by :mod:`calib.data.hub` (``HF_HUB_OFFLINE=1``
  reads the cache only).

A bad row does not stop the load: it becomes a :class:`Problem` (row number and a one-line message
naming the file, the row, the key and the fix) in the returned :class:`TaskSet`. A source without any
good task, or with two rows of the same ``task_id``, is an :class:`~calib.InputError`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from calib._exceptions import InputError, InvalidParameterError

__all__ = ["MBPP_CONFIGS", "MBPP_REPO", "MBPP_REVISION", "MBPP_SPLITS", "Problem", "Task", "TaskSet", "load_tasks"]

MBPP_REPO = "google-research-datasets/mbpp"
# The commit "Convert dataset to Parquet (#4)" of the repository's main branch, whose tree holds
# sanitized/{train,test,validation,prompt}-00000-of-00001.parquet and the same under full/ (seen on the
# Hub's tree pages, and the revision other evaluation code pins for this dataset's Parquet files, e.g.
# full/test-00000-of-00001.parquet at this commit). Pin another with "mbpp@<commit>"; the repository's
# History page lists them.
MBPP_REVISION = "4bb6404fdc6cacfda99d4ac4205087b89d32030c"
MBPP_CONFIGS = ("sanitized", "full")
MBPP_SPLITS = ("test", "train", "validation", "prompt")
_MBPP = re.compile(r"^mbpp(?::(?P<config>[^:@]*))?(?::(?P<split>[^:@]*))?(?:@(?P<revision>.*))?$")
_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True)
class Task:
    """One benchmark problem.

    Attributes
    ----------
    task_id
        Unique within its source (MBPP's integer ids become strings: ``"11"``).
    prompt
        The natural-language statement only (no tests, no code).
    code
        The reference solution.
    entry_point
        The top-level function (or class) of ``code`` that the tests call.
    tests
        Assert statements, each independent of the others.
    setup
        Code run before the solution and tests (imports the tests need).
    source
        Where the task came from: ``path#row=N`` or ``hf:repo@revision/file#row=N``.
    """

    task_id: str
    prompt: str
    code: str
    entry_point: str
    tests: tuple[str, ...]
    setup: str = ""
    source: str = ""


class Problem(NamedTuple):
    """A row that could not become a task: its 1-based row (line of a JSONL file) and why."""

    row: int
    message: str


@dataclass(frozen=True)
class TaskSet:
    """The tasks of a source, in its order, and the rows that were skipped.

    Iterating, ``len()`` and indexing see the tasks.
    """

    tasks: tuple[Task, ...]
    problems: tuple[Problem, ...]
    source: str

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> Task:
        return self.tasks[index]


def load_tasks(source: str, *, limit: int | None = None, hub_cache_dir: str | None = None) -> TaskSet:
    """Load benchmark tasks from a task file, or from MBPP or HumanEval on the Hub.

    Parameters
    ----------
    source
        A path to a ``.jsonl``, ``.json`` or ``.parquet`` task file, or ``"mbpp[:config[:split]][@commit]"``
        (config ``sanitized`` (default) or ``full``; split ``test`` (default), ``train``, ``validation``
        or ``prompt``; commit defaults to :data:`MBPP_REVISION`), or ``"humaneval[@commit]"`` (commit defaults to
        :data:`calib.probes.humaneval.HUMANEVAL_REVISION`). A file literally named ``mbpp`` is read as ``./mbpp``.
    limit
        Keep only the first ``limit`` good tasks (every row is still checked).
    hub_cache_dir
        The Hugging Face cache for MBPP; default ``HF_HUB_CACHE`` or the library's.

    Returns
    -------
    TaskSet
        The good tasks and the skipped rows (:class:`Problem`).

    Raises
    ------
    InputError
        The file is missing or unreadable, holds no good task, or repeats a ``task_id``; MBPP is not in
        the cache while offline.
    InvalidParameterError
        ``limit`` is not a positive integer, or an ``mbpp`` spec names an unknown config, split or a
        revision that is not a commit hash.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidParameterError(f"limit must be a positive integer or None; got {limit!r}")
    if not isinstance(source, str) or not source:
        raise InvalidParameterError(f"source must be a task file path or 'mbpp[:config[:split]][@commit]'; "
                                    f"got {source!r}")
    match = _MBPP.match(source)
    humaneval = _humaneval_revision(source)
    if match:
        rows = _mbpp_rows(match, hub_cache_dir)
        label = source
    elif humaneval is not None:
        rows = _humaneval_rows(humaneval, hub_cache_dir)
        label = source
    else:
        path = Path(source)
        rows = _file_rows(path)
        label = str(path)
    tasks: list[Task] = []
    problems: list[Problem] = []
    first_row: dict[str, tuple[int, str]] = {}
    for where, row, record in rows:
        if isinstance(record, Problem):
            problems.append(record)
            continue
        try:
            task = _task(record, f"{where}#row={row}")
        except _BadRow as exc:
            problems.append(Problem(row, f"{where}: row {row}: {exc}"))
            continue
        if task.task_id in first_row:
            other_where, other_row = first_row[task.task_id][1], first_row[task.task_id][0]
            raise InputError(f"task_id {task.task_id!r} appears twice: {other_where} row {other_row} and {where} "
                             f"row {row}; give every task its own task_id")
        first_row[task.task_id] = (row, where)
        tasks.append(task)
    if not tasks:
        shown = "; ".join(p.message for p in problems[:3]) or "it holds no rows"
        raise InputError(f"{label}: no usable task ({shown})")
    return TaskSet(tasks=tuple(tasks[:limit] if limit else tasks), problems=tuple(problems), source=label)


# --- reading rows ---------------------------------------------------------------------------------

Row = tuple[str, int, "dict[str, Any] | Problem"]


def _file_rows(path: Path) -> list[Row]:
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise InputError(f"{path}: a task file must end in {', '.join(_SUFFIXES)}; got {path.suffix or 'no suffix'} "
                         "(for MBPP on the Hub write 'mbpp' or 'mbpp:sanitized')")
    if not path.is_file():
        raise InputError(f"{path}: no such task file; check the path")
    where = str(path)
    if suffix == ".parquet":
        return _parquet_rows(path, where)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not JSON
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the task file ({exc}); it must be UTF-8 text") from exc
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); a .json task file holds "
                             "one list of task objects (use .jsonl for one object per line)") from exc
        if not isinstance(data, list):
            raise InputError(f"{path}: a .json task file must hold a list of task objects; got "
                             f"{type(data).__name__}")
        return [(where, i, _object(item, where, i)) for i, item in enumerate(data, start=1)]
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append((where, number, Problem(number, f"{where}: row {number}: not valid JSON ({exc.msg}); write "
                                                        "one task object per line")))
            continue
        rows.append((where, number, _object(item, where, number)))
    return rows


def _object(item: Any, where: str, row: int) -> dict[str, Any] | Problem:
    if isinstance(item, dict):
        return item
    return Problem(row, f"{where}: row {row}: a task must be a JSON object with task_id, prompt, code and "
                        f"test_list; got {type(item).__name__}")


def _parquet_rows(path: Path, where: str) -> list[Row]:
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet sources need it

    try:
        records = pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise InputError(f"{path}: cannot read Parquet ({' '.join(str(exc).split())[:200]})") from exc
    return [(where, i, record) for i, record in enumerate(records, start=1)]


def _mbpp_rows(match: re.Match[str], cache_dir: str | None) -> list[Row]:
    config = match["config"] or "sanitized"
    split = match["split"] or "test"
    revision = match["revision"] if match["revision"] is not None else MBPP_REVISION
    if config not in MBPP_CONFIGS:
        raise InvalidParameterError(f"source: MBPP config must be one of {', '.join(MBPP_CONFIGS)}; got {config!r} "
                                    "(write 'mbpp:sanitized' or 'mbpp:full')")
    if split not in MBPP_SPLITS:
        raise InvalidParameterError(f"source: MBPP split must be one of {', '.join(MBPP_SPLITS)}; got {split!r} "
                                    "(write e.g. 'mbpp:sanitized:test')")
    from calib.data.hub import HubCorpus, resolve_files  # noqa: PLC0415 - huggingface_hub only when used

    corpus = HubCorpus(MBPP_REPO, revision, allow_patterns=(f"{config}/{split}-*.parquet",), cache_dir=cache_dir)
    rows: list[Row] = []
    for name, local in resolve_files(corpus):
        rows += _parquet_rows(local, f"{corpus.label}/{name}")
    return rows


def _humaneval_revision(source: str) -> str | None:
    from calib.probes.humaneval import humaneval_revision  # noqa: PLC0415 - a small module, only for its sources

    return humaneval_revision(source)


def _humaneval_rows(revision: str, cache_dir: str | None) -> list[Row]:
    from calib.data.hub import HubCorpus, resolve_files  # noqa: PLC0415 - huggingface_hub only when used
    from calib.probes.humaneval import HUMANEVAL_FILE, HUMANEVAL_REPO, humaneval_record  # noqa: PLC0415

    corpus = HubCorpus(HUMANEVAL_REPO, revision, allow_patterns=(HUMANEVAL_FILE,), cache_dir=cache_dir)
    rows: list[Row] = []
    for name, local in resolve_files(corpus):
        where = f"{corpus.label}/{name}"
        for _, number, record in _parquet_rows(local, where):
            if isinstance(record, Problem):
                rows.append((where, number, record))
                continue
            try:
                rows.append((where, number, humaneval_record(record)))
            except ValueError as exc:
                rows.append((where, number, Problem(number, f"{where}: row {number}: {exc}")))
    return rows


# --- one row --------------------------------------------------------------------------------------


class _BadRow(Exception):
    """One row's problem: the key and how to fix it (the caller adds the file and row)."""


def _task(record: dict[str, Any], source: str) -> Task:
    task_id = record.get("task_id")
    if task_id is None or isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
        raise _BadRow(f"key 'task_id' is {'missing' if task_id is None else repr(task_id)}; give each task a "
                      "unique non-empty string or integer id")
    prompt = _text(record, ("prompt", "text"), "the natural-language statement of the task")
    code = _text(record, ("code",), "the reference solution (Python source)")
    tests = _list(record, ("test_list", "tests"), required=True)
    setup_parts = _list(record, ("test_imports",), required=False)
    for key in ("test_setup_code", "setup"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise _BadRow(f"key {key!r} must be a string of Python source; got {type(value).__name__}")
        if value and value.strip():
            setup_parts.append(_lines(value))
    setup = "\n".join(setup_parts)
    tree = _parse(code, "code", "the reference solution must be valid Python")
    _parse(setup, "test_imports/test_setup_code/setup", "setup code must be valid Python")
    test_trees = [_parse(t, f"test_list[{i}]", "each test must be a Python statement such as 'assert f(1) == 2'")
                  for i, t in enumerate(tests)]
    defined = _top_level_names(tree)
    entry_point = record.get("entry_point")
    if entry_point is not None:
        if not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise _BadRow(f"key 'entry_point' must be a function name; got {entry_point!r}")
        if entry_point not in defined:
            raise _BadRow(f"key 'entry_point' names {entry_point!r}, which 'code' does not define at top level; "
                          "fix the name or the code")
    else:
        entry_point = _called(test_trees[0], defined)
        if entry_point is None:
            raise _BadRow("no 'entry_point' given and the first test calls no function that 'code' defines at top "
                          "level; add 'entry_point' or fix the test")
    return Task(task_id=str(task_id), prompt=prompt, code=code, entry_point=entry_point, tests=tuple(tests),
                setup=setup, source=source)


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")  # MBPP's full config has Windows line ends


def _text(record: dict[str, Any], keys: tuple[str, ...], what: str) -> str:
    for key in keys:
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise _BadRow(f"key {key!r} must be a non-empty string ({what}); got {value!r:.60}")
        return _lines(value).strip("\n") if key != "code" else _lines(value)
    named = " or ".join(repr(k) for k in keys)
    raise _BadRow(f"key {named} is missing; give {what}")


def _list(record: dict[str, Any], keys: tuple[str, ...], *, required: bool) -> list[str]:
    for key in keys:
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, str) for v in value):
            raise _BadRow(f"key {key!r} must be a list of strings (one Python statement each); got {value!r:.60}")
        items = [_lines(v).strip() for v in value if v.strip()]
        if required and not items:
            raise _BadRow(f"key {key!r} is empty; give at least one assert statement")
        return items
    if required:
        named = " or ".join(repr(k) for k in keys)
        raise _BadRow(f"key {named} is missing; give the assert statements as a list of strings")
    return []


def _parse(source: str, key: str, fix: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        detail = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else str(exc)
        raise _BadRow(f"key {key!r} does not parse ({detail}); {fix}") from exc


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _called(tree: ast.Module, defined: set[str]) -> str | None:
    """The first function (in reading order) the test calls by a name ``code`` defines."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        assert isinstance(call.func, ast.Name)
        if call.func.id in defined:
            return call.func.id
    return None
