"""The band table (calib.dedup.bands): the in-memory index's pairs, out of core, with Polars and on a real Ray cluster.

The corpus: 779 standard-library functions, three token-perturbed copies of each (up to 15 % of the tokens
replaced, so that pairs fall on both sides of the threshold), the planted families of test_minhash (renamed and
reformatted copies), short functions, a repeated text and blank texts; shuffled, so that near-duplicates lie in
different shards and slices. Every result is compared with the independent reference, the datasketch-backed
in-memory index (``textual_duplicates``, ``TextualIndex``), row for row.
"""

from __future__ import annotations

import json
import random
import re

import polars as pl
import pytest

from calib._exceptions import InputError, InvalidParameterError
from calib.dedup.bands import BandTable, build_band_table
from calib.dedup.minhash import TEXTUAL_DUPLICATES_SCHEMA, TextualIndex, code_tokens, textual_duplicates
from calib.dedup.shards import band_keys
from tests.dedup.test_minhash import BASE, RENAMES, UNRELATED, _reformatted, _renamed, _stdlib_functions

SHARDS = 3
BATCH = 400  # rows per slice: several slices per shard


def _corpus() -> tuple[list[str], list[str]]:
    rng = random.Random(7)
    texts = list(_stdlib_functions())
    for text in list(texts):
        tokens = code_tokens(text)
        for _ in range(3):
            rate = rng.uniform(0.0, 0.15)
            texts.append(" ".join(f"z{rng.randrange(10**6)}" if rng.random() < rate else t for t in tokens))
    for name, text in BASE.items():
        texts += [text, _renamed(text, *RENAMES[name]), _reformatted(text)]
    texts += [*UNRELATED.values(), "x = 1", "y = 2", "x = 1", "def f(): pass", "", "   \n\t", "\x1c"]
    rng.shuffle(texts)
    return [f"fn/{i:05d}" for i in range(len(texts))], texts


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[str]]:
    ids, texts = _corpus()
    rng = random.Random(11)
    asked = rng.sample(range(len(ids)), 400)
    extra = [" ".join(t if rng.random() > 0.1 else "w" for t in code_tokens(texts[i])) for i in asked[:60]]
    query_ids = [ids[i] for i in asked] + [f"new/{i}" for i in range(len(extra))] + [ids[asked[0]], "blank", "x"]
    query_texts = [texts[i] for i in asked] + extra + [texts[asked[0]], "  ", "x = 1"]
    return {"ids": ids, "texts": texts, "query_ids": query_ids, "query_texts": query_texts}


@pytest.fixture(scope="module")
def reference(corpus) -> pl.DataFrame:
    table = textual_duplicates(corpus["ids"], corpus["texts"], corpus["query_ids"], corpus["query_texts"])
    assert table.height > 600 and table["query_id"].n_unique() > 250  # planted pairs on both sides of the threshold
    assert table["jaccard"].min() < 0.5 and (table["jaccard"] == 1.0).any()
    return table


def _write(folder, ids, texts, fmt: str) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    size = -(-len(ids) // SHARDS)
    for n in range(SHARDS):
        frame = pl.DataFrame({"id": ids[n * size:(n + 1) * size], "text": texts[n * size:(n + 1) * size]})
        kind = fmt if fmt != "mixed" else ("parquet", "jsonl")[n % 2]
        path = folder / f"shard-{n}.{kind}"
        frame.write_parquet(path) if kind == "parquet" else frame.write_ndjson(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def shards(corpus, tmp_path_factory) -> dict[str, list]:
    root = tmp_path_factory.mktemp("shards")
    return {fmt: _write(root / fmt, corpus["ids"], corpus["texts"], fmt) for fmt in ("parquet", "jsonl", "mixed")}


@pytest.fixture(scope="module")
def table(shards, tmp_path_factory) -> BandTable:
    return build_band_table(shards["parquet"], tmp_path_factory.mktemp("t") / "bands", batch_rows=BATCH)


def _band_rows(table: BandTable) -> pl.DataFrame:
    return pl.read_parquet(table.path / "bands" / "*.parquet").sort("band", "key", "row")


def test_polars_engine_finds_the_in_memory_index_pairs_row_for_row(table, corpus, reference):
    found = table.search(corpus["query_ids"], corpus["query_texts"])
    assert found.schema == pl.Schema(TEXTUAL_DUPLICATES_SCHEMA)
    assert found.rows() == reference.rows()  # same pairs, same order, the same float Jaccard values
    with_self = textual_duplicates(corpus["ids"], corpus["texts"], corpus["query_ids"], corpus["query_texts"],
                                   exclude_self=False)
    assert table.search(corpus["query_ids"], corpus["query_texts"], exclude_self=False).rows() == with_self.rows()
    assert with_self.height > reference.height


def test_candidates_are_the_lsh_candidates_of_the_index(table, corpus):
    index = TextualIndex()
    index.add(corpus["ids"], corpus["texts"])
    expected = index.candidates(corpus["query_texts"], exclude=corpus["query_ids"])
    found = table.candidates(corpus["query_ids"], corpus["query_texts"])
    mine = [[] for _ in corpus["query_ids"]]
    for q, corpus_id in found.select("query", "corpus_id").iter_rows():
        mine[q].append(corpus_id)
    assert mine == expected
    assert sum(map(len, expected)) > 2 * len(expected)


def test_the_layout_and_its_size_are_as_documented(table, corpus):
    manifest = json.loads((table.path / "manifest.json").read_text())
    assert manifest["settings"] == {"threshold": 0.4, "num_perm": 128, "seed": 1, "shingle_size": 5, "bands": 64,
                                    "rows": 2, "scheme": "affine32", "key": "packed"}
    rows = _band_rows(table)
    assert rows.schema == pl.Schema({"band": pl.UInt16, "key": pl.UInt64, "row": pl.UInt32})
    with_tokens = sum(1 for t in corpus["texts"] if code_tokens(t))
    assert rows.height == manifest["band_rows"] == 64 * with_tokens  # blank texts have no band row
    for path in (table.path / "bands").glob("*.parquet"):  # each file sorted by band, then key
        part = pl.read_parquet(path)
        assert part.equals(part.sort("band", "key"))
    ids = pl.read_parquet(table.path / "ids" / "*.parquet").sort("row")
    assert ids["id"].to_list() == corpus["ids"] and ids["row"].to_list() == list(range(len(corpus["ids"])))
    # a row's key is its signature's band, packed: v[2b] << 32 | v[2b + 1]
    values = TextualIndex()._hasher.hashvalues(corpus["texts"][:50])
    keys = band_keys(values, 64, 2)
    sample = rows.filter(pl.col("row") < 50)
    for band, key, row in sample.iter_rows():
        assert key == keys[row, band] == (int(values[row, 2 * band]) << 32) | int(values[row, 2 * band + 1])
    assert manifest["functions"] == table.functions == len(corpus["ids"])
    size = table.bytes
    assert size["bands"] == sum(p.stat().st_size for p in (table.path / "bands").glob("*.parquet"))
    assert size == {"bands": manifest["bytes"]["bands"], "ids": manifest["bytes"]["ids"],
                    "total": size["bands"] + size["ids"] + (table.path / "manifest.json").stat().st_size}
    assert table.bytes_per_function() <= 1024  # the target, documented in docs/dedup.md
    assert 300 <= size["bands"] / table.functions <= 700  # about 0.5 KB per function


def test_jsonl_and_parquet_shards_give_the_same_table_and_pairs(shards, table, corpus, reference, tmp_path):
    for fmt in ("jsonl", "mixed"):
        other = build_band_table(shards[fmt], tmp_path / fmt, batch_rows=BATCH)
        assert _band_rows(other).equals(_band_rows(table))
        assert other.search(corpus["query_ids"], corpus["query_texts"]).rows() == reference.rows()


def test_a_folder_and_a_glob_name_the_shards(shards, table, corpus, reference, tmp_path):
    folder = shards["parquet"][0].parent
    for name, arg in (("folder", [folder]), ("glob", [str(folder / "shard-*.parquet")])):
        other = build_band_table(arg, tmp_path / name, batch_rows=5000)
        assert _band_rows(other).equals(_band_rows(table))
        assert other.search(corpus["query_ids"], corpus["query_texts"]).rows() == reference.rows()


def test_three_rows_per_band_hash_the_band_and_still_match_the_index(shards, corpus, tmp_path):
    other = build_band_table(shards["parquet"], tmp_path / "t", threshold=0.5, batch_rows=1000)
    assert other.settings.bands == (42, 3) and other.manifest["settings"]["key"] == "hash64"
    expected = textual_duplicates(corpus["ids"], corpus["texts"], corpus["query_ids"], corpus["query_texts"],
                                  threshold=0.5)
    assert other.search(corpus["query_ids"], corpus["query_texts"]).rows() == expected.rows()
    assert expected.height > 300


def test_a_functions_table_from_calib_extract_is_a_shard(corpus, tmp_path):
    ids, texts = corpus["ids"][:600], corpus["texts"][:600]
    split = [t.partition("\n") for t in texts]
    pl.DataFrame({"function_id": ids, "signature": [s for s, _, _ in split], "body": [b for _, _, b in split]}) \
        .write_parquet(tmp_path / "functions.parquet")
    joined = [s + ("" if b.startswith("\n") else "\n") + b for s, _, b in split]  # as calib dedup reads it
    other = build_band_table([tmp_path / "functions.parquet"], tmp_path / "t")
    assert other.shards[0].id_column == "function_id"
    expected = textual_duplicates(ids, joined, ids[:200], joined[:200])
    assert other.search(ids[:200], joined[:200]).rows() == expected.rows() and expected.height > 20


def test_ray_engine_finds_the_same_pairs_on_a_real_cluster(ray_cluster, shards, table, corpus, reference, tmp_path):
    built = build_band_table(shards["mixed"], tmp_path / "ray", batch_rows=BATCH, ray_address=ray_cluster.address)
    assert built.manifest["engine"] == "ray"
    assert _band_rows(built).equals(_band_rows(table))  # the same band rows, written by Ray Data
    assert built.bytes_per_function() <= 1024
    found = built.search(corpus["query_ids"], corpus["query_texts"], ray_address=ray_cluster.address)
    assert found.rows() == reference.rows()
    # a table built in this process, searched on the cluster (and the other way round)
    assert table.search(corpus["query_ids"], corpus["query_texts"], ray_address=ray_cluster.address).rows() == \
        reference.rows()
    assert built.search(corpus["query_ids"], corpus["query_texts"]).rows() == reference.rows()
    cands = built.candidates(corpus["query_ids"], corpus["query_texts"], ray_address=ray_cluster.address)
    assert cands.equals(table.candidates(corpus["query_ids"], corpus["query_texts"]))


def test_a_null_text_in_a_ray_task_is_the_same_one_line_error(ray_cluster, tmp_path):
    path = tmp_path / "holes.jsonl"
    pl.DataFrame({"id": ["a", "b", "c"], "text": ["x = 1", None, "y = 2"]}).write_ndjson(path)
    for address in (None, ray_cluster.address):
        with pytest.raises(InputError) as raised:
            build_band_table([path], tmp_path / f"t{address is None}", ray_address=address)
        assert str(raised.value) == f"{path}: row 1 has no text (null); give every row one"
        assert not (tmp_path / f"t{address is None}").exists()  # nothing half-built is left


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_shard_without_its_text_column_is_a_one_line_error_naming_file_and_column(tmp_path):
    path = tmp_path / "shard.parquet"
    pl.DataFrame({"id": ["a"], "body": ["x = 1"]}).write_parquet(path)
    with pytest.raises(InputError) as raised:
        build_band_table([path], tmp_path / "t")
    assert _one_line(raised) == f"{path}: the shard has no column 'text' (it has id, body); name its column with " \
                                "--text-column"
    jsonl = tmp_path / "shard.jsonl"
    jsonl.write_text('{"id": "a", "code": "x = 1"}\n')
    with pytest.raises(InputError, match=re.escape(f"{jsonl}: the shard has no column 'source'")):
        build_band_table([jsonl], tmp_path / "t2", text_column="source")
    with pytest.raises(InputError, match=re.escape(f"{jsonl}: the shard has no column 'key'")):
        build_band_table([jsonl], tmp_path / "t3", id_column="key", text_column="code")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("case, message", [
    ("repeated", "id 'a' occurs 2 times in the corpus (first at row 0); ids must be unique"),
    ("null_id", "row 1 has no id (null); give every row an id"),
    ("number", "column 'text' is Int64, not text"),
    ("suffix", "a shard must be .parquet or .jsonl, not .csv"),
    ("damaged", "cannot read the parquet shard"),
])
def test_bad_shards_are_one_line_errors(tmp_path, case, message):
    path = tmp_path / ("shard.csv" if case == "suffix" else "shard.parquet")
    frames = {"repeated": {"id": ["a", "b", "a"], "text": ["x", "y", "z"]},
              "null_id": {"id": ["a", None], "text": ["x", "y"]}, "number": {"id": ["a"], "text": [1]}}
    if case in frames:
        pl.DataFrame(frames[case]).write_parquet(path)
    else:
        path.write_text("id,text\na,x\n")
    with pytest.raises(InputError) as raised:
        build_band_table([path], tmp_path / "t")
    assert _one_line(raised).startswith(f"{path}: {message}")


def test_a_changed_shard_a_used_folder_and_a_missing_table_are_refused(shards, corpus, tmp_path):
    paths = _write(tmp_path / "s", corpus["ids"][:50], corpus["texts"][:50], "parquet")
    built = build_band_table(paths, tmp_path / "t")
    with pytest.raises(InputError, match="the folder exists and is not empty; give a new --out folder"):
        build_band_table(paths, tmp_path / "t")
    pl.DataFrame({"id": ["q"], "text": ["x = 2"]}).write_parquet(paths[1])
    with pytest.raises(InputError) as raised:
        built.search(["q"], ["x = 2"])
    assert _one_line(raised).startswith(f"{paths[1]}: shard of the band table {tmp_path / 't'}: it changed since")
    with pytest.raises(InputError, match="no manifest.json: not a band table; build one with calib dedup bands"):
        BandTable(tmp_path / "s")
    with pytest.raises(InvalidParameterError, match="same length"):
        build_band_table(shards["parquet"], tmp_path / "u").search(["a", "b"], ["x"])
    with pytest.raises(InvalidParameterError, match=re.escape("threshold must be a number in (0, 1]")):
        build_band_table(paths[:1], tmp_path / "v", threshold=0)


def test_empty_queries_and_a_corpus_of_blank_texts_find_nothing(tmp_path):
    path = tmp_path / "blank.parquet"
    pl.DataFrame({"id": ["a", "b"], "text": ["", " \n"]}).write_parquet(path)
    built = build_band_table([path], tmp_path / "t")
    assert built.manifest["band_rows"] == 0
    assert built.search(["a", "q"], ["", "x = 1"]).height == 0
    assert built.search([], []).schema == pl.Schema(TEXTUAL_DUPLICATES_SCHEMA)


def test_calib_dedup_bands_and_search_equal_calib_dedup(shards, corpus, tmp_path, capsys):
    from tests.cli._helpers import run_calib

    ids, texts = corpus["ids"][:800], corpus["texts"][:800]
    split = [t.partition("\n") for t in texts]
    corpus_table = tmp_path / "corpus.parquet"
    pl.DataFrame({"function_id": ids, "signature": [s for s, _, _ in split], "body": [b for _, _, b in split],
                  "path": "x.py"}).write_parquet(corpus_table)
    audited = tmp_path / "audited.parquet"
    pl.read_parquet(corpus_table).head(150).write_parquet(audited)
    built = run_calib(capsys, "dedup", "bands", corpus_table, "--out", tmp_path / "t", "--batch-rows", "300",
                      "--json").json()
    assert built["functions"] == 800 and built["bytes_per_function"] <= 1024 and built["engine"] == "polars"
    out = run_calib(capsys, "dedup", "search", tmp_path / "t", "--against", audited, "--out", tmp_path / "p.parquet",
                    "--counts", tmp_path / "c.parquet", "--json").json()
    same = run_calib(capsys, "dedup", corpus_table, "--against", audited, "--out", tmp_path / "q.parquet",
                     "--counts", tmp_path / "d.parquet", "--no-semantic", "--json").json()
    assert pl.read_parquet(tmp_path / "p.parquet").equals(pl.read_parquet(tmp_path / "q.parquet"))
    assert pl.read_parquet(tmp_path / "c.parquet").equals(pl.read_parquet(tmp_path / "d.parquet"))
    assert out["pairs"]["textual"] == same["pairs"]["textual"] > 20
    error = run_calib(capsys, "dedup", "bands", shards["parquet"][0], "--out", tmp_path / "u", "--text-column",
                      "code").one_line_error()
    assert error == f"calib: error: {shards['parquet'][0]}: the shard has no column 'code' (it has id, text); " \
                    "name its column with --text-column"
    assert "calib dedup search" in run_calib(capsys, "dedup", "--help").out


def test_calib_dedup_on_a_ray_cluster_gives_the_same_table_and_one_line_errors(ray_cluster, shards, table, corpus,
                                                                              tmp_path, capsys):
    from tests.cli._helpers import run_calib

    address = ray_cluster.address
    built = run_calib(capsys, "dedup", "bands", *shards["jsonl"], "--out", tmp_path / "t", "--batch-rows", "700",
                      "--ray", address, "--json").json()
    assert built["engine"] == "ray" and built["functions"] == len(corpus["ids"])
    assert _band_rows(BandTable(tmp_path / "t")).equals(_band_rows(table))
    audited = tmp_path / "audited.parquet"
    pl.DataFrame({"function_id": corpus["query_ids"][:300],
                  "signature": [t.partition("\n")[0] for t in corpus["query_texts"][:300]],
                  "body": [t.partition("\n")[2] for t in corpus["query_texts"][:300]]}).write_parquet(audited)
    for engine in ((), ("--ray", address)):
        out = run_calib(capsys, "dedup", "search", tmp_path / "t", "--against", audited, "--out",
                        tmp_path / f"p{len(engine)}.parquet", *engine, "--json").json()
        assert out["engine"] == ("ray" if engine else "polars")
    assert pl.read_parquet(tmp_path / "p0.parquet").equals(pl.read_parquet(tmp_path / "p2.parquet"))
    assert pl.read_parquet(tmp_path / "p0.parquet").height > 200
    holes = tmp_path / "holes.parquet"
    pl.DataFrame({"id": ["a", "b"], "text": [None, "x = 1"]}).write_parquet(holes)
    error = run_calib(capsys, "dedup", "bands", holes, "--out", tmp_path / "u", "--ray", address).one_line_error()
    assert error == f"calib: error: {holes}: row 0 has no text (null); give every row one"
