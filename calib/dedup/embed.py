"""Embeddings of texts for the semantic near-duplicate search: a server's ``embed`` or the offline fallback.

:func:`embed_texts` returns :class:`Embeddings` (unit float32 vectors, the model, which texts the fallback
truncated); :mod:`calib.dedup.semantic` (its module docstring describes both steps) searches them, and
re-exports both names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calib._exceptions import InvalidParameterError
from calib.servers.base import ServerError, require

__all__ = ["Embeddings", "embed_texts"]


@dataclass(frozen=True, eq=False)
class Embeddings:
    """What :func:`embed_texts` returns.

    Attributes
    ----------
    vectors
        float32 array of shape (n, d), one L2-normalised row per text, in the texts' order (shape (0, 0)
        for no texts).
    model
        The model that embedded them: ``"sentence-transformers/all-MiniLM-L6-v2"`` for the offline
        fallback, ``"<kind>:<model>"`` for a server.
    truncated
        Per text, whether the fallback model cut it at its ``max_seq_length`` (256 word pieces) and so
        embedded its beginning only; all False for a server (a server does not say).
    """

    vectors: np.ndarray
    model: str
    truncated: list[bool]


async def embed_texts(texts: Sequence[str], *, server: Any = None, batch_size: int = 32,
                      concurrency: int = 4) -> Embeddings:
    """Unit float32 embeddings of ``texts``, in order.

    With ``server`` the texts go to ``server.embed`` in chunks of ``batch_size``, at most ``concurrency``
    requests at a time (after checking the server's capabilities, when it has ``capabilities``). Without
    one the offline fallback model embeds them in a worker thread, ``batch_size`` texts per forward pass.
    Texts are embedded as they are, duplicates and empty strings included: the fallback gives an empty
    text the vector of its special tokens, while a server may refuse it (calib's embedded server does,
    with an error naming the empty input). A repeated text is embedded again, and the fallback pads each
    batch to its longest text, so the copies may differ in the last float32 digits (about 1e-7);
    :func:`semantic_duplicates` embeds each distinct text once.

    Raises
    ------
    MetricUnavailable
        Without a server, when the offline model is not installed (names the extra to install).
    CapabilityError
        When the server cannot embed.
    RequestFailed, ServerError
        When a request fails, or the server answers with the wrong number of vectors, vectors of
        different lengths, or a zero or non-finite vector.
    """
    texts = list(texts)
    _check_count("batch_size", batch_size)
    _check_count("concurrency", concurrency)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidParameterError(f"embed_texts: text #{i} is a {type(text).__name__}, not a str")
    if server is not None and not callable(getattr(server, "embed", None)):
        raise InvalidParameterError(f"embed_texts: server {getattr(server, 'name', server)!r} cannot embed; give "
                                    f"an embedding server (vLLM --task embed, or calib's embedded server)")
    if server is None:
        from calib.metrics.embedding import FALLBACK_MODEL

        raw, truncated = await asyncio.to_thread(_embed_fallback, texts, batch_size)
        return Embeddings(_unit_rows(raw, lambda i: f"the offline model gave text #{i}"), FALLBACK_MODEL, truncated)
    raw, model = await _embed_server(server, texts, batch_size, concurrency)
    name = getattr(server, "name", model)
    return Embeddings(_unit_rows(raw, lambda i: f"server {name!r} returned for text #{i}"), model,
                      [False] * len(texts))


def _embed_fallback(texts: list[str], batch_size: int) -> tuple[np.ndarray, list[bool]]:
    """Raw fallback vectors of ``texts`` (float64) and whether each was truncated."""
    from calib.metrics.embedding import fallback_model

    model = fallback_model()  # raises MetricUnavailable naming the extra when it is not installed
    if not texts:
        return np.zeros((0, 0)), []
    vectors = model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    limit = model.max_seq_length
    lengths = [len(ids) for ids in model.tokenizer(texts, add_special_tokens=True, verbose=False)["input_ids"]]
    return np.asarray(vectors, dtype=np.float64), [n > limit for n in lengths]


async def _embed_server(server: Any, texts: list[str], batch_size: int,
                        concurrency: int) -> tuple[np.ndarray, str]:
    """Raw server vectors of ``texts`` (float64) and the model's name."""
    name = getattr(server, "name", type(server).__name__)
    model = None
    probe = getattr(server, "capabilities", None)
    if callable(probe):
        caps = await probe()
        require(caps, ["embeddings"])
        model = f"{caps.kind}:{caps.model}"
    if model is None:
        served = getattr(server, "model", None)
        if not isinstance(served, str):
            served = getattr(server, "model_dir", None)
        model = f"{getattr(server, 'kind', type(server).__name__)}:{served}"
    if not texts:
        return np.zeros((0, 0)), model
    parts = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
    answers: list[list[Any]] = [[] for _ in parts]
    pending = iter(range(len(parts)))

    async def worker() -> None:
        for i in pending:  # one shared iterator: each chunk goes to exactly one worker
            vectors = await server.embed(parts[i])
            if len(vectors) != len(parts[i]):
                raise ServerError(f"server {name!r} returned {len(vectors)} vectors for {len(parts[i])} texts")
            answers[i] = list(vectors)

    try:
        async with asyncio.TaskGroup() as group:  # the first failure cancels the other requests
            for _ in range(min(concurrency, len(parts))):
                group.create_task(worker())
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    rows = [v for answer in answers for v in answer]
    dims = {len(v) for v in rows}
    if len(dims) != 1 or 0 in dims:
        raise ServerError(f"server {name!r} returned vectors of lengths {sorted(dims)}; expected one length >= 1")
    return np.asarray(rows, dtype=np.float64), model


def _unit_rows(raw: np.ndarray, source: Callable[[int], str]) -> np.ndarray:
    """``raw``'s rows divided by their float64 L2 norms, as float32."""
    if raw.size == 0:
        return np.zeros((raw.shape[0], 0 if raw.ndim < 2 else raw.shape[1]), dtype=np.float32)
    norms = np.linalg.norm(raw, axis=1)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0.0))
    if bad.size:
        raise ServerError(f"{source(int(bad[0]))} a zero or non-finite vector; it has no direction to compare")
    return (raw / norms[:, None]).astype(np.float32)


def _check_count(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
