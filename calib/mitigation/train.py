"""Post-training a model away from its memorized functions: NPO or DPO with LoRA, checkpoints per epoch.

The functional-memorization paper's Appendix H, on a model calib can load (a Hugging Face causal LM folder:
the embedded server's kind, the model organism on this machine):

- LoRA (Hu et al., 2022) through ``peft``: rank r = 32, α = 32, dropout 0.05 on every attention and MLP
  projection of every layer (``target_modules="all-linear"``: every linear or GPT-2 ``Conv1D`` layer but
  the output head);
- AdamW (β = (0.9, 0.99), weight decay 0.01), gradients clipped at norm 1.0, batches of 8 pairs, a constant
  learning rate (1e-5 for NPO, 3e-5 for DPO in the paper; it names no schedule);
- losses on the body tokens only (:mod:`calib.mitigation.losses`), β = 0.1, π_ref the frozen model before
  post-training (its log-probabilities computed once, adapters off, before the first step);
- 10 epochs, a LoRA checkpoint at epochs 2, 4, 6, 8 and 10.

Each checkpoint is a folder ``epoch-<k>/`` holding the adapter (``adapter_config.json``,
``adapter_model.safetensors``), the base model's tokenizer files and ``calib-checkpoint.json`` (method,
epoch, settings, the pairs' fingerprint, the mean loss of every epoch so far). calib's embedded server loads
such a folder as a model (the base with the adapter merged in), so a checkpoint is served like any model
folder. Every random choice (LoRA's initialisation, dropout, batch order) comes from the seed.

trl's trainers are not used: trl has no NPO, and one loop for both methods keeps batching, optimiser and
checkpoints identical across the methods being compared. Pairs are exported in trl's preference format
(:func:`calib.mitigation.pairs.write_jsonl`) for training large models with any external trainer.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calib._exceptions import InputError, InvalidParameterError
from calib.mitigation.losses import dpo_loss, npo_loss, sequence_logps

__all__ = ["CHECKPOINT_FILE", "METHODS", "Pair", "TrainConfig", "TrainResult", "train"]

#: NPO uses the rejected bodies only; DPO both.
METHODS = ("npo", "dpo")
#: The record each checkpoint folder carries.
CHECKPOINT_FILE = "calib-checkpoint.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                    "merges.txt", "tokenizer.model", "added_tokens.json", "chat_template.jinja")

Progress = Callable[[int, int, float], None]  # (step, total_steps, loss)


@dataclass(frozen=True)
class Pair:
    """One preference pair: the prompt (context ending in the signature), the preferred and the memorized body."""

    prompt: str
    chosen: str
    rejected: str


@dataclass(frozen=True)
class TrainConfig:
    """The post-training settings; defaults are the paper's (Appendix H.1), with its DPO learning rate."""

    method: str = "dpo"
    epochs: int = 10
    save_epochs: tuple[int, ...] = (2, 4, 6, 8, 10)
    learning_rate: float | None = None  # None: 1e-5 for NPO, 3e-5 for DPO (the paper's)
    batch_size: int = 8
    beta: float = 0.1
    lora_r: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.99)
    max_grad_norm: float = 1.0
    seed: int = 0
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidParameterError(f"method={self.method!r}: choose one of {', '.join(METHODS)}")
        for name in ("epochs", "batch_size", "lora_r", "lora_alpha"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidParameterError(f"{name}={value!r}: need an integer >= 1")
        bad = [e for e in self.save_epochs if not 1 <= e <= self.epochs]
        if bad or not self.save_epochs:
            raise InvalidParameterError(f"save_epochs={list(self.save_epochs)}: need epochs between 1 and "
                                        f"epochs={self.epochs}")
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise InvalidParameterError(f"learning_rate={self.learning_rate!r}: need a number > 0")
        if not self.beta > 0:
            raise InvalidParameterError(f"beta={self.beta!r}: need a number > 0")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise InvalidParameterError(f"lora_dropout={self.lora_dropout!r}: need 0 <= dropout < 1")

    @property
    def lr(self) -> float:
        """The learning rate used: the one given, else the paper's for the method."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 1e-5 if self.method == "npo" else 3e-5

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["learning_rate"] = self.lr
        out["save_epochs"] = list(self.save_epochs)
        out["betas"] = list(self.betas)
        out.pop("threads")
        return out


@dataclass(frozen=True)
class TrainResult:
    """Where the checkpoints are (epoch -> folder) and the mean loss of each epoch."""

    checkpoints: dict[int, Path]
    epoch_losses: list[float]
    steps: int
    pairs: int
    fingerprint: str
    trainable_parameters: int
    step_losses: list[float] = field(default_factory=list)


def pairs_fingerprint(pairs: Sequence[Pair]) -> str:
    """A hash of the pairs in order (16 hex digits): part of every checkpoint's record."""
    digest = hashlib.sha256()
    for p in pairs:
        digest.update(json.dumps([p.prompt, p.chosen, p.rejected]).encode("utf-8"))
    return digest.hexdigest()[:16]


def _encode(tokenizer: Any, prompt: str, completion: str, *, eos_id: int, context: int) -> tuple[list[int], int]:
    """``(ids, n_prompt)``: the prompt's tokens then the completion's and end-of-text, within ``context`` tokens.

    The prompt loses its first tokens when the two do not fit (the completion is what is scored); a completion
    longer than the context keeps its first ``context - 1`` tokens after one prompt token.
    """
    p_ids = list(tokenizer.encode(prompt, add_special_tokens=False))
    c_ids = list(tokenizer.encode(completion, add_special_tokens=False)) + [eos_id]
    c_ids = c_ids[:context - 1]
    keep = max(1, context - len(c_ids))
    p_ids = p_ids[-keep:] if p_ids else [eos_id]
    return p_ids + c_ids, len(p_ids)


def _batch(rows: Sequence[tuple[list[int], int]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded ids, attention mask and the completion-token mask of ``rows``."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (row, n_prompt) in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        attention[i, :len(row)] = 1
        scored[i, n_prompt:len(row)] = True
    return ids, attention, scored


def _logps(model: Any, rows: Sequence[tuple[list[int], int]], pad_id: int) -> Any:
    ids, attention, scored = _batch(rows, pad_id)
    logits = model(input_ids=ids, attention_mask=attention).logits
    return sequence_logps(logits, ids, scored)


def load_base(model_dir: str | Path) -> tuple[Any, Any, Path]:
    """The causal LM and tokenizer of a Hugging Face folder (float32, CPU) and the folder's resolved path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise InputError("not a Hugging Face model folder (no config.json); pass the target model's folder",
                         path=str(path))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return model.float(), tokenizer, path


def _conv1d(model: Any) -> bool:
    """GPT-2-style models store projections as ``Conv1D`` (weights transposed): LoRA must know (fan_in_fan_out)."""
    from transformers.pytorch_utils import Conv1D

    return any(isinstance(m, Conv1D) for m in model.modules())


def _context(model: Any) -> int:
    config = model.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 1:
            return value
    return 2048


def train(model_dir: str | Path, pairs: Sequence[Pair], out: str | Path, config: TrainConfig | None = None, *,
          progress: Progress | None = None) -> TrainResult:
    """Post-train the model in ``model_dir`` on ``pairs`` with ``config``; checkpoints under ``out/epoch-<k>/``.

    ``out`` is created; checkpoint folders already there are replaced. Returns where each checkpoint is, the
    mean loss of each epoch and of each step.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    config = config or TrainConfig()
    if not pairs:
        raise InvalidParameterError("no preference pairs to train on")
    if config.method == "dpo" and any(not p.chosen.strip() for p in pairs):
        raise InvalidParameterError("DPO needs a preferred body for every pair; a pair has an empty 'chosen'")
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = pairs_fingerprint(pairs)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        base, tokenizer, base_path = load_base(model_dir)
        eos_id = tokenizer.eos_token_id
        if eos_id is None:
            raise InputError("the tokenizer names no end-of-sequence token", path=str(base_path))
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
        context = _context(base)
        rejected = [_encode(tokenizer, p.prompt, p.rejected, eos_id=eos_id, context=context) for p in pairs]
        chosen = ([_encode(tokenizer, p.prompt, p.chosen, eos_id=eos_id, context=context) for p in pairs]
                  if config.method == "dpo" else [])
        lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                          target_modules="all-linear", task_type="CAUSAL_LM", fan_in_fan_out=_conv1d(base))
        model = get_peft_model(base, lora)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        # π_ref: the model before post-training, adapters off, no dropout; once, before the first step.
        model.eval()
        with torch.no_grad(), model.disable_adapter():
            ref_rejected = torch.cat([_logps(model, rejected[i:i + config.batch_size], pad_id)
                                      for i in range(0, len(pairs), config.batch_size)])
            ref_chosen = (torch.cat([_logps(model, chosen[i:i + config.batch_size], pad_id)
                                     for i in range(0, len(pairs), config.batch_size)])
                          if chosen else None)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.lr,
                                      betas=config.betas, weight_decay=config.weight_decay)
        rng = random.Random(config.seed)
        steps_per_epoch = math.ceil(len(pairs) / config.batch_size)
        total = steps_per_epoch * config.epochs
        step_losses: list[float] = []
        epoch_losses: list[float] = []
        checkpoints: dict[int, Path] = {}
        model.train()
        for epoch in range(1, config.epochs + 1):
            order = list(range(len(pairs)))
            rng.shuffle(order)
            losses: list[float] = []
            for start in range(0, len(order), config.batch_size):
                idx = order[start:start + config.batch_size]
                index = torch.tensor(idx)
                if config.method == "npo":
                    policy = _logps(model, [rejected[i] for i in idx], pad_id)
                    loss = npo_loss(policy, ref_rejected[index], config.beta)
                else:
                    both = _logps(model, [chosen[i] for i in idx] + [rejected[i] for i in idx], pad_id)
                    loss = dpo_loss(both[:len(idx)], both[len(idx):], ref_chosen[index], ref_rejected[index],
                                    config.beta)
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                               config.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
                step_losses.append(losses[-1])
                if progress is not None:
                    progress(len(step_losses), total, losses[-1])
            epoch_losses.append(sum(losses) / len(losses))
            if epoch in config.save_epochs:
                checkpoints[epoch] = _save(model, base_path, out / f"epoch-{epoch}", config, epoch, fingerprint,
                                           len(pairs), epoch_losses)
        model.eval()
    return TrainResult(checkpoints=checkpoints, epoch_losses=epoch_losses, steps=len(step_losses), pairs=len(pairs),
                       fingerprint=fingerprint, trainable_parameters=trainable, step_losses=step_losses)


def _save(model: Any, base_path: Path, folder: Path, config: TrainConfig, epoch: int, fingerprint: str,
          n_pairs: int, epoch_losses: list[float]) -> Path:
    """Write one checkpoint folder atomically (a temporary sibling renamed into place)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    adapter_config = json.loads((tmp / "adapter_config.json").read_text(encoding="utf-8"))
    adapter_config["base_model_name_or_path"] = str(base_path)
    (tmp / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n",
                                             encoding="utf-8")
    for name in _TOKENIZER_FILES:
        if (base_path / name).is_file():
            shutil.copy2(base_path / name, tmp / name)
    record = {"method": config.method, "epoch": epoch, "base_model": str(base_path), "settings": config.to_dict(),
              "pairs": n_pairs, "pairs_fingerprint": fingerprint, "epoch_losses": list(epoch_losses)}
    (tmp / CHECKPOINT_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder
