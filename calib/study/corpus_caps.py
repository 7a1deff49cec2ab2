"""The caps on one corpus document as spec keys: ``max_file_bytes`` and ``max_line_chars`` of ``[data]`` and
``[dedup]`` (docs/study-spec.md).

They are the caps of ``calib extract`` (``--max-file-bytes``, ``--max-line-chars``; docs/data.md), with the
same defaults: a document over ``max_file_bytes`` bytes is dropped unread (``too_large``), one with a line
over ``max_line_chars`` characters is dropped before it is parsed (``long_line``). A study counts these
drops with the others (the manifest's ``counts.dropped``, ``counts.dedup_dropped``) and records each such
document in ``events.jsonl`` (``document_dropped``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from calib.data.extract import DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_LINE_CHARS

__all__ = ["CAP_MAX", "DOCUMENT_REASONS", "CorpusCaps", "count_dropped"]

#: Upper bound of both caps (10^9 bytes or characters): a document is held in memory whole.
CAP_MAX = 1_000_000_000

#: Drop reasons that say a document was not read or not parsed because of the caps (or could not be read):
#: each such document is named in an event, as ``calib extract`` names its dropped files.
DOCUMENT_REASONS = frozenset({"too_large", "long_line", "unreadable"})


class CorpusCaps(BaseModel):
    """The two caps, as keys of a spec section that reads a corpus (mixed into ``[data]`` and ``[dedup]``)."""

    max_file_bytes: int = Field(default=DEFAULT_MAX_DOCUMENT_BYTES, ge=1, le=CAP_MAX)
    max_line_chars: int = Field(default=DEFAULT_MAX_LINE_CHARS, ge=1, le=CAP_MAX)


def count_dropped(dropped: dict[str, int], reasons: Any, source: str,
                  event: Callable[..., None] | None = None) -> None:
    """Add ``reasons`` ({reason: count}) to ``dropped``; a whole document dropped by a cap goes to ``event``."""
    for reason, n in dict(reasons).items():
        dropped[reason] = dropped.get(reason, 0) + n
        if event is not None and reason in DOCUMENT_REASONS:
            event("document_dropped", source=source, reason=reason)
