"""The Executor seam: settings, results, the protocol and the executions table (docs/architecture.md, "Seams").

An executor takes a reference function x (with its file context) and candidates, chooses input states
on x, runs everything in the sandbox and returns the validity facts and the per-input matches:

- an input is *valid* when x finishes on it by its own logic (returns, or raises an exception of its
  own) and does so identically when run again in a fresh process; time-outs, memory and recursion
  limits, scaffolding failures (a missing name or import, a stand-in used where a real value was
  needed, the sandbox refusing an operation) do not count;
- the sample is *conclusive* when at least ``min_valid`` (N_in = 8) of the ``n_inputs`` (N = 10)
  inputs are valid, x's line coverage over them is at least ``coverage`` (C = 0.8), and they give at
  least ``min_distinct`` (N_out = 2) distinct output states;
- SIM_func of a candidate = matched / valid inputs, reported only for a conclusive sample; an
  inconclusive sample carries its reason and is never a non-match.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import polars as pl

from calib._exceptions import InvalidParameterError
from calib._registry import Registry

__all__ = [
    "EXECUTIONS_SCHEMA", "KINDS", "CandidateResult", "Comparison", "Executor", "ExecutorConfig", "InputResult",
    "create_executor", "execution_rows", "register",
]


@dataclass(frozen=True)
class ExecutorConfig:
    """Settings of an execution-based comparison (defaults: the functional-memorization paper, §3)."""

    n_inputs: int = 10
    min_valid: int = 8
    coverage: float = 0.8
    min_distinct: int = 2
    seed: int = 0
    input_timeout: float = 1.0
    budget_runs: int = 200  # twice that for a search within 0.2 of C that still progresses (harness synth.EXTEND)
    budget_seconds: float = 2.0  # CPU seconds of the search (4.0 before issue 24 §3: the same conclusive samples)
    bare: bool = False
    import_paths: tuple[str, ...] = ()
    module_name: str | None = None
    workers: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    memory_mb: int = 1024
    unsafe_no_sandbox: bool = False
    #: False: when x's search already makes the sample inconclusive (its replay can only make fewer inputs
    #: valid), the candidates are not run (``not_run``): two of a study case's four batches, for about half
    #: the samples of benchmarks/executor.py
    candidates_when_inconclusive: bool = True

    def __post_init__(self) -> None:
        for name in ("n_inputs", "min_valid", "min_distinct", "budget_runs", "workers", "memory_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidParameterError(f"{name}={value!r}: need an integer >= 1")
        if self.min_valid > self.n_inputs:
            raise InvalidParameterError(f"min_valid={self.min_valid} > n_inputs={self.n_inputs}: N_in cannot "
                                        "exceed the number of input states N")
        if not isinstance(self.coverage, int | float) or not 0.0 <= self.coverage <= 1.0:
            raise InvalidParameterError(f"coverage={self.coverage!r}: need a share in [0, 1]")
        for name in ("input_timeout", "budget_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise InvalidParameterError(f"{name}={value!r}: need a number of seconds > 0")
        for path in self.import_paths:
            if not os.path.isdir(path):
                raise InvalidParameterError(f"import path {path!r} is not a directory")


@dataclass(frozen=True)
class InputResult:
    """One chosen input state and what x did on it."""

    index: int
    state: Mapping[str, Any]
    valid: bool
    status: str  # ok | raised | invalid
    reason: str  # why invalid ("" when valid): timeout, memory, missing_name, nondeterministic, ...
    output: str  # canonical JSON of x's output state

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "state": dict(self.state), "valid": self.valid, "status": self.status,
                "reason": self.reason}


@dataclass(frozen=True)
class CandidateResult:
    """One candidate against x: a match per input (None for x's invalid inputs) and SIM_func."""

    name: str
    matches: tuple[bool | None, ...]
    sim_func: float | None
    outcome: str = "ran"  # ran | unparsable | crashed
    message: str = ""
    outputs: tuple[str | None, ...] = ()

    def to_dict(self, *, outputs: bool = False) -> dict[str, Any]:
        out = {"path": self.name, "sim_func": self.sim_func, "matches": list(self.matches),
               "outcome": self.outcome, "message": self.message}
        if outputs:
            out["outputs"] = list(self.outputs)
        return out


@dataclass(frozen=True)
class Comparison:
    """The result of running x and its candidates: validity facts, per-input results, candidates."""

    conclusive: bool
    reason: str
    valid_inputs: int
    coverage: float
    distinct_outputs: int
    inputs: tuple[InputResult, ...]
    candidates: tuple[CandidateResult, ...]
    executor: str = "sandbox"
    runs: int = 0
    uncovered_lines: tuple[int, ...] = ()  # lines of x (1 = its first line) no valid input reached
    warnings: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self, *, outputs: bool = False) -> dict[str, Any]:
        """The JSON object ``calib compare --json`` prints."""
        return {
            "conclusive": self.conclusive, "reason": self.reason, "valid_inputs": self.valid_inputs,
            # NaN (line coverage not measured or unavailable) is not JSON: null
            "coverage": self.coverage if math.isfinite(self.coverage) else None,
            "distinct_outputs": self.distinct_outputs,
            "inputs": [{**i.to_dict(), **({"output": i.output} if outputs else {})} for i in self.inputs],
            "candidates": [c.to_dict(outputs=outputs) for c in self.candidates],
            "uncovered_lines": list(self.uncovered_lines),
            "executor": self.executor, "runs": self.runs, "warnings": list(self.warnings),
            "config": dict(self.config),
        }


@runtime_checkable
class Executor(Protocol):
    """Runs x and candidates on input states chosen on x."""

    config: ExecutorConfig

    async def compare(self, truth: str, candidates: Sequence[str], *, context: str = "",
                      inputs: Sequence[Mapping[str, Any]] | None = None,
                      names: Sequence[str] | None = None) -> Comparison: ...


#: ``factory(config, **options)``: ``llm`` and ``agent`` take ``server=`` (a chat server) and their own options.
Factory = Callable[..., Executor]
REGISTRY: Registry[Factory] = Registry("executor kind", "calib.executors", {
    "sandbox": "calib.executors.python",
    "llm": "calib.executors.llm",
    "agent": "calib.executors.agent",
    **{f"native-{lang}": "calib.executors.native" for lang in ("c", "cpp", "java", "rust", "go")}})
#: The executor kinds registered so far (built-ins appear once their module is imported).
KINDS: dict[str, Factory] = REGISTRY.factories
register = REGISTRY.register


def create_executor(kind: str, config: ExecutorConfig | None = None, **options: Any) -> Executor:
    """Build the executor ``kind`` (built-in, or from the ``calib.executors`` entry points) with ``config``
    and the kind's own ``options`` (``server=`` for ``llm`` and ``agent``)."""
    factory = REGISTRY.get(kind)
    if factory is None:
        raise InvalidParameterError(f"unknown executor kind {kind!r}; known kinds: {', '.join(REGISTRY.names())}")
    return factory(config or ExecutorConfig(), **options)

#: The ``reason`` of an executions row for a role that has no completion to compare (its request failed).
NO_GENERATION = "no generation (the request failed)"

#: The ``executions`` table (docs/architecture.md, "Run directory"): one row per (sample, role).
EXECUTIONS_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "role": pl.String(),
    "executor": pl.String(),
    "valid_inputs": pl.Int64(),
    "coverage": pl.Float64(),
    "distinct_outputs": pl.Int64(),
    "conclusive": pl.Boolean(),
    "reason": pl.String(),
    "sim_func": pl.Float64(),
    "matches": pl.List(pl.Boolean()),
    "warnings": pl.List(pl.String()),  # the executor's notes: scaffold warnings; the llm/agent transcript lines
}


def execution_rows(sample_id: str, comparison: Comparison, roles: Sequence[str]) -> pl.DataFrame:
    """Rows of the executions table for one sample: one per candidate, named by ``roles``."""
    if len(roles) != len(comparison.candidates):
        raise InvalidParameterError(f"{len(roles)} roles for {len(comparison.candidates)} candidates")
    rows = [{"sample_id": sample_id, "role": role, "executor": comparison.executor,
             "valid_inputs": comparison.valid_inputs, "coverage": comparison.coverage,
             "distinct_outputs": comparison.distinct_outputs, "conclusive": comparison.conclusive,
             "reason": comparison.reason, "sim_func": cand.sim_func, "matches": list(cand.matches),
             "warnings": list(comparison.warnings)}
            for role, cand in zip(roles, comparison.candidates)]
    return pl.DataFrame(rows, schema=EXECUTIONS_SCHEMA)
