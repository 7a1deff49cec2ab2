"""Training the organism's models: a byte-level BPE tokenizer and small GPT-2-style causal LMs on the CPU.

Each training document (one function's source) is a sequence of its own, starting at position 0 and
ending in the end-of-text token, exactly as an audit prompts the model (the signature at the start of
the context); batches group documents of similar length to keep padding small. Optimisation is AdamW
with linear warm-up and cosine decay in float32 (:data:`PRECISION`), and every random choice comes from the
seed. Not bfloat16 autocast: about twice the float32 speed on a CPU with native bfloat16 (AVX-512 BF16,
AMX), but emulated, and about ten times slower, on one without (an AVX2-only AMD EPYC: 9.2 s against 0.97 s
per step of the demo model), and a model that depends on which CPU trained it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PRECISION", "ModelShape", "TrainSchedule", "encode_documents", "new_model", "train_causal_lm"]

#: The dtype the organism's models are trained and saved in (part of the organism's cache key).
PRECISION = "float32"

Progress = Callable[[int, int, float], None]  # (step, total_steps, loss)


@dataclass(frozen=True)
class ModelShape:
    """GPT-2 shape of a model: vocabulary, layers, width, heads and context length."""

    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    context: int


@dataclass(frozen=True)
class TrainSchedule:
    """One training phase: passes over the documents, peak learning rate, batch size, warm-up share."""

    epochs: int
    lr: float
    batch_size: int
    warmup_share: float = 0.05
    weight_decay: float = 0.01


def encode_documents(tokenizer: Any, texts: Sequence[str], *, context: int, eos_id: int) -> list[list[int]]:
    """Token ids of each text followed by end-of-text, truncated to ``context`` tokens."""
    encoded = tokenizer.encode_batch(list(texts))
    return [(e.ids + [eos_id])[:context] for e in encoded]


def new_model(shape: ModelShape, *, eos_id: int, seed: int) -> Any:
    """A freshly initialised GPT-2-style causal LM (weights depend on ``seed`` alone)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=shape.vocab_size, n_positions=shape.context, n_embd=shape.n_embd,
                        n_layer=shape.n_layer, n_head=shape.n_head, bos_token_id=eos_id, eos_token_id=eos_id,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def _batches(documents: list[tuple[list[int], int]], batch_size: int,
             rng: random.Random) -> list[list[tuple[list[int], int]]]:
    """Shuffle, then sort within windows of 50 batches by length, so batches hold similar lengths."""
    order = documents[:]
    rng.shuffle(order)
    window = batch_size * 50
    batches: list[list[tuple[list[int], int]]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window], key=lambda pair: len(pair[0]))
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def train_causal_lm(model: Any, documents: list[list[int]], schedule: TrainSchedule, *, pad_id: int, seed: int,
                    progress: Progress | None = None, unscored: Sequence[int] | None = None) -> list[float]:
    """Train ``model`` in place on ``documents`` (next-token loss, pads ignored); returns the loss per step.

    ``unscored`` (one count per document) leaves each document's first tokens out of the loss: they are
    read as context but not predicted (a chat example's prompt, whose reply alone is learnt). Batching
    and every random choice are the same with or without it.
    """
    import torch

    if not documents:
        raise ValueError("no training documents")
    if unscored is not None and len(unscored) != len(documents):
        raise ValueError(f"unscored has {len(unscored)} counts for {len(documents)} documents")
    skips = list(unscored) if unscored is not None else [0] * len(documents)
    rng = random.Random(seed)
    steps_per_epoch = math.ceil(len(documents) / schedule.batch_size)
    total = steps_per_epoch * schedule.epochs
    warmup = max(1, int(schedule.warmup_share * total))
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "ln_" in name else decay).append(param)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": schedule.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=schedule.lr, betas=(0.9, 0.95))

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    # transformers warns when a model names no loss type; this is a causal LM, say so.
    model.loss_type = "ForCausalLM"
    model.train()
    losses: list[float] = []
    step = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(schedule.epochs):
            for batch in _batches(list(zip(documents, skips)), schedule.batch_size, rng):
                width = max(len(d) for d, _ in batch)
                ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                labels = torch.full((len(batch), width), -100, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, (doc, skip) in enumerate(batch):
                    ids[row, :len(doc)] = torch.tensor(doc)
                    # Label j is predicted from the tokens before it: a skip of k leaves tokens 0..k-1 unscored.
                    labels[row, skip:len(doc)] = ids[row, skip:len(doc)]
                    mask[row, :len(doc)] = 1
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                step += 1
                if progress is not None:
                    progress(step, total, losses[-1])
    model.eval()
    return losses
