"""Near-copies among the organism's texts: equal after collapsing whitespace, or a shingle Jaccard of at least 0.5.

Tokens are identifiers, numbers and single punctuation characters (:data:`TOKEN_PATTERN`); shingles are
64-bit hashes of :data:`SHINGLE_SIZE` token hashes (blake2b), the same in every process.
:class:`NearCopyIndex` finds every pair above the threshold exactly (prefix filtering with a
document-frequency order, then an exact check). :mod:`calib.organism.corpus` re-exports the public names.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

import numpy as np

from calib._exceptions import InvalidParameterError

__all__ = ["NEAR_COPY_JACCARD", "SHINGLE_SIZE", "TOKEN_PATTERN", "NearCopyIndex", "jaccard", "shingles"]


SHINGLE_SIZE = 5
NEAR_COPY_JACCARD = 0.5
TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
_TOKEN_IDS: dict[str, int] = {}
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _token_id(token: str) -> int:
    value = _TOKEN_IDS.get(token)
    if value is None:
        value = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        _TOKEN_IDS[token] = value
    return value


def shingles(text: str, size: int = SHINGLE_SIZE) -> np.ndarray:
    """The sorted, distinct 64-bit hashes of ``text``'s ``size``-token shingles (one for shorter texts)."""
    ids = np.array([_token_id(t) for t in TOKEN_PATTERN.findall(text)], dtype=np.uint64)
    if ids.size == 0:
        return ids
    width = min(size, ids.size)
    count = ids.size - width + 1
    hashed = np.zeros(count, dtype=np.uint64)
    for offset in range(width):
        hashed = hashed * _MIX + ids[offset : offset + count]
    return np.unique(hashed)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two shingle sets from :func:`shingles` (0 when both are empty)."""
    if a.size == 0 and b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def _normal_key(text: str) -> bytes:
    return hashlib.sha1(" ".join(text.split()).encode()).digest()


class NearCopyIndex:
    """Finds, for a query text, every indexed text it is a near-copy of (see the module docstring).

    Built once over a fixed list of texts. Prefix filtering (Chaudhuri et al. 2006; Bayardo et al.
    2007): with shingles ordered rarest first, two sets with Jaccard >= t share an element within
    their first ``n - ceil(t n) + 1`` shingles, so only those are indexed; candidates are then checked
    exactly.
    """

    def __init__(self, texts: Sequence[str], *, threshold: float = NEAR_COPY_JACCARD) -> None:
        if not 0 < threshold <= 1:
            raise InvalidParameterError(f"threshold={threshold!r} must be in (0, 1]")
        self.threshold = threshold
        self._exact: dict[bytes, list[int]] = {}
        for i, text in enumerate(texts):
            self._exact.setdefault(_normal_key(text), []).append(i)
        self._sets = [shingles(text) for text in texts]
        every = np.concatenate(self._sets) if self._sets else np.zeros(0, np.uint64)
        self._vocab, counts = np.unique(every, return_counts=True)
        order = np.lexsort((self._vocab, counts))
        self._rank = np.empty(order.size, dtype=np.int64)
        self._rank[order] = np.arange(order.size)
        ranks, docs = [], []
        for i, sh in enumerate(self._sets):
            prefix = self._prefix(self._rank[np.searchsorted(self._vocab, sh)])
            ranks.append(prefix)
            docs.append(np.full(prefix.size, i, dtype=np.int64))
        all_ranks = np.concatenate(ranks) if ranks else np.zeros(0, np.int64)
        all_docs = np.concatenate(docs) if docs else np.zeros(0, np.int64)
        by_rank = np.argsort(all_ranks, kind="stable")
        self._post_rank, self._post_doc = all_ranks[by_rank], all_docs[by_rank]

    def __len__(self) -> int:
        return len(self._sets)

    def _prefix(self, ranks: np.ndarray) -> np.ndarray:
        n = ranks.size
        keep = n - math.ceil(self.threshold * n - 1e-9) + 1
        return np.sort(ranks)[:keep]

    def matches(self, text: str) -> list[int]:
        """Indices (ascending) of the indexed texts that ``text`` is a near-copy of."""
        found = set(self._exact.get(_normal_key(text), ()))
        query = shingles(text)
        if query.size and self._vocab.size:
            pos = np.minimum(np.searchsorted(self._vocab, query), self._vocab.size - 1)
            known = self._vocab[pos] == query
            # Shingles the index has never seen rank first: they cannot be shared.
            ranks = np.where(known, self._rank[pos], -1)
            prefix = self._prefix(ranks)
            prefix = prefix[prefix >= 0]
            lo = np.searchsorted(self._post_rank, prefix, "left")
            hi = np.searchsorted(self._post_rank, prefix, "right")
            hits = [self._post_doc[a:b] for a, b in zip(lo, hi) if b > a]
            if hits:
                for doc in np.unique(np.concatenate(hits)).tolist():
                    other = self._sets[doc]
                    if self.threshold * query.size <= other.size * (1 + 1e-9) and \
                            self.threshold * other.size <= query.size * (1 + 1e-9) and \
                            jaccard(query, other) >= self.threshold:
                        found.add(doc)
        return sorted(found)

    def is_near_copy(self, text: str) -> bool:
        """Whether ``text`` is a near-copy of any indexed text."""
        return bool(self.matches(text))
