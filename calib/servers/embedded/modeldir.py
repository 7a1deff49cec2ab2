"""The check that a directory holds a Hugging Face-format causal LM, light enough to run before torch loads.

``calib serve`` rejects a bad directory at once with it; :mod:`calib.servers.embedded` re-exports it.
"""

from __future__ import annotations

from pathlib import Path

from calib._exceptions import InputError

__all__ = ["check_model_dir"]

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def check_model_dir(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it holds a Hugging Face-format causal LM.

    Raises
    ------
    InputError
        One line naming the path and what is missing (the directory, ``config.json``, weights, tokenizer).
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError("model directory does not exist; pass a directory holding a Hugging Face-format model "
                         "(config.json, model.safetensors, tokenizer.json)", path=str(p))
    if not p.is_dir():
        raise InputError("not a directory; pass the directory holding config.json and the weights", path=str(p))
    missing = []
    if not (p / "config.json").is_file():
        missing.append("config.json")
    if not any((p / name).is_file() for name in _WEIGHTS):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not any((p / name).is_file() for name in _TOKENIZER):
        missing.append("tokenizer files (tokenizer.json or tokenizer_config.json)")
    if missing:
        raise InputError(f"not a Hugging Face model directory: missing {', '.join(missing)}", path=str(p))
    return p
