"""``calib cluster``: Ray clusters for the Ray runner; ``check`` says what one offers before a study uses it.

``calib cluster check ADDRESS`` connects to the cluster, runs one small task on every alive node and prints a
line per node (CPUs, calib's, Python's and Ray's versions there, bubblewrap and whether calib's sandbox ran a
trivial batch), then ``ok: ...`` or the problems, each with its remedy (:mod:`calib.scale.cluster`). Exit code
0 when the cluster is ready, 1 when a problem was found, 2 when the address cannot be reached or an option is
wrong. See docs/cli.md and docs/scale.md.
"""

from __future__ import annotations

import math
from typing import Any

import click

from calib.cli._untrusted import json_text, shown

__all__ = ["check", "cluster", "render"]


@click.group("cluster")
def cluster() -> None:
    """Ray clusters for [runner] kind = "ray": what one offers (see docs/scale.md)."""


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'' if n == 1 else 's'}"


def _sandbox_cell(node: dict[str, Any], need_sandbox: bool) -> str:
    if not node["answered"]:
        return "-"
    if node["sandbox_ok"]:
        return "ok"
    return "FAILED" if need_sandbox else "failed (not required)"


def render(report: dict[str, Any]) -> list[str]:
    """The human-readable lines of a report (:meth:`calib.scale.cluster.ClusterReport.to_dict`)."""
    nodes = report["nodes"]
    lines = [f"Ray cluster at {shown(report['address'])}: {_plural(len(nodes), 'node')}, "
             f"{_plural(report['cpus'], 'CPU')}",
             f"driver: calib {shown(report['calib_version'])}, Python {shown(report['python_version'])}, "
             f"Ray {shown(report['ray_version'])}"]
    if nodes:
        header = ("node", "address", "host", "CPUs", "calib", "Python", "Ray", "bubblewrap", "sandbox")
        rows = [header] + [(shown(n["node_id"][:12]), shown(n["address"]), shown(n["hostname"]), f"{n['cpus']:g}",
                            *(shown(n[key]) if n[key] is not None else "-"
                              for key in ("calib_version", "python_version", "ray_version", "bwrap")),
                            _sandbox_cell(n, report["need_sandbox"])) for n in nodes]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                  for row in rows]
    if report["ok"]:
        lines.append(f"ok: {_plural(len(nodes), 'node')}, {_plural(report['cpus'], 'CPU')}, "
                     f"calib {shown(report['calib_version'])} on every node")
    else:
        lines += [f"problem: {shown(problem)}" for problem in report["problems"]]
    return lines


@cluster.command("check")
@click.argument("address")
@click.option("--no-sandbox", is_flag=True,
              help="Do not require calib's sandbox (bubblewrap) on every node; only report it.")
@click.option("--timeout", type=float, default=120.0, show_default=True, metavar="SECONDS",
              help="How long to wait for every node's check task.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def check(address: str, no_sandbox: bool, timeout: float, as_json: bool) -> None:
    """Check the Ray cluster at ADDRESS (HOST:PORT of its head) before a study uses it.

    Runs one small task on every alive node: its CPUs, calib's, Python's and Ray's versions there (calib's
    must equal this machine's), bubblewrap, and whether calib's sandbox runs a trivial batch. Exit code 0
    when the cluster is ready, 1 when a problem was found (each printed with its remedy).
    """
    if not (math.isfinite(timeout) and timeout > 0):
        raise click.BadParameter(f"{timeout!r} is not a positive number of seconds", param_hint="'--timeout'")
    from calib.scale.cluster import check_cluster

    report = check_cluster(address, need_sandbox=not no_sandbox, timeout=timeout).to_dict()
    click.echo(json_text(report) if as_json else "\n".join(render(report)))
    if not report["ok"]:
        raise click.exceptions.Exit(1)
