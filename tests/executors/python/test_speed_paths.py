"""The harness's shortcuts for speed keep what each input sees (issue 24 §3): an input without files
skips rewriting the working directory only when it is already empty, and sees what a full reset gives."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import workdir

# docs/executors.md, "Input states": the frozen clock is 2024-01-02T03:04:05Z, and the input's files and
# the folder carry its time
FROZEN = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc).timestamp()

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _tree(root: str) -> dict[str, str]:
    found = {}
    for base, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(base, name), root) + "/"] = ""
        for name in names:
            with open(os.path.join(base, name), encoding="utf-8") as fh:
                found[os.path.relpath(os.path.join(base, name), root)] = fh.read()
    return found


def test_an_input_without_files_after_one_that_left_files_starts_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # prepare_workdir enters the folder; the test's own is given back after
    root = tmp_path / "work"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "left.txt").write_text("by the last input")
    (root / "top.txt").write_text("also")
    workdir.prepare_workdir(str(root), {})
    assert _tree(str(root)) == {}
    assert os.stat(root).st_mtime == FROZEN and os.getcwd() == str(root)


def test_an_already_empty_folder_gets_the_frozen_time_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "work"
    root.mkdir()
    os.utime(root, (FROZEN + 1000, FROZEN + 1000))  # as code that created and deleted a file leaves it
    workdir.prepare_workdir(str(root), {})
    assert _tree(str(root)) == {} and os.stat(root).st_mtime == FROZEN


def test_an_input_with_files_after_an_empty_one_gets_exactly_its_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "work"
    root.mkdir()
    workdir.prepare_workdir(str(root), {})
    workdir.prepare_workdir(str(root), {"a.txt": "one", "sub/b.txt": "two", "empty/": "", "../out.txt": "ignored"})
    assert _tree(str(root)) == {"a.txt": "one", "sub/": "", "sub/b.txt": "two", "empty/": ""}
    assert not (tmp_path / "out.txt").exists()
    for path in ("", "a.txt", "sub", "sub/b.txt", "empty"):
        assert os.stat(root / path).st_mtime == FROZEN, path



def test_files_written_with_descriptors_are_what_open_writes(tmp_path, monkeypatch):
    # The input's files are written with os.open/os.write (no file object per file, issue 24 §3): the same
    # bytes, mode bits and frozen times as ``open(path, "w", encoding="utf-8")`` and ``os.makedirs`` gave,
    # after an input that left nested files and folders; an empty folder inside a file's folder is one folder.
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "work"
    (root / "old" / "deeper").mkdir(parents=True)
    (root / "old" / "deeper" / "left.txt").write_text("by the last input")
    files = {"a.txt": "één\nline\r\n", "sub/dir/b.txt": "two", "sub/dir/": "", "sub/empty/": "", "c.bin": ""}
    workdir.prepare_workdir(str(root), files)
    for path in ("", "a.txt", "sub", "sub/dir", "sub/dir/b.txt", "sub/empty", "c.bin"):  # before reading them
        assert os.stat(root / path).st_mtime == FROZEN and os.stat(root / path).st_atime == FROZEN, path
    assert _tree(str(root)) == {"a.txt": "één\nline\n", "sub/": "", "sub/dir/": "", "sub/dir/b.txt": "two",
                                "sub/empty/": "", "c.bin": ""}  # (_tree reads in text mode: \r\n -> \n)
    assert (root / "a.txt").read_bytes() == "één\nline\r\n".encode()
    reference = tmp_path / "reference"
    reference.mkdir()
    with open(reference / "f", "w", encoding="utf-8") as fh:
        fh.write("x")
    os.makedirs(reference / "d")
    assert os.stat(root / "a.txt").st_mode == os.stat(reference / "f").st_mode
    assert os.stat(root / "sub" / "dir").st_mode == os.stat(reference / "d").st_mode
    assert os.getcwd() == str(root)
    workdir.prepare_workdir(str(root), {"sub": "a file where a folder was"})
    assert _tree(str(root)) == {"sub": "a file where a folder was"}
    with pytest.raises(IsADirectoryError):  # a file named like a folder the state also holds: as open() refused
        workdir.prepare_workdir(str(root), {"x/": "", "x": "text"})


def test_a_link_to_a_folder_that_an_input_left_is_removed_before_the_next(tmp_path, monkeypatch):
    # os.walk lists a symbolic link to a folder among the folders, and removing it as a folder failed: the link
    # stayed in the working directory for every later input. Now the link goes (what it points to stays).
    monkeypatch.chdir(tmp_path)
    root, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "kept.txt").write_text("not the input's")
    for files in ({}, {"a.txt": "one"}):
        os.symlink(elsewhere, root / "link")
        workdir.prepare_workdir(str(root), files)
        assert sorted(os.listdir(root)) == sorted(files), files
        assert (elsewhere / "kept.txt").read_text() == "not the input's"

LISTS_AND_WRITES = (
    "def f(n):\n"
    "    before = sorted(os.listdir('.'))\n"
    "    with open('out%d.txt' % n, 'w') as fh:\n"
    "        fh.write(str(n))\n"
    "    return before\n"
)


@needs_bwrap
def test_each_input_sees_only_its_own_files_in_the_sandbox():
    # Inputs without files follow inputs that wrote files or were given some: each sees exactly the
    # files its own state names (what a fresh folder per input would hold), in x's runs and replays alike.
    states = [{"args": {"n": "1"}}, {"args": {"n": "2"}, "files": {"a.txt": "x"}}, {"args": {"n": "3"}},
              {"args": {"n": "4"}}, {"args": {"n": "5"}, "files": {"b.txt": "y", "c/d.txt": "z"}},
              {"args": {"n": "6"}}]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    try:
        result = asyncio.run(executor.compare(LISTS_AND_WRITES, [LISTS_AND_WRITES], context="import os\n",
                                              inputs=states))
    finally:
        executor.close()
    expected = [[], ["a.txt"], [], [], ["b.txt", "c"], []]
    assert [json.loads(i.output)["return"] for i in result.inputs] == [{"list": e} for e in expected]
    assert all(i.valid for i in result.inputs)  # x's replay in a fresh process agreed on every input
    assert result.candidates[0].matches == (True,) * len(states)


UNREACHABLE = (  # the branch needs an object the context makes afresh at each call: no input state holds it
    "def f(n):\n"
    "    if n is sentinel():\n"
    "        a = 1\n"
    "        b = 2\n"
    "        c = 3\n"
    "        return a + b + c\n"
    "    return n\n"
)


SENTINEL_CONTEXT = "def sentinel():\n    return object()\n"


def _run(truth: str, candidates: list[str], context: str, **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0, **config))  # type: ignore[arg-type]
    try:
        return asyncio.run(executor.compare(truth, candidates, context=context))
    finally:
        executor.close()


@needs_bwrap
def test_candidates_are_not_run_when_the_search_already_made_the_sample_inconclusive():
    off = _run(UNREACHABLE, [UNREACHABLE, UNREACHABLE.replace("return n", "return -n")], SENTINEL_CONTEXT,
               candidates_when_inconclusive=False)
    on = _run(UNREACHABLE, [UNREACHABLE], SENTINEL_CONTEXT)
    # 2 of x's 6 statements can run (the `if` and `return n`): coverage 1/3 < C = 0.8 either way
    for result in (off, on):
        assert not result.conclusive and "coverage 0.33 < 0.8" in result.reason
    assert [(c.outcome, c.matches, c.sim_func) for c in off.candidates] == [("not_run", (), None)] * 2
    assert on.candidates[0].outcome == "ran" and on.candidates[0].sim_func is None
    assert [i.output for i in off.inputs] == [i.output for i in on.inputs]  # x's side is the same


@needs_bwrap
def test_candidates_still_run_on_a_sample_the_search_left_conclusive():
    truth = "def sign(n):\n    if n > 0:\n        return 1\n    if n < 0:\n        return -1\n    return 0\n"
    result = _run(truth, [truth, truth.replace("n < 0", "n <= 0")], "", candidates_when_inconclusive=False)
    assert result.conclusive
    assert result.candidates[0].sim_func == 1.0
    # the off-by-one candidate differs exactly on the inputs equal to 0
    zeros = [json.loads(i.output).get("return") == 0 for i in result.inputs if i.valid]
    assert result.candidates[1].sim_func == 1 - sum(zeros) / len(zeros) < 1.0


def _modes(truth: str, candidates: list[str], context: str, **config: object) -> tuple[object, list[str]]:
    """The comparison and the mode of every batch it ran (explore, replay; ``explore+replay``: an explore batch
    that replays x itself, job key ``then_replay``), in order."""
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0, **config))  # type: ignore[arg-type]
    modes: list[str] = []
    run = executor._run

    async def counted(job, wall):
        modes.append(job["mode"] + ("+replay" if job.get("then_replay") else ""))
        return await run(job, wall)

    executor._run = counted  # type: ignore[method-assign]
    try:
        return asyncio.run(executor.compare(truth, candidates, context=context)), modes
    finally:
        executor.close()


@needs_bwrap
def test_x_is_not_replayed_either_when_the_search_already_made_the_sample_inconclusive():
    off, off_modes = _modes(UNREACHABLE, [UNREACHABLE], SENTINEL_CONTEXT, candidates_when_inconclusive=False)
    on, on_modes = _modes(UNREACHABLE, [UNREACHABLE], SENTINEL_CONTEXT)
    assert off_modes == ["explore"] and on_modes == ["explore+replay"]  # on: x's replay in its explore batch
    # the same verdict, reason and inputs: x's replay could only have made fewer inputs valid
    assert (off.conclusive, off.reason, off.valid_inputs) == (on.conclusive, on.reason, on.valid_inputs)
    assert [(i.valid, i.output) for i in off.inputs] == [(i.valid, i.output) for i in on.inputs]


@needs_bwrap
def test_x_and_its_candidates_are_replayed_on_a_sample_the_search_left_conclusive():
    truth = "def sign(n):\n    if n > 0:\n        return 1\n    if n < 0:\n        return -1\n    return 0\n"
    result, modes = _modes(truth, [truth, truth.replace("n < 0", "n <= 0")], "", candidates_when_inconclusive=False)
    assert result.conclusive and modes == ["explore", "replay", "replay"]  # x (and its verbatim copy), then x'


READS = (
    "def f(name):\n"
    "    with open(name) as fh:\n"
    "        return fh.read()\n"
)


@needs_bwrap
def test_an_input_file_name_with_a_doubled_slash_is_not_reported_as_written():
    # ``sub//a.txt`` is written as ``sub/a.txt`` (a walk of the folder spells it so); the output state's files
    # compare it with the input's own, so an input x leaves alone shows no file written or deleted. Before,
    # it showed {"sub//a.txt": null, "sub/a.txt": "hi"} on every such input (a URL-like literal taken for a
    # file name: ``{http://purl.org/dc/elements/1.1/}`` in xlrd's search).
    states = [{"args": {"name": "'sub/a.txt'"}, "files": {"sub//a.txt": "hi"}},
              {"args": {"name": "'b.txt'"}, "files": {"./b.txt": "there", "c/../d.txt": "x"}}]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    try:
        result = asyncio.run(executor.compare(READS, [READS], inputs=states))
    finally:
        executor.close()
    outputs = [json.loads(i.output) for i in result.inputs]
    assert [o["return"] for o in outputs] == ["hi", "there"]
    assert [o["files"] for o in outputs] == [{}, {}]
    assert all(i.valid for i in result.inputs) and result.candidates[0].matches == (True, True)
