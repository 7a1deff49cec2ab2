"""The organism's tokenizer: byte-level BPE trained offline, saved as a Hugging Face tokenizer folder.

:func:`train_bpe_tokenizer` trains a GPT-2-style byte-level BPE (end-of-text as its only special token)
on any texts with no network; :func:`save_tokenizer` writes it with a chat template, so that
``AutoTokenizer.from_pretrained(path)``, vLLM and calib's embedded server load it.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "EOS_TOKEN", "save_tokenizer", "train_bpe_tokenizer"]

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
