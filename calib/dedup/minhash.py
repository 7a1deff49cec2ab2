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
from calib.dedup.shingles import MinHasher, jaccard, shingle_hash, shingle_hash32, shingles
from calib.metrics.textual import code_tokens

__all__ = ["LSH_RECALL", "MinHasher", "TEXTUAL_DUPLICATES_SCHEMA", "TextualIndex", "TextualMatches", "code_tokens",
           "jaccard", "lsh_params", "shingle_hash", "shingle_hash32", "shingles", "textual_duplicates"]

#: Columns of :func:`textual_duplicates`: one row per verified (query, corpus) pair.
TEXTUAL_DUPLICATES_SCHEMA = {"query_id": pl.String, "corpus_id": pl.String, "jaccard": pl.Float64}

_QUERY_CHUNK = 2048
#: The least probability that a pair at exactly the threshold becomes an LSH candidate (see lsh_params).
LSH_RECALL = 0.99


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
