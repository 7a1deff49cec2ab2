"""``calib similarity``: every similarity metric of a candidate to a reference function, for ad-hoc checks.

REFERENCE and CANDIDATE are files holding one function each. The language comes from ``--language``
or the REFERENCE file's extension. ``--json`` prints one JSON object mapping each metric to its value
(null when the metric cannot apply), with ``reasons`` for the nulls and ``details`` (judge categories,
reasoning and raw replies). Judges need a chat server and server embeddings an embeddings server:
``--server NAME`` names a ``[servers.NAME]`` table of ``--servers FILE`` (a study spec or a file of
server tables); without a server, judges are null with the reason and ``embedding`` uses the offline
model. See docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import click
import polars as pl

from calib._exceptions import InputError
from calib.cli._untrusted import json_text, shown
from calib.cli.compare import _read

__all__ = ["EXTENSIONS", "load_server_tables", "similarity"]

#: File extension → language, for REFERENCE files given without ``--language``.
EXTENSIONS = {".py": "python", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
              ".hh": "cpp", ".java": "java", ".rs": "rust", ".go": "go"}



def load_server_tables(path: Path) -> dict[str, dict[str, Any]]:
    """The server tables of a TOML file: its ``[servers.NAME]`` tables, or its top-level tables if it has none."""
    try:
        data = tomllib.loads(_read(path, "servers file"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", path=str(path)) from None
    tables = data.get("servers", data)
    if not isinstance(tables, dict):
        raise InputError("'servers' must be a table of [servers.NAME] tables", path=str(path))
    return {name: table for name, table in tables.items() if isinstance(table, dict)}


def _server(name: str | None, servers_file: Path | None, option: str):
    if name is None:
        return None
    if servers_file is None:
        raise click.UsageError(f"{option} {name}: name the TOML file that defines [servers.{name}] with --servers FILE")
    tables = load_server_tables(servers_file)
    if name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise InputError(f"no server {name!r} (servers defined: {known}); add a [servers.{name}] table with its kind",
                         path=str(servers_file))
    from calib.servers import create_server

    return create_server(name, tables[name])


def _language(reference: Path, language: str | None) -> str:
    from calib.metrics import normalize_language

    if language is not None:
        return normalize_language(language)
    guessed = EXTENSIONS.get(reference.suffix.lower())
    if guessed is None:
        raise click.UsageError(f"cannot tell the language of {reference.name} from its extension: pass --language "
                               "(python, c, cpp, java, rust, go)")
    return guessed


def _metric_names(text: str) -> list[str]:
    from calib.metrics import METRIC_NAMES

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise click.BadParameter("name at least one metric", param_hint="--metrics")
    if "all" in names:
        return list(METRIC_NAMES)
    return list(dict.fromkeys(names))


async def _run(reference: str, candidate: str, language: str, names: list[str], judge_server, embed_server,
               judge_max_tokens: int) -> pl.DataFrame:
    from calib.metrics import create_metric
    from calib.metrics.run import acompute_similarities
    from calib.servers import ChatParams

    metrics = []
    for name in names:
        options: dict[str, Any] = {}
        if name.startswith("judge_"):
            options["server"] = judge_server
            options["params"] = ChatParams(max_tokens=judge_max_tokens, temperature=0.0)
        elif name == "embedding" and embed_server is not None:
            options["server"] = embed_server
        metrics.append(create_metric(name, **options))
    pairs = pl.DataFrame({"sample_id": ["cli"], "role": ["candidate"], "reference": [reference],
                          "candidate": [candidate], "language": [language]})
    try:
        return await acompute_similarities(pairs, metrics, workers=1)
    finally:
        for server in {id(s): s for s in (judge_server, embed_server) if s is not None}.values():
            await server.aclose()


@click.command("similarity")
@click.argument("reference", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--language", "-l", default=None,
              help="python, c, cpp, java, rust or go (default: from REFERENCE's extension).")
@click.option("--metrics", "metrics_text", default="all", show_default=True,
              help="Comma-separated metric names: exact, bleu, edit, lcs, codebleu, codebleu_syntax, "
                   "codebleu_dataflow, tsed, embedding, judge_structure, judge_semantic, judge_functional; "
                   "or all.")
@click.option("--server", "server_name", default=None, metavar="NAME",
              help="The server for judges (chat) and embeddings: a [servers.NAME] table of --servers.")
@click.option("--embedding-server", "embed_name", default=None, metavar="NAME",
              help="Another server for embeddings only (default: --server, else the offline model).")
@click.option("--servers", "servers_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="TOML file with [servers.NAME] tables (a study spec works).")
@click.option("--judge-max-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="Most tokens a judge may answer with (greedy decoding).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def similarity(reference: Path, candidate: Path, language: str | None, metrics_text: str, server_name: str | None,
               embed_name: str | None, servers_file: Path | None, judge_max_tokens: int, as_json: bool) -> None:
    """Score CANDIDATE against REFERENCE with textual, structural, embedding and judge metrics."""
    from calib.metrics import METRIC_NAMES, create_metric

    lang = _language(reference, language)
    names = _metric_names(metrics_text)
    for name in names:
        if name not in METRIC_NAMES:
            create_metric(name)  # a plug-in metric, or the error listing the known names
    judge_server = _server(server_name, servers_file, "--server")
    embed_server = _server(embed_name, servers_file, "--embedding-server") if embed_name else judge_server
    table = asyncio.run(_run(_read(reference, "reference file"), _read(candidate, "candidate file"), lang, names,
                             judge_server, embed_server, judge_max_tokens))
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    details: dict[str, Any] = {}
    for row in table.iter_rows(named=True):
        values[row["metric"]] = row["value"]
        if row["reason"] is not None:
            reasons[row["metric"]] = row["reason"]
        if row["detail"] is not None:
            details[row["metric"]] = json.loads(row["detail"])
    if as_json:
        click.echo(json_text({**values, "language": lang, "reasons": reasons, "details": details}))
        return
    width = max(len(n) for n in values)
    click.echo(f"{shown(reference.name)} vs {shown(candidate.name)} ({shown(lang)})")
    for name, value in values.items():
        number = f"{value:.4f}" if value is not None else "—"
        note = f"  ({shown(reasons[name])})" if name in reasons else ""  # a judge's or server's words
        click.echo(f"  {shown(name):<{width}}  {number}{note}")
