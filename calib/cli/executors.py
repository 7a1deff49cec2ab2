"""``calib executors``: commands about executors; ``ablate`` measures the paper's non-agentic levels.

``calib executors ablate`` runs each level of the ``llm`` executor (:mod:`calib.executors.llm`) on a
sample of functions and reports, per level, the conclusive rate k/n with a Clopper–Pearson interval
and the reasons for the rest — the functional-memorization paper's Table 3 (App. C) for any chat
server. Each function gets one input-generation request and one preamble request, shared by the
levels ([FM] App. C: "we reuse the same generated inputs across all levels"). See docs/llm-executor.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import click

from calib._exceptions import InputError
from calib.cli._untrusted import json_text, shown

__all__ = ["ablate", "executors", "load_functions", "reason_key"]

_MOSTLY = re.compile(r"valid_inputs \d+ < \d+ \(mostly ([^)]*)\)")


def reason_key(reason: str) -> str:
    """The category of an inconclusive reason, for counting: ``llm_inputs``, ``llm_request``,
    ``preamble_failed``, ``valid_inputs (missing_name)``, ``coverage``, ``crashed``, ..."""
    first = reason.split("; ")[0].strip()
    m = _MOSTLY.match(first)
    if m:
        return f"valid_inputs ({m.group(1)})"
    return re.split(r"[:\s]", first, maxsplit=1)[0] or "unknown"


def load_server_spec(path: Path, name: str | None) -> tuple[str, dict[str, Any]]:
    """The chat server's table from a TOML or JSON file: one table with ``kind`` at the top level, or
    ``[servers.NAME]`` tables (a study spec works; ``name`` picks one when there are several)."""
    from calib.cli.compare import _read

    text = _read(path, "server spec")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {exc}",
                         path=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a table (object) describing the chat server", path=str(path))
    if "kind" in data:
        return name or "llm", data
    tables = data.get("servers", data)
    tables = {k: v for k, v in tables.items() if isinstance(v, dict)} if isinstance(tables, dict) else {}
    if name is None and len(tables) == 1:
        name = next(iter(tables))
    if name is None or name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise InputError(f"name the chat server with --server (servers defined: {known})" if name is None else
                         f"no server {name!r} (servers defined: {known})", path=str(path))
    return name, tables[name]


def load_functions(paths: tuple[Path, ...], contexts: tuple[Path, ...], sample: int | None,
                   seed: int) -> list[tuple[str, str, str]]:
    """``(id, function, context)`` triples from Python files (one function each, ``contexts`` matched by
    order) or from functions tables (Parquet written by ``calib extract``; Python rows only)."""
    from calib.cli.compare import _read

    tables = [p for p in paths if p.suffix.lower() == ".parquet"]
    if tables and len(tables) != len(paths):
        raise click.UsageError("give either Python files or functions tables (.parquet), not both")
    if contexts and (tables or len(contexts) != len(paths)):
        raise click.UsageError(f"--context: give one per function file ({len(paths)}), in the same order, or none")
    items: list[tuple[str, str, str]] = []
    if tables:
        import polars as pl

        frame = pl.concat([pl.read_parquet(p) for p in tables], how="diagonal_relaxed")
        missing = {"signature", "body", "context"} - set(frame.columns)
        if missing:
            raise InputError(f"not a functions table: missing column(s) {sorted(missing)} (calib extract writes "
                             "them)", path=str(tables[0]))
        if "language" in frame.columns:
            frame = frame.filter(pl.col("language") == "python")
        if sample is not None and frame.height > sample:
            frame = frame.sample(n=sample, seed=seed)
        for i, r in enumerate(frame.iter_rows(named=True)):
            body = r["body"] or ""
            text = r["signature"] + ("" if body.startswith("\n") else "\n") + body
            items.append((r.get("function_id") or f"row {i}", text, r["context"] or ""))
    else:
        for i, path in enumerate(paths):
            context = _read(contexts[i], "context file") if contexts else ""
            items.append((str(path), _read(path, "function file"), context))
        if sample is not None:
            items = items[:sample]
    if not items:
        raise InputError("no Python function to run", path=str(paths[0]))
    return items


def summarise(results: list[dict[str, Any]], levels: list[str], confidence: float) -> dict[str, Any]:
    """Per level: conclusive k of n, the Clopper–Pearson interval, and the count of each reason."""
    from calib.stats import clopper_pearson

    out = {}
    for level in levels:
        rows = [r["levels"][level] for r in results]
        k, n = sum(1 for r in rows if r["conclusive"]), len(rows)
        ci = clopper_pearson(k, n, confidence)
        reasons = Counter(reason_key(r["reason"]) for r in rows if not r["conclusive"])
        out[level] = {"conclusive": k, "n": n, "rate": k / n, "low": ci.low, "high": ci.high,
                      "confidence": confidence, "reasons": dict(reasons.most_common())}
    return out


async def _ablate(items, server, config, levels, chat_params, concurrency: int) -> list[dict[str, Any]]:
    from calib.executors.llm import LLMExecutor

    executor = LLMExecutor(config, server, level=levels[-1], chat_params=chat_params)  # type: ignore[arg-type]
    gate = asyncio.Semaphore(concurrency)

    async def one(item: tuple[str, str, str]) -> dict[str, Any]:
        ident, truth, context = item
        async with gate:
            results = await executor.compare_levels(truth, [], levels=levels, context=context)
        return {"id": ident, "levels": {lv: {"conclusive": c.conclusive, "reason": c.reason,
                                             "valid_inputs": c.valid_inputs, "coverage": c.coverage,
                                             "warnings": list(c.warnings)} for lv, c in results.items()}}

    try:
        return list(await asyncio.gather(*(one(item) for item in items)))
    finally:
        close = getattr(server, "aclose", None)
        if close is not None:
            await close()


@click.group("executors")
def executors() -> None:
    """Executors: the llm executor's non-agentic levels (see docs/llm-executor.md)."""


@executors.command("ablate")
@click.argument("functions", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--server-spec", "spec_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML or JSON file with the chat server's table (kind, model, base_url, ...) or [servers.NAME].")
@click.option("--server", "server_name", default=None, help="Which [servers.NAME] table, when there are several.")
@click.option("--context", "contexts", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Context file of each FUNCTIONS file, in the same order (repeat it).")
@click.option("--levels", default="bare,common_imports,preamble,preamble_retry", show_default=True,
              help="Comma-separated levels to run.")
@click.option("--sample", type=click.IntRange(min=1), default=None, help="Run at most this many functions.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample on tables.")
@click.option("--n-inputs", type=click.IntRange(min=1), default=10, show_default=True, help="Input states kept (N).")
@click.option("--min-valid", type=click.IntRange(min=1), default=8, show_default=True,
              help="Valid inputs needed (N_in).")
@click.option("--timeout", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds per input state.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=4096, show_default=True,
              help="Most tokens of each answer.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
              help="Functions in flight at once.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="Confidence of the Clopper-Pearson intervals.")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Run without bubblewrap when it is unavailable. Generated code then runs UNISOLATED.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def ablate(functions: tuple[Path, ...], spec_file: Path, server_name: str | None, contexts: tuple[Path, ...],
           levels: str, sample: int | None, seed: int, n_inputs: int, min_valid: int, timeout: float,
           max_tokens: int, concurrency: int, confidence: float, unsafe_no_sandbox: bool, as_json: bool) -> None:
    """Conclusive rate of each non-agentic level on FUNCTIONS (files or functions tables), like [FM] Table 3."""
    from calib.executors.base import ExecutorConfig
    from calib.executors.llm import LEVELS
    from calib.servers import ChatParams, create_server

    chosen = [lv.strip() for lv in levels.split(",") if lv.strip()]
    bad = [lv for lv in chosen if lv not in LEVELS]
    if bad or not chosen:
        raise click.BadParameter(f"{','.join(bad) or levels!r}: choose from {', '.join(LEVELS)}",
                                 param_hint="--levels")
    if min_valid > n_inputs:
        raise click.BadParameter(f"--min-valid {min_valid} exceeds --n-inputs {n_inputs}", param_hint="--min-valid")
    items = load_functions(functions, contexts, sample, seed)
    name, table = load_server_spec(spec_file, server_name)
    server = create_server(name, table)
    config = ExecutorConfig(n_inputs=n_inputs, min_valid=min_valid, seed=seed, input_timeout=timeout,
                            unsafe_no_sandbox=unsafe_no_sandbox)
    results = asyncio.run(_ablate(items, server, config, chosen, ChatParams(max_tokens=max_tokens), concurrency))
    from calib.executors.llm.prompting import PROMPTS_VERSION

    record = {"n": len(items), "server": name, "prompts": PROMPTS_VERSION, "levels": summarise(results, chosen,
                                                                                               confidence),
              "functions": results}
    if as_json:
        click.echo(json_text(record))
        return
    click.echo(f"{len(items)} functions, server {shown(repr(name))}, prompts {PROMPTS_VERSION}")
    for level, s in record["levels"].items():
        reasons = ", ".join(f"{shown(k)} {v}" for k, v in s["reasons"].items()) or "-"  # from generated code
        click.echo(f"{level:<15} {s['conclusive']:>4}/{s['n']:<4} {s['rate']:6.1%}  "
                   f"[{s['low']:.3f}, {s['high']:.3f}]  {reasons}")
