"""The ``sandbox`` executor: deterministic execution of Python functions, no LLM (docs/architecture.md, "Seams").

One comparison is three kinds of sandboxed batch (:mod:`calib.executors.sandbox`), each a fresh
process that runs one function variant on all its input states:

1. *explore* x: the harness builds the scaffold from the file context and searches input states
   (:mod:`calib.executors.sandbox.harness.synth`), or runs the ones the user gave;
2. *replay* x on the chosen states in a fresh process: an input whose output state differs from the
   one seen while exploring is invalid (``nondeterministic``). The search ran on one build of the
   module; if the replay differs there, x is explored again with a build per run, then replayed. The
   explore batch forks this process itself once it has analysed the scaffold, before any of its code
   runs (job key ``then_replay``, :mod:`calib.executors.sandbox.harness.handover`); what it did not
   report is replayed in a batch of its own;
3. *replay* each candidate, in x's place in the same scaffold, on the same states (with
   ``candidates_when_inconclusive`` off, neither they nor x when x's search already made the sample
   inconclusive: x's replay can only make fewer inputs valid; the candidates are ``not_run``). A candidate
   with x's own source (or an earlier candidate's) gets that variant's replay, not a batch of its own.

Batches 2 and 3 run concurrently, at most ``workers`` at a time, each a child of a fork server
(:mod:`calib.executors.sandbox.forkserver`); without fork servers, their processes start while x is
explored (at most ``workers`` ahead, across all comparisons) and wait for the states, running no code
under test before they arrive, one batch each. If a batch dies (a crash, the wall clock, the output
cap) the input it was on gets that outcome and the batch restarts after it, in a fresh process, so one
hostile input costs one input, not the sample.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from calib.executors.base import CandidateResult, Comparison, ExecutorConfig, InputResult, register
from calib.executors.python.replay import Replay, take_results
from calib.executors.python.replay import index as _index
from calib.executors.sandbox import Batch, Limits, Sandbox, SandboxRun
from calib.executors.sandbox.harness import ambient, scaffold
from calib.executors.sandbox.harness.runner import THREADS_EXIT
from calib.executors.sandbox.harness.synth import WALL_FACTOR
from calib.executors.validity import validity

__all__ = ["SandboxExecutor"]

_MAX_EXPLORE_RESTARTS = 3
_STARTUP_SLACK = 5.0  # seconds a batch may spend starting and building its scaffold


def _events(run: SandboxRun) -> list[dict[str, Any]]:
    """The harness's events; the channel is written inside the sandbox, so untrusted code can forge
    lines on it: anything that is not a JSON object is dropped, and callers check each event's shape."""
    events = []
    for line in run.stdout.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a torn last line of a killed batch, or garbage
        if isinstance(event, dict):
            events.append(event)
    return events


def _nonce() -> str:
    """A batch's nonce: the harness echoes it in every event, and lines without it are not the harness's."""
    return secrets.token_hex(16)


def _ours(events: list[dict[str, Any]], nonce: str) -> list[dict[str, Any]]:
    """The events that carry the batch's nonce, up to its ``done``. This drops lines that code under
    test writes blindly (on every descriptor, on stdout); it is not a proof of origin, since code in
    the same interpreter can find the nonce (docs/executors.md, *What a batch can forge*)."""
    kept = []
    for event in events:
        if event.get("nonce") != nonce:
            continue
        kept.append(event)
        if event.get("event") == "done":
            break
    return kept


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


#: Keys of an input state (docs/executors.md, "Input states").
_STATE_KEYS = frozenset({"args", "self", "files", "seed", "standins", "env", "stdin", "argv", "probe"})


def _state_problem(state: Any) -> str:
    """What is wrong with an input state's shape ('' when nothing): JSON data only, env, stdin, argv, probe within
    their bounds (the harness's own check, :func:`calib.executors.sandbox.harness.ambient.check`)."""
    if not isinstance(state, dict) or not set(state) <= _STATE_KEYS:
        return f"an input state is an object with the keys {', '.join(sorted(_STATE_KEYS))}"
    args, files = state.get("args", {}), state.get("files", {})
    if not (isinstance(args, dict) and all(isinstance(v, str) for v in args.values())):
        return "args must map each parameter to a value written as text"
    if not (files is None or isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        return "files must map each file name to its text"
    return ambient.check(state.get("env"), state.get("stdin"), state.get("argv"), state.get("probe"))


def _well_formed_state(state: Any) -> bool:
    return not _state_problem(state)


def _explore_problem(event: dict[str, Any], n_inputs: int, given: list[dict[str, Any]] | None) -> str:
    """Why an ``explore`` event cannot be x's report ('' when it can): the host checks what it can
    by itself, whatever the batch claims: its shape, at most ``n_inputs`` inputs (exactly the given
    inputs, in order, when the user gave them)."""
    chosen = event.get("chosen")
    if not isinstance(chosen, list) or not _ints(event.get("executable")):
        return "no list of chosen inputs"
    if given is not None and len(chosen) != len(given):
        return f"{len(chosen)} inputs reported for {len(given)} given"
    if given is None and len(chosen) > n_inputs:
        return f"{len(chosen)} inputs reported, at most n_inputs={n_inputs}"
    for i, c in enumerate(chosen):
        if not (isinstance(c, dict) and _well_formed_state(c.get("state")) and isinstance(c.get("valid"), bool)
                and isinstance(c.get("status"), str) and isinstance(c.get("output"), str)
                and _ints(c.get("lines"))):
            return f"input {i} is not an input state with its output state"
        if given is not None and c["state"] != given[i]:
            return f"input {i} is not the given input {i}"
    return ""


class SandboxExecutor:
    """Runs x and candidates in bubblewrap with scaffolding and input synthesis from the file context."""

    kind = "sandbox"

    def __init__(self, config: ExecutorConfig | None = None, *, fixups: bool = True) -> None:
        """``fixups`` False: the context runs as one Python script would, without the scaffold's fix-ups
        (an optional import's handler runs, a test's failed assertion ends it: docs/executors.md,
        "Scaffolding"); the LLM and agent executors' strict levels ([FM] App. C)."""
        self.config = config or ExecutorConfig()
        self._fixups = fixups
        limits = Limits(memory_bytes=self.config.memory_mb << 20)
        self.sandbox = Sandbox(limits=limits, unsafe=self.config.unsafe_no_sandbox,
                               read_only=self.config.import_paths)
        self._slots = asyncio.Semaphore(self.config.workers)
        self._ahead: set[Batch] = set()  # replay processes started ahead of their input states, not yet done
        # x's replay in x's explore batch (job ``then_replay``), unless x's replay may be skipped
        self._then_replay = self.config.candidates_when_inconclusive
        self._starting = 0

    def close(self) -> None:
        """Stop the sandbox's idle fork servers (:meth:`calib.executors.sandbox.Sandbox.close`)."""
        self.sandbox.close()

    def _job(self, mode: str, context: str, function: str, **extra: Any) -> dict[str, Any]:
        c = self.config
        return {"mode": mode, "context": context, "function": function, "seed": c.seed,
                "input_timeout": c.input_timeout, "bare": c.bare, "module_name": c.module_name,
                "import_paths": list(c.import_paths), **({} if self._fixups else {"fixups": False}), **extra}

    async def _run(self, job: dict[str, Any], wall: float) -> SandboxRun:
        async with self._slots:
            return await self.sandbox.run(json.dumps(job).encode("utf-8"), wall_seconds=wall)

    async def _start_ahead(self, context: str, function: str) -> tuple[Batch, str] | None:
        """Start a replay batch of ``function`` now, to be given its input states later; None when
        ``workers`` batches are already waiting ahead (that replay then starts when its states are known)."""
        if self.sandbox.forks:  # a fork server starts a batch in milliseconds: nothing to win ahead
            return None
        self._ahead = {b for b in self._ahead if not b.done}
        if len(self._ahead) + self._starting >= self.config.workers:
            return None
        nonce = _nonce()
        job = self._job("replay", context, function, wait=True, nonce=nonce)
        self._starting += 1
        try:
            batch = await self.sandbox.start(json.dumps(job).encode("utf-8") + b"\n")
        except Exception:  # noqa: BLE001 - it will be started again, the usual way, when it is needed
            return None
        finally:
            self._starting -= 1
        self._ahead.add(batch)
        return batch, nonce

    async def _release(self, started: tuple[Batch, str] | None) -> None:
        if started is not None:
            batch = started[0]
            try:
                await batch.cancel()  # nothing to do when it has finished
            finally:
                self._ahead.discard(batch)

    async def _explore(self, context: str, truth: str, inputs: Sequence[Mapping[str, Any]] | None, *,
                       reuse: bool = True) -> tuple[dict[str, Any] | None, str, Replay]:
        """x's explore batch: its ``explore`` event (None and why if none), and what it reported of x's replay
        (``then_replay``); ``reuse``: one build for the search, x's replay checks it (job ``verify: false``)."""
        c = self.config
        replayed = Replay()
        avoid: list[str] = []
        crashed: dict[str, str] = {}  # given inputs that took a batch down, and how
        extra: dict[str, Any] = {"n_inputs": c.n_inputs, "min_valid": c.min_valid, "coverage": c.coverage,
                                 "min_distinct": c.min_distinct, "budget_runs": c.budget_runs,
                                 "budget_seconds": c.budget_seconds}
        extra.update({"verify": False} if reuse else {"reuse": False}, trim=True)
        if inputs is not None:
            for i, state in enumerate(inputs):
                if problem := _state_problem(dict(state) if isinstance(state, Mapping) else state):
                    return None, f"invalid input state {i}: {problem}", replayed
            extra["inputs"] = [dict(i) for i in inputs]
            wall = _STARTUP_SLACK + c.input_timeout * (len(inputs) + 1)
        else:
            wall = _STARTUP_SLACK + WALL_FACTOR * c.budget_seconds + 2 * c.input_timeout  # the search's CPU budget
        if self._then_replay:  # x's replay in this batch: at most as long as a batch of its own
            extra["then_replay"] = True
            wall += c.input_timeout * (len(inputs) if inputs is not None else c.n_inputs) + c.input_timeout
        died = ""
        given = extra.get("inputs")
        for _ in range((len(inputs) if inputs is not None else _MAX_EXPLORE_RESTARTS) + 1):
            nonce = _nonce()
            run = await self._run(self._job("explore", context, truth, avoid=avoid, crashed=crashed, nonce=nonce,
                                            **extra), wall)
            events = _ours(_events(run), nonce)
            for at, event in enumerate(events):
                if event.get("event") == "explore":
                    problem = _explore_problem(event, c.n_inputs, given)
                    if problem:
                        return None, f"crashed: malformed harness output ({problem})", replayed
                    chosen = event["chosen"]
                    # what x's replay reported whole; the rest (after a crash, the wall clock) in a batch of its own
                    _started, failed = take_results(events[at + 1:], len(chosen), {
                        i for i, item in enumerate(chosen) if not item["valid"]}, replayed)
                    return event, "", Replay() if failed else replayed
                if event.get("event") == "error":
                    return None, f"unparsable: {event.get('message', '')}", replayed
            died = "threads left running" if run.returncode == THREADS_EXIT else run.died or f"exit {run.returncode}"
            tries = [e["key"] for e in events if e.get("event") == "try" and isinstance(e.get("key"), str)]
            if not tries or tries[-1] in avoid:
                break
            avoid.append(tries[-1])  # the input that took the batch down is not tried again
            crashed[tries[-1]] = died
        return None, f"crashed: {died}", replayed

    async def _replay(self, context: str, function: str, states: list[dict[str, Any]],
                      wanted: set[int], ahead: tuple[Batch, str] | None = None, result: Replay | None = None) -> Replay:
        """Run ``function`` on the states whose index is in ``wanted`` (x's valid inputs) but those ``result``
        holds already (x's, from its explore batch); ``ahead`` is its first batch if it was started ahead
        (:meth:`_start_ahead`)."""
        c = self.config
        result = result or Replay()
        done = {i for i in range(len(states)) if i not in wanted}
        for _ in range(len(states) + 1):
            pending = [i for i in range(len(states)) if i not in result.outputs and i not in done]
            if not pending:
                break
            wall = _STARTUP_SLACK + c.input_timeout * (len(pending) + 1)
            skip = sorted({*result.outputs, *done})
            if ahead is not None and not ahead[0].done:
                batch, nonce = ahead
                async with self._slots:
                    try:
                        rest = json.dumps({"inputs": states, "skip": skip}).encode("utf-8") + b"\n"
                        run = await batch.finish(rest, wall_seconds=wall)
                    finally:
                        self._ahead.discard(batch)
            else:
                nonce = _nonce()
                run = await self._run(self._job("replay", context, function, inputs=states, skip=skip, nonce=nonce),
                                      wall)
            started, failed = take_results(_ours(_events(run), nonce), len(states), done, result)
            if failed:
                return result
            if started is None and run.returncode == THREADS_EXIT and not run.timed_out:
                continue  # an input left threads running: its result is in, the rest run in a fresh process
            if started is not None or run.died:
                at = started if started is not None else (pending[0] if pending else None)
                if at is None or at in result.outputs:
                    break
                why = run.died or "crashed"
                result.outputs[at] = json.dumps({"outcome": why})
        return result

    async def _replays(self, ctx: str, unique: list[str], explored: dict[str, Any],
                       ahead: list[tuple[Batch, str] | None], replayed: Replay) -> tuple[list[Replay], bool]:
        """Each distinct variant (x first, after what its explore batch ``replayed``) replayed on x's chosen
        states, none when skipped; and whether skipped."""
        chosen = explored["chosen"]
        states = [item["state"] for item in chosen]
        wanted = {i for i, item in enumerate(chosen) if item["valid"]}
        if not self.config.candidates_when_inconclusive and not self._verdict(
                chosen, explored, [bool(item["valid"]) for item in chosen]).conclusive:
            return [], True  # nor x's replay, which can only make fewer inputs valid (docs/executors.md, "Measured")
        replays = await asyncio.gather(*(self._replay(ctx, variant, states, wanted, batch, replayed if i == 0 else None)
                                         for i, (variant, batch) in enumerate(zip(unique, ahead))))
        return list(replays), False

    @staticmethod
    def _coverage(chosen: list[dict[str, Any]], explored: dict[str, Any], valid: list[bool]) -> float:
        """The share of x's executable lines that its inputs marked ``valid`` reach."""
        executable = set(explored["executable"])
        covered = set().union(*(set(item["lines"]) for item, ok in zip(chosen, valid) if ok))
        return len(covered & executable) / len(executable) if executable else 1.0

    def _verdict(self, chosen: list[dict[str, Any]], explored: dict[str, Any], valid: list[bool],
                 invalid_reasons: list[str] | None = None) -> Any:
        """The validity verdict on x's inputs marked ``valid`` (:func:`calib.executors.validity.validity`)."""
        outputs = {item["output"] for item, ok in zip(chosen, valid) if ok}
        reasons = invalid_reasons if invalid_reasons is not None else [
            item["status"] for item, ok in zip(chosen, valid) if not ok]
        return validity(self.config, valid_inputs=sum(valid), distinct_outputs=len(outputs),
                        coverage=self._coverage(chosen, explored, valid), invalid_reasons=reasons)

    async def compare(self, truth: str, candidates: Sequence[str], *, context: str = "",
                      inputs: Sequence[Mapping[str, Any]] | None = None,
                      names: Sequence[str] | None = None) -> Comparison:
        """Choose input states on ``truth``, run it and every candidate on them, and compare."""
        c = self.config
        names = list(names) if names is not None else [f"candidate {i + 1}" for i in range(len(candidates))]
        # x's explore batch trims the context (job key ``trim``: the longest suffix x parses after) and says how
        # long the suffix is; the candidates run after that same suffix (the host no longer parses the module)
        whole = ctx = "" if c.bare else scaffold.joined_context(context)
        indent = scaffold.indentation(truth)
        settings = {k: v for k, v in asdict(c).items() if k not in ("workers", "unsafe_no_sandbox")}
        settings["sandbox"] = "bubblewrap" if self.sandbox.isolated else "none (--unsafe-no-sandbox)"
        # a candidate that is x verbatim runs as x's own text: re-indenting would put the indent on its blank
        # lines too, another text (a docstring's value) that would not share x's replay
        variants = [truth, *(cand if cand == truth else scaffold.reindent(cand, indent) for cand in candidates)]
        # a variant with the same source as an earlier one (a candidate that is x verbatim, two equal
        # samples) shares that one's replay batch: the same code on the same states in a fresh process
        first: dict[str, int] = {}
        owner = [first.setdefault(variant, i) for i, variant in enumerate(variants)]
        unique = [variants[i] for i in sorted(set(owner))]
        exploring = asyncio.ensure_future(self._explore(whole, truth, inputs))
        ahead: list[Batch | None] = []
        try:
            for i, variant in enumerate(unique):  # x's replay first: it is the one every sample needs
                # (unless x's explore batch replays x itself)
                ahead.append(None if i == 0 and self._then_replay else await self._start_ahead(ctx, variant))
            explored, why, replayed = await exploring
            if explored is not None:
                ctx = scaffold.reported_context(whole, explored.get("context_chars"), truth)
                if ctx != whole:  # batches started ahead hold the whole context: started again when needed
                    for batch in ahead:
                        await self._release(batch)
                    ahead = [None] * len(ahead)
                replays, skip = await self._replays(ctx, unique, explored, ahead, replayed)
                if explored.get("unverified") is True and replays and replays[0].differs(explored["chosen"]):
                    # the search's one build kept state between its runs (a module-level cache, a class
                    # attribute x changed): explore again with a build per run, and replay again
                    runs = _index(explored.get("runs"), 1 << 30) or 0
                    explored, why, replayed = await self._explore(ctx, truth, inputs, reuse=False)
                    if explored is not None:
                        explored["runs"] = runs + (_index(explored.get("runs"), 1 << 30) or 0)
                        replays, skip = await self._replays(ctx, unique, explored, [None] * len(unique), replayed)
            if explored is None:
                return Comparison(conclusive=False, reason=why, valid_inputs=0, coverage=0.0, distinct_outputs=0,
                                  inputs=(), config=settings,
                                  candidates=tuple(CandidateResult(n, (), None, "not_run") for n in names))
        finally:
            if not exploring.done():
                exploring.cancel()
                await asyncio.gather(exploring, return_exceptions=True)
            for batch in ahead:  # those never given their states (x unusable, no valid input)
                await self._release(batch)
        chosen = explored["chosen"]
        ran = dict(zip(sorted(set(owner)), replays))
        again, results = (replays[0] if replays else None), ([] if skip else [ran[i] for i in owner[1:]])
        rows: list[InputResult] = []
        for i, item in enumerate(chosen):
            status = item["status"] if item["valid"] else "invalid"
            reason = "" if item["valid"] else item["status"]
            valid = bool(item["valid"])
            if valid and again is not None and again.outputs.get(i) != item["output"]:
                valid, status, reason = False, "invalid", "nondeterministic"
            rows.append(InputResult(index=i, state=item["state"], valid=valid, status=status, reason=reason,
                                    output=item["output"]))
        valid_rows = [r for r in rows if r.valid]
        executable = set(explored["executable"])
        covered = set().union(*(set(chosen[r.index]["lines"]) for r in valid_rows)) if valid_rows else set()
        offset = (_index(explored.get("first_line"), 1 << 30) or 1) - 1
        uncovered = tuple(sorted(line - offset for line in executable - covered))
        valid = [r.valid for r in rows]
        verdict = self._verdict(chosen, explored, valid, [r.reason for r in rows if not r.valid])
        coverage, distinct = self._coverage(chosen, explored, valid), len({r.output for r in valid_rows})
        conclusive = verdict.conclusive
        # fewer results than candidates: none ran (candidates_when_inconclusive off, x's search inconclusive)
        cand_results = [] if len(results) == len(names) else [
            CandidateResult(n, (), None, "not_run", "the sample was inconclusive before the candidates ran")
            for n in names]
        for name, res in zip(names, results):
            if res.error:
                matches = tuple(False if r.valid else None for r in rows)
                outcome, message = "unparsable", res.error
            else:
                matches = tuple((res.outputs.get(r.index) == r.output) if r.valid else None for r in rows)
                outcome, message = "ran", ""
            hits = sum(1 for m in matches if m)
            sim = hits / len(valid_rows) if conclusive and valid_rows else None
            cand_results.append(CandidateResult(name=name, matches=matches, sim_func=sim, outcome=outcome,
                                                message=message,
                                                outputs=tuple(res.outputs.get(r.index) for r in rows)))
        return Comparison(conclusive=conclusive, reason=verdict.reason, valid_inputs=len(valid_rows),
                          coverage=coverage, distinct_outputs=distinct, inputs=tuple(rows),
                          candidates=tuple(cand_results), runs=_index(explored.get("runs"), 1 << 30) or 0,
                          uncovered_lines=uncovered,
                          warnings=_strings(explored.get("warnings")),
                          config=settings)


@register("sandbox")
def _factory(config: ExecutorConfig) -> SandboxExecutor:
    return SandboxExecutor(config)
