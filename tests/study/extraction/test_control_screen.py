"""``[extraction.screen]``: the decontamination screen finds planted near-copies among controls and nothing else.

One real ``python -m calib study`` run on the tiny organism (its target in the embedded server, one model):
a JSONL corpus of the organism's verbatim members and controls, plus three planted controls — two
members with a few tokens changed, and one stdlib function that also sits (slightly edited) in the
given training corpus. The screen must flag exactly those three. Its n-gram overlap and Jaccard are
recomputed here from Python sets of token tuples (an exact set Jaccard with no hashing), its MinHash
estimate with datasketch's own ``MinHash``; the screened pool's operating points are recomputed by hand
from the scores table on the controls left (K = floor(α(N+1)), τ the K-th largest control score).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib.study.tables import CONTROL_SCREEN_SCHEMA

ALPHA = 0.2
NGRAM, SHINGLE, NUM_PERM, SEED = 13, 5, 128, 3
_TOKEN = re.compile(r"\w+|[^\w\s]")  # calib's code tokens (calib/metrics/textual.py), restated


def _near_copy(text: str, changes: int) -> str:
    """``text`` with its first ``changes`` identifiers of five letters or more renamed (a few tokens changed)."""
    words = list(dict.fromkeys(w for w in re.findall(r"\b[a-z_]{5,}\b", text) if w not in ("return", "raise")))
    out = text
    for word in words[:changes]:
        out = re.sub(rf"(?<!\w){word}(?!\w)", word + "_x", out, count=1)
    return out


def _stdlib_function(module, name: str) -> str:
    return inspect.getsource(getattr(module, name))


@pytest.fixture(scope="module")
def planted(organism_tiny, tmp_path_factory) -> dict:
    import textwrap

    root = tmp_path_factory.mktemp("screen")
    truth = pl.read_parquet(organism_tiny.truth).filter(pl.col("kind") == "verbatim")
    members = truth.filter(pl.col("membership") == "member")["audited"].to_list()
    rows = [{"text": r["audited"], "split": r["membership"]} for r in truth.iter_rows(named=True)]
    copies = [_near_copy(members[0], 3), _near_copy(members[1], 2)]
    leaked = _stdlib_function(textwrap, "indent")
    assert all(c != m for c, m in zip(copies, members))
    rows += [{"text": copies[0], "split": "control"}, {"text": copies[1], "split": "control"},
             {"text": leaked, "split": "control"}]
    with (root / "corpus.jsonl").open("w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    # the "training corpus": unrelated stdlib text and the leaked control with one name changed
    training = [_stdlib_function(textwrap, "dedent"), _near_copy(leaked, 1), _stdlib_function(json, "dumps")]
    with (root / "train.jsonl").open("w") as out:
        for text in training:
            out.write(json.dumps({"content": text}) + "\n")
    listed = truth.filter(pl.col("membership") == "control")["audited"][0]  # the manual list keeps working
    spec = f"""[study]
name = "control-screen"
kind = "extraction"
seed = {SEED - 1}

[servers.target]
kind = "embedded"
model_dir = "{organism_tiny.target}"
threads = 1

[models]
target = "target"

[data]
source = "corpus"
unit = "document"
paths = ["corpus.jsonl"]
content_column = "text"
metadata_columns = {{membership = "split"}}

[extraction]
prefix_tokens = 16
suffix_tokens = [16]
procedures = ["greedy", "base"]

[extraction.screen]
source = "corpus"
paths = ["{root / 'train.jsonl'}"]
ngram_tokens = {NGRAM}
shingle_tokens = {SHINGLE}
num_perm = {NUM_PERM}

[analyze]
alpha = {ALPHA}
alphas = [0.1, {ALPHA}, 0.5]
decontaminate = ["LISTED"]
"""
    (root / "study.toml").write_text(spec)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    # the listed control's sample id is known once the samples stage has run (offline: no model is loaded)
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "study.toml", "--run-dir", "r", "--quiet",
                           "--stage", "samples"], capture_output=True, text=True, cwd=root, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    samples = pl.read_parquet(root / "r" / "tables" / "samples.parquet")
    listed_id = samples.filter(pl.col("function") == listed)["sample_id"][0]
    (root / "study.toml").write_text(spec.replace("LISTED", listed_id))
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "study.toml", "--run-dir", "r", "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr
    ids = dict(samples.select("function", "sample_id").iter_rows())
    return {"run": root / "r", "planted": {ids[copies[0]], ids[copies[1]], ids[leaked]}, "listed": listed_id,
            "texts": dict(samples.select("sample_id", "function").iter_rows()), "training": training,
            "copies": {ids[copies[0]], ids[copies[1]]}, "leaked": ids[leaked],
            "members": samples.filter(pl.col("membership") == "member")["sample_id"].to_list()}


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def _grams(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)} if len(tokens) >= n else {tuple(tokens)}


def _document(planted: dict, key: str) -> str:
    kind, _, name = key.partition(":")
    if kind == "member":
        return planted["texts"][name]
    row = int(name.rsplit("#row=", 1)[1])
    return planted["training"][row - 1]


def test_the_screen_flags_the_planted_near_copies_and_nothing_else(planted):
    screen = _table(planted["run"], "control_screen")
    assert screen.schema == pl.Schema(CONTROL_SCREEN_SCHEMA)
    samples = _table(planted["run"], "samples")
    assert screen.height == int((samples["membership"] == "control").sum()) == 11  # 8 organism controls + 3 planted
    assert set(screen.filter(pl.col("flagged"))["sample_id"]) == planted["planted"]
    by_id = {r["sample_id"]: r for r in screen.to_dicts()}
    for sid in planted["copies"]:
        assert by_id[sid]["overlap_match"].startswith("member:") and "member:" in by_id[sid]["reason"]
    leak = by_id[planted["leaked"]]
    assert leak["overlap_match"].startswith("corpus:") and leak["overlap_match"].endswith("train.jsonl#row=2")
    clean = screen.filter(~pl.col("flagged"))
    assert clean["reason"].is_null().all()
    assert (clean["overlap"] < 0.5).all() and (clean["jaccard"] < 0.5).all()


def test_overlap_and_jaccard_equal_exact_set_computations_and_datasketch(planted):
    from datasketch import MinHash

    from calib.dedup.shingles import shingle_hash32

    screen = _table(planted["run"], "control_screen")
    checked = 0
    for r in screen.filter(pl.col("jaccard_match").is_not_null()).to_dicts():
        text, other = planted["texts"][r["sample_id"]], _document(planted, r["jaccard_match"])
        a, b = _grams(text, SHINGLE), _grams(other, SHINGLE)
        assert r["jaccard"] == pytest.approx(len(a & b) / len(a | b), abs=1e-12)  # exact set Jaccard, no hashing
        sketches = []
        for grams in (a, b):
            m = MinHash(num_perm=NUM_PERM, seed=SEED, hashfunc=shingle_hash32)
            for g in grams:
                m.update(g)
            sketches.append(m)
        assert r["minhash_jaccard"] == pytest.approx(sketches[0].jaccard(sketches[1]), abs=1e-12)
        checked += 1
    for r in screen.filter(pl.col("overlap_match").is_not_null()).to_dicts():
        mine = _grams(planted["texts"][r["sample_id"]], NGRAM)
        theirs = _grams(_document(planted, r["overlap_match"]), NGRAM)
        assert r["ngrams"] == len(mine)
        assert r["overlap"] == pytest.approx(len(mine & theirs) / len(mine), abs=1e-12)
        # no member or corpus document holds a larger share (the best match is the best)
        for key in [f"member:{m}" for m in planted["members"]] + [f"corpus:x#row={i}" for i in (1, 2, 3)]:
            assert len(mine & _grams(_document(planted, key), NGRAM)) <= len(mine & theirs)
    assert checked >= 3


def _hand_point(controls: np.ndarray, members: np.ndarray, alpha: float) -> dict:
    """The conformal operating point by hand: K = floor(α(N+1)), τ = the K-th largest control score."""
    n = controls.size
    k = math.floor(alpha * (n + 1) + 1e-9)
    tau = np.sort(controls)[::-1][k - 1]
    claims = int((members > tau).sum())
    return {"n_controls": n, "k": k, "certified_alpha": k / (n + 1), "log10_threshold": float(tau),
            "claims": claims, "member_rate": claims / members.size,
            "calibrated_rate": claims / members.size - k / (n + 1)}


def test_both_pools_are_analysed_and_the_screened_pool_matches_a_hand_computation(planted):
    run = planted["run"]
    scores = _table(run, "scores").filter(pl.col("procedure") == "base").join(
        _table(run, "windows").select("window_id", "membership"), on="window_id")
    members = scores.filter(pl.col("membership") == "member")["log10_value"].to_numpy()
    controls = scores.filter(pl.col("membership") == "control")
    dropped = planted["planted"] | {planted["listed"]}
    ops = _table(run, "operating_points").filter((pl.col("procedure") == "base")
                                                 & ((pl.col("alpha") - ALPHA).abs() < 1e-12))
    assert sorted(ops["pool"]) == ["all", "decontaminated"]
    for pool, kept in (("all", controls), ("decontaminated", controls.filter(~pl.col("sample_id").is_in(dropped)))):
        row = ops.filter(pl.col("pool") == pool).row(0, named=True)
        hand = _hand_point(kept["log10_value"].to_numpy(), members, ALPHA)
        assert row["n_controls"] == hand["n_controls"] == kept.height
        for key in ("k", "claims"):
            assert row[key] == hand[key], (pool, key)
        for key in ("certified_alpha", "log10_threshold", "member_rate", "calibrated_rate"):
            assert row[key] == pytest.approx(hand[key], abs=1e-12), (pool, key)
    # every planted control has a window and is scored: the screened pool is the full pool less those four
    assert dropped <= set(controls["sample_id"])
    assert ops.filter(pl.col("pool") == "decontaminated")["n_controls"][0] == controls.height - 4
    # the near-copies of members are the controls the target scores highest: they set the full pool's τ
    top = controls.sort("log10_value", descending=True)["sample_id"].head(2).to_list()
    assert set(top) == planted["copies"]
    claims = _table(run, "extraction_claims").filter(pl.col("membership") == "control")
    assert set(claims.filter(pl.col("contaminated"))["sample_id"]) == dropped


def test_the_report_states_the_screen_and_both_pools(planted):
    summary = json.loads((planted["run"] / "report" / "summary.json").read_text())
    screen = summary["control_screen"]
    assert summary["settings"]["primary_pool"] == "decontaminated"
    assert screen["flagged"] == 3 and screen["controls"] == 11 and screen["listed"] == 1
    assert {r["sample_id"] for r in screen["rows"]} == planted["planted"]
    assert set(screen["removed_samples"]) == planted["planted"] | {planted["listed"]}
    assert "training corpus" in screen["method"] and f"{NGRAM}-token n-grams" in screen["method"]
    base = next(p for p in screen["pools"] if p["procedure"] == "base")
    assert base["all"]["n_controls"] - base["decontaminated"]["n_controls"] == 4  # three flagged, one listed
    text = (planted["run"] / "report" / "report.md").read_text()
    assert "## Control screen" in text and "flagged **3 of 11**" in text


_REFUSED = """[study]
name = "refused"
kind = "KIND"

[servers.target]
kind = "embedded"
model_dir = "unused"

[models]
target = "target"

[data]
source = "corpus"
unit = "document"
paths = ["docs.jsonl"]
content_column = "text"
metadata_columns = {membership = "split"}

[[census.pairs]]
name = "p"
document = "a.txt"
control = "a.txt"

[extraction.screen]
source = "organism"
"""


@pytest.mark.parametrize("kind,stage,message", [
    ("census", "samples", "[extraction.screen] is read only by extraction studies (kind is 'census')"),
    ("extraction", "screen", "extraction.screen.source = 'organism' needs an [organism] table"),
])
def test_a_screen_it_cannot_run_is_refused_in_one_line(tmp_path, kind, stage, message):
    (tmp_path / "a.txt").write_text("a document of a few words\n" * 20)
    with (tmp_path / "docs.jsonl").open("w") as out:
        for i, split in enumerate(["member", "control"]):
            out.write(json.dumps({"text": f"def f{i}(x):\n    return x + {i}\n", "split": split}) + "\n")
    spec = _REFUSED.replace("KIND", kind)
    if kind == "extraction":
        spec = spec.split("[[census.pairs]]")[0] + "[extraction.screen]\nsource = \"organism\"\n"
    (tmp_path / "s.toml").write_text(spec)
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "r", "--quiet", "--stage",
                           stage], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("calib: error:")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in proc.stderr, proc.stderr


def test_a_control_inside_a_long_document_is_flagged_by_overlap_alone():
    """Containment, not resemblance: a control copied into a long training document shares all its n-grams
    with it but few of the document's shingles (Jaccard well under the threshold)."""
    import textwrap

    from calib.study.extraction.screen import screen_controls

    control = inspect.getsource(textwrap.indent)
    long_doc = inspect.getsource(textwrap)  # the whole module holds indent verbatim
    other = inspect.getsource(json.dumps)
    frame = screen_controls([("c", "src", control), ("d", "src", other)], [("corpus:textwrap", long_doc)])
    inside, unrelated = frame.row(0, named=True), frame.row(1, named=True)
    assert inside["overlap"] == 1.0 and inside["overlap_match"] == "corpus:textwrap"
    a, b = _grams(control, SHINGLE), _grams(long_doc, SHINGLE)
    assert inside["jaccard"] == pytest.approx(len(a & b) / len(a | b), abs=1e-12) and inside["jaccard"] < 0.5
    assert inside["flagged"] and "n-grams" in inside["reason"] and "Jaccard" not in inside["reason"]
    assert not unrelated["flagged"] and unrelated["reason"] is None


def test_without_a_screen_the_stages_and_their_fingerprint_settings_are_unchanged():
    from calib.study.extraction.analysis import analysis_settings
    from calib.study.extraction.stages import EXTRACTION_STAGES, extraction_stages
    from calib.study.spec import StudySpec

    base = {"study": {"name": "s", "kind": "extraction"}, "organism": {}, "models": {"target": "t"},
            "servers": {"t": {"kind": "embedded", "model_dir": "organism:target"}}}
    plain = StudySpec.model_validate(base)
    off = StudySpec.model_validate({**base, "extraction": {"screen": {"enabled": False}}})
    on = StudySpec.model_validate({**base, "extraction": {"screen": {}}})
    assert extraction_stages(plain) == extraction_stages(off) == EXTRACTION_STAGES
    assert analysis_settings(plain, None) == analysis_settings(off, None)
    stages = extraction_stages(on)
    assert [s.name for s in stages][:3] == ["samples", "screen", "windows"]
    assert all("control_screen" in s.reads for s in stages if s.name in ("calibrate", "claims", "budgets", "paired",
                                                                        "report"))
    assert analysis_settings(on, None)["screen"]["ngram_tokens"] == 13
