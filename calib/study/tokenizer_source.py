"""What cuts a study's prompts and windows: ``[prompt] tokenizer`` resolved to a tokenizer (one rule for every kind).

A functional study counts its prompts' context tokens with it; an extraction or census study cuts its
prefix/suffix windows with it and counts the tokens of the generation-only procedures
(``greedy_prefix``, ``sampled``) with it. The sources (:mod:`calib.data.tokenizers`, docs/hosted.md
"Tokenizer sources"): the target server's ``/tokenize`` (``server``, the default), its completions route's
own tokens (``completions``, :mod:`calib.data.completion_tokenizer`), a local
``tokenizer.json`` (``file``), one of a Hub repository at a pinned revision (``hub``), or a character
budget (``chars``: a token is ``chars_per_token`` characters). :func:`tokenizer_source` returns the
tokenizer and what the manifest states about it; :func:`tokenizer_settings` is what a stage's cache key
holds, so a run cut by another tokenizer is never reused.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

__all__ = ["token_units", "tokenizer_settings", "tokenizer_source"]

_PROBE_TEXT = "def add(a, b):\n    return a + b\n"


async def tokenizer_source(section: Any, resources: Any, target: str) -> tuple[Any, dict[str, Any]]:
    """The tokenizer ``section`` (a table with the ``tokenizer`` keys) names, and what the manifest says of it.

    ``resources`` is the run's :class:`calib.study.resources.Resources`; ``target`` the server whose
    ``/tokenize`` the ``server`` source uses, or whose completions route the ``completions`` source asks (it is
    probed, so its model name is stated; ``completions`` tokenizes a short text first, so the manifest says
    how the ids came: ``via``).
    """
    from calib.data.tokenizers import CharTokenizer, FileTokenizer, hub_tokenizer_file

    if section.tokenizer == "chars":
        chars = CharTokenizer(section.chars_per_token)
        return chars, chars.describe()
    if section.tokenizer in ("file", "hub"):
        if section.tokenizer == "hub":
            path, origin = await asyncio.to_thread(hub_tokenizer_file, section.tokenizer_repo,
                                                   section.tokenizer_revision)
            local = FileTokenizer(path, origin)
        else:
            local = FileTokenizer(Path(section.tokenizer_file))
        return local, local.describe()
    caps = await resources.probe(target)
    if section.tokenizer == "completions":
        from calib.data.completion_tokenizer import CompletionTokenizer

        route = CompletionTokenizer(resources.server(target), target)
        await route.tokenize(_PROBE_TEXT)  # learns how the ids come (via), or stops with the remedy
        return route, route.describe()
    return resources.server(target), {"source": "server", "server": target, "model": caps.get("model")}


def tokenizer_settings(section: Any, servers: dict[str, dict[str, Any]], target: str) -> dict[str, Any]:
    """What decides the cut, for a stage's settings: the source's keys and the server table or file's SHA-256."""
    out: dict[str, Any] = {"tokenizer": section.tokenizer}
    if section.tokenizer in ("server", "completions"):
        out["server"] = servers[target]
    elif section.tokenizer == "file":
        path = Path(section.tokenizer_file)
        out["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else str(path)
    elif section.tokenizer == "hub":
        out.update(repo=section.tokenizer_repo, revision=section.tokenizer_revision)
    else:
        out["chars_per_token"] = section.chars_per_token
    return out


def token_units(tokenizer: Any, tokens: int) -> int:
    """``tokenizer``'s units in ``tokens`` tokens: a character budget's characters (at least 1), else ``tokens``."""
    budget = getattr(tokenizer, "budget", None)
    return max(1, budget(tokens)) if budget is not None else tokens
