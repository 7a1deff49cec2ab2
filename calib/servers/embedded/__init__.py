"""The embedded server: a local Hugging Face causal LM served in-process or over HTTP.

- :class:`EmbeddedModel` (``model.py``): the model and its tokenizer, synchronous, CPU, float32.
- :class:`EmbeddedServer` (``kind.py``): the ``embedded`` server kind (the Server seam, in-process).
- :func:`make_app` (``app.py``): an aiohttp application with vLLM's OpenAI-compatible routes and
  Hugging Face TGI's native routes, which ``calib serve`` runs.

The heavy names import torch and transformers, so they load on first use; :func:`check_model_dir`
(``modeldir.py``) does not, so that ``calib serve`` can reject a bad directory at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calib.servers.embedded.modeldir import check_model_dir

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
