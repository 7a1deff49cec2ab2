"""Token shingles and their MinHash signatures: stable 64-bit shingle hashes, exact Jaccard, :class:`MinHasher`.

:mod:`calib.dedup.minhash` (its module docstring defines shingles and the hash) indexes the signatures
for near-duplicate search; every name here is also importable from there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from calib._exceptions import InvalidParameterError
from calib.metrics.textual import code_tokens

__all__ = ["MinHasher", "jaccard", "shingle_hash", "shingle_hash32", "shingles"]


_MASK64 = (1 << 64) - 1
_POLY = 0x100000001B3  # the FNV-1a 64-bit prime; its powers weigh each position, so token order counts
_GOLDEN = 0x9E3779B97F4A7C15  # mixes the window length in, so an n-token short text differs from any 5-gram
_FMIX64 = (33, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
_TOKEN_CACHE: dict[str, int] = {}
_TOKEN_CACHE_MAX = 1 << 21
_CHUNK_CHARS = 1 << 17  # texts per batch: ~40k tokens, a 20 MB (tokens x num_perm) uint32 matrix


def _token_hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def _fmix64(h: int) -> int:
    shift, m1, m2 = _FMIX64
    h ^= h >> shift
    h = (h * m1) & _MASK64
    h ^= h >> shift
    h = (h * m2) & _MASK64
    return h ^ (h >> shift)


def _window_hash(token_hashes: Sequence[int]) -> int:
    acc = 0
    for t in token_hashes:
        acc = (acc * _POLY + t) & _MASK64
    return _fmix64(acc ^ ((len(token_hashes) * _GOLDEN) & _MASK64))


def shingle_hash(tokens: Sequence[str]) -> int:
    """The stable 64-bit hash of one shingle (a sequence of code tokens), as an ``int`` in [0, 2^64).

    ``fmix64(poly ^ len * 0x9E3779B97F4A7C15)`` with ``poly = Σ_j t_j · P^(len-1-j) mod 2^64``, ``t_j`` the
    little-endian BLAKE2b-64 digest of token j's UTF-8 bytes, ``P`` the FNV-1a 64-bit prime and ``fmix64``
    the MurmurHash3 finalizer. Pure Python: the reference the vectorized :class:`MinHasher` must equal.
    """
    return _window_hash([_token_hash(t) for t in tokens])


def shingle_hash32(tokens: Sequence[str]) -> int:
    """The 32-bit hash of one shingle fed to MinHash: the xor of the two halves of :func:`shingle_hash`."""
    h = shingle_hash(tokens)
    return (h ^ (h >> 32)) & 0xFFFFFFFF


def _token_hashes(tokens: list[str]) -> np.ndarray:
    cache = _TOKEN_CACHE
    try:
        return np.fromiter(map(cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
    except KeyError:
        if len(cache) > _TOKEN_CACHE_MAX:
            cache.clear()
        for token in tokens:
            if token not in cache:
                cache[token] = _token_hash(token)
        return np.fromiter(map(cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))


def _fmix64_array(h: np.ndarray) -> np.ndarray:
    shift, m1, m2 = (np.uint64(c) for c in _FMIX64)
    h = h ^ (h >> shift)
    h *= m1
    h ^= h >> shift
    h *= m2
    return h ^ (h >> shift)


def _shingle_hashes(texts: Sequence[str], size: int) -> list[np.ndarray]:
    """Per text, the hashes of its shingles in text order (repeats kept)."""
    tokens = [code_tokens(text) for text in texts]
    lengths = [len(t) for t in tokens]
    flat = _token_hashes([tok for toks in tokens for tok in toks])
    # Horner's rule over every window of the concatenated tokens at once; windows that straddle two
    # texts are computed too and never sliced out.
    n_windows = flat.size - size + 1
    windows = np.empty(0, dtype=np.uint64)
    if n_windows > 0:
        acc = flat[:n_windows].copy()
        for j in range(1, size):
            acc *= np.uint64(_POLY)
            acc += flat[j:j + n_windows]
        windows = _fmix64_array(acc ^ np.uint64((size * _GOLDEN) & _MASK64))
    out, start = [], 0
    for n in lengths:
        if n >= size:
            out.append(windows[start:start + n - size + 1])
        elif n:
            out.append(np.array([_window_hash([int(t) for t in flat[start:start + n]])], dtype=np.uint64))
        else:
            out.append(np.empty(0, dtype=np.uint64))
        start += n
    return out


def _check_size(size: int, name: str = "size") -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidParameterError(f"{name} must be an integer >= 1, got {size!r}")


def shingles(text: str, size: int = 5) -> np.ndarray:
    """The distinct hashed shingles of ``text``: a sorted ``uint64`` array.

    Parameters
    ----------
    text
        Source code.
    size
        Tokens per shingle. A text with fewer tokens has one shingle of all its tokens; a text with no
        token has none (an empty array).

    Returns
    -------
    numpy.ndarray
        The distinct :func:`shingle_hash` values of the token ``size``-grams of ``text``, sorted.
    """
    _check_size(size)
    return np.unique(_shingle_hashes([text], size)[0])


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The exact Jaccard similarity |a ∩ b| / |a ∪ b| of two shingle arrays from :func:`shingles`.

    Both arrays must be sorted and free of repeats. Two empty arrays give 0.0 (an empty text is the
    near-duplicate of nothing), not the 0/0 some authors set to 1.
    """
    common = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - common
    return common / union if union else 0.0


class MinHasher:
    """datasketch-compatible MinHash signatures of many texts at once, vectorized with numpy.

    The signature of a text equals (hash values identical) that of
    ``datasketch.MinHash(num_perm, seed, hashfunc=shingle_hash32)`` updated with each shingle of the text.

    Parameters
    ----------
    num_perm
        Permutations (hash values per signature).
    seed
        Seed of datasketch's permutations, in [0, 2^32).
    shingle_size
        Tokens per shingle (see :func:`shingles`).
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, shingle_size: int = 5) -> None:
        import datasketch

        if isinstance(num_perm, bool) or not isinstance(num_perm, int) or num_perm < 2:
            raise InvalidParameterError(f"num_perm must be an integer >= 2, got {num_perm!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 32:
            raise InvalidParameterError(f"seed must be an integer in [0, 2^32), got {seed!r}")
        _check_size(shingle_size, "shingle_size")
        self.num_perm, self.seed, self.shingle_size = num_perm, seed, shingle_size
        reference = datasketch.MinHash(num_perm=num_perm, seed=seed)
        # datasketch >= 2.0 defaults to the "affine32" scheme; the arithmetic below is that scheme's.
        self.scheme = getattr(reference, "scheme", "legacy")
        if self.scheme != "affine32":
            raise RuntimeError(f"datasketch MinHash scheme {self.scheme!r}: calib needs 'affine32' (datasketch >= 2)")
        self._a, self._b = (np.asarray(p, dtype=np.uint32) for p in reference.permutations)
        self._lean = datasketch.LeanMinHash

    def hashvalues(self, texts: Sequence[str]) -> np.ndarray:
        """The signatures of ``texts`` as a ``(len(texts), num_perm)`` uint32 matrix (empty text: all 2^32-1)."""
        return self._sketch(texts, keep_shingles=False)[0]

    def signatures(self, texts: Sequence[str]) -> list[Any]:
        """The signatures of ``texts`` as ``datasketch.LeanMinHash`` objects (scheme ``"affine32"``)."""
        return [self._lean(seed=self.seed, hashvalues=row, scheme=self.scheme) for row in self.hashvalues(texts)]

    def _sketch(self, texts: Sequence[str], keep_shingles: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        """Signatures and, when asked, each text's distinct sorted shingles."""
        values = np.full((len(texts), self.num_perm), 0xFFFFFFFF, dtype=np.uint32)
        kept: list[np.ndarray] = []
        first = 0
        while first < len(texts):
            last, chars = first, 0
            while last < len(texts) and (last == first or chars < _CHUNK_CHARS):
                chars += len(texts[last])
                last += 1
            hashes = _shingle_hashes(texts[first:last], self.shingle_size)
            if keep_shingles:
                hashes = [np.unique(h) for h in hashes]
                kept += hashes
            self._minhash(hashes, values[first:last])
            first = last
        return values, kept

    def _minhash(self, hashes: list[np.ndarray], out: np.ndarray) -> None:
        sizes = np.array([h.size for h in hashes])
        nonempty = np.flatnonzero(sizes)
        if not nonempty.size:
            return
        h = np.concatenate([hashes[i] for i in nonempty])
        h32 = ((h ^ (h >> np.uint64(32))) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        # datasketch's fmix32 pre-mix (MurmurHash3's 32-bit finalizer), then a * h + b mod 2^32 per permutation.
        h32 ^= h32 >> np.uint32(16)
        h32 *= np.uint32(0x85EBCA6B)
        h32 ^= h32 >> np.uint32(13)
        h32 *= np.uint32(0xC2B2AE35)
        h32 ^= h32 >> np.uint32(16)
        permuted = h32[:, None] * self._a[None, :]
        permuted += self._b[None, :]
        starts = np.concatenate([[0], np.cumsum(sizes[nonempty])[:-1]])
        out[nonempty] = np.minimum.reduceat(permuted, starts, axis=0)
