"""The embedded server: a local Hugging Face causal LM served in-process or over HTTP.

- :class:`EmbeddedModel` (``model.py``): the model and its tokenizer, synchronous, CPU, float32.
- :class:`EmbeddedServer` (``kind.py``): the ``embedded`` server kind (the Server seam, in-process).
- :func:`make_app` (``app.py``): an aiohttp application with vLLM's OpenAI-compatible routes and
  Hugging Face TGI's native routes, which ``calib serve`` runs.

The heavy names import torch and transformers, so they load on first use; :func:`check_model_dir`
does not, so that ``calib serve`` can reject a bad directory at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from calib._exceptions import InputError

if TYPE_CHECKING:
    from calib.servers.embedded.app import make_app
    from calib.servers.embedded.kind import EmbeddedServer
    from calib.servers.embedded.model import EmbeddedModel

__all__ = ["EmbeddedModel", "EmbeddedServer", "check_model_dir", "make_app"]

_LAZY = {
    "EmbeddedModel": "calib.servers.embedded.model",
    "EmbeddedServer": "calib.servers.embedded.kind",
    "make_app": "calib.servers.embedded.app",
}

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
