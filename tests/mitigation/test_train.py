"""Post-training (calib/mitigation/train.py) and ``calib mitigate`` on the tiny organism's real audit: checkpoints
reload and serve through calib's embedded server, training is reproducible from its seed, NPO makes the target
stop reproducing its memorized members, and bad input gets one line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys

import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from calib.metrics.textual import Bleu  # noqa: E402
from calib.mitigation.train import CHECKPOINT_FILE, Pair, TrainConfig, train  # noqa: E402
from calib.servers import create_server  # noqa: E402
from calib.servers.messages import SamplingParams  # noqa: E402

ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}


def _calib(*args, cwd):
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env=ENV)


@pytest.fixture(scope="module")
def ref_pairs(audit, tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs") / "pairs.parquet"
    done = _calib("mitigate", "pairs", str(audit), "--source", "ref", "--out", str(out), "--jsonl",
                  str(out.with_suffix(".jsonl")), "--json", cwd=out.parent)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    table = pl.read_parquet(out)
    claims = pl.read_parquet(audit / "tables" / "claims.parquet")
    memorized = claims.filter((pl.col("membership") == "member") & pl.col("verdict").is_in(["textual", "functional"]))
    assert counts["pairs"] == table.height == memorized.height
    assert counts["jsonl_lines"] == table.filter(pl.col("chosen").is_not_null()).height
    lines = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert all(set(line) == {"prompt", "chosen", "rejected"} for line in lines)  # trl's standard preference format
    return out


def _digest(folder):
    return hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()


def _greedy(model_dir, prompts):
    async def go():
        server = create_server("m", {"kind": "embedded", "model_dir": str(model_dir), "threads": 1})
        try:
            return [c[0].text for c in await server.complete(prompts, SamplingParams(max_tokens=120,
                                                                                     stop=("\ndef ", "\nclass ")))]
        finally:
            await server.aclose()

    return asyncio.run(go())


def test_npo_checkpoints_serve_and_stop_reproducing_the_members(ref_pairs, organism_tiny, tmp_path):
    table = pl.read_parquet(ref_pairs)
    pairs = [Pair(r["prompt"], r["chosen"] or "", r["rejected"]) for r in table.iter_rows(named=True)]
    config = TrainConfig(method="npo", epochs=10, save_epochs=(5, 10), learning_rate=1e-3, seed=3)
    result = train(organism_tiny.target, pairs, tmp_path / "npo", config)
    assert sorted(result.checkpoints) == [5, 10] and result.steps == 10 * -(-len(pairs) // 8)
    # the NPO objective starts at (2/β) log 2 (π_θ = π_ref) and falls
    assert result.epoch_losses[0] == pytest.approx(20 * 0.6931, rel=0.05) and result.epoch_losses[-1] < 5
    record = json.loads((result.checkpoints[10] / CHECKPOINT_FILE).read_text())
    assert record["method"] == "npo" and record["epoch"] == 10 and record["pairs"] == len(pairs)
    assert record["settings"]["lora_r"] == 32 and record["settings"]["beta"] == 0.1
    adapter = json.loads((result.checkpoints[10] / "adapter_config.json").read_text())
    assert adapter["r"] == 32 and adapter["lora_alpha"] == 32 and adapter["lora_dropout"] == 0.05
    assert {"c_attn", "c_fc", "c_proj"} <= {m.rsplit(".", 1)[-1] for m in adapter["target_modules"]}

    prompts = [p.prompt for p in pairs]
    before = _greedy(organism_tiny.target, prompts)
    after = _greedy(result.checkpoints[10], prompts)  # the embedded server loads the adapter folder as a model
    bleu = Bleu()
    mean = lambda texts: sum(bleu.score(p.rejected, t, "python") for p, t in zip(pairs, texts)) / len(pairs)  # noqa: E731
    assert mean(before) > 0.5 and mean(after) < mean(before) / 2

    # the served checkpoint is the base with the adapter merged, as peft itself loads it
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(organism_tiny.target)
    base = AutoModelForCausalLM.from_pretrained(organism_tiny.target)
    merged = PeftModel.from_pretrained(base, result.checkpoints[10]).merge_and_unload().eval()
    ids = torch.tensor([tok.encode(prompts[0])])
    out = merged.generate(ids, max_new_tokens=20, do_sample=False, pad_token_id=tok.eos_token_id)
    assert after[0].startswith(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)[:40])


def test_training_is_reproducible_from_its_seed(ref_pairs, organism_tiny, tmp_path):
    rows = pl.read_parquet(ref_pairs).iter_rows(named=True)
    pairs = [Pair(r["prompt"], r["chosen"] or "x", r["rejected"]) for r in rows]
    config = TrainConfig(method="dpo", epochs=2, save_epochs=(2,), learning_rate=1e-3, seed=5)
    a = train(organism_tiny.target, pairs, tmp_path / "a", config)
    b = train(organism_tiny.target, pairs, tmp_path / "b", config)
    c = train(organism_tiny.target, pairs, tmp_path / "c", TrainConfig(method="dpo", epochs=2, save_epochs=(2,),
                                                                        learning_rate=1e-3, seed=6))
    assert a.step_losses == b.step_losses and _digest(a.checkpoints[2]) == _digest(b.checkpoints[2])
    assert _digest(a.checkpoints[2]) != _digest(c.checkpoints[2])
    # DPO starts at log 2 (π_θ = π_ref on both bodies)
    assert a.step_losses[0] == pytest.approx(0.6931, rel=0.02)


def test_cli_train_reads_jsonl_and_prints_its_checkpoints(ref_pairs, organism_tiny, tmp_path):
    done = _calib("mitigate", "train", str(ref_pairs.with_suffix(".jsonl")), "--model", str(organism_tiny.target),
                  "--method", "dpo", "--epochs", "1", "--save-epochs", "1", "--lr", "1e-3", "--out", "ck", "--json",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["method"] == "dpo" and record["checkpoints"] == {"1": "ck/epoch-1"}
    assert (tmp_path / "ck" / "epoch-1" / "adapter_model.safetensors").is_file()


def test_bad_input_gets_one_line(audit, ref_pairs, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\nnot json\n')
    done = _calib("mitigate", "train", str(bad), "--model", "nowhere", "--out", "ck", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "bad.jsonl:2" in done.stderr
    done = _calib("mitigate", "train", str(ref_pairs), "--model", "nowhere", "--out", "ck", "--save-epochs", "11",
                  cwd=tmp_path)
    assert done.returncode == 2 and "save_epochs" in done.stderr and done.stderr.count("\n") == 1
    # a run in which nothing was memorized: exit 3, nothing written
    run = tmp_path / "run"
    shutil.copytree(audit, run)
    claims = pl.read_parquet(run / "tables" / "claims.parquet").with_columns(verdict=pl.lit("none"))
    claims.write_parquet(run / "tables" / "claims.parquet")
    done = _calib("mitigate", "pairs", str(run), "--out", "p.parquet", cwd=tmp_path)
    assert done.returncode == 3 and "no memorized member" in done.stderr and not (tmp_path / "p.parquet").exists()
    done = _calib("mitigate", "pairs", str(tmp_path), "--out", "p.parquet", cwd=tmp_path)
    assert done.returncode == 2 and "spec.json" in done.stderr and done.stderr.count("\n") == 1


def test_an_adapter_folder_whose_base_is_gone_is_refused_in_one_line(ref_pairs, organism_tiny, tmp_path):
    from calib._exceptions import InputError
    from calib.servers.embedded import check_model_dir

    pairs = [Pair(r["prompt"], "", r["rejected"]) for r in pl.read_parquet(ref_pairs).iter_rows(named=True)][:2]
    result = train(organism_tiny.target, pairs, tmp_path / "npo", TrainConfig(method="npo", epochs=1, save_epochs=(1,)))
    folder = result.checkpoints[1]
    assert check_model_dir(folder) == folder
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": str(tmp_path / "no")}))
    with pytest.raises(InputError, match="the adapter's base model is not usable") as caught:
        check_model_dir(folder)
    assert "\n" not in str(caught.value)
