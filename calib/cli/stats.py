"""``calib stats``: the statistics core for users who already have scores, and for planning."""

from __future__ import annotations

import click


@click.group()
def stats() -> None:
    """Intervals, conformal thresholds, FPR laws, budgets and census coverage from scores."""
