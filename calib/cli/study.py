"""``calib study`` (run or resume a study) and ``calib check`` (validate a spec and probe its servers).

See docs/study-spec.md for the spec and docs/cli.md for the options.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["check", "study"]

_SPEC = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("study")
@click.argument("spec", type=_SPEC)
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the run's tables, cache and report go (default: runs/<study name>).")
@click.option("--stage", default=None, metavar="NAME",
              help="Stop after this stage (extract, prompt, generate, execute, measure, analyze, report).")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Audit at most N samples (a seeded draw; overrides data.limit).")
@click.option("--fresh", is_flag=True, help="Delete the run directory's previous results first.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, metavar="J",
              help="Executions and metric processes at once (default: the CPU count).")
@click.option("--quiet", is_flag=True,
              help="No progress bars (on a terminal) or progress lines (without one); warnings still show.")
def study(spec: Path, run_dir: Path | None, stage: str | None, limit: int | None, fresh: bool, jobs: int | None,
          quiet: bool) -> None:
    """Run the study SPEC (a TOML file), resuming where an earlier run stopped."""
    import os

    from calib.study import run_study
    from calib.study.runner import RunOptions

    options = RunOptions(limit=limit, jobs=jobs or os.cpu_count() or 1, until=stage, progress=not quiet)
    result = run_study(spec, run_dir=run_dir, options=options, fresh=fresh)
    ran = ", ".join(result.ran) or "none"
    skipped = ", ".join(result.skipped) or "none"
    click.echo(f"calib study: {result.run_dir} (ran: {ran}; up to date: {skipped}; {result.seconds:.1f} s)")
    report = result.run_dir / "report" / "report.html"
    if report.is_file() and "report" in result.ran + result.skipped:
        click.echo(f"report: {report}")
    if result.empty is not None:
        # a study that measured nothing is not a success, whatever its stages did (docs/cli.md, exit 3)
        click.echo(f"calib study: error: the study measured nothing: {result.empty}", err=True)
        raise click.exceptions.Exit(3)


@click.command("check")
@click.argument("spec", type=_SPEC)
@click.option("--no-probe", is_flag=True, help="Validate the spec only; do not contact any server.")
@click.option("--estimate", is_flag=True,
              help="Also estimate the requests, tokens and cost each stage will ask of each server (no generation).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def check(spec: Path, no_probe: bool, estimate: bool, as_json: bool) -> None:
    """Validate SPEC, probe every server it names, and say what will run."""
    from calib.study import check_study

    found = check_study(spec, probe=not no_probe, estimate=estimate)
    if as_json:
        click.echo(json.dumps(found))
    else:
        click.echo(f"{spec}: valid {found['kind']} study {found['study']!r}")
        click.echo(f"  stages: {' -> '.join(found['stages'])}")
        if "organism" in found:
            org = found["organism"]
            click.echo(f"  organism: {org['preset']} (seed {org['seed']}), "
                       f"{'built' if org['built'] else 'built on the first run'}")
        if "samples" in found:
            click.echo(f"  samples: {found['samples']}")
        for key in ("metrics", "procedures", "conditions", "tasks"):
            if key in found:
                value = found[key]
                click.echo(f"  {key}: {', '.join(value) if isinstance(value, list) else value}")
        for name, entry in found["servers"].items():
            state = entry.get("error") or entry.get("note") or "ok"
            model = entry.get("capabilities", {}).get("model", "")
            click.echo(f"  server {name} ({entry['kind']}{', ' + model if model else ''}): needs "
                       f"{', '.join(entry['needs'])}: {state}")
            if "allows" in entry:
                click.echo(f"    allows: {'; '.join(entry['allows']) or 'nothing calib uses'}")
        if "runner" in found:
            r = found["runner"]
            click.echo(f"  runner ray at {r['address']}: {r['nodes']} node(s), {r['cpus']:g} CPUs: "
                       + ("; ".join(r["problems"]) or "ok"))
        if found.get("estimate") is not None:
            from calib.study.estimate import render

            click.echo("\n".join(render(found["estimate"])))
        elif estimate:
            click.echo(f"  estimate: the {found['kind']} study kind gives none")
    if not found["ok"]:
        raise click.exceptions.Exit(2)
