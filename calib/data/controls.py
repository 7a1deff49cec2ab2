"""Matched controls for extraction studies: non-members drawn to look like the members.

A member (code the target trained on) is compared with controls (comparable code it never saw). The
comparison is fair only if the two groups agree on what drives completion difficulty, so controls are
drawn by stratified sampling: within each stratum (language, body-length bin, source) ``ratio`` controls
per member, without replacement, in an order fixed by ``seed``. A stratum without enough candidates
leaves members unmatched and says so in the report; it is never filled from another stratum unless the
caller asks (``fallback="nearest_length"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from calib._exceptions import InvalidParameterError

__all__ = ["DEFAULT_LENGTH_BINS", "MatchResult", "length_bin_labels", "match_controls"]

#: Edges of the body-length bins (non-blank body lines), right-open: [0, 10), [10, 20), ... [100, inf).
DEFAULT_LENGTH_BINS: tuple[float, ...] = (0, 10, 20, 30, 50, 100, math.inf)

_LENGTH = "length_bin"
_SOURCE = "source"


@dataclass(frozen=True)
class MatchResult:
    """Controls matched to members, with the match laid out for the report.

    Attributes
    ----------
    controls
        The chosen candidate rows, with ``length_bin``, ``member_function_id`` (the member each control
        is matched to) and ``fallback`` (drawn from the nearest length outside the member's stratum).
    report
        One row per stratum that has members: the stratum's values, ``members``, ``controls``,
        ``unmatched`` (members with fewer than ``ratio`` controls), ``fallback_controls`` and
        ``candidates`` (candidates in the stratum).
    summary
        Body length of members and controls side by side: ``group``, ``n``, ``mean_body_lines``,
        ``median_body_lines``.
    """

    controls: pl.DataFrame
    report: pl.DataFrame
    summary: pl.DataFrame

    @property
    def unmatched(self) -> int:
        """Members left with fewer than ``ratio`` controls, over all strata."""
        return int(self.report["unmatched"].sum())


def length_bin_labels(body_lines: Sequence[int] | pl.Series, edges: Sequence[float] = DEFAULT_LENGTH_BINS) -> list[str]:
    """The label of each value's right-open bin, e.g. ``"[10,20)"``; values outside the edges get
    ``"<first"`` or ``">=last"``."""
    edges = _check_edges(edges)
    values = np.asarray(list(body_lines), dtype=float)
    index = np.searchsorted(np.asarray(edges), values, side="right")
    labels = [f"<{_fmt(edges[0])}"] + [f"[{_fmt(a)},{_fmt(b)})" for a, b in zip(edges, edges[1:])]
    labels.append(f">={_fmt(edges[-1])}")
    return [labels[i] for i in index]


def match_controls(
    members: pl.DataFrame,
    candidates: pl.DataFrame,
    *,
    seed: int,
    strata: Sequence[str] = ("language", _LENGTH, _SOURCE),
    length_bins: Sequence[float] = DEFAULT_LENGTH_BINS,
    source_column: str | None = None,
    ratio: int = 1,
    fallback: Literal["nearest_length"] | None = None,
) -> MatchResult:
    """Draw ``ratio`` controls per member from ``candidates``, within the member's stratum.

    Parameters
    ----------
    members, candidates
        Functions tables (:data:`calib.data.schema.FUNCTIONS_SCHEMA`); both need ``function_id``,
        ``body_lines`` and the strata columns. A candidate whose ``function_id`` is a member's is never
        drawn.
    seed
        Seeds the draw: the same inputs and seed give the same controls.
    strata
        What members and controls must share. ``"length_bin"`` is the bin of ``body_lines`` (edges
        ``length_bins``); ``"source"`` is the column named by ``source_column``; any other name is a
        column of both tables.
    length_bins
        Increasing bin edges; bins are right-open.
    source_column
        The column the ``"source"`` stratum matches on, e.g. ``"repo"`` or a ``"period"`` column
        (before/after a training cutoff). Required when ``strata`` contains ``"source"``: the functions
        table's own ``source`` column locates one document, and matching on it would match nothing.
    ratio
        Controls per member (>= 1).
    fallback
        ``None``: members of a stratum short of candidates stay unmatched. ``"nearest_length"``: they get
        unused candidates that share every other stratum, nearest in ``body_lines`` (ties broken by the
        seeded draw), marked ``fallback`` in ``controls`` and counted in the report.
    """
    strata = tuple(strata)
    if len(set(strata)) != len(strata):
        raise InvalidParameterError(f"strata must not repeat a name, got {strata!r}")
    if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 1:
        raise InvalidParameterError(f"ratio must be an integer >= 1, got {ratio!r}")
    if fallback not in (None, "nearest_length"):
        raise InvalidParameterError(f"fallback must be None or 'nearest_length', got {fallback!r}")
    if _SOURCE in strata and source_column is None:
        raise InvalidParameterError("strata includes 'source': name the column to match on with source_column= "
                                    "(e.g. 'repo', or a 'period' column for before/after a cutoff), or leave "
                                    "'source' out of strata")
    edges = _check_edges(length_bins)
    columns = {s: (source_column if s == _SOURCE else s) for s in strata if s != _LENGTH}
    for name, table in (("members", members), ("candidates", candidates)):
        missing = sorted({"function_id", "body_lines", *columns.values()} - set(table.columns))
        if missing:
            raise InvalidParameterError(f"{name} lacks column(s) {missing} needed to match on strata {strata!r}")

    mem = members.with_columns(pl.Series(_LENGTH, length_bin_labels(members["body_lines"], edges), pl.String))
    member_ids = set(members["function_id"].to_list())
    cand = candidates.with_columns(pl.Series(_LENGTH, length_bin_labels(candidates["body_lines"], edges), pl.String))
    cand = cand.filter(~pl.col("function_id").is_in(list(member_ids)))
    key_cols = [_LENGTH if s == _LENGTH else columns[s] for s in strata]
    rng = np.random.default_rng(seed)

    mem_keys = _keys(mem, key_cols)
    cand_keys = _keys(cand, key_cols)
    pool: dict[tuple, list[int]] = {}
    for i, k in enumerate(cand_keys):
        pool.setdefault(k, []).append(i)
    by_stratum: dict[tuple, list[int]] = {}
    for i, k in enumerate(mem_keys):
        by_stratum.setdefault(k, []).append(i)

    used = np.zeros(cand.height, dtype=bool)
    chosen: list[tuple[int, int, bool]] = []  # (candidate row, member row, fallback)
    got = np.zeros(mem.height, dtype=np.int64)
    order = sorted(by_stratum, key=_sort_key)
    for key in order:
        rows = [by_stratum[key][i] for i in rng.permutation(len(by_stratum[key]))]
        available = pool.get(key, [])
        drawn = [available[i] for i in rng.permutation(len(available))]
        for j, member in enumerate(rows):
            for c in drawn[j * ratio:(j + 1) * ratio]:
                used[c] = True
                chosen.append((c, member, False))
                got[member] += 1

    fallback_of: dict[tuple, int] = {}
    if fallback == "nearest_length":
        _fill_nearest(mem, cand, mem_keys, cand_keys, key_cols, order, by_stratum, ratio, rng, used, got, chosen,
                      fallback_of)

    chosen.sort(key=lambda t: (_sort_key(mem_keys[t[1]]), t[1], t[2], t[0]))
    controls = cand.select(pl.all().gather([c for c, _, _ in chosen])) if chosen else cand.clear()
    controls = controls.with_columns(
        pl.Series("member_function_id", [mem["function_id"][m] for _, m, _ in chosen], pl.String),
        pl.Series("fallback", [f for _, _, f in chosen], pl.Boolean))
    report = _report(strata, order, by_stratum, pool, got, chosen, mem_keys, fallback_of, ratio)
    summary = pl.DataFrame({
        "group": ["members", "controls"],
        "n": [mem.height, controls.height],
        "mean_body_lines": [_stat(mem["body_lines"], "mean"), _stat(controls["body_lines"], "mean")],
        "median_body_lines": [_stat(mem["body_lines"], "median"), _stat(controls["body_lines"], "median")],
    }, schema={"group": pl.String, "n": pl.Int64, "mean_body_lines": pl.Float64, "median_body_lines": pl.Float64})
    return MatchResult(controls=controls, report=report, summary=summary)


def _fill_nearest(mem, cand, mem_keys, cand_keys, key_cols, order, by_stratum, ratio, rng, used, got, chosen,
                  fallback_of) -> None:
    # Candidates sharing every stratum but the length bin, nearest body length first.
    other = [i for i, c in enumerate(key_cols) if c != _LENGTH]
    cand_lines = cand["body_lines"].to_numpy().astype(float)
    tiebreak = rng.random(cand.height)
    members_of: dict[tuple, list[int]] = {}
    for i, k in enumerate(cand_keys):
        members_of.setdefault(tuple(k[j] for j in other), []).append(i)
    groups = {k: np.asarray(v, dtype=np.int64) for k, v in members_of.items()}
    for key in order:
        for member in by_stratum[key]:
            short = ratio - int(got[member])
            if short <= 0:
                continue
            rows = groups.get(tuple(key[j] for j in other))
            if rows is None:
                continue
            free = rows[~used[rows]]
            if free.size == 0:
                continue
            distance = np.abs(cand_lines[free] - float(mem["body_lines"][member]))
            for c in free[np.lexsort((tiebreak[free], distance))][:short]:
                used[c] = True
                chosen.append((int(c), member, True))
                got[member] += 1
                fallback_of[key] = fallback_of.get(key, 0) + 1


def _report(strata, order, by_stratum, pool, got, chosen, mem_keys, fallback_of, ratio) -> pl.DataFrame:
    controls_in: dict[tuple, int] = {}
    for _, m, _ in chosen:
        controls_in[mem_keys[m]] = controls_in.get(mem_keys[m], 0) + 1
    data: dict[str, list[Any]] = {s: [] for s in strata}
    data.update(members=[], controls=[], unmatched=[], fallback_controls=[], candidates=[])
    for key in order:
        for s, v in zip(strata, key):
            data[s].append(None if v is None else str(v))
        rows = by_stratum[key]
        data["members"].append(len(rows))
        data["controls"].append(controls_in.get(key, 0))
        data["unmatched"].append(int(sum(got[m] < ratio for m in rows)))
        data["fallback_controls"].append(fallback_of.get(key, 0))
        data["candidates"].append(len(pool.get(key, [])))
    schema = {s: pl.String for s in strata} | {c: pl.Int64 for c in
                                                ("members", "controls", "unmatched", "fallback_controls", "candidates")}
    return pl.DataFrame(data, schema=schema)


def _keys(table: pl.DataFrame, key_cols: list[str]) -> list[tuple]:
    if not key_cols:
        return [()] * table.height
    return list(zip(*(table[c].to_list() for c in key_cols)))


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in key)


def _stat(values: pl.Series, how: str) -> float | None:
    if values.len() == 0:
        return None
    return float(values.mean() if how == "mean" else values.median())  # type: ignore[arg-type]


def _check_edges(edges: Sequence[float]) -> tuple[float, ...]:
    edges = tuple(float(e) for e in edges)
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise InvalidParameterError(f"length_bins must be at least two strictly increasing edges, got {edges!r}")
    return edges


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"
