"""Opcode profiles of generated Python: histograms, entropy and Jensen–Shannon divergence.

The paper reads "lost the algorithm" apart from "mis-serialized the interface" off the bytecode a
generation compiles to (§5.5, §6.3.2): each generation's opcode counts are pooled per problem and
condition over its n generations, the pooled profile π gets an entropy H(π) = −Σ π(o) log2 π(o), and
two conditions (Original vs Iso, over all generations and over passing ones) are compared by the
Jensen–Shannon divergence of their pooled profiles, in bits.

What is counted: every instruction of every code object the source compiles to (the module, and
recursively every function, lambda, class body and comprehension found in ``co_consts``), by its
base opcode name as :func:`dis.get_instructions` shows it without adaptive specialisation. Left out
are ``CACHE`` entries (inline cache slots, not instructions), ``RESUME`` (one per code object, a
bookkeeping marker), ``NOP`` and ``EXTENDED_ARG`` (artefacts of layout and of argument width). The
counts depend on the CPython version (opcodes differ between 3.11, 3.12 and 3.13), so profiles are
comparable only when computed by the same interpreter.

Static profiles are a proxy for the algorithm, not a measurement of it (§9): a list comprehension and
the equivalent loop compile to different opcodes, two different programs can share a histogram, and the
divergence ignores instruction order.

References
----------
C. E. Shannon (1948). A mathematical theory of communication. *Bell System Technical Journal*
27:379–423. J. Lin (1991). Divergence measures based on the Shannon entropy. *IEEE Transactions on
Information Theory* 37(1):145–151.
"""

from __future__ import annotations

import dis
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from types import CodeType

from calib._exceptions import InvalidParameterError
from calib.stats.passk import jensen_shannon

__all__ = ["EXCLUDED_OPCODES", "opcode_entropy", "opcode_histogram", "opcode_jsd", "pool"]

#: Opcode names never counted (see the module docstring for why).
EXCLUDED_OPCODES = frozenset({"CACHE", "RESUME", "NOP", "EXTENDED_ARG"})


def opcode_histogram(source: str) -> dict[str, int] | None:
    """Count the opcodes ``source`` compiles to, over all its nested code objects.

    Parameters
    ----------
    source
        Python source (a generation's code). It is compiled, never run.

    Returns
    -------
    dict of str to int, or None
        Opcode name -> count, keys sorted by name; None when the source does not compile (a syntax
        error, a null byte). A source with no instruction left after :data:`EXCLUDED_OPCODES` (an empty
        module still has ``RETURN_VALUE``) cannot occur on CPython 3.11–3.13.
    """
    if not isinstance(source, str):
        raise InvalidParameterError(f"source must be a string of Python code, got {type(source).__name__}")
    try:
        module = compile(source, "<generation>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, OverflowError):
        return None
    counts: Counter[str] = Counter()
    pending: list[CodeType] = [module]
    while pending:
        code = pending.pop()
        counts.update(ins.opname for ins in dis.get_instructions(code) if ins.opname not in EXCLUDED_OPCODES)
        pending.extend(const for const in code.co_consts if isinstance(const, CodeType))
    return dict(sorted(counts.items()))


def pool(histograms: Iterable[Mapping[str, int] | None]) -> dict[str, int]:
    """Sum opcode histograms (the paper pools a problem's n generations per condition); None is skipped.

    Returns
    -------
    dict of str to int
        Keys sorted by name; empty when every histogram is None (or there are none).
    """
    total: Counter[str] = Counter()
    for histogram in histograms:
        if histogram is not None:
            total.update(histogram)
    return dict(sorted(total.items()))


def opcode_entropy(hist: Mapping[str, int]) -> float:
    """Shannon entropy of an opcode histogram in bits, H(π) = −Σ_o π(o) log2 π(o) (paper §5.5).

    π is the histogram normalised to sum to one; opcodes counted zero times contribute nothing.

    Parameters
    ----------
    hist
        Opcode name -> non-negative count (from :func:`opcode_histogram` or :func:`pool`).

    Returns
    -------
    float
        In [0, log2 of the number of opcodes]; 0 for a single opcode.

    Raises
    ------
    InvalidParameterError
        For an empty or all-zero histogram (e.g. the pool of generations none of which compiled) and
        for a negative or non-finite count.
    """
    counts = list(hist.values())
    for name, count in hist.items():
        if isinstance(count, bool) or not isinstance(count, int | float) or not math.isfinite(count) or count < 0:
            raise InvalidParameterError(f"hist[{name!r}]={count!r} must be a non-negative finite count")
    total = math.fsum(counts)
    if total <= 0:
        raise InvalidParameterError("hist is empty (no opcode counted); the entropy of an empty profile is "
                                    "undefined: skip problems whose generations did not compile")
    return math.fsum(c / total * math.log2(total / c) for c in counts if c > 0)


def opcode_jsd(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Jensen–Shannon divergence in bits between two opcode histograms (Lin 1991), in [0, 1].

    Computed by :func:`calib.stats.passk.jensen_shannon` over the union of the two histograms' opcodes
    (one missing from a histogram counts zero): 0 for identical profiles, 1 for disjoint ones.

    Raises
    ------
    ValueError
        For an empty, all-zero or negative histogram (the message names ``p_counts`` for ``a`` and
        ``q_counts`` for ``b``).
    """
    return jensen_shannon(dict(a), dict(b))
