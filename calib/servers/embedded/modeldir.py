"""The check that a directory holds a Hugging Face-format causal LM, light enough to run before torch loads.

``calib serve`` rejects a bad directory at once with it; :mod:`calib.servers.embedded` re-exports it.
"""

from __future__ import annotations

from pathlib import Path

from calib._exceptions import InputError

__all__ = ["ADAPTER_CONFIG", "adapter_base", "check_model_dir"]

#: A LoRA adapter folder (peft's ``save_pretrained``; ``calib mitigate train`` writes one per checkpoint).
ADAPTER_CONFIG = "adapter_config.json"

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def check_model_dir(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it holds a Hugging Face-format causal LM.

    A LoRA adapter folder (``adapter_config.json``, adapter weights, tokenizer files) counts as one when the base
    model its ``base_model_name_or_path`` names is itself a model folder: the server loads the base with the
    adapter merged in (:func:`adapter_base`).

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
    if (p / ADAPTER_CONFIG).is_file():
        adapter_base(p)
        if not any((p / name).is_file() for name in _TOKENIZER):
            raise InputError("LoRA adapter folder without tokenizer files; copy the base model's tokenizer.json "
                             "and tokenizer_config.json into it", path=str(p))
        return p
    if not (p / "config.json").is_file():
        missing.append("config.json")
    if not any((p / name).is_file() for name in _WEIGHTS):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not any((p / name).is_file() for name in _TOKENIZER):
        missing.append("tokenizer files (tokenizer.json or tokenizer_config.json)")
    if missing:
        raise InputError(f"not a Hugging Face model directory: missing {', '.join(missing)}", path=str(p))
    return p


def adapter_base(path: str | Path) -> Path:
    """The base model folder a LoRA adapter folder names (``base_model_name_or_path``; relative to the adapter).

    Raises
    ------
    InputError
        One line naming the adapter folder when its config is unreadable or its base is not a model folder.
    """
    import json

    p = Path(path)
    try:
        config = json.loads((p / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        base = config["base_model_name_or_path"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"unreadable {ADAPTER_CONFIG} ({exc}); it must name base_model_name_or_path",
                         path=str(p)) from None
    if not isinstance(base, str) or not base:
        raise InputError(f"{ADAPTER_CONFIG} names no base_model_name_or_path", path=str(p))
    base_path = (p / base).resolve() if not Path(base).is_absolute() else Path(base)
    if (base_path / ADAPTER_CONFIG).is_file():
        raise InputError(f"the adapter's base {base_path} is itself an adapter; name a full model folder",
                         path=str(p))
    try:
        return check_model_dir(base_path)
    except InputError as exc:
        raise InputError(f"the adapter's base model is not usable: {exc}", path=str(p)) from None
