"""Tokenizer sources: what counts a prompt's context tokens when the target server has no ``/tokenize``.

A functional study's corpus prompts keep the last P tokens of the code before a function
(:mod:`calib.data.prompts`). The paper counts them with the target model's own tokenizer; a hosted API
rarely exposes one. ``[prompt] tokenizer`` chooses the source (docs/hosted.md "Tokenizer sources"):

``server``
    The target server's ``/tokenize`` (vLLM, TGI, ``calib serve``): the model's own tokens.
``completions``
    The target server's completions route: a text echoed with ``logprobs`` comes back as the model's token ids
    and texts (:mod:`calib.data.completion_tokenizer`); for a host with no ``/tokenize``.
``file``
    A local ``tokenizer.json`` (the Hugging Face ``tokenizers`` format): the model's tokenizer where its
    publisher ships it, counted here with no request.
``hub``
    ``tokenizer.json`` of a Hugging Face Hub repository at a pinned revision, fetched through
    ``huggingface_hub`` (that one file only, cached; with ``HF_HUB_OFFLINE=1`` only the cache is read).
``chars``
    A character budget: P tokens are taken to be ``P x chars_per_token`` characters. No tokenizer at all;
    the report says the context was counted by characters.

Each source is a :class:`calib.servers.base.Tokenizing` (``tokenize``, ``detokenize``), so
:func:`calib.data.prompts.build_prompts` cuts with any of them, and :meth:`TokenizerSource.describe`
is what the manifest and the report state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calib._exceptions import InputError

__all__ = ["SOURCES", "CharTokenizer", "FileTokenizer", "hub_tokenizer_file"]

#: The tokenizer sources a spec may name (``[prompt] tokenizer``).
SOURCES = ("server", "completions", "file", "hub", "chars")


@dataclass
class FileTokenizer:
    """A Hugging Face ``tokenizer.json`` read with the ``tokenizers`` library; no special tokens are added."""

    path: Path
    origin: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer

        try:
            self._tokenizer = Tokenizer.from_file(str(self.path))
        except Exception as exc:  # the library raises its own Exception for a malformed file
            raise InputError(f"cannot read the tokenizer: {' '.join(str(exc).split())[:200]} (give a Hugging Face "
                             "tokenizer.json)", path=str(self.path)) from None

    async def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids`` (special tokens kept)."""
        return self._tokenizer.decode([int(i) for i in token_ids], skip_special_tokens=False)

    def describe(self) -> dict[str, Any]:
        """What the manifest states: the source, the file, its SHA-256 and where it came from."""
        import hashlib

        return {"source": self.origin.get("source", "file"), "path": str(self.path),
                "sha256": hashlib.sha256(self.path.read_bytes()).hexdigest(),
                **{k: v for k, v in self.origin.items() if k != "source"}}


@dataclass
class CharTokenizer:
    """A character budget: every character is one unit; P tokens are ``P x chars_per_token`` characters.

    Units are the characters' code points, so ``detokenize(tokenize(t)) == t``; the prompt builder cuts at
    a character, then widens to a line start, as with any tokenizer.
    """

    chars_per_token: float = 4.0

    async def tokenize(self, text: str) -> list[int]:
        """One unit per character (its code point)."""
        return [ord(c) for c in text]

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """The characters back."""
        return "".join(chr(int(i)) for i in token_ids)

    def budget(self, max_context_tokens: int) -> int:
        """Characters of context kept for a budget of ``max_context_tokens`` tokens."""
        return int(round(max_context_tokens * self.chars_per_token))

    def describe(self) -> dict[str, Any]:
        """What the manifest states."""
        return {"source": "chars", "chars_per_token": self.chars_per_token}


def hub_tokenizer_file(repo: str, revision: str) -> tuple[Path, dict[str, Any]]:
    """``tokenizer.json`` of Hub repository ``repo`` at ``revision``, downloaded once into the Hub cache.

    Only that file is fetched; ``HF_HUB_OFFLINE=1`` reads the cache alone. Raises :class:`InputError` (one
    line naming the repository, the revision and the fix) when it is neither cached nor reachable.
    """
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(repo_id=repo, filename="tokenizer.json", revision=revision)
    except Exception as exc:  # offline, missing file, private repository: one line with the cause
        why = " ".join(str(exc).split())[:200]
        raise InputError(f"prompt.tokenizer_repo = {repo!r} at revision {revision!r}: tokenizer.json is neither "
                         f"in the Hub cache nor reachable ({type(exc).__name__}: {why}); download it once with "
                         "network, or give prompt.tokenizer_file") from None
    return Path(path), {"source": "hub", "repo": repo, "revision": revision}
