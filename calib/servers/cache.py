"""The request cache: every server response, keyed by a hash of server identity and request.

SQLite in WAL mode, one row per request. A row is written in one transaction after the response is
complete, so a run killed at any moment (even ``kill -9``) leaves either the whole row or none, and a
re-run with the same spec does no network work for what it already has. Keys hash the server's
identity (kind, model, revision, base URL set by the caller) and the canonical JSON request body;
secrets are never part of either, so they never reach the cache.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["RequestCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    route TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def _canonical(value: Any) -> str:
    # ensure_ascii: a token's text may be a lone surrogate (half of a character split across tokens),
    # which is valid JSON ("\ud83d") but cannot be encoded as UTF-8 for hashing or for SQLite.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def cache_key(identity: Mapping[str, Any], route: str, body: Any) -> str:
    """SHA-256 of the canonical JSON of (identity, route, body): equal requests, equal keys.

    Canonical means sorted keys and no insignificant whitespace, so the order in which a dict was
    built does not change the key. Never put a secret in ``identity`` or ``body``.
    """
    return hashlib.sha256(_canonical({"identity": identity, "route": route, "body": body}).encode()).hexdigest()


class RequestCache:
    """A SQLite (WAL) store of JSON responses by key; safe to share between threads of one process.

    Several processes may open the same file (SQLite locks it; a writer waits up to 30 s). Each
    :meth:`put` commits on its own, and ``synchronous=NORMAL`` in WAL mode keeps every committed row
    through a crash of the process (only a power loss may drop the last few).

    Parameters
    ----------
    path
        The database file (created with its parent folder). ``":memory:"`` keeps it in memory.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any | None:
        """The cached response for ``key``, or ``None`` (a stored JSON ``null`` also reads as ``None``)."""
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, route: str, response: Any) -> None:
        """Store ``response`` (JSON data) under ``key``, atomically (one transaction)."""
        text = _canonical(response)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, route, response, created) VALUES (?, ?, ?, ?)",
                (key, route, text, time.time()),
            )

    def put_many(self, rows: list[tuple[str, str, Any]]) -> None:
        """Store several ``(key, route, response)`` rows in one transaction (all or none)."""
        now = time.time()
        data = [(key, route, _canonical(response), now) for key, route, response in rows]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, route, response, created) VALUES (?, ?, ?, ?)", data)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RequestCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
