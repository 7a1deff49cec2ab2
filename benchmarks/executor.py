"""Throughput of the sandbox executor on real functions: functions per second with 10 inputs each, coverage on.

A fixed seeded sample of real functions (``benchmarks/_functions.py``: half standard library, half
third-party, 10-50 body lines) runs through :class:`calib.executors.python.SandboxExecutor` in the
paper's setting (file context only, stand-ins for what it cannot import), line tracing on as always:

1. *start-up*: one trivial batch (a one-line function replayed on one input), run
   ``--startup-repeats`` times one after another (median): forked by a fork server (the default), in a
   bubblewrap sandbox of its own, the same harness without bubblewrap, and a bare
   ``python -I -S -c pass``, so the cost of starting a batch each way is visible;
2. *study case*: ``compare(x, [target, reference])`` as a study runs it, with two candidates: x itself
   and a near-copy of x with one small change (:func:`mutant`: the first comparison operator flipped,
   else the first integer constant plus one): explore x (input search) and replay x (in the same batch:
   the explore batch forks the replay, job key ``then_replay``; ``--own-replay-batch``: a batch of its
   own, as before), replay the near-copy (a candidate with x's own source shares x's replay);
   ``--target copy``: the target is x with a
   trailing comment instead (the same behaviour in other text), which replays in a batch of its own, as
   a target that does not reproduce x verbatim does;
3. *x alone*: ``compare(x, [])``: the search and x's replay (what ``benchmarks/conclusive.py`` runs);
4. *given inputs*: ``compare(x, [], inputs=...)`` with the states pass 2 chose: x run on the given
   inputs, then replayed (no search).

Passes 2-4 keep ``--in-flight`` compares going at once (default: ``--workers``) behind the executor's
own limit of ``--workers`` sandboxes; a function's seconds are the wall time of its compare with that
many in flight. CPU time, two ways: the sandboxes do not show in ``RUSAGE_CHILDREN`` (bubblewrap's
pid 1 does not pass their usage up), so (a) the machine's busy time (/proc/stat) during the pass minus
the other load measured while the benchmark sleeps (``--probe-seconds`` before and after), and (b)
what stays meaningful on a busy machine: the CPU of each sandboxed batch process plus this process's
own (host) CPU, per function. A batch's CPU is what its fork server measured (``wait4``: the fork and
the child's set-up included), else what the harness reports at its end (the ``done`` event,
``os.times``, in 10 ms ticks; bubblewrap's own few milliseconds per batch and batches that died are not
in it). Where each batch's CPU goes, by the harness's own clock (its ``done`` event's ``phases_ms``): the study
case's explore and replay batches' mean ``start`` (before the harness's ``main``), ``analysis``, ``first build`` and
``inputs``, and the search's runs, those of its walk through the pools among them. Target (issue, 2-core machine):
>= 20 functions/s.

Run: ``python benchmarks/executor.py [--n 100] [--seed 0] [--workers 2] [--in-flight 2] [--no-fork-server]
[--budget-seconds S] [--budget-runs N] [--skip-inconclusive-candidates] [--own-replay-batch] [--target x|copy]
[--json]``

``--ray ADDRESS`` (docs/scale.md): the study case instead runs as a study's execute stage does under ``[runner]
kind = "ray"``: chunks of 4 functions as Ray tasks of 1 CPU (:class:`calib.scale.runner.RayRunner` with
:func:`calib.study.functional.execute.execute_chunk`) on the cluster at ADDRESS (``ray start --head --num-cpus 2``),
once with 1 task in flight and once with 2 (1 and 2 worker processes): functions/s of each, the scaling ratio,
and on paper the figure for ``--nodes`` nodes of ``--cores-per-node`` cores from the measured per-core rate.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _functions import Function, sample_functions  # noqa: E402

import calib.executors.python as python_executor  # noqa: E402
from calib.executors.base import Comparison, ExecutorConfig  # noqa: E402
from calib.executors.python import SandboxExecutor  # noqa: E402
from calib.executors.sandbox import Sandbox, base_interpreter  # noqa: E402

TRIVIAL_JOB = {"mode": "replay", "context": "", "function": "def f(n):\n    return n + 1\n",
               "inputs": [{"args": {"n": "1"}}], "seed": 0, "input_timeout": 2.0}


_SANDBOX_CPU = [0.0]  # CPU seconds the harness processes reported (their ``done`` events)
_events = python_executor._events


def _counting_events(run: Any) -> list[dict[str, Any]]:
    events = _events(run)
    if isinstance(run.cpu_seconds, float):  # a fork server's child: its CPU from wait4 (microseconds, fork included)
        _SANDBOX_CPU[0] += run.cpu_seconds
        return events
    for event in events:  # else what the harness says at its end (os.times: 10 ms ticks)
        cpu = event.get("cpu_s") if event.get("event") == "done" else None
        if isinstance(cpu, int | float) and not isinstance(cpu, bool) and 0 <= cpu < 3600:
            _SANDBOX_CPU[0] += cpu
    return events


python_executor._events = _counting_events  # every batch's output passes through it once

#: Every batch run: (job mode, CPU seconds from the fork server's wait4, the harness's ``done`` event's phases in ms,
#: and for a search the runs of its walk and in all, from its ``explore`` event). An explore batch that replays x
#: itself (job key ``then_replay``) has two ``done`` events: its replaying child's phases are under ``x_replay``.
_BATCHES: list[tuple[str, float, dict[str, float], tuple[int, int] | None]] = []
_PHASES = ("analysis", "first_build", "inputs")  # the harness's phases (its ``done`` event's ``phases_ms``)


def _by_mode(batches: list[tuple[str, float, dict[str, float], tuple[int, int] | None]]) -> dict[str, dict[str, Any]]:
    """Per job mode (explore, replay): the batches, their CPU seconds and median CPU ms (fork servers only); the
    mean CPU ms of a batch's phases: ``start`` (the fork and the child's set-up, before the harness's ``main``:
    wait4's CPU less the phases), ``analysis`` (parsing and analysing the scaffold), ``first_build`` (the module's
    first build and the collection after it), ``inputs`` (the search or the replays); a search's runs: of its walk
    through the pools and in all."""
    out: dict[str, dict[str, Any]] = {}
    for mode in sorted({m for m, *_ in batches}):
        rows = [b for b in batches if b[0] == mode]
        cpu = [c for _, c, _, _ in rows]
        out[mode] = {"batches": len(cpu), "cpu_s": round(sum(cpu), 2),
                     "median_ms": round(statistics.median(cpu) * 1000, 1)}
        timed = [(c, p) for _, c, p, _ in rows if p]
        if timed:
            mean = {k: statistics.fmean(p[k] for _, p in timed) for k in _PHASES}
            start = statistics.fmean(c * 1000 - sum(p.values()) for c, p in timed)  # x_replay_ phases too
            out[mode]["phases_ms"] = {"start": round(start, 1), **{k: round(v, 1) for k, v in mean.items()}}
            merged = [p for _, p in timed if "x_replay_inputs" in p]
            if merged:  # x's replay in the explore batch: its child's own phases (its analysis was the parent's)
                out[mode]["x_replays"] = len(merged)
                out[mode]["x_replay_ms"] = {k: round(statistics.fmean(p["x_replay_" + k] for p in merged), 1)
                                            for k in ("first_build", "inputs")}
        searched = [r for _, _, _, r in rows if r is not None]
        if searched:
            out[mode]["walk_runs"] = sum(w for w, _ in searched)
            out[mode]["runs"] = sum(n for _, n in searched)
    return out


def _phases(events: list[dict[str, Any]]) -> tuple[dict[str, float], tuple[int, int] | None]:
    """The phases of a batch's ``done`` event (empty if it has none), and its search's walk and runs (or None)."""
    phases: dict[str, float] = {}
    replayed: dict[str, float] = {}
    searched = None
    for event in events:
        p = event.get("phases_ms") if event.get("event") == "done" else None
        if isinstance(p, dict) and all(isinstance(p.get(k), int | float) for k in _PHASES):
            if event.get("handed_over") is True:  # x's replay, forked by the explore batch
                replayed = {f"x_replay_{k}": float(p[k]) for k in _PHASES}
            else:
                phases = {k: float(p[k]) for k in _PHASES}
        walk, runs = event.get("walk_runs"), event.get("runs")
        if event.get("event") == "explore" and isinstance(walk, int) and isinstance(runs, int):
            searched = (walk, runs)
    return ({**phases, **replayed} if phases else phases), searched


def _count_batches(ex: SandboxExecutor) -> None:
    """Record the mode, CPU and phases of every batch ``ex`` runs (what a pass's CPU is made of)."""
    run = ex._run

    async def counted(job: dict[str, Any], wall: float) -> Any:
        result = await run(job, wall)
        if isinstance(result.cpu_seconds, float):
            phases, searched = _phases(_events(result))
            _BATCHES.append((str(job.get("mode")), result.cpu_seconds, phases,
                             searched if job.get("inputs") is None else None))
        return result

    ex._run = counted  # type: ignore[method-assign]


_FLIPS: dict[type, type] = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
                            ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


def mutant(text: str) -> str:
    """x with one small change, as a near-copy generated by a model would have: the first comparison
    operator (breadth first) flipped (``==``/``!=``, ``<``/``>=``, ``in``/``not in`` ...), else the first
    integer constant plus one; x unchanged when it has neither (or does not parse dedented)."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return text
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIPS:
            node.ops[0] = _FLIPS[type(node.ops[0])]()
            return ast.unparse(tree) + "\n"
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            node.value += 1
            return ast.unparse(tree) + "\n"
    return text


def _host_cpu() -> float:
    """CPU seconds of this process (the host side: scheduling, JSON, comparison)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait).

    The sandboxed processes do not show in ``RUSAGE_CHILDREN`` (bubblewrap's pid-1 does not pass their
    usage up), so the machine's counters are the measure; whatever else runs on the machine counts too,
    which is why :func:`background` is measured and subtracted.
    """
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
    except OSError:
        return float("nan")
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def background(seconds: float) -> float:
    """Busy CPUs (0..cpus) while this benchmark sleeps: load from other processes."""
    start, t0 = _machine_busy(), time.perf_counter()
    time.sleep(seconds)
    return (_machine_busy() - start) / (time.perf_counter() - t0)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def startup(repeats: int) -> dict[str, Any]:
    """Median seconds of one trivial batch: forked by a fork server, in a sandbox of its own, the same
    harness without bubblewrap, and a bare interpreter."""
    job = json.dumps(TRIVIAL_JOB).encode("utf-8")
    forked, own = Sandbox(fork_server=True), Sandbox(fork_server=False)
    out: dict[str, Any] = {}
    await forked.run(job, wall_seconds=30)  # the server starts once: what follows is per batch
    for name, box in (("fork_server_batch", forked), ("bwrap_batch", own), ("harness_no_bwrap", None)):
        times = []
        for _ in range(repeats):
            if box is None:  # the same harness as a plain child process (what --unsafe-no-sandbox does)
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    run = await Sandbox(unsafe=True, bwrap="/nonexistent/bwrap").run(job, wall_seconds=30)
            else:
                run = await box.run(job, wall_seconds=30)
            if b'"event":"result"' not in run.stdout:
                raise RuntimeError(f"trivial batch failed ({run.died}): {run.stderr[-500:]!r}")
            times.append(run.seconds)
        out[name] = round(statistics.median(times), 4)
    forked.close()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([base_interpreter(), "-I", "-S", "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    out["python_pass"] = round(statistics.median(times), 4)
    out["bwrap_overhead"] = round(out["bwrap_batch"] - out["harness_no_bwrap"], 4)
    return out


async def timed(functions: list[Function], in_flight: int,
                call: Callable[[int, Function], Awaitable[Comparison]]) -> dict[str, Any]:
    """Run ``call`` over every function, ``in_flight`` at a time: wall, CPU, per-function seconds."""
    gate = asyncio.Semaphore(in_flight)
    seconds: list[float] = [0.0] * len(functions)
    results: list[Comparison | None] = [None] * len(functions)
    errors: list[str] = []

    async def one(i: int, fn: Function) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                results[i] = await call(i, fn)
            except Exception as exc:  # noqa: BLE001 - an executor bug is a finding
                errors.append(f"{fn.ident}: {type(exc).__name__}: {exc}")
            seconds[i] = time.perf_counter() - started

    host0, busy0, box0, wall0 = _host_cpu(), _machine_busy(), _SANDBOX_CPU[0], time.perf_counter()
    first_batch = len(_BATCHES)
    await asyncio.gather(*(one(i, fn) for i, fn in enumerate(functions)))
    wall = time.perf_counter() - wall0
    host, busy, box = _host_cpu() - host0, _machine_busy() - busy0, _SANDBOX_CPU[0] - box0
    done = [r for r in results if r is not None]
    return {
        "functions": len(functions), "wall_s": round(wall, 2), "functions_per_s": round(len(functions) / wall, 2),
        "median_s": round(statistics.median(seconds), 3), "p90_s": round(_quantile(seconds, 0.9), 3),
        "max_s": round(max(seconds), 3), "machine_busy_cpu_s": round(busy, 1), "host_cpu_s": round(host, 1),
        "sandbox_cpu_s": round(box, 1),
        "cpu_ms_per_function": round((box + host) / max(1, len(functions)) * 1000, 1),
        "conclusive": sum(r.conclusive for r in done), "inputs_run": sum(len(r.inputs) for r in done),
        "explore_runs_median": statistics.median([r.runs for r in done]) if done else None,
        "batches": _by_mode(_BATCHES[first_batch:]),
        "errors": errors, "_results": results,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    functions = sample_functions(args.n, args.seed)
    budget = {k: v for k, v in (("budget_seconds", args.budget_seconds), ("budget_runs", args.budget_runs))
              if v is not None}
    ex = SandboxExecutor(ExecutorConfig(seed=args.seed, workers=args.workers, **budget,
                                        candidates_when_inconclusive=not args.skip_inconclusive_candidates))
    ex.sandbox.forks = ex.sandbox.forks and not args.no_fork_server
    ex._then_replay = ex._then_replay and not args.own_replay_batch
    _count_batches(ex)
    in_flight = args.in_flight or args.workers
    report: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "workers": args.workers,
                              "in_flight": in_flight, "n": len(functions), "seed": args.seed, "target": args.target,
                              "fork_servers": ex.sandbox.forks, "budget_seconds": ex.config.budget_seconds,
                              "budget_runs": ex.config.budget_runs,
                              "candidates_when_inconclusive": ex.config.candidates_when_inconclusive,
                              "x_replayed_in_explore": ex._then_replay}
    report["startup"] = await startup(args.startup_repeats)
    report["background_busy_cpus"] = round(background(args.probe_seconds), 2)

    mutants = [mutant(fn.text) for fn in functions]
    # the target: x verbatim (a memorizing model; it shares x's replay batch), or x with a trailing
    # comment (the same behaviour in other text: a batch of its own, as any target that is not x verbatim)
    targets = [fn.text if args.target == "x" else fn.text.rstrip("\n") + "  # target\n" for fn in functions]
    study = await timed(functions, in_flight,
                        lambda i, fn: ex.compare(fn.text, [targets[i], mutants[i]], context=fn.context))
    chosen = [[dict(inp.state) for inp in r.inputs] if r is not None else [] for r in study.pop("_results")]
    alone = await timed(functions, in_flight, lambda i, fn: ex.compare(fn.text, [], context=fn.context))
    alone.pop("_results")
    given_fns = [fn for fn, states in zip(functions, chosen) if states]
    given_states = [states for states in chosen if states]
    given = await timed(given_fns, in_flight,
                        lambda i, fn: ex.compare(fn.text, [], context=fn.context, inputs=given_states[i]))
    given.pop("_results")
    report["study_compare_x_vs_2"] = study
    report["x_alone_search"] = alone
    report["x_on_given_inputs"] = given
    ex.close()
    report["background_busy_cpus_after"] = round(background(args.probe_seconds), 2)
    load = (report["background_busy_cpus"] + report["background_busy_cpus_after"]) / 2
    cpus = os.cpu_count() or 1
    # with other work holding a quarter of the machine or more, what is left of busy time is not ours
    report["cpu_reliable"] = load < 0.25 * cpus
    for key in ("study_compare_x_vs_2", "x_alone_search", "x_on_given_inputs"):
        r = report[key]
        cpu = max(0.0, r["machine_busy_cpu_s"] - load * r["wall_s"])
        reliable = report["cpu_reliable"]
        r["cpu_s"] = round(cpu, 1) if reliable else None
        r["cpu_s_per_function"] = round(cpu / r["functions"], 3) if reliable else None
        r["machine_saturated"] = r["machine_busy_cpu_s"] > 0.95 * cpus * r["wall_s"]
    return report


def ray_passes(args: argparse.Namespace) -> dict[str, Any]:
    """The study case through the Ray runner with 1 and then 2 tasks in flight (see the module's docstring)."""
    from calib.scale.runner import RayRunner, RemoteWork
    from calib.study.functional.execute import execute_chunk
    from calib.study.sections import RunnerSection
    from calib.study.spec import StudySpec

    functions = sample_functions(args.n, args.seed)
    execute = {k: v for k, v in (("budget_seconds", args.budget_seconds), ("budget_runs", args.budget_runs))
               if v is not None}
    spec = StudySpec.model_validate({
        "study": {"name": "executor-benchmark", "seed": args.seed},
        "servers": {"none": {"kind": "openai", "base_url": "http://127.0.0.1:9"}},  # never asked: execute only
        "organism": {"preset": "tiny"},  # a valid spec needs data: the organism, never built here
        "models": {"target": "none", "reference": "none"}, "execute": {**execute, "workers": 1}})
    rows = [{"sample_id": f"f{i}", "context": fn.context, "function": fn.text, "language": "python"}
            for i, fn in enumerate(functions)]
    targets = {f"f{i}": fn.text if args.target == "x" else fn.text.rstrip("\n") + "  # target\n"
               for i, fn in enumerate(functions)}
    by_role = {"target": targets, "reference": {f"f{i}": mutant(fn.text) for i, fn in enumerate(functions)}}
    chunks = [(i // 4, rows[i:i + 4]) for i in range(0, len(rows), 4)]
    out: dict[str, Any] = {"n": len(functions), "address": args.ray, "passes": []}
    for in_flight in (1, 2):
        runner = RayRunner(RunnerSection(kind="ray", address=args.ray, max_in_flight=in_flight))
        tables: list[Any] = []
        warm = [(0, rows[:1])]  # the cluster check and the workers' first imports, outside the timing
        asyncio.run(runner.map(RemoteWork(execute_chunk, (spec, 1, by_role)), warm, lambda *a: None, lambda: False))
        started = time.perf_counter()
        asyncio.run(runner.map(RemoteWork(execute_chunk, (spec, 1, by_role)), chunks,
                               lambda index, table, events, where, got=tables: got.append(table), lambda: False))
        wall = time.perf_counter() - started
        runner.close()
        conclusive = sum(t.filter(t["role"] == "target")["conclusive"].sum() for t in tables)
        out["passes"].append({"workers": in_flight, "wall_s": round(wall, 2),
                              "functions_per_s": round(len(functions) / wall, 2), "conclusive": int(conclusive)})
    one, two = (p["functions_per_s"] for p in out["passes"])
    out["scaling_2_over_1"] = round(two / one, 2)
    out["per_core_functions_per_s"] = round(two / 2, 2)
    out["paper_cluster"] = {"nodes": args.nodes, "cores_per_node": args.cores_per_node,
                            "functions_per_s": round(two / 2 * args.nodes * args.cores_per_node, 1)}
    return out


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'n/a':>{width}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="functions (half stdlib, half third-party)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="sandboxes at once (the executor's limit)")
    parser.add_argument("--in-flight", type=int, default=None, help="compares at once (default: --workers)")
    parser.add_argument("--no-fork-server", action="store_true",
                        help="start a sandbox per batch (as before fork servers; CALIB_FORK_SERVER=0)")
    parser.add_argument("--budget-seconds", type=float, default=None,
                        help="input-search budget in seconds (default: ExecutorConfig's)")
    parser.add_argument("--budget-runs", type=int, default=None,
                        help="input-search budget in runs of x (default: ExecutorConfig's)")
    parser.add_argument("--skip-inconclusive-candidates", action="store_true",
                        help="candidates_when_inconclusive=False: once x's search is inconclusive, no candidate "
                             "runs and x is not replayed")
    parser.add_argument("--own-replay-batch", action="store_true",
                        help="x's replay in a batch of its own, as before issue 24's twenty-first round (not forked "
                             "by x's explore batch: job key then_replay)")
    parser.add_argument("--target", choices=("x", "copy"), default="x",
                        help="the study case's target: x verbatim (shares x's replay batch) or x with a trailing "
                             "comment (a replay batch of its own)")
    parser.add_argument("--startup-repeats", type=int, default=20)
    parser.add_argument("--probe-seconds", type=float, default=3.0,
                        help="seconds to measure other load on the machine before and after")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="the study case on the Ray cluster at ADDRESS, with 1 and 2 worker processes")
    parser.add_argument("--nodes", type=int, default=64, help="with --ray: the cluster figured on paper")
    parser.add_argument("--cores-per-node", type=int, default=32, help="with --ray: its cores per node")
    args = parser.parse_args()
    if args.ray is not None:
        out = ray_passes(args)
        if args.json:
            print(json.dumps(out, indent=1))
            return
        print(f"{out['n']} functions, study case compare(x, [target, x']) as Ray tasks of 4 functions, 1 CPU "
              f"each, on {out['address']}")
        for p in out["passes"]:
            print(f"{p['workers']} worker process(es): {p['functions_per_s']:.2f} functions/s ({p['wall_s']} s), "
                  f"conclusive {p['conclusive']}/{out['n']}")
        c = out["paper_cluster"]
        print(f"scaling 2 over 1: {out['scaling_2_over_1']:.2f}x; per core {out['per_core_functions_per_s']:.2f} "
              f"functions/s; on paper, {c['nodes']} nodes x {c['cores_per_node']} cores: "
              f"{c['functions_per_s']:,.0f} functions/s")
        return
    report = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(report, indent=1))
        return
    s = report["startup"]
    print(f"{report['n']} functions, {report['workers']} workers, {report['in_flight']} compares in flight, "
          f"{report['cpus']} CPUs, Python {report['python']}, search budget {report['budget_runs']} runs / "
          f"{report['budget_seconds']:g} s, "
          + ("" if report["candidates_when_inconclusive"] else "replays only where x's search was conclusive, ")
          + ("fork servers" if report["fork_servers"] else "a sandbox per batch"))
    print(f"one trivial batch (median of {args.startup_repeats}): forked by a fork server "
          f"{s['fork_server_batch'] * 1000:.1f} ms, in a sandbox of its own {s['bwrap_batch'] * 1000:.0f} ms, "
          f"same harness without bwrap {s['harness_no_bwrap'] * 1000:.0f} ms, python -I -S -c pass "
          f"{s['python_pass'] * 1000:.0f} ms (bwrap adds {s['bwrap_overhead'] * 1000:.0f} ms)")
    print(f"other load on the machine: {report['background_busy_cpus']} busy CPUs before, "
          f"{report['background_busy_cpus_after']} after (their mean is subtracted from the CPU figures"
          + ("" if report["cpu_reliable"] else "; too much other load: CPU figures left out") + ")")
    print(f"{'pass':<32} {'fn/s':>6} {'median s':>9} {'p90 s':>6} {'max s':>6} {'wall s':>6} {'CPU s':>6} "
          f"{'CPU s/fn':>8} {'host CPU s':>10} {'CPU ms/fn':>9} {'runs':>5} {'conclusive':>10}")
    study_name = "compare(x, [x, x']): study case" if args.target == "x" else "compare(x, [x#, x']): study case"
    for name, key in ((study_name, "study_compare_x_vs_2"),
                      ("compare(x, []): search + replay", "x_alone_search"),
                      ("x on given inputs + replay", "x_on_given_inputs")):
        r = report[key]
        print(f"{name:<32} {r['functions_per_s']:>6.2f} {r['median_s']:>9.3f} {r['p90_s']:>6.3f} {r['max_s']:>6.2f} "
              f"{r['wall_s']:>6.1f} {_num(r['cpu_s'], 6, 1)} {_num(r['cpu_s_per_function'], 8, 3)} "
              f"{r['host_cpu_s']:>10.1f} {r['cpu_ms_per_function']:>9.1f} "
              f"{r['explore_runs_median']:>5g} {r['conclusive']:>6}/{r['functions']}"
              + ("  (machine saturated)" if r["machine_saturated"] else ""))
        for error in r["errors"]:
            print(f"  executor error: {error}")
    study = report["study_compare_x_vs_2"]["batches"]
    if study:  # fork servers: each batch's CPU by what it ran
        print("study case batches: " + "; ".join(
            f"{mode} {b['batches']} ({b['cpu_s']:g} CPU s, median {b['median_ms']:g} ms)" for mode, b in study.items()))
        for mode, b in study.items():
            if "phases_ms" in b:  # where a batch's CPU goes, by the harness's own clock
                print(f"  {mode}, mean CPU ms a batch: " + ", ".join(f"{k.replace('_', ' ')} {v:g}"
                                                                    for k, v in b["phases_ms"].items())
                      + (f"; search runs {b['runs']}, {b['walk_runs']} of them the walk through the pools"
                         if "runs" in b else "")
                      + (f"; x's replay forked by {b['x_replays']} of them: " + ", ".join(
                          f"{k.replace('_', ' ')} {v:g}" for k, v in b["x_replay_ms"].items()) if "x_replays" in b
                         else ""))
    print("CPU s, CPU s/fn: the machine's busy time less the other load; CPU ms/fn: the sandboxed batch processes' "
          "CPU (a fork server's child: wait4, fork included; else the harness's own report) plus the host process "
          "(holds on a busy machine; without bwrap's few ms per batch)")
    print("target: >= 20 functions/s")


if __name__ == "__main__":
    main()
