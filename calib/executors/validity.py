"""The one rule that makes an execution of x conclusive, for every executor (docs/executors.md, "Validity").

A comparison of x with its candidates is *conclusive* when x's execution meets the validity criteria
of the functional-memorization paper (§3): at least ``min_valid`` (N_in) of the ``n_inputs`` (N) input
states are valid, the valid inputs together reach at least ``coverage`` (C) of x's executable lines,
and x gives at least ``min_distinct`` distinct output states on them. An executor that cannot measure
a criterion passes ``None`` for it: the criterion is not
applied, :attr:`Verdict.criteria` says which were, and the report counts such samples apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calib.executors.base import ExecutorConfig

__all__ = ["CRITERIA", "Verdict", "criteria_of", "validity"]

#: Every validity criterion, in the order reasons are listed.
CRITERIA = ("valid_inputs", "coverage", "distinct_outputs")


@dataclass(frozen=True)
class Verdict:
    """Whether x's execution is conclusive, why not, and which criteria were applied."""

    conclusive: bool
    problems: tuple[str, ...]
    criteria: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The problems joined as the executions table's ``reason`` ("" when conclusive)."""
        return "; ".join(self.problems)


def validity(config: ExecutorConfig, *, valid_inputs: int, distinct_outputs: int, coverage: float | None,
             invalid_reasons: Sequence[str] = ()) -> Verdict:
    """Decide conclusive/inconclusive from what the executor measured.

    Parameters
    ----------
    config:
        The thresholds: ``min_valid`` (N_in), ``coverage`` (C), ``min_distinct``.
    valid_inputs, distinct_outputs:
        How many of x's input states were valid, and how many distinct output states they gave.
    coverage:
        The share of x's executable lines the valid inputs reached; ``None`` (or NaN) when the executor
        does not measure line coverage: the criterion is then not applied.
    invalid_reasons:
        Why each invalid input was invalid; the most common one is named when too few were valid.
    """
    measured = coverage is not None and not math.isnan(coverage)
    problems = []
    if valid_inputs < config.min_valid:
        reasons = list(invalid_reasons)
        top = max(set(reasons), key=reasons.count) if reasons else "none found"
        problems.append(f"valid_inputs {valid_inputs} < {config.min_valid} (mostly {top})")
    if measured and coverage < config.coverage:  # type: ignore[operator]
        problems.append(f"coverage {coverage:.2f} < {config.coverage:g}")
    if distinct_outputs < config.min_distinct:
        problems.append(f"distinct_outputs {distinct_outputs} < {config.min_distinct}")
    criteria = tuple(c for c in CRITERIA if measured or c != "coverage")
    return Verdict(not problems, tuple(problems), criteria)


#: The native executor kinds that measure line coverage (gcc --coverage and gcov; Rust's
#: -C instrument-coverage and llvm-cov; go tool cover; JaCoCo): every native language
_NATIVE_WITH_COVERAGE = ("native-c", "native-cpp", "native-rust", "native-go", "native-java")


def criteria_of(executor: str) -> tuple[str, ...]:
    """The criteria executor kind ``executor`` applies (``sandbox``, ``llm``, ``agent``, ``native-c``,
    ``native-cpp``, ``native-java``, ``native-rust``, ``native-go``: all three; another ``native-*`` kind
    measuring no line coverage: the other two)."""
    if executor.startswith("native-") and executor not in _NATIVE_WITH_COVERAGE:
        return tuple(c for c in CRITERIA if c != "coverage")
    return CRITERIA
