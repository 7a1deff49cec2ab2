"""Progress without a terminal: lines with counts, rate and ETA, from ``calib study`` and ``calib organism build``.

The line printer is checked with a clock of the test's own (so rates and ETAs are exact numbers);
the commands run as real subprocesses whose stderr is a pipe, with ``CALIB_PROGRESS_SECONDS=0`` (a
line at every update) so that what they print does not depend on how fast this machine is.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from calib._exceptions import InvalidParameterError
from calib._progress import LineProgress, interval_from_env, use_lines


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_give_counts_rate_and_eta_and_respect_the_interval():
    out, clock = io.StringIO(), _Clock()
    with LineProgress(interval=30, stream=out, clock=clock, prefix="calib study: ") as bar:
        task = bar.add_task("generate", total=40)
        clock.now += 10
        bar.update(task, completed=10)  # 10 s after the start line: not due yet
        clock.now += 20
        bar.update(task, completed=20)  # 30 s: due. 20 done in 30 s: 0.667/s, 20 left: 30 s
        clock.now += 5
        bar.advance(task, 20)  # finished: always printed
    assert out.getvalue().splitlines() == [
        "calib study: generate: 0/40 (0%), 0:00:00 elapsed",
        "calib study: generate: 20/40 (50%), 0.667/s, eta 0:00:30, 0:00:30 elapsed",
        "calib study: generate: 40/40 done in 0:00:35",
    ]


def test_resumed_work_counts_but_is_not_in_the_rate():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(interval=0, stream=out, clock=clock)
    task = bar.add_task("execute", total=100)
    bar.update(task, advance=50, resumed=50)  # chunks a killed run had finished
    clock.now += 10
    bar.advance(task, 10)  # 10 in 10 s: 1/s, 40 left
    assert out.getvalue().splitlines()[-1] == "execute: 60/100 (60%), 1/s, eta 0:00:40, 0:00:10 elapsed"


def test_a_stage_line_repeats_only_while_nothing_else_prints():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(interval=30, stream=out, clock=clock)
    stage = bar.add_task("execute")  # a whole stage: no total
    clock.now += 20
    bar.add_task("execute: runs", total=4)
    clock.now += 15
    bar.tick()  # 35 s since the stage's line, but another line 15 s ago: nothing is due
    clock.now += 20
    bar.tick()  # 35 s since any line: both repeat
    bar.stop_task(stage)
    clock.now += 40
    bar.tick()
    assert out.getvalue().splitlines() == [
        "execute: running, 0:00:00 elapsed",
        "execute: runs: 0/4 (0%), 0:00:00 elapsed",
        "execute: running, 0:00:55 elapsed",
        "execute: runs: 0/4 (0%), 0:00:35 elapsed",
        "execute: runs: 0/4 (0%), 0:01:15 elapsed",
    ]


def test_a_stalled_task_still_prints_a_line_each_interval():
    out = io.StringIO()
    with LineProgress(interval=0.05, stream=out) as bar:
        bar.add_task("measure", total=3)
        deadline = time.monotonic() + 60
        while out.getvalue().count("measure: 0/3") < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert out.getvalue().count("measure: 0/3 (0%)") >= 3  # the start line and at least two heartbeats


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CALIB_PROGRESS_SECONDS", "7.5")
    assert interval_from_env() == 7.5 and LineProgress().interval == 7.5
    monkeypatch.delenv("CALIB_PROGRESS_SECONDS")
    assert interval_from_env() == 20.0
    for bad in ("-1", "soon", "nan", "inf"):
        monkeypatch.setenv("CALIB_PROGRESS_SECONDS", bad)
        with pytest.raises(InvalidParameterError, match=f"CALIB_PROGRESS_SECONDS='{bad}'"):
            interval_from_env()


def test_lines_are_used_when_stderr_is_not_a_terminal():
    assert use_lines(io.StringIO())
    with open(os.devnull, "w") as devnull:
        assert use_lines(devnull)


def test_study_stages_print_lines_and_a_resumed_stage_counts_its_finished_chunks(tmp_path, monkeypatch, capsys):
    import polars as pl

    from calib.study.runner import RunOptions, Stage, run_stages
    from calib.study.spec import load_spec
    from tests.study.test_run import _spec

    monkeypatch.setenv("CALIB_PROGRESS_SECONDS", "0")
    (tmp_path / "tiny.toml").write_text(_spec(tmp_path))
    spec = load_spec(tmp_path / "tiny.toml")
    fail_at: list[int] = [4]  # the first run dies on the chunk holding item 4

    async def work(ctx):
        async def chunk(items):
            if fail_at and fail_at[0] in items:
                raise RuntimeError("killed")
            return pl.DataFrame({"item": items})

        return await ctx.chunked(list(range(6)), 2, chunk, {"item": pl.Int64()}, label="work")

    def run() -> str:
        run_stages([Stage("work", (), "work", "1", lambda spec, options: {}, work)], spec, "", tmp_path / "run",
                   options=RunOptions(progress=True), resources=None)
        return capsys.readouterr().err

    capsys.readouterr()
    with pytest.raises(RuntimeError, match="killed"):
        run()
    first = _lines(capsys.readouterr().err, "calib study: ")
    assert first == {"work": [(0, 6), (2, 6), (4, 6)]}
    fail_at.clear()
    err = run()
    assert _lines(err, "calib study: ") == {"work": [(0, 6), (2, 6), (4, 6), (6, 6)]}
    assert "calib study: work: 6/6 done in " in err and "calib study: work: 6 rows in " in err


# --- the commands, stderr a pipe -----------------------------------------------------------------------

_LINE = re.compile(r"^calib (?:study|organism build): (?P<label>[^:]+(?:: \w+)?): (?P<done>\d+)/(?P<total>\d+)")


def _lines(stderr: str, prefix: str) -> dict[str, list[tuple[int, int]]]:
    """label -> [(done, total), ...] of every progress line."""
    found: dict[str, list[tuple[int, int]]] = {}
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if match and line.startswith(prefix):
            found.setdefault(match["label"], []).append((int(match["done"]), int(match["total"])))
    return found


def _env() -> dict[str, str]:
    return {**os.environ, "CALIB_PROGRESS_SECONDS": "0", "TOKENIZERS_PARALLELISM": "false"}


def test_organism_build_prints_training_lines_without_a_terminal(tmp_path):
    # A fresh build (minutes on a busy machine): read its stderr until three training steps have printed,
    # then stop it; the lines, not the finished organism, are what this test is about.
    proc = subprocess.Popen([sys.executable, "-m", "calib", "organism", "build", "--preset", "tiny", "--cache-dir",
                             str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            if len(_lines("\n".join(seen), "calib organism build: ").get("training the reference model", [])) >= 4:
                break
    finally:
        proc.kill()
        proc.wait()
    counts = _lines("\n".join(seen), "calib organism build: ").get("training the reference model")
    assert counts, "\n".join(seen[-20:])
    total = counts[0][1]
    assert total > 3 and counts[:4] == [(0, total), (1, total), (2, total), (3, total)]  # a start line, then each step
    third = next(line for line in seen if f"training the reference model: 3/{total} (" in line)
    assert re.search(r", [\d.]+/s, eta \d+:\d\d:\d\d, \d+:\d\d:\d\d elapsed$", third), third


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_study_prints_a_line_per_stage_with_counts_without_a_terminal(tiny_model_dir, tmp_path):
    from tests.study.functional.test_corpus_study import CODE
    from tests.study.test_integrity import corpus_spec

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "mod.py").write_text(CODE)  # three functions
    (tmp_path / "study.toml").write_text(corpus_spec(tiny_model_dir, tmp_path / "corpus"))
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "study.toml", "--run-dir", "run", "--stage",
                           "measure", "--jobs", "2"], capture_output=True, text=True, cwd=tmp_path, env=_env(),
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc.stderr, "calib study: ")
    # 3 samples x 2 roles: 6 generations and 6 pairs to measure; the executor runs each sample once.
    for label, total in (("generate", 6), ("execute", 3), ("measure", 6)):
        assert lines.get(label, [None])[0] == (0, total) and lines[label][-1] == (total, total), proc.stderr[-3000:]
    err = proc.stderr.splitlines()
    for stage in ("extract", "prompt", "generate", "execute", "measure"):
        assert f"calib study: {stage}: running, 0:00:00 elapsed" in err, stage  # every stage that runs says so
        assert any(line.startswith(f"calib study: {stage}: ") and " rows in " in line for line in err), stage
    assert "calib study: generate: 6 rows in " in proc.stderr and "calib study: execute: 6 rows in " in proc.stderr
    assert not (tmp_path / "run" / "report").exists()  # --stage measure stops there
