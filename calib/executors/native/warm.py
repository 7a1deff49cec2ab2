"""What a language's builds share, made once (docs/native-executors.md, "Build cache").

C++ spends most of a build reading ``<bits/stdc++.h>`` (about 1.2 s of CPU per translation unit, two
units per variant, four variants per sample). A :class:`Warm` recipe makes, once per toolchain, flags and
harness source, a directory holding what every build of the language can reuse — C++: the precompiled
``bits/stdc++.h`` for the function's unit (normal and coverage flags) and the compiled harness objects.
It is made in the *build* sandbox from calib's own files and the system headers only (no code under
test), in a fresh host directory renamed into place when complete
(``~/.cache/calib/native-warm/<language>-<key>``), and every later build binds it read-only at ``/warm``
(``CALIB_WARM`` in its environment names it). A build that finds nothing there builds as before, so a
failed or absent cache costs time, never a result.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from calib.executors.native.language import Tools, Warm
from calib.executors.native.sandbox import Profile, build, inside
from calib.executors.sandbox import Sandbox

__all__ = ["READY", "Warm", "cache_root", "prepared"]

#: The file written last into a complete cache directory.
READY = "ready"
_DONE: dict[str, str | None] = {}  # key: the directory, or None when making it failed (not tried again)
_LOCKS: dict[str, asyncio.Lock] = {}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base, "calib", "native-warm")


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


async def prepared(sb: Sandbox, tools: Tools, language: str, warm: Warm, slots: asyncio.Semaphore,
                   memory: int) -> str | None:
    """The language's shared build directory (host path), made now if needed; None when it cannot be."""
    name = f"{language}-{warm.key(tools)}"
    if name in _DONE:
        return _DONE[name]
    lock = _LOCKS.setdefault(name, asyncio.Lock())
    async with lock:
        if name in _DONE:
            return _DONE[name]
        final = cache_root() / name
        if not (final / READY).is_file():
            final.parent.mkdir(parents=True, exist_ok=True)
            work = tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent)
            ok = await _make(sb, tools, warm, work, slots, memory)
            if ok and not (final / READY).is_file():
                shutil.rmtree(final, ignore_errors=True)
                os.replace(work, final)
            else:
                shutil.rmtree(work, ignore_errors=True)
        _DONE[name] = str(final) if (final / READY).is_file() else None
        return _DONE[name]


async def _make(sb: Sandbox, tools: Tools, warm: Warm, work: str, slots: asyncio.Semaphore, memory: int) -> bool:
    for file, text in warm.files().items():
        Path(work, file).write_text(text, encoding="utf-8")
    where = inside(sb, work, "/warm")
    profile = Profile(memory_bytes=memory, cpu_seconds=300, tmpfs_bytes=512 << 20, file_bytes=512 << 20,
                      open_files=1024, seccomp=False, ro=tools.ro, binds=((work, "/warm", True), *tools.build_binds),
                      env=tools.build_env)
    async with slots:
        done = await build(sb, profile, warm.argv(tools, where), wall_seconds=300.0)
    if done.returncode != 0 or done.timed_out:
        return False
    Path(work, READY).write_text("", encoding="utf-8")
    os.chmod(work, 0o755)  # mkdtemp makes it 0700: the sandbox's user (nobody, as root) reads it
    return True
