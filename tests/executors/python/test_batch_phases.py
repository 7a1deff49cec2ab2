"""What a batch reports of its own CPU, for ``benchmarks/executor.py`` (docs/executors.md, "Measured"): its ``done``
event's phases (analysis, first build, inputs) and, for a search, the runs of its walk through the pools."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.sandbox import Sandbox

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# a module whose first build costs CPU (its top-level loop), and a function whose inputs cost more
CONTEXT = "TABLE = [sum(range(i)) for i in range(20000)]\n\n"
FUNCTION = "def f(n):\n    total = 0\n    for i in range(200000):\n        total += i % (n or 1)\n    return total\n"
JOB = {"context": CONTEXT, "function": FUNCTION, "seed": 0, "input_timeout": 10.0}


def _events(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]


def _run(job: dict) -> tuple[list[dict], float | None]:
    run = asyncio.run(Sandbox().run(json.dumps(job).encode() + b"\n", wall_seconds=120))
    return _events(run.stdout), run.cpu_seconds


@needs_bwrap
def test_a_replay_reports_where_its_cpu_went():
    inputs = [{"args": {"n": str(v)}} for v in (3, 7)]
    events, cpu = _run({**JOB, "mode": "replay", "inputs": inputs})
    done = [e for e in events if e.get("event") == "done"]
    assert len(done) == 1
    phases = done[0]["phases_ms"]
    assert set(phases) == {"analysis", "first_build", "inputs"}
    assert all(v >= 0 for v in phases.values())
    # the module's top-level loop is in the first build, the function's loops in the inputs
    assert phases["first_build"] > phases["analysis"]
    assert phases["inputs"] > phases["analysis"]
    if cpu is not None:  # a fork server's child: its whole CPU (wait4) holds every phase
        assert sum(phases.values()) <= cpu * 1000 + 1


@needs_bwrap
def test_a_search_reports_the_runs_of_its_walk():
    events, _ = _run({**JOB, "context": "", "function": "def g(a, b):\n    if a > b:\n        return a\n    return b\n",
                      "mode": "explore", "n_inputs": 10, "budget_runs": 200, "budget_seconds": 2.0})
    explore = [e for e in events if e.get("event") == "explore"]
    assert len(explore) == 1
    assert 1 <= explore[0]["walk_runs"] <= explore[0]["runs"]
    given, _ = _run({**JOB, "context": "", "function": "def g(a):\n    return a\n", "mode": "explore",
                     "inputs": [{"args": {"a": "1"}}]})
    assert [e["walk_runs"] for e in given if e.get("event") == "explore"] == [0]  # given inputs: no search
