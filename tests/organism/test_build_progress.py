"""Progress lines for the organism build's warm-up: reading the corpus, splitting it, training the tokenizer.

The warm-up of the ``tiny`` preset runs for real (no model is trained); its ``progress`` calls go through
:func:`calib.organism.build.progress_tasks` to a :class:`calib._progress.LineProgress` whose clock is the
test's own and moves one second per call, so every line (counts, rate, ETA) is an exact string. Then
``calib organism build`` runs with stderr a pipe, and its warm-up lines must come before the first
training line.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

from calib._progress import LineProgress
from calib.organism.build import PHASES, PRESETS, progress_tasks, warm_up
from calib.organism.corpus import stdlib_files
from tests.study.test_progress import _Clock


def test_the_warm_up_reports_the_corpus_split_and_tokenizer_phases_with_exact_lines():
    out, clock = io.StringIO(), _Clock()
    calls: list[tuple[str, int, int]] = []
    with LineProgress(interval=0, stream=out, clock=clock, prefix="calib organism build: ") as bar:
        report = progress_tasks(bar)

        def progress(phase: str, done: int, total: int) -> None:
            clock.now += 1.0  # one second per report: the rate is 1 file per second after the first
            calls.append((phase, done, total))
            report(phase, done, total)

        prepared = warm_up(PRESETS["tiny"], seed=0, progress=progress)
    files = len(stdlib_files())  # the files the corpus phase must count, listed independently
    assert files > 100
    assert [c for c in calls if c[0] == "corpus"] == [("corpus", i, files) for i in range(files + 1)]
    assert [c for c in calls if c[0] != "corpus"] == [("split", 0, 1), ("split", 1, 1), ("tokenizer", 0, 1),
                                                      ("tokenizer", 1, 1)]
    lines = out.getvalue().splitlines()
    corpus = [line for line in lines if PHASES["corpus"] in line]
    assert len(corpus) == files + 1
    assert corpus[0] == f"calib organism build: reading the standard library: 0/{files} (0%), 0:00:00 elapsed"
    # 10 files in 10 s (the task started at the first report): 1/s, files - 10 left
    eta = files - 10
    assert corpus[10] == (f"calib organism build: reading the standard library: 10/{files} "
                          f"({100 * 10 / files:.0f}%), 1/s, eta 0:{eta // 60:02d}:{eta % 60:02d}, 0:00:10 elapsed")
    assert corpus[-1] == f"calib organism build: reading the standard library: {files}/{files} done in " \
                         f"0:{files // 60:02d}:{files % 60:02d}"
    assert lines[len(corpus):] == [
        "calib organism build: splitting the corpus and planting members: 0/1 (0%), 0:00:00 elapsed",
        "calib organism build: splitting the corpus and planting members: 1/1 done in 0:00:01",
        "calib organism build: training the tokenizer: 0/1 (0%), 0:00:00 elapsed",
        "calib organism build: training the tokenizer: 1/1 done in 0:00:01",
    ]
    # what the warm-up prepared is what training needs: the tiny preset's background, members and tokenizer
    assert len(prepared.background) == PRESETS["tiny"].max_background
    assert prepared.member_texts and prepared.tokenizer.get_vocab_size() <= PRESETS["tiny"].shape.vocab_size


def test_calib_organism_build_prints_the_warm_up_before_training(tmp_path):
    env = {**os.environ, "CALIB_PROGRESS_SECONDS": "0", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "calib", "organism", "build", "--preset", "tiny", "--cache-dir",
                             str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    seen: list[str] = []
    try:
        for line in proc.stderr:  # stop at the first training line: the warm-up is what this test is about
            seen.append(line.rstrip("\n"))
            if "training the reference model: " in line:
                break
    finally:
        proc.kill()
        proc.wait()
    files = len(stdlib_files())
    done = [i for i, line in enumerate(seen) if " done in " in line]
    labels = [seen[i].split(": ")[1] for i in done]
    assert labels == [PHASES["corpus"], PHASES["split"], PHASES["tokenizer"]], "\n".join(seen[-20:])
    assert seen[done[0]].startswith(f"calib organism build: reading the standard library: {files}/{files} done in ")
    assert seen[-1].startswith("calib organism build: training the reference model: 0/"), seen[-1]
