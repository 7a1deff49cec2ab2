"""Agreement between several judges and embedding models (summary.json ``proxies.judges_agreement``,
``proxies.embeddings_agreement``; docs/report.md "Proxy metrics"), on small synthetic similarities tables.

The synthetic run of tests/report/_fake_run.py (one judge server) with its similarities table replaced:
three judge servers on ``judge_functional`` and two embedding servers whose values are chosen here, so the
edge cases are known: a pair without values, a judge that gives one score throughout (κ undefined), and
fewer than 3 shared pairs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from calib.metrics import SIMILARITIES_SCHEMA
from calib.report.functional.judges import judges_agreement, score_levels
from calib.report.functional.proxies import metric_order
from calib.report.run import load_run
from tests.report._fake_run import make_run


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return load_run(make_run(tmp_path_factory.mktemp("run")))


def _with(run, values: dict[str, list[float | None]], judges: list[str], embedders: list[str]):
    ids = run.samples["sample_id"].to_list()
    rows = []
    for metric, column in values.items():
        for i, value in enumerate(column):
            rows.append({"sample_id": ids[i // 2], "role": ("target", "reference")[i % 2], "metric": metric,
                         "value": value, "reason": None if value is not None else "judge reply unparsable: x",
                         "detail": None})
    spec = {**run.spec, "measure": {**run.spec["measure"], "metrics": ["bleu", "judge_functional", "embedding"],
                                    "judge_server": judges, "embedding_server": embedders}}
    return replace(run, spec=spec, similarities=pl.DataFrame(rows, schema=SIMILARITIES_SCHEMA))


def test_one_server_each_compares_nothing(base):
    assert judges_agreement(base, metric_order(base)) == {"judges": [], "embeddings": []}


def test_pairs_kappa_and_edge_cases(base):
    rng = np.random.default_rng(0)
    a = [float(v) for v in rng.choice(np.linspace(0, 1, 11), 12)]
    b = [min(1.0, max(0.0, v + float(rng.choice([-0.2, 0.0, 0.0, 0.13])))) for v in a]
    a[3], b[5] = None, None  # a judge without a value on one pair each
    const = [0.5] * 12
    values = {"bleu": [0.1] * 12, "judge_functional": a, "judge_functional@b": b, "judge_functional@c": const,
              "embedding": [0.9, 0.8, None, None, None, None, None, None, None, None, None, 0.7],
              "embedding@e2": [0.5, 0.6, 0.2, None, None, None, None, None, None, None, None, 0.1]}
    run = _with(base, values, ["judge", "b", "c"], ["e1", "e2"])
    assert metric_order(run) == list(values)
    out = judges_agreement(run, metric_order(run))
    (family,) = out["judges"]
    assert family["metric"] == "judge_functional" and family["n_pairs"] == 12
    assert [(m["metric"], m["server"]) for m in family["members"]] == [
        ("judge_functional", "judge"), ("judge_functional@b", "b"), ("judge_functional@c", "c")]
    ab, ac, bc = family["pairs"]
    keep = [i for i in range(12) if a[i] is not None and b[i] is not None]
    x, y = np.array([a[i] for i in keep]), np.array([b[i] for i in keep])
    assert (ab["a"], ab["b"], ab["n"]) == ("judge_functional", "judge_functional@b", 10)
    assert ab["pearson_r"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
    assert ab["spearman_rho"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # levels by the nearest tenth (0.13 above a tenth rounds down, 0.2 moves two levels); sklearn's weighted κ
    lx, ly = np.floor(x * 10 + 0.5).astype(int), np.floor(y * 10 + 0.5).astype(int)
    assert list(score_levels(x)) == list(lx)
    assert ab["kappa"] == pytest.approx(cohen_kappa_score(lx, ly, weights="quadratic", labels=list(range(11))),
                                        abs=1e-12)
    # a judge constant throughout: no correlation; κ is defined (the other varies) and is 0 by its closed
    # form, since every observed cell lies in the constant judge's one column, as chance predicts
    assert (ac["n"], ac["pearson_r"], ac["spearman_rho"]) == (11, None, None)
    assert ac["kappa"] == pytest.approx(0.0, abs=1e-12)
    assert bc["n"] == 11
    (emb,) = out["embeddings"]
    (pair,) = emb["pairs"]
    assert (emb["n_pairs"], pair["n"]) == (4, 3) and "kappa" not in pair
    assert pair["pearson_r"] == pytest.approx(stats.pearsonr([0.9, 0.8, 0.7], [0.5, 0.6, 0.1]).statistic, abs=1e-12)


def test_too_few_pairs_and_one_level_throughout_are_null(base):
    values = {"bleu": [0.1] * 4, "judge_functional": [0.3, 0.31, 0.29, None],
              "judge_functional@b": [0.3, 0.3, 0.3, 0.9], "embedding": [0.1, 0.2, None, None],
              "embedding@e2": [0.3, 0.1, None, None]}
    run = _with(base, values, ["judge", "b"], ["e1", "e2"])
    out = judges_agreement(run, metric_order(run))
    (pair,) = out["judges"][0]["pairs"]
    assert pair["n"] == 3 and pair["pearson_r"] is None  # b is constant on the shared pairs
    assert pair["kappa"] is None  # both give level 3 throughout: κ is 0/0
    (emb,) = out["embeddings"][0]["pairs"]
    assert (emb["n"], emb["pearson_r"], emb["spearman_rho"]) == (2, None, None)
