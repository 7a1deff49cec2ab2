"""Textual near-duplicates: token shingles, MinHash signatures, a MinHash LSH index verified by exact Jaccard.

The functional-memorization paper relates memorization of a function x to the number of textual
near-duplicates of x in the training corpus. calib counts a corpus function y as a near-duplicate of x
when the **exact** Jaccard similarity of their shingle sets reaches ``threshold`` (0.4 by default):

- tokens: calib's code tokens (:func:`calib.metrics.textual.code_tokens`, the tokens behind ``bleu``);
- shingles: the distinct token ``size``-grams (5 by default), each hashed to 64 bits with a hash that is
  the same in every process and on every machine (:func:`shingle_hash`: BLAKE2b-64 per token, a
  polynomial over the window, the MurmurHash3 64-bit finalizer). A text with fewer than ``size`` tokens
  has one shingle, all its tokens, so that two different short functions do not collide. A text without
  tokens has no shingles and is the near-duplicate of nothing (its Jaccard similarity with anything,
  itself included, is 0.0 here);
- candidates: MinHash LSH (Broder 1997; Leskovec, Rajaraman & Ullman, *Mining of Massive Datasets*,
  ch. 3) as implemented by datasketch, with datasketch's own permutations ("affine32" scheme of
  datasketch 2.0: ``a * fmix32(h) + b mod 2^32``), fed with the 32-bit fold of each shingle hash
  (:func:`shingle_hash32`). The bands are chosen for recall at the threshold (:func:`lsh_params`), not
  datasketch's balanced default, because LSH only proposes: every reported pair is verified by exact
  Jaccard, so a false candidate costs time and a missed one undercounts.

The index is in memory, or in Redis (``storage="redis://host:port/db"``) so that several processes
share it. Verification needs the candidate's shingles: the index keeps those of the keys it added
itself; for keys added by another process the caller passes their texts (``corpus_texts``); a candidate
it cannot verify is reported as unverified and never counted.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import polars as pl

from calib._exceptions import InvalidParameterError
from calib.metrics.textual import code_tokens

__all__ = ["LSH_RECALL", "MinHasher", "TEXTUAL_DUPLICATES_SCHEMA", "TextualIndex", "TextualMatches", "code_tokens",
           "jaccard", "lsh_params", "shingle_hash", "shingle_hash32", "shingles", "textual_duplicates"]

#: Columns of :func:`textual_duplicates`: one row per verified (query, corpus) pair.
TEXTUAL_DUPLICATES_SCHEMA = {"query_id": pl.String, "corpus_id": pl.String, "jaccard": pl.Float64}

_MASK64 = (1 << 64) - 1
_POLY = 0x100000001B3  # the FNV-1a 64-bit prime; its powers weigh each position, so token order counts
_GOLDEN = 0x9E3779B97F4A7C15  # mixes the window length in, so an n-token short text differs from any 5-gram
_FMIX64 = (33, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
_TOKEN_CACHE: dict[str, int] = {}
_TOKEN_CACHE_MAX = 1 << 21
_CHUNK_CHARS = 1 << 17  # texts per batch: ~40k tokens, a 20 MB (tokens x num_perm) uint32 matrix
_QUERY_CHUNK = 2048
#: The least probability that a pair at exactly the threshold becomes an LSH candidate (see lsh_params).
LSH_RECALL = 0.99


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


@dataclass(frozen=True)
class TextualMatches:
    """What the index found for one query text.

    Attributes
    ----------
    matches
        ``(corpus key, exact Jaccard)`` of every verified near-duplicate (Jaccard >= threshold), by
        Jaccard descending, then key.
    unverified
        LSH candidates whose shingles the index could not get (added by another process and absent
        from ``corpus_texts``), sorted; never counted as near-duplicates.
    """

    matches: tuple[tuple[str, float], ...]
    unverified: tuple[str, ...]


def lsh_params(threshold: float, num_perm: int, recall: float = LSH_RECALL) -> tuple[int, int]:
    """The LSH bands ``(b, r)``: the most rows per band whose candidate probability at ``threshold`` is >= ``recall``.

    A pair with Jaccard similarity s shares at least one of b bands of r MinHash values with probability
    1 - (1 - s^r)^b (Leskovec, Rajaraman & Ullman, *Mining of Massive Datasets*, §3.4.2). datasketch's
    own choice weighs false positives and false negatives alike ((32, 4) at 0.4 with 128 permutations:
    a pair at s = 0.4 is a candidate with probability 0.56), which undercounts near-duplicates; since
    every candidate is verified exactly, calib spends candidates on recall instead: (64, 2) at 0.4
    (probability 0.99999), (42, 3) at 0.5, (21, 6) at 0.8. Without a band size that reaches ``recall``
    (tiny thresholds), one value per band.
    """
    for rows in range(num_perm // 2, 0, -1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold ** rows) ** bands >= recall:
            return bands, rows
    return num_perm, 1


def _redis_config(storage: str) -> dict[str, Any]:
    parts = urlsplit(storage)
    try:
        port = parts.port or 6379
        db = int(parts.path.strip("/") or 0)
    except ValueError as exc:
        raise InvalidParameterError(f"storage={storage!r}: expected 'redis://host:port/db' ({exc})") from exc
    if parts.scheme != "redis" or not parts.hostname:
        raise InvalidParameterError(f"storage={storage!r}: expected None (in memory) or 'redis://host:port/db'")
    config: dict[str, Any] = {"host": parts.hostname, "port": port, "db": db}
    if parts.username:
        config["username"] = parts.username
    if parts.password:
        config["password"] = parts.password
    return config


def _glob_escape(text: bytes) -> bytes:
    return b"".join(b"\\" + bytes([c]) if c in b"*?[]\\" else bytes([c]) for c in text)


class TextualIndex:
    """A MinHash LSH index of corpus texts whose answers are verified by exact Jaccard.

    Parameters
    ----------
    threshold
        Near-duplicate threshold on the exact Jaccard similarity of shingle sets, in (0, 1].
    num_perm
        MinHash permutations.
    shingle_size
        Tokens per shingle.
    seed
        Seed of the MinHash permutations.
    storage
        ``None``: in memory. ``"redis://host:port/db"``: datasketch's Redis storage, shared by every
        index with the same ``prefix`` and settings on that server (the settings are stored under the
        prefix and checked).
    prefix
        Name of the index in Redis (datasketch's ``basename``); ignored in memory.
    """

    def __init__(self, threshold: float = 0.4, num_perm: int = 128, shingle_size: int = 5, seed: int = 1,
                 storage: str | None = None, prefix: str = "calib") -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 < threshold <= 1.0:
            raise InvalidParameterError(f"threshold must be a number in (0, 1], got {threshold!r}")
        if not isinstance(prefix, str) or not prefix:
            raise InvalidParameterError(f"prefix must be a non-empty string, got {prefix!r}")
        self.threshold = float(threshold)
        self.storage = storage
        self.prefix = prefix
        self._hasher = MinHasher(num_perm, seed, shingle_size)
        self._shingles: dict[str, np.ndarray] = {}
        self._redis = None
        self._storage_config: dict[str, Any] = {"type": "dict"}
        if storage is not None:
            if not isinstance(storage, str):
                raise InvalidParameterError(f"storage={storage!r}: expected None (in memory) or 'redis://host:port/db'")
            self._connect(_redis_config(storage))
        self._lsh = self._new_lsh()

    @property
    def num_perm(self) -> int:
        return self._hasher.num_perm

    @property
    def shingle_size(self) -> int:
        return self._hasher.shingle_size

    @property
    def seed(self) -> int:
        return self._hasher.seed

    @property
    def bands(self) -> tuple[int, int]:
        """The LSH parameters (b bands, r rows per band)."""
        return self._lsh.b, self._lsh.r

    def _new_lsh(self):
        from datasketch import MinHashLSH

        return MinHashLSH(num_perm=self.num_perm, params=lsh_params(self.threshold, self.num_perm),
                          storage_config=self._storage_config, prepickle=False)

    def _connect(self, config: dict[str, Any]) -> None:
        try:
            import redis
        except ImportError as exc:
            raise InvalidParameterError(f"storage={self._where!r} needs the redis client: pip install redis") from exc
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No retries: redis-py's default backoff takes seconds to report a server that is not there.
        client = redis.Redis(**config, retry=Retry(NoBackoff(), 0))
        settings = json.dumps({"threshold": self.threshold, "num_perm": self.num_perm, "seed": self.seed,
                               "shingle_size": self.shingle_size, "scheme": self._hasher.scheme,
                               "bands": list(lsh_params(self.threshold, self.num_perm))}, sort_keys=True)
        try:
            client.set(self._settings_key, settings, nx=True)
            stored = client.get(self._settings_key)
        except redis.RedisError as exc:
            raise InvalidParameterError(f"storage={self._where!r}: Redis does not answer ({exc})") from exc
        if stored is not None and stored.decode() != settings:
            raise InvalidParameterError(f"prefix={self.prefix!r} on {self._where} holds an index with settings "
                                        f"{stored.decode()}, not {settings}: use those settings or another prefix")
        self._redis = client
        self._storage_config = {"type": "redis", "basename": self.prefix.encode(), "redis": config}

    @property
    def _where(self) -> str:
        """The storage URL without its password, for messages."""
        parts = urlsplit(self.storage or "")
        return self.storage if parts.password is None else self.storage.replace(f":{parts.password}@", ":***@", 1)

    @property
    def _settings_key(self) -> bytes:
        return self.prefix.encode() + b"_settings"

    def _encode(self, key: str) -> str | bytes:
        return key if self._redis is None else key.encode()

    def _decode(self, key: str | bytes) -> str:
        return key.decode() if isinstance(key, bytes) else key

    def add(self, keys: Sequence[str], texts: Sequence[str]) -> None:
        """Index ``texts`` under ``keys`` (one insertion session per call).

        Raises
        ------
        InvalidParameterError
            When the lengths differ, a key is not a string, repeats, or is already in the index.
        """
        keys, texts = list(keys), list(texts)
        if len(keys) != len(texts):
            raise InvalidParameterError(f"keys and texts must have the same length, got {len(keys)} and {len(texts)}")
        if not all(isinstance(k, str) for k in keys):
            raise InvalidParameterError("keys must be strings")
        repeated = sorted(k for k, count in Counter(keys).items() if count > 1)
        if repeated:
            raise InvalidParameterError(f"keys repeat within the batch: {repeated[:5]}")
        present = [k for k in keys if k in self._shingles]
        if self._redis is not None:
            found = self._lsh.keys.getmany(*[self._encode(k) for k in keys])
            present += [k for k, hs in zip(keys, found) if hs and k not in self._shingles]
        if present:
            raise InvalidParameterError(f"keys already in the index: {sorted(present)[:5]}")
        values, kept = self._hasher._sketch(texts, keep_shingles=True)
        from datasketch import LeanMinHash

        with self._lsh.insertion_session() as session:
            for key, row, shingle_set in zip(keys, values, kept):
                self._shingles[key] = shingle_set
                if shingle_set.size:
                    session.insert(self._encode(key), LeanMinHash(seed=self.seed, hashvalues=row, scheme="affine32"),
                                   check_duplication=False)

    def candidates(self, texts: Sequence[str], *, exclude: Sequence[str | None] | None = None) -> list[list[str]]:
        """The unverified LSH candidates of each text (sorted corpus keys), ``exclude[i]`` left out."""
        return self._candidates(list(texts), self._exclude(exclude, len(texts)))[0]

    def _exclude(self, exclude: Sequence[str | None] | None, n: int) -> list[str | None]:
        if exclude is None:
            return [None] * n
        exclude = list(exclude)
        if len(exclude) != n:
            raise InvalidParameterError(f"exclude must have one entry per text ({n}), got {len(exclude)}")
        return exclude

    def _candidates(self, texts: list[str], exclude: list[str | None]) -> tuple[list[list[str]], list[np.ndarray]]:
        values, kept = self._hasher._sketch(texts, keep_shingles=True)
        found: list[set] = [set() for _ in texts]
        live = [i for i, s in enumerate(kept) if s.size]
        for at in range(0, len(live), _QUERY_CHUNK):
            chunk = live[at:at + _QUERY_CHUNK]
            for (lo, hi), table in zip(self._lsh.hashranges, self._lsh.hashtables):
                # The bucket key of a band is datasketch's MinHashLSH._byteswap of the band's hash values
                # (tested against MinHashLSH.query); one getmany per band is one Redis round trip.
                buckets = table.getmany(*[bytes(values[i, lo:hi].byteswap().data) for i in chunk])
                for i, bucket in zip(chunk, buckets):
                    found[i].update(bucket)
        result = []
        for keys, skip in zip(found, exclude):
            decoded = {self._decode(k) for k in keys}
            decoded.discard(skip)
            result.append(sorted(decoded))
        return result, kept

    def search(self, texts: Sequence[str], *, exclude: Sequence[str | None] | None = None,
               corpus_texts: Mapping[str, str] | None = None) -> list[TextualMatches]:
        """The verified near-duplicates of each text, and the candidates that could not be verified.

        Parameters
        ----------
        texts
            Query texts.
        exclude
            Per text, a corpus key to leave out (e.g. the audited function itself), or ``None``.
        corpus_texts
            Texts of corpus keys this index did not add itself (a shared Redis index), for verification.
        """
        texts = list(texts)
        candidates, kept = self._candidates(texts, self._exclude(exclude, len(texts)))
        borrowed: dict[str, np.ndarray] = {}
        results = []
        for query, keys in zip(kept, candidates):
            matches, unverified = [], []
            for key in keys:
                corpus = self._shingles.get(key)
                if corpus is None and corpus_texts is not None and key in corpus_texts:
                    if key not in borrowed:
                        borrowed[key] = shingles(corpus_texts[key], self.shingle_size)
                    corpus = borrowed[key]
                if corpus is None:
                    unverified.append(key)
                    continue
                similarity = jaccard(query, corpus)
                if similarity >= self.threshold:
                    matches.append((key, similarity))
            matches.sort(key=lambda m: (-m[1], m[0]))
            results.append(TextualMatches(tuple(matches), tuple(unverified)))
        return results

    def query(self, texts: Sequence[str], *, exclude: Sequence[str | None] | None = None,
              corpus_texts: Mapping[str, str] | None = None) -> list[list[tuple[str, float]]]:
        """Per text, the verified ``(corpus key, exact Jaccard)`` with Jaccard >= threshold (see :meth:`search`)."""
        return [list(r.matches) for r in self.search(texts, exclude=exclude, corpus_texts=corpus_texts)]

    def clear(self) -> None:
        """Empty the index; with Redis, delete every key under the prefix (other processes' keys too)."""
        self._shingles.clear()
        if self._redis is not None:
            base = _glob_escape(self.prefix.encode())
            for pattern in (base + b"_bucket_*", base + b"_keys*"):
                batch = []
                for name in self._redis.scan_iter(match=pattern, count=10_000):
                    batch.append(name)
                    if len(batch) >= 10_000:
                        self._redis.unlink(*batch)
                        batch = []
                if batch:
                    self._redis.unlink(*batch)
            self._redis.delete(self._settings_key)
        self._lsh = self._new_lsh()


def textual_duplicates(corpus_keys: Sequence[str], corpus_texts: Sequence[str], query_keys: Sequence[str],
                       query_texts: Sequence[str], *, threshold: float = 0.4, num_perm: int = 128,
                       shingle_size: int = 5, seed: int = 1, storage: str | None = None,
                       exclude_self: bool = True) -> pl.DataFrame:
    """Every (query, corpus) pair whose exact shingle Jaccard reaches ``threshold``.

    Parameters
    ----------
    corpus_keys, corpus_texts
        The corpus (keys unique).
    query_keys, query_texts
        The functions whose near-duplicates are counted (e.g. the audited functions).
    threshold, num_perm, shingle_size, seed, storage
        As for :class:`TextualIndex`. With Redis the index lives under a fresh prefix and is deleted
        afterwards.
    exclude_self
        Drop the pairs whose corpus key equals the query key.

    Returns
    -------
    polars.DataFrame
        :data:`TEXTUAL_DUPLICATES_SCHEMA`: ``query_id``, ``corpus_id``, ``jaccard``; queries in input
        order, each query's pairs by Jaccard descending then ``corpus_id``.
    """
    query_keys, query_texts = list(query_keys), list(query_texts)
    if len(query_keys) != len(query_texts):
        raise InvalidParameterError(f"query_keys and query_texts must have the same length, got {len(query_keys)} "
                                    f"and {len(query_texts)}")
    prefix = "calib" if storage is None else f"calib-dup-{uuid.uuid4().hex}"
    index = TextualIndex(threshold, num_perm, shingle_size, seed, storage=storage, prefix=prefix)
    try:
        index.add(corpus_keys, corpus_texts)
        found = index.query(query_texts, exclude=query_keys if exclude_self else None)
    finally:
        if storage is not None:
            index.clear()
    rows = [(q, key, value) for q, matches in zip(query_keys, found) for key, value in matches]
    return pl.DataFrame(rows, schema=TEXTUAL_DUPLICATES_SCHEMA, orient="row")
