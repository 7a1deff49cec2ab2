"""A tiny random-weight causal LM in Hugging Face format: the fixture tests and demos serve.

:func:`build_tiny_model` writes a GPT-2-style model (a few layers, a small vocabulary) with a byte-level
BPE tokenizer trained offline on the Python source of a few standard-library modules, so that
``AutoModelForCausalLM.from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)`` load it with
no network, and vLLM or calib's embedded server can serve it. Its weights are random: it knows nothing,
which is what a fixture needs (the model-organism issue trains real ones).
"""

from __future__ import annotations

import json
import string
import textwrap
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "EOS_TOKEN", "build_tiny_model", "save_tokenizer", "train_bpe_tokenizer"]

EOS_TOKEN = "<|endoftext|>"

# One line per message, so a chat prompt is plain text the byte-level tokenizer covers.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

# Larger than GPT-2's 0.02 so that next-token distributions are peaked enough for greedy decoding and
# top-k scores to be interesting, while staying far from numerical ties.
_INITIALIZER_RANGE = 0.2


def _training_text() -> list[str]:
    """Python source of a few standard-library modules (present in every CPython installation)."""
    json_dir = Path(json.__file__).parent
    files = sorted(json_dir.glob("*.py")) + [Path(textwrap.__file__), Path(string.__file__)]
    return [f.read_text(encoding="utf-8") for f in files]


def train_bpe_tokenizer(texts, vocab_size: int):  # -> tokenizers.Tokenizer
    """A byte-level BPE tokenizer (GPT-2 style, end-of-text as the only special token) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    # As GPT-2's tokenizer.json: offsets keep the leading space of a token (TGI's /tokenize reports them).
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def save_tokenizer(tokenizer, out: Path, model_max_length: int) -> int:
    """Write ``tokenizer`` as a Hugging Face tokenizer folder in ``out`` (end-of-text as BOS/EOS/UNK, the
    chat template); returns the end-of-text token id."""
    tokenizer.save(str(out / "tokenizer.json"))
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    special = {"content": EOS_TOKEN, "lstrip": False, "normalized": False, "rstrip": False,
               "single_word": False, "special": True}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": {str(eos_id): special},
        "bos_token": EOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "unk_token": EOS_TOKEN,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n", encoding="utf-8")
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": EOS_TOKEN, "eos_token": EOS_TOKEN, "unk_token": EOS_TOKEN}, indent=2) + "\n",
        encoding="utf-8")
    return eos_id


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
