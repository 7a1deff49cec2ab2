"""``calib dedup``: near-duplicates of audited functions in a training corpus, as a Parquet table.

``CORPUS`` and ``--against`` each name source files, directories or globs (cut into functions as
``calib extract`` does) or functions tables written by ``calib extract`` (``.parquet``). Every pair of
an audited function and a corpus function that is a textual near-duplicate (MinHash LSH, verified by
exact shingle Jaccard) or a semantic-only one (embedding cosine) is written to ``--out``; the counts
per audited function to ``--counts``. docs/dedup.md defines both. Source files are read under the caps of
``calib extract`` (``--max-file-bytes``, ``--max-line-chars``); a file dropped whole is listed with its reason.

For a corpus larger than memory, ``calib dedup bands SHARD... --out DIR`` writes its band table
(:mod:`calib.dedup.bands`) and ``calib dedup search DIR --against ...`` finds the same textual pairs in it, in
this process or on a Ray cluster (``--ray``). ``calib dedup`` followed by anything but those two names is the
search above.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
import polars as pl

from calib._exceptions import InputError
from calib.data.extract import DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_LINE_CHARS

_LISTED = 10  # dropped files named in the summary (--json lists all)

__all__ = ["dedup"]


def _functions(paths: tuple[str, ...], language: str | None, min_lines: int, what: str, caps: tuple[int, int],
               dropped_files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(ids, texts) of the functions the paths name: functions tables, or source cut into functions.

    ``caps`` is (``--max-file-bytes``, ``--max-line-chars``); a source file dropped whole (over a cap,
    unreadable, not UTF-8, a Python syntax error) goes into ``dropped_files`` with its reason, as in calib extract.
    """
    from calib.cli.extract import _FILE_REASONS, read_capped, source_files
    from calib.data.extract import Deduplicator, extract_document

    ids: list[str] = []
    texts: list[str] = []
    sources = []
    for arg in paths:
        if arg.endswith(".parquet") and Path(arg).is_file():
            try:
                table = pl.read_parquet(arg)
            except Exception as exc:  # polars raises several types for a damaged file
                raise InputError(f"cannot read the functions table ({type(exc).__name__})", path=arg) from None
            missing = [c for c in ("function_id", "signature", "body") if c not in table.columns]
            if missing:
                raise InputError(f"{what}: the table lacks column(s) {', '.join(missing)}; write it with calib extract",
                                 path=arg)
            for r in table.select("function_id", "signature", "body").iter_rows(named=True):
                ids.append(r["function_id"])
                texts.append(_text(r["signature"], r["body"]))
        else:
            sources.append(arg)
    if sources:
        dedup = Deduplicator()
        for file, rel, lang in source_files(tuple(sources), language):
            data = read_capped(file, caps[0])  # a corpus is read as far as it can be: a bad file is listed
            if isinstance(data, str):
                dropped_files[str(file)] = data
                continue
            result = extract_document(data, language=lang, source=str(file), path=rel, min_lines=min_lines,
                                      max_lines=10**6, deduplicator=dedup, max_document_bytes=caps[0],
                                      max_line_chars=caps[1])
            whole = set(_FILE_REASONS.intersection(result.dropped))
            if lang == "python" and "syntax_error" in result.dropped:
                whole.add("syntax_error")
            if whole:
                dropped_files[str(file)] = min(whole)
            for f in result.functions:
                ids.append(f["function_id"])
                texts.append(_text(f["signature"], f["body"]))
    return ids, texts


def _text(signature: str, body: str) -> str:
    return signature + ("" if body.startswith("\n") else "\n") + body


@click.command("dedup")
@click.argument("corpus", nargs=-1, required=True)
@click.option("--against", "against", multiple=True, required=True,
              help="The audited functions: a functions table (.parquet) or source files, folders or globs; repeatable.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Parquet file for the pairs (sample_id, corpus_id, kind, similarity, copies).")
@click.option("--counts", "counts_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Parquet file for the counts per audited function (sample_id, textual_dups, semantic_dups).")
@click.option("--language", type=click.Choice(["python", "c", "cpp", "java", "rust", "go"]), default=None,
              help="Language of the source files (default: from each file's extension).")
@click.option("--min-lines", type=click.IntRange(min=0), default=1, show_default=True,
              help="Fewest body lines of a corpus function.")
@click.option("--max-file-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_DOCUMENT_BYTES,
              show_default=True, help="Drop a source file over this many bytes unread (too_large), as calib extract.")
@click.option("--max-line-chars", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_CHARS,
              show_default=True, help="Drop a source file with a line over this many characters (long_line).")
@click.option("--jaccard", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.4, show_default=True,
              help="Textual threshold on the exact Jaccard of shingle sets.")
@click.option("--num-perm", type=click.IntRange(min=16), default=128, show_default=True, help="MinHash permutations.")
@click.option("--shingle-tokens", type=click.IntRange(min=1), default=5, show_default=True,
              help="Shingle size in code tokens.")
@click.option("--cosine", type=click.FloatRange(-1.0, 1.0), default=0.9, show_default=True,
              help="Semantic threshold on embedding cosine.")
@click.option("--no-semantic", is_flag=True, help="Textual near-duplicates only (no embedding model).")
@click.option("--embedding-server", "embed_name", default=None,
              help="An embeddings server: a [servers.NAME] table of --servers (default: the offline model).")
@click.option("--servers", "servers_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="TOML file with [servers.NAME] tables (a study spec works).")
@click.option("--index", type=click.Choice(["auto", "exact", "faiss", "hnsw"]), default="auto", show_default=True,
              help="Semantic search: exact blockwise numpy, faiss exact range search, or approximate HNSW.")
@click.option("--redis", "redis_url", default=None, metavar="URL",
              help="Keep the MinHash LSH index in Redis (redis://HOST:PORT/DB) instead of memory.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def find(corpus: tuple[str, ...], against: tuple[str, ...], out: Path, counts_out: Path | None, language: str | None,
          min_lines: int, max_file_bytes: int, max_line_chars: int, jaccard: float, num_perm: int,
          shingle_tokens: int, cosine: float, no_semantic: bool, embed_name: str | None, servers_file: Path | None,
          index: str, redis_url: str | None, as_json: bool) -> None:
    """Near-duplicates of the functions of --against in the training corpus CORPUS.

    Out of core: calib dedup bands SHARD... --out DIR writes a corpus's band table, calib dedup search DIR
    --against ... searches it (docs/dedup.md).
    """
    from calib._files import atomic_write
    from calib.cli.similarity import _server
    from calib.dedup import DedupConfig, duplicate_counts, find_duplicates

    if redis_url is not None and not redis_url.startswith("redis://"):
        raise click.BadParameter("give a redis:// URL, e.g. redis://127.0.0.1:6379/0", param_hint="--redis")
    started = time.perf_counter()
    dropped_files: dict[str, str] = {}
    caps = (max_file_bytes, max_line_chars)
    corpus_ids, corpus_texts = _functions(corpus, language, min_lines, "CORPUS", caps, dropped_files)
    sample_ids, sample_texts = _functions(against, language, 0, "--against", caps, dropped_files)
    if not sample_ids:
        raise InputError("--against names no function; check the paths and --language")
    config = DedupConfig(jaccard=jaccard, num_perm=num_perm, shingle_tokens=shingle_tokens, cosine=cosine,
                         semantic=not no_semantic, storage=redis_url, index=index)
    server = _server(embed_name, servers_file, "--embedding-server") if embed_name else None
    pairs = find_duplicates(corpus_ids, corpus_texts, sample_ids, sample_texts, config=config, server=server)
    atomic_write(out, pairs.write_parquet, suffix=".parquet")
    counts = duplicate_counts(pairs, list(dict.fromkeys(sample_ids)))
    if counts_out is not None:
        atomic_write(counts_out, counts.write_parquet, suffix=".parquet")
    result: dict[str, Any] = {
        "corpus_functions": len(corpus_ids), "samples": counts.height,
        "pairs": {kind: int((pairs["kind"] == kind).sum()) for kind in ("textual", "semantic")},
        "samples_with": {"textual": int((counts["textual_dups"] > 0).sum()),
                         "semantic": int((counts["semantic_dups"] > 0).sum())},
        "settings": config.to_dict() | {"storage": "redis" if redis_url else "memory"},
        "seconds": round(time.perf_counter() - started, 3), "out": str(out),
        "counts": None if counts_out is None else str(counts_out), "dropped_files": dropped_files,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"{result['samples']} functions against {result['corpus_functions']} corpus functions: "
                   f"{result['pairs']['textual']} textual and {result['pairs']['semantic']} semantic-only "
                   f"near-duplicate pairs ({result['samples_with']['textual']} and "
                   f"{result['samples_with']['semantic']} functions with at least one); {out}")
        _echo_dropped(dropped_files)


_RAY = click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
                    help="Run on the Ray cluster at HOST:PORT (Ray Data) instead of in this process.")


@click.command("bands")
@click.argument("shards", nargs=-1, required=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="New folder for the band table (manifest.json, bands/, ids/).")
@click.option("--id-column", default="id", show_default=True, help="The shards' id column.")
@click.option("--text-column", default="text", show_default=True, help="The shards' text column.")
@click.option("--jaccard", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.4, show_default=True,
              help="Textual threshold on the exact Jaccard of shingle sets (it sets the LSH bands).")
@click.option("--num-perm", type=click.IntRange(min=16), default=128, show_default=True, help="MinHash permutations.")
@click.option("--shingle-tokens", type=click.IntRange(min=1), default=5, show_default=True,
              help="Shingle size in code tokens.")
@click.option("--batch-rows", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="Rows of a shard hashed and written at once (one band file, one Ray task).")
@_RAY
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bands(shards: tuple[str, ...], out: Path, id_column: str, text_column: str, jaccard: float, num_perm: int,
          shingle_tokens: int, batch_rows: int, ray_address: str | None, as_json: bool) -> None:
    """Write the band table of the corpus SHARD... (Parquet or JSONL files, folders or globs) to --out.

    A SHARD of the form hf://datasets/OWNER/NAME@COMMIT/PATTERN names files of a Hugging Face Hub dataset at a
    pinned commit (PATTERN: a file, a glob or a folder), read from the HF cache (fetched unless HF_HUB_OFFLINE=1).
    """
    from calib.dedup.bands import build_band_table

    table = build_band_table(shards, out, id_column=id_column, text_column=text_column, threshold=jaccard,
                             num_perm=num_perm, shingle_size=shingle_tokens, batch_rows=batch_rows,
                             ray_address=ray_address)
    manifest = table.manifest
    result = {"functions": table.functions, "shards": len(table.shards), "band_rows": manifest["band_rows"],
              "bytes": table.bytes, "bytes_per_function": round(table.bytes_per_function(), 1),
              "settings": manifest["settings"], "engine": manifest["engine"], "seconds": manifest["seconds"],
              "out": str(out)}
    if as_json:
        click.echo(json.dumps(result))
    else:
        settings = result["settings"]
        click.echo(f"{result['functions']} functions from {result['shards']} shards: {result['band_rows']} band rows "
                   f"({settings['bands']} bands of {settings['rows']}), {result['bytes_per_function']} bytes per "
                   f"function, in {result['seconds']} s ({result['engine']}); {out}")


@click.command("search")
@click.argument("table", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--against", "against", multiple=True, required=True,
              help="The audited functions: a functions table (.parquet) or source files, folders or globs; repeatable.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Parquet file for the pairs (sample_id, corpus_id, kind, similarity, copies).")
@click.option("--counts", "counts_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Parquet file for the counts per audited function (sample_id, textual_dups, semantic_dups).")
@click.option("--language", type=click.Choice(["python", "c", "cpp", "java", "rust", "go"]), default=None,
              help="Language of the --against source files (default: from each file's extension).")
@click.option("--max-file-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_DOCUMENT_BYTES,
              show_default=True, help="Drop a source file over this many bytes unread (too_large), as calib extract.")
@click.option("--max-line-chars", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_CHARS,
              show_default=True, help="Drop a source file with a line over this many characters (long_line).")
@_RAY
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def search(table: Path, against: tuple[str, ...], out: Path, counts_out: Path | None, language: str | None,
           max_file_bytes: int, max_line_chars: int, ray_address: str | None, as_json: bool) -> None:
    """Textual near-duplicates of the functions of --against in the band table TABLE (calib dedup bands)."""
    from calib._files import atomic_write
    from calib.dedup import DUPLICATES_SCHEMA, duplicate_counts
    from calib.dedup.bands import BandTable

    started = time.perf_counter()
    index = BandTable(table)
    dropped_files: dict[str, str] = {}
    sample_ids, sample_texts = _functions(against, language, 0, "--against", (max_file_bytes, max_line_chars),
                                          dropped_files)
    if not sample_ids:
        raise InputError("--against names no function; check the paths and --language")
    found = index.search(sample_ids, sample_texts, ray_address=ray_address)
    pairs = found.select(pl.col("query_id").alias("sample_id"), "corpus_id", pl.lit("textual").alias("kind"),
                         pl.col("jaccard").alias("similarity"), pl.lit(1).alias("copies")) \
        .cast(DUPLICATES_SCHEMA).sort(["sample_id", "kind", "corpus_id"])
    atomic_write(out, pairs.write_parquet, suffix=".parquet")
    counts = duplicate_counts(pairs, list(dict.fromkeys(sample_ids)))
    if counts_out is not None:
        atomic_write(counts_out, counts.write_parquet, suffix=".parquet")
    result: dict[str, Any] = {
        "corpus_functions": index.functions, "samples": counts.height, "pairs": {"textual": pairs.height},
        "samples_with": {"textual": int((counts["textual_dups"] > 0).sum())},
        "settings": index.manifest["settings"], "engine": "polars" if ray_address is None else "ray",
        "seconds": round(time.perf_counter() - started, 3), "out": str(out),
        "counts": None if counts_out is None else str(counts_out), "dropped_files": dropped_files,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"{result['samples']} functions against the {result['corpus_functions']} corpus functions of "
                   f"{table}: {pairs.height} textual near-duplicate pairs ({result['samples_with']['textual']} "
                   f"functions with at least one); {out}")
        _echo_dropped(dropped_files)


def _echo_dropped(dropped_files: dict[str, str]) -> None:
    """The corpus files dropped whole, the first few by name."""
    for name, reason in list(dropped_files.items())[:_LISTED]:
        click.echo(f"  dropped {name}: {reason}")
    if len(dropped_files) > _LISTED:
        click.echo(f"  ... and {len(dropped_files) - _LISTED} more files dropped whole (--json lists all)")


class _DedupCommands(click.Group):
    """``calib dedup``: the search (``find``) unless the first argument names a subcommand (``bands``, ``search``).

    The search keeps its command line (``calib dedup CORPUS... --against ...``): :meth:`make_context` hands any
    other arguments to it whole. ``params`` lists the search's parameters (for help and docs); the group itself
    parses none of them (:meth:`get_params`).
    """

    def __init__(self, default: click.Command, commands: list[click.Command]) -> None:
        super().__init__(name=default.name, commands=commands, help=default.help,
                         short_help="Near-duplicates of audited functions in a training corpus.")
        self.default = default
        self.params = default.params

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        help_option = self.get_help_option(ctx)
        return [] if help_option is None else [help_option]

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        if args and args[0] in self.commands:
            return super().make_context(info_name, args, parent=parent, **extra)
        return self.default.make_context(info_name, args, parent=parent, **extra)


dedup = _DedupCommands(find, [bands, search])
