"""Atomic file writes shared by the run directory and the report.

A file is written to a temporary name in its folder, flushed to disk and renamed into place, so a
process killed at any moment (even ``kill -9``) leaves the old file or the new one, never half of one.
The new file gets the permissions any file the user writes gets (``0666 & ~umask``), not the private
``0600`` of :func:`tempfile.mkstemp`.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text"]


@functools.cache
def _umask() -> int:
    """The process umask: read from /proc where it can be (os.umask can only be read by setting it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[str], None], *, suffix: str = "") -> None:
    """Call ``write(temporary_path)`` and rename the result to ``path`` (for writers that take a path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        os.close(fd)
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line endings) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
