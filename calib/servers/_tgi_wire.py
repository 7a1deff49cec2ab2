"""The ``tgi`` kind's reading of TGI's answers: which client errors to retry, and the token lists of prefill details.

:mod:`calib.servers.tgi` (its module docstring explains the alignment by token ids these helpers serve)
re-exports :func:`classify_tgi`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import aiohttp
from text_generation import errors as tgi_errors

from calib.servers._http import classify_error

__all__ = ["PREFILL_FIX", "classify_tgi"]


PREFILL_FIX = ("TGI returned no prefill log-probs: TGI 3 computes them only when started with "
               "--enable-prefill-logprobs")
_RETRYABLE = (tgi_errors.RateLimitExceededError, tgi_errors.OverloadedError, tgi_errors.ShardNotReadyError,
              tgi_errors.ShardTimeoutError, tgi_errors.IncompleteGenerationError, tgi_errors.UnknownError)
_FINAL = (tgi_errors.ValidationError, tgi_errors.BadRequestError, tgi_errors.NotFoundError,
          tgi_errors.GenerationError, tgi_errors.NotSupportedError)
_FINISH = {"length": "length", "eos_token": "stop", "stop_sequence": "stop"}


def classify_tgi(exc: BaseException) -> tuple[bool, float | None, int | None, str]:
    """(retryable, retry_after, status, message) for an error of the ``text-generation`` client."""
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, _RETRYABLE):
        return True, None, None, message
    if isinstance(exc, _FINAL):
        return False, None, None, message
    if isinstance(exc, (json.JSONDecodeError, KeyError)):  # a body that is not TGI's JSON
        return True, None, None, f"malformed response: {message}"
    if isinstance(exc, aiohttp.ContentTypeError):
        return exc.status >= 500 or exc.status in (408, 429), None, exc.status, f"HTTP {exc.status}: not JSON"
    return classify_error(exc)


def _strip_specials(tokens: list[dict[str, Any]], *, leading: bool) -> list[dict[str, Any]]:
    """Drop the special tokens TGI's /tokenize adds: those with an empty character span at the ends
    (leading ones only where asked: a prompt keeps its BOS, which the model sees)."""
    def added(t: dict[str, Any]) -> bool:
        return t.get("start") is not None and t.get("start") == t.get("stop")

    start, stop = 0, len(tokens)
    while leading and start < stop and added(tokens[start]):
        start += 1
    while stop > start and added(tokens[stop - 1]):
        stop -= 1
    return tokens[start:stop]


def _prefixes(continuation: str, tokens: list[dict[str, Any]]) -> list[str | None]:
    """The text of the continuation before each of its tokens (None where a token starts mid-character).

    The tokens' own texts where they add up to the continuation; else their ``start`` offsets, which TGI
    gives in bytes of the UTF-8 text (a byte-level token may hold part of a character, whose text TGI
    then reports as U+FFFD). Offsets that end at the continuation's length in characters, not bytes,
    are character offsets (as Python tokenizers report them): there a token that starts where the
    previous one started holds the rest of a character.
    """
    texts = [str(t.get("text", "")) for t in tokens]
    if "".join(texts) == continuation:
        return [""] + list(itertools.accumulate(texts[:-1]))
    starts = [int(t.get("start") or 0) for t in tokens]
    raw = continuation.encode("utf-8")
    out: list[str | None] = []
    if max(int(t.get("stop") or 0) for t in tokens) == len(continuation) != len(raw):
        for j, start in enumerate(starts):
            out.append(None if j and start == starts[j - 1] else continuation[:start])
        return out
    for start in starts:
        try:
            out.append(raw[:start].decode("utf-8"))
        except UnicodeDecodeError:
            out.append(None)
    return out


def _top(tokens: Sequence[Any]) -> tuple[tuple[int | None, str, float], ...]:
    ranked = sorted(((t.id, t.text, float(t.logprob)) for t in tokens if t.logprob is not None),
                    key=lambda t: -t[2])
    return tuple(ranked)
