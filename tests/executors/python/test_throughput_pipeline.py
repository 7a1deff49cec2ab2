"""What the throughput work (issue 6) changed must not change what a comparison measures.

- A replay batch may be started while x is still explored and be given its input states later (a
  job in two parts): it gives exactly what a batch started with the whole job gives, no code under
  test runs before the second part, and a batch never given its states is killed, not left behind.
- A comparison with batches started ahead equals one without, field for field.
- The rlimits are applied by the batch's first lines (no ``preexec_fn``, so the host spawns with
  vfork): the code under test sees them, with and without bubblewrap, and it sees the garbage
  collector enabled (the harness turns it off only while it starts).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import FORK_SERVER_ENV, HARNESS_DIR, Limits, Sandbox

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

FUNCTION = "def f(n):\n    return n + 1\n"
REPLAY = {"mode": "replay", "context": "", "function": FUNCTION, "seed": 0, "input_timeout": 2.0}
INPUTS = [{"args": {"n": str(v)}} for v in (1, 2, 3)]


def _events(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]


def _results(stdout: bytes) -> list[tuple[int, str]]:
    return [(e["index"], e["output"]) for e in _events(stdout) if e.get("event") == "result"]


def _line(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _descendants() -> set[int]:
    """Live processes below this test process."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                    fields = fh.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields and fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    me, found = os.getpid(), set()
    for pid, parent in parents.items():
        hops = 0
        while parent > 1 and hops < 64:
            if parent == me:
                found.add(pid)
                break
            parent, hops = parents.get(parent, 0), hops + 1
    return found


def _settled(before: set[int]) -> set[int]:
    deadline = time.monotonic() + 5.0
    while (left := _descendants() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def _two_parts(sandbox: Sandbox, first: dict, rest: dict | None) -> bytes:
    batch = await sandbox.start(_line({**first, "wait": True}))
    await asyncio.sleep(0.3)  # the harness has started and waits for the rest
    run = await batch.finish(_line(rest) if rest is not None else b"", wall_seconds=30)
    assert run.died is None, run.stderr.decode(errors="replace")
    return run.stdout


@needs_bwrap
def test_a_job_in_two_parts_gives_what_the_whole_job_gives():
    sandbox = Sandbox()
    whole = asyncio.run(sandbox.run(_line({**REPLAY, "inputs": INPUTS, "skip": [1]}), wall_seconds=30))
    parted = asyncio.run(_two_parts(sandbox, REPLAY, {"inputs": INPUTS, "skip": [1]}))
    assert _results(whole.stdout) == _results(parted)
    assert [i for i, _ in _results(parted)] == [0, 2]
    assert [json.loads(out)["return"] for _, out in _results(parted)] == [2, 4]


@needs_bwrap
def test_no_code_under_test_runs_before_the_second_part():
    # module-level code of the scaffold would write to the harness's channel (fd 200) when it runs
    context = "import os\nos.write(200, b'{\"event\": \"early\"}\\n')\n\n"
    sandbox = Sandbox()
    first = {**REPLAY, "context": context}
    never = asyncio.run(_two_parts(sandbox, first, None))  # the host needed no batch after all
    assert [e["event"] for e in _events(never)] == []
    given = asyncio.run(_two_parts(sandbox, first, {"inputs": INPUTS[:1]}))
    # the scaffold's first build, then the input's own build
    assert [e["event"] for e in _events(given)] == ["early", "start", "early", "result", "done"]


@needs_bwrap
def test_a_batch_started_ahead_and_cancelled_is_gone():
    before = _descendants()

    async def go() -> None:
        batch = await Sandbox().start(_line({**REPLAY, "wait": True}))
        await asyncio.sleep(0.3)
        assert _descendants() - before
        await batch.cancel()
        assert batch.done

    asyncio.run(go())
    assert not _settled(before)


TRUTH = '''\
def score(items, factor=2):
    total = 0
    for item in items:
        if item < 0:
            raise ValueError("negative")
        total += helper(item) * factor
    return {"total": total, "n": len(items), "seen": sorted(set(items))}
'''
CONTEXT = "import random\n\n\ndef helper(value):\n    return value + random.randint(0, 3)\n\n\n"
WRONG = TRUTH.replace("* factor", "+ factor")


def _compare(executor: SandboxExecutor, *, inputs=None, truth=TRUTH):
    return asyncio.run(executor.compare(truth, [TRUTH, WRONG, "def score(:\n"], context=CONTEXT, inputs=inputs))


@needs_bwrap
@pytest.mark.parametrize("then_replay", [True, False], ids=["x-replayed-by-its-explore-batch", "x-replay-ahead"])
@pytest.mark.parametrize("given", [False, True])
def test_starting_replays_ahead_changes_nothing_in_the_result(monkeypatch, given, then_replay):
    # a search bounded by its run budget, not by the clock: the same inputs every time
    config = ExecutorConfig(budget_seconds=60.0, budget_runs=60, workers=2)
    inputs = [{"args": {"items": "[1, 2]"}}, {"args": {"items": "[3, -1]"}}, {"args": {"items": "[]", "factor": "5"}},
              {"args": {"items": "(4, 4, 4)"}}] if given else None
    monkeypatch.setenv(FORK_SERVER_ENV, "0")  # a sandbox per batch: what starting ahead is for
    started = []
    start_ahead = SandboxExecutor._start_ahead

    async def counted(self, context, function):
        batch = await start_ahead(self, context, function)
        started.append(batch is not None)
        return batch

    monkeypatch.setattr(SandboxExecutor, "_start_ahead", counted)
    executor = SandboxExecutor(config)
    executor._then_replay = then_replay  # on (the default): x's replay is forked by its explore batch, not ahead
    ahead = _compare(executor, inputs=inputs)
    # x's replay (unless its explore batch makes it), WRONG's and the unparsable one's: ``workers`` ahead at most
    # (the first candidate is x itself: it shares x's replay)
    assert started == ([True, True] if then_replay else [True, True, False])

    async def never(self, context, function):
        return None

    monkeypatch.setattr(SandboxExecutor, "_start_ahead", never)
    executor = SandboxExecutor(config)
    executor._then_replay = then_replay
    plain = _compare(executor, inputs=inputs)
    assert ahead.to_dict(outputs=True) == plain.to_dict(outputs=True)
    monkeypatch.delenv(FORK_SERVER_ENV)
    started.clear()
    forked = _compare(SandboxExecutor(config), inputs=inputs)  # fork servers: nothing is started ahead
    assert started == [] and forked.to_dict(outputs=True) == plain.to_dict(outputs=True)
    assert ahead.valid_inputs >= 3
    assert [c.outcome for c in ahead.candidates] == ["ran", "ran", "unparsable"]
    assert all(m for m in ahead.candidates[0].matches if m is not None)


@needs_bwrap
@pytest.mark.parametrize("truth", ["def score(:\n", "def score(items):\n    while True:\n        pass\n"])
def test_replays_started_ahead_do_not_outlive_a_comparison_that_needs_none(truth):
    before = _descendants()
    config = ExecutorConfig(budget_seconds=1.0, budget_runs=5, input_timeout=0.2, workers=2)
    result = _compare(SandboxExecutor(config), truth=truth, inputs=[{"args": {"items": "[1]"}}])
    assert result.valid_inputs == 0
    assert not _settled(before)


LIMITS = '''\
def limits(n):
    import gc
    import resource
    names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
    return [gc.isenabled()] + [list(resource.getrlimit(getattr(resource, name))) for name in names]
'''


def _expected(limits: Limits) -> list:
    return [True, [limits.memory_bytes] * 2, [limits.cpu_seconds, limits.cpu_seconds + 1], [limits.file_bytes] * 2,
            [limits.open_files] * 2, [0, 0]]


@needs_bwrap
def test_the_code_runs_under_the_rlimits_and_an_enabled_collector():
    executor = SandboxExecutor(ExecutorConfig(memory_mb=300, workers=1))
    result = asyncio.run(executor.compare(LIMITS, [LIMITS], inputs=[{"args": {"n": "1"}}, {"args": {"n": "2"}}]))
    assert result.inputs[0].valid, result.inputs[0].reason
    out = json.loads(result.inputs[0].output)["return"]
    assert json.loads(json.dumps(out)) == json.loads(json.dumps(_canonical(_expected(executor.sandbox.limits))))
    assert result.candidates[0].matches == (True, True)


def test_the_rlimits_hold_without_bubblewrap_too():
    limits = Limits(memory_bytes=400 << 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sandbox = Sandbox(limits=limits, unsafe=True, bwrap="/nonexistent/bwrap")
        job = {**REPLAY, "function": LIMITS, "inputs": INPUTS[:1]}
        run = asyncio.run(sandbox.run(_line(job), wall_seconds=30))
    assert run.died is None, run.stderr.decode(errors="replace")
    ((_, output),) = _results(run.stdout)
    assert json.loads(output)["return"] == _canonical(_expected(limits))


def test_the_boot_lines_lower_a_hard_limit_never_raise_it():
    boot = Sandbox(unsafe=True, bwrap="/nonexistent/bwrap")._boot()
    assert "set_limits(" in boot and boot.index("set_limits(") < boot.index("runner import main")
    compile(boot, "<boot>", "exec")
    # what the boot lines (and a fork server's child) call: a hard limit held lower stays lower
    probe = ("import resource, sys\nsys.path.insert(0, sys.argv[1])\nfrom harness import set_limits\n"
             "K = resource.RLIMIT_NOFILE\nresource.setrlimit(K, (100, 200))\n"
             "set_limits(((K, 256, 256), (resource.RLIMIT_CORE, 0, 0)))\n"
             "print(resource.getrlimit(K), resource.getrlimit(resource.RLIMIT_CORE))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(HARNESS_DIR.parent)], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split("\n")[0] == "(200, 200) (0, 0)"


def _canonical(value):
    from calib.executors.sandbox.harness import canon

    return canon.canonical(value)
