"""``calib mitigate``: preference pairs from a finished functional audit, and post-training away from memorization.

``calib mitigate pairs RUN`` makes the pairs table (and trl's JSONL preference format) from a run's memorized
members; ``calib mitigate train PAIRS`` post-trains the target with NPO or DPO and LoRA, a checkpoint per chosen
epoch (docs/mitigation.md, after the functional-memorization paper's Appendix H).
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import click

from calib._exceptions import InputError

__all__ = ["mitigate"]


@click.group()
def mitigate() -> None:
    """Remove memorized functions from a model: preference pairs from an audit, NPO/DPO post-training."""


def _extra_servers(spec: Any, path: Path | None) -> Any:
    """``spec`` with the ``[servers.*]`` tables of ``path`` added (a rewriter the audit did not name)."""
    if path is None:
        return spec
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read the servers file ({exc})", path=str(path)) from None
    servers = data.get("servers")
    if not isinstance(servers, dict) or not all(isinstance(v, dict) and "kind" in v for v in servers.values()):
        raise InputError("need [servers.NAME] tables, each with a kind (as in a study spec)", path=str(path))
    return spec.model_copy(update={"servers": {**spec.servers, **servers}})


@mitigate.command("pairs")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--source", type=click.Choice(["ref", "target", "rewrite"]), default="ref", show_default=True,
              help="The preferred completion: ref (the reference's greedy completion), target (target samples at "
                   "T = 1.0 then 1.4), rewrite (K = 10 rewrites by a chat model, --rewriter).")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="The pairs table to write (Parquet).")
@click.option("--jsonl", type=click.Path(path_type=Path), default=None,
              help="Also write the pairs as JSON lines {prompt, chosen, rejected} (trl's preference format).")
@click.option("--rewriter", default=None, help="--source rewrite: the chat server that rewrites (a server name of "
                                               "the run's spec or of --servers).")
@click.option("--servers", "servers_file", type=click.Path(path_type=Path), default=None,
              help="A TOML file of [servers.NAME] tables (as in a study spec) adding servers the run did not name.")
@click.option("--max-tokens", type=int, default=None,
              help="Most new tokens of a target sample or rewrite (default: the run's generation.max_tokens).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object (the counts).")
def pairs(run: Path, source: str, out: Path, jsonl: Path | None, rewriter: str | None, servers_file: Path | None,
          max_tokens: int | None, as_json: bool) -> None:
    """Preference pairs from the memorized members of a finished functional run (RUN: its run directory).

    Rejected: the memorized body; chosen: from --source, kept only if it parses, BLEU <= 0.3 against the
    memorized body and execution similarity <= 0.2, else the reference's greedy completion (a fall-back,
    counted). Exits 3 when the run has no memorized member.
    """
    from calib.mitigation.pairs import build_pairs, write_jsonl
    from calib.study.mitigation.audit import executor_for, load_audit
    from calib.study.resources import Resources

    audit = load_audit(run)
    spec = _extra_servers(audit.spec, servers_file)
    memorized = audit.memorized()
    if not memorized:
        click.echo(f"calib mitigate pairs: {run} has no memorized member (verdict textual or functional); "
                   "nothing to pair", err=True)
        raise click.exceptions.Exit(3)
    if source == "rewrite" and rewriter is None:
        raise click.UsageError("--source rewrite needs --rewriter NAME (a chat server)")
    if rewriter is not None and rewriter not in spec.servers:
        raise click.UsageError(f"--rewriter {rewriter!r}: no such server in the run's spec"
                               f"{' or ' + str(servers_file) if servers_file else ''} "
                               f"(known: {', '.join(sorted(spec.servers))})")
    resources = Resources(spec)

    async def make() -> Any:
        try:
            return await build_pairs(
                memorized, source,
                target=resources.server(spec.models.target) if source == "target" else None,
                rewriter=resources.server(rewriter) if source == "rewrite" else None,
                executor=executor_for(spec) if source != "ref" else None, seed=spec.study.seed,
                max_tokens=max_tokens or spec.generation.max_tokens, stop=tuple(spec.generation.stop))
        finally:
            await resources.aclose()

    table = asyncio.run(make())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    table.write_parquet(tmp)
    tmp.replace(out)
    lines = write_jsonl(table, jsonl) if jsonl is not None else None
    counts = _counts(table)
    counts.update(out=str(out), jsonl=str(jsonl) if jsonl else None, jsonl_lines=lines)
    if as_json:
        click.echo(json.dumps(counts))
        return
    click.echo(f"{counts['pairs']} pairs ({counts['textual']} textual, {counts['functional']} functional) from "
               f"{run}; source {source}: {counts['accepted']} accepted, {counts['fallback']} fell back to the "
               f"reference's completion, {counts['no_chosen']} without a preferred completion\n  {out}"
               + (f"\n  {jsonl} ({lines} lines)" if jsonl else ""))


def _counts(table: Any) -> dict[str, Any]:
    rows = table.to_dicts()
    return {"pairs": len(rows), "textual": sum(r["verdict"] == "textual" for r in rows),
            "functional": sum(r["verdict"] == "functional" for r in rows),
            "source": rows[0]["source"] if rows else None,
            "accepted": sum(r["chosen_from"] in ("target", "rewrite") for r in rows),
            "fallback": sum(bool(r["fallback"]) for r in rows),
            "no_chosen": sum(r["chosen"] is None for r in rows)}


def _read_pairs(path: Path, method: str) -> tuple[list[Any], int]:
    """The pairs of a pairs table (Parquet) or JSONL file, and how many were left out (DPO: no chosen)."""
    import polars as pl

    from calib.mitigation.train import Pair

    rows: list[dict[str, Any]] = []
    if path.suffix == ".jsonl":
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read the pairs ({exc.strerror})", path=str(path)) from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise InputError("not a JSON object; each line needs prompt, chosen, rejected", path=str(path),
                                 line=number) from None
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("prompt", "rejected")):
                raise InputError("each line needs the strings prompt and rejected (and chosen for DPO)",
                                 path=str(path), line=number)
            rows.append(row)
    else:
        try:
            table = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise InputError(f"cannot read the pairs table ({exc}); pass the Parquet file `calib mitigate "
                             "pairs` wrote, or a .jsonl file", path=str(path)) from None
        missing = {"prompt", "chosen", "rejected"} - set(table.columns)
        if missing:
            raise InputError(f"the pairs table lacks the columns {', '.join(sorted(missing))}", path=str(path))
        rows = table.select("prompt", "chosen", "rejected").to_dicts()
    kept = [Pair(r["prompt"], r.get("chosen") or "", r["rejected"]) for r in rows
            if method == "npo" or (r.get("chosen") or "").strip()]
    return kept, len(rows) - len(kept)


def _model_dir(model: str, preset: str, seed: int) -> Path:
    if model.startswith("organism:"):
        from calib.organism.build import build_organism
        from calib.organism.chat import organism_model

        return organism_model(build_organism(preset, seed=seed), model.removeprefix("organism:"))
    return Path(model)


@mitigate.command("train")
@click.argument("pairs_path", metavar="PAIRS", type=click.Path(path_type=Path))
@click.option("--model", required=True,
              help="The model to post-train: a Hugging Face folder, or organism:target (with --organism-preset).")
@click.option("--organism-preset", type=click.Choice(["tiny", "demo"]), default="demo", show_default=True,
              help="The organism preset an organism:NAME model is built from (cached).")
@click.option("--organism-seed", type=int, default=0, show_default=True, help="The organism's seed.")
@click.option("--method", type=click.Choice(["npo", "dpo"]), default="dpo", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Folder for the checkpoints (epoch-K/: a LoRA adapter the embedded server loads as a model).")
@click.option("--epochs", type=int, default=10, show_default=True)
@click.option("--save-epochs", default="2,4,6,8,10", show_default=True,
              help="Comma-separated epochs to save a checkpoint at.")
@click.option("--lr", "learning_rate", type=float, default=None,
              help="Learning rate (default: the paper's, 1e-5 for NPO and 3e-5 for DPO).")
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--beta", type=float, default=0.1, show_default=True, help="β of NPO and DPO.")
@click.option("--lora-r", type=int, default=32, show_default=True)
@click.option("--lora-alpha", type=int, default=32, show_default=True)
@click.option("--lora-dropout", type=float, default=0.05, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of LoRA's initialisation, dropout, order.")
@click.option("--threads", type=int, default=None, help="Torch CPU threads (default: torch's).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def train(pairs_path: Path, model: str, organism_preset: str, organism_seed: int, method: str, out: Path,
          epochs: int, save_epochs: str, learning_rate: float | None, batch_size: int, beta: float, lora_r: int,
          lora_alpha: int, lora_dropout: float, seed: int, threads: int | None, as_json: bool) -> None:
    """Post-train MODEL on PAIRS (a pairs table or JSONL) with NPO or DPO and LoRA; print the checkpoints."""
    from calib.mitigation.train import TrainConfig
    from calib.mitigation.train import train as run_training

    try:
        saves = tuple(int(part) for part in save_epochs.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{save_epochs!r}: comma-separated integers", param_hint="--save-epochs") from None
    config = TrainConfig(method=method, epochs=epochs, save_epochs=saves, learning_rate=learning_rate,
                         batch_size=batch_size, beta=beta, lora_r=lora_r, lora_alpha=lora_alpha,
                         lora_dropout=lora_dropout, seed=seed, threads=threads)
    kept, left_out = _read_pairs(pairs_path, method)
    if not kept:
        raise InputError("no pair to train on" + (f" ({left_out} without a preferred completion)" if left_out
                                                  else ""), path=str(pairs_path))
    result = run_training(_model_dir(model, organism_preset, organism_seed), kept, out, config)
    record = {"method": method, "pairs": result.pairs, "left_out": left_out, "steps": result.steps,
              "trainable_parameters": result.trainable_parameters, "epoch_losses": result.epoch_losses,
              "checkpoints": {str(k): str(v) for k, v in result.checkpoints.items()},
              "learning_rate": config.lr, "pairs_fingerprint": result.fingerprint}
    if as_json:
        click.echo(json.dumps(record))
        return
    click.echo(f"{method.upper()} on {result.pairs} pairs ({left_out} left out: no preferred completion), "
               f"{result.steps} steps, lr {config.lr:g}, {result.trainable_parameters:,} LoRA parameters")
    for epoch, folder in result.checkpoints.items():
        click.echo(f"  epoch {epoch}: {folder} (mean loss {result.epoch_losses[epoch - 1]:.4g})")
