"""``calib organism``: build the model organism (tiny target/reference code models with known members)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.group()
def organism() -> None:
    """The model organism: a reference and a target model trained here, with known members."""


@organism.command("build")
@click.option("--preset", type=click.Choice(["tiny", "demo"]), default="demo", show_default=True,
              help="Size: tiny (tests, about a minute) or demo (the demo study, a few minutes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random choice.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Cache folder (default: $CALIB_CACHE_DIR, else ~/.cache/calib).")
@click.option("--chat", is_flag=True,
              help="Also build the chat variant: chat-reference (the reference fine-tuned on chat-formatted "
                   "background) and chat-target (it, trained on the members in chat format); docs/organism.md.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def build(preset: str, seed: int, cache_dir: Path | None, chat: bool, as_json: bool) -> None:
    """Build (or find in the cache) the organism; print the paths of both models and the ground truth."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from calib._progress import LineProgress, use_lines
    from calib.organism.build import build_organism, progress_tasks

    # stdout carries only the result; progress goes to stderr: bars on a terminal, else lines.
    with (LineProgress(prefix="calib organism build: ") if use_lines() else
          Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TimeElapsedColumn(), TimeRemainingColumn(), transient=True, console=Console(stderr=True))) as bar:
        progress = progress_tasks(bar)
        paths = build_organism(preset, seed=seed, cache_dir=cache_dir, progress=progress)
        chat_paths = None
        if chat:
            from calib.organism.chat import build_chat_variant

            chat_paths = build_chat_variant(paths, progress=progress)
    record = paths.to_dict()
    if chat_paths is not None:
        record.update(chat_paths.to_dict())
    if as_json:
        click.echo(json.dumps(record))
    else:
        how = "found in the cache" if paths.cached else f"built in {paths.seconds:.0f} s"
        click.echo(f"organism ({preset}, seed {seed}) {how}\n  target:    {paths.target}\n"
                   f"  reference: {paths.reference}\n  truth:     {paths.truth}")
        if chat_paths is not None:
            how = "found in the cache" if chat_paths.cached else f"built in {chat_paths.seconds:.0f} s"
            click.echo(f"chat variant {how}\n  chat-target:    {chat_paths.chat_target}\n"
                       f"  chat-reference: {chat_paths.chat_reference}")
