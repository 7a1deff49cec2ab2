"""SHA-256 digests of what an output state keeps only in part (runs inside the sandbox; stdlib only).

The builtin module's hash (importing ``hashlib`` loads OpenSSL, about 15 ms a batch), and the digest of each
of the last large values remembered by value: a buffer an object holds (asyncio's SSL protocol keeps 256 KiB)
is digested in every state observed, before and after each run of the search, and a dictionary lookup
hashes and compares it about ten times as fast as SHA-256 (docs/executors.md, "Output states").
"""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: At most this many digests are remembered, each of a value of at most ``MEMO_BYTES``.
MEMO_ENTRIES, MEMO_BYTES = 8, 4 << 20
_known: dict[bytes, str] = {}
_sha256: Any = None


def sha256(data: bytes = b"") -> Any:
    """A SHA-256 hash object (the builtin module's)."""
    global _sha256
    if _sha256 is None:
        try:
            from _sha256 import sha256 as _sha256  # noqa: PLC0415 - CPython <= 3.11
        except ImportError:
            from _sha2 import sha256 as _sha256  # type: ignore[no-redef]  # noqa: PLC0415 - 3.12+
    return _sha256(data)


def digest(data: bytes) -> str:
    """SHA-256 of ``data`` (bytes) in hex."""
    if (known := _known.get(data)) is None:
        known = sha256(data).hexdigest()
        if len(data) <= MEMO_BYTES:
            if len(_known) >= MEMO_ENTRIES:
                _known.clear()
            _known[data] = known
    return known
