"""compute_similarities: rows, order, nulls with reasons, the process pool, the cache and resuming."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.metrics import SIMILARITIES_SCHEMA, MetricUnavailable, create_metric
from calib.metrics.run import compute_similarities
from calib.servers.cache import RequestCache


@dataclass
class Picky:
    """A real metric of the test's own: length ratio; unavailable on 'skip'; a bug on 'boom'; counts calls."""

    name: ClassVar[str] = "picky"
    kind: ClassVar[str] = "textual"
    version: ClassVar[str] = "1"
    calls: list[str] = field(default_factory=list)

    def fingerprint(self):
        return {"name": self.name, "version": self.version}

    def score(self, reference_code, candidate_code, language):
        self.calls.append(candidate_code)
        if candidate_code == "skip":
            raise MetricUnavailable("told to skip")
        if candidate_code == "flaky":
            raise MetricUnavailable("request failed: 503", transient=True)
        if candidate_code == "boom":
            raise ZeroDivisionError("division by zero")
        return min(len(candidate_code), len(reference_code)) / max(len(candidate_code), len(reference_code))


def _pairs(n: int) -> pl.DataFrame:
    refs = [f"def f{i}(x):\n    return x + {i}\n" for i in range(n)]
    cands = [r.replace("x", "y") if i % 2 else r for i, r in enumerate(refs)]
    return pl.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "role": ["target"] * n, "reference": refs,
                         "candidate": cands, "language": ["python"] * n})


def test_one_row_per_pair_and_metric_in_order_with_schema():
    metrics = [create_metric(n) for n in ("exact", "bleu", "edit")]
    out = compute_similarities(_pairs(3), metrics, workers=1)
    assert out.schema == pl.Schema(SIMILARITIES_SCHEMA)
    assert out["sample_id"].to_list() == ["s0"] * 3 + ["s1"] * 3 + ["s2"] * 3
    assert out["metric"].to_list() == ["exact", "bleu", "edit"] * 3
    assert out.filter(pl.col("sample_id") == "s0")["value"].to_list() == [1.0, 1.0, 1.0]
    s1 = out.filter(pl.col("sample_id") == "s1")
    assert s1["value"][0] == 0.0 and 0 < s1["value"][1] < 1


def test_bad_rows_are_recorded_and_skipped_never_fatal():
    pairs = pl.DataFrame({"sample_id": ["ok", "lang", "nogen", "skip", "boom"], "role": ["target"] * 5,
                          "reference": ["abc"] * 5, "candidate": ["abc", "abc", None, "skip", "boom"],
                          "language": ["go", "cobol", "go", "go", "go"]})
    out = compute_similarities(pairs, [Picky()], workers=1)
    rows = {r["sample_id"]: r for r in out.iter_rows(named=True)}
    assert rows["ok"]["value"] == 1.0 and rows["ok"]["reason"] is None
    assert rows["lang"]["value"] is None and "cobol" in rows["lang"]["reason"]
    assert rows["nogen"]["value"] is None and "no candidate" in rows["nogen"]["reason"]
    assert rows["skip"]["value"] is None and rows["skip"]["reason"] == "told to skip"
    assert rows["boom"]["value"] is None and rows["boom"]["reason"].startswith("error: ZeroDivisionError")


def test_process_pool_gives_the_same_table_as_one_process():
    metrics = [create_metric(n) for n in ("exact", "bleu", "edit", "lcs")]
    pairs = _pairs(12)
    one = compute_similarities(pairs, metrics, workers=1)
    pooled = compute_similarities(pairs, metrics, workers=2, chunk_size=3)
    assert pooled.equals(one)


def test_a_chunk_pool_gets_every_chunk_once_and_gives_the_same_table(tmp_path):
    """``pool=``: where the Ray runner scores chunks (tests/scale/test_ray_runner.py runs it on a real cluster);
    here a pool of the test's own, which runs the calls in reverse and hands the results back in order."""
    metrics = [create_metric(n) for n in ("exact", "bleu", "edit")]
    pairs = _pairs(10)
    calls: list[int] = []

    def pool(fn, arguments):
        calls.extend(len(chunk) for _, chunk in arguments)
        done = [fn(*a) for a in reversed(arguments)]
        return list(reversed(done))

    cache = tmp_path / "cache.sqlite"
    pooled = compute_similarities(pairs, metrics, workers=1, chunk_size=4, pool=pool, cache=cache)
    assert calls == [4, 4, 2]  # 10 pairs in chunks of 4, each sent once
    assert pooled.equals(compute_similarities(pairs, metrics, workers=1))
    calls.clear()  # the pooled scores went to the cache: a rerun sends nothing to the pool
    assert compute_similarities(pairs, metrics, workers=1, chunk_size=4, pool=pool, cache=cache).equals(pooled)
    assert calls == []


def test_cache_makes_a_rerun_compute_nothing_and_resumes_a_partial_run(tmp_path):
    path = tmp_path / "cache.sqlite"
    pairs = _pairs(10)
    first = Picky()
    partial = compute_similarities(pairs.head(4), [first], cache=path, workers=1)
    assert len(first.calls) == 4
    resumed = Picky()
    full = compute_similarities(pairs, [resumed], cache=path, workers=1, chunk_size=2)
    assert len(resumed.calls) == 6  # only the pairs the partial run had not finished
    assert full.head(4).equals(partial)
    again = Picky()
    rerun = compute_similarities(pairs, [again], cache=RequestCache(path), workers=1)
    assert again.calls == [] and rerun.equals(full)
    with RequestCache(path) as cache:
        assert len(cache) == 10


def test_cache_key_includes_the_metrics_settings(tmp_path):
    @dataclass
    class Versioned(Picky):
        version: ClassVar[str] = "2"

    path = tmp_path / "cache.sqlite"
    compute_similarities(_pairs(3), [Picky()], cache=path, workers=1)
    bumped = Versioned()
    compute_similarities(_pairs(3), [bumped], cache=path, workers=1)
    assert len(bumped.calls) == 3


def test_detail_column_is_json_with_raw_reply():
    from calib.metrics import Score
    from calib.metrics.run import _detail

    assert json.loads(_detail(Score(None, "judge reply unparsable", raw="meh", detail={"x": 1}))) == {
        "raw": "meh", "x": 1}
    assert _detail(Score(0.5)) is None


def test_refuses_bad_arguments_with_clear_messages():
    with pytest.raises(InvalidParameterError, match="lacks column"):
        compute_similarities(pl.DataFrame({"sample_id": ["a"]}), [Picky()])
    with pytest.raises(InvalidParameterError, match="listed twice"):
        compute_similarities(_pairs(1), [Picky(), Picky()])
    with pytest.raises(InvalidParameterError, match="workers"):
        compute_similarities(_pairs(3), [Picky()], workers=0, chunk_size=1)


def test_transient_nulls_are_recorded_but_retried_on_the_next_run(tmp_path):
    pairs = pl.DataFrame({"sample_id": ["a", "b"], "role": ["target"] * 2, "reference": ["abc"] * 2,
                          "candidate": ["flaky", "ab"], "language": ["c"] * 2})
    first = compute_similarities(pairs, [Picky()], cache=tmp_path / "c.sqlite", workers=1)
    assert first["value"].to_list() == [None, 2 / 3] and first["reason"][0] == "request failed: 503"
    again = Picky()
    compute_similarities(pairs, [again], cache=tmp_path / "c.sqlite", workers=1)
    assert again.calls == ["flaky"]
