"""``calib stats``: the statistics core for users who already have scores, and for planning.

One module per subcommand; each prints a short summary, or with ``--json`` exactly one JSON object.
"""

from __future__ import annotations

import click

from calib.cli.stats.beta_law import beta_law
from calib.cli.stats.budget import budget
from calib.cli.stats.census import census
from calib.cli.stats.conformal import conformal
from calib.cli.stats.interval import interval
from calib.cli.stats.plan import plan


@click.group()
def stats() -> None:
    """Intervals, conformal thresholds, FPR laws, budgets and census coverage from scores."""


for _command in (interval, beta_law, conformal, budget, plan, census):
    stats.add_command(_command)

__all__ = ["stats"]
