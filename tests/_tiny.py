"""A tiny random-weight causal LM in Hugging Face format: the fixture the tests serve (a test double).

:func:`build_tiny_model` writes a GPT-2-style model (a few layers, a small vocabulary) with calib's
organism tokenizer trained offline on the Python source of a few standard-library modules, so that
``AutoModelForCausalLM.from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)`` load it with
no network, and vLLM or calib's embedded server can serve it. Its weights are random: it knows nothing,
which is what a fixture needs (calib's model organism trains real ones).
"""

from __future__ import annotations

import json
import string
import textwrap
from pathlib import Path

from calib.organism.tokenizer import save_tokenizer, train_bpe_tokenizer

__all__ = ["build_tiny_model"]

# Larger than GPT-2's 0.02 so that next-token distributions are peaked enough for greedy decoding and
# top-k scores to be interesting, while staying far from numerical ties.
_INITIALIZER_RANGE = 0.2


def _training_text() -> list[str]:
    """Python source of a few standard-library modules (present in every CPython installation)."""
    json_dir = Path(json.__file__).parent
    files = sorted(json_dir.glob("*.py")) + [Path(textwrap.__file__), Path(string.__file__)]
    return [f.read_text(encoding="utf-8") for f in files]


def build_tiny_model(path: str | Path, *, seed: int = 0, vocab_size: int = 384, n_layer: int = 2,
                     n_embd: int = 64, n_head: int = 2, n_positions: int = 512) -> Path:
    """Write a tiny GPT-2-style causal LM and its tokenizer to ``path`` (created if missing).

    Parameters
    ----------
    path
        Output directory; files already there are overwritten.
    seed
        Seed of the weight initialisation: the same seed gives the same weights.
    vocab_size
        Size of the byte-level BPE vocabulary (at least 257: 256 bytes and the end-of-text token).
    n_layer, n_embd, n_head, n_positions
        GPT-2 shape: layers, width, attention heads (must divide ``n_embd``), context length.

    Returns
    -------
    Path
        ``path``, holding ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
        ``tokenizer_config.json`` (with a chat template and the end-of-text token as EOS).
    """
    if vocab_size < 257:
        raise ValueError(f"vocab_size must be >= 257 (256 bytes and the end-of-text token), got {vocab_size}")
    if n_embd % n_head:
        raise ValueError(f"n_head must divide n_embd, got n_embd={n_embd}, n_head={n_head}")
    if min(n_layer, n_embd, n_head, n_positions) < 1:
        raise ValueError("n_layer, n_embd, n_head and n_positions must be >= 1")

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_bpe_tokenizer(_training_text(), vocab_size)
    eos_id = save_tokenizer(tokenizer, out, n_positions)

    config = GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=n_positions, n_embd=n_embd,
                        n_layer=n_layer, n_head=n_head, bos_token_id=eos_id, eos_token_id=eos_id,
                        initializer_range=_INITIALIZER_RANGE)
    # A private RNG state: the weights depend on the seed alone, and the caller's RNG is left untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    model.save_pretrained(out, safe_serialization=True)
    return out
