"""The private working directory and ``/tmp`` of the code under test (runs inside the sandbox; stdlib only).

The working directory is reset per input and holds the input state's files (a name ending in ``/`` is an empty
folder); what the code writes there is part of the output state (:func:`files_written`). In the sandbox, what an
input leaves in ``/tmp`` is removed before the next input (:func:`tidy_tmp`).
"""

from __future__ import annotations

import os

from . import canon
from .env import FROZEN_EPOCH

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 200


class TooManyFiles(Exception):
    """More than ``MAX_FILES`` files in the working directory: the output state is not observed."""


def _walk(root: str) -> dict[str, tuple[bytes, str | None]]:
    """Each file's first ``MAX_FILE_BYTES`` bytes, and for a longer file the digest of all of it."""
    found: dict[str, tuple[bytes, str | None]] = {}
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if len(found) >= MAX_FILES:
                raise TooManyFiles(f"more than {MAX_FILES} files")
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            try:
                with open(path, "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
                    whole = None
                    if len(data) > MAX_FILE_BYTES:  # at most RLIMIT_FSIZE (16 MiB)
                        hasher = canon.sha256(data)
                        while chunk := fh.read(1 << 20):
                            hasher.update(chunk)
                        whole = hasher.hexdigest()
                found[rel] = (data, whole)
            except OSError as exc:
                found[rel] = (f"<unreadable: {type(exc).__name__}>".encode(), None)
    return found


def _is_empty(root: str) -> bool:
    """Whether ``root`` is an empty directory (False when it cannot be read: the full reset then runs)."""
    try:
        with os.scandir(root) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def own_workdir(path: str, environ: Any = os.environ, mountinfo: str = "/proc/self/mountinfo") -> bool:
    """Whether the harness may empty ``path`` before each input: the host named it (``CALIB_WORKDIR``: a
    folder of its own, without a sandbox), or it is a tmpfs mount point (the sandbox's ``/work``). Run
    by hand outside a sandbox, the harness would otherwise empty the machine's own ``/work``."""
    if environ.get("CALIB_WORKDIR"):
        return True
    top = None  # the last mount on ``path`` is the one seen there
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) > 4 and fields[4] == path and right:
                    top = right.split()[0]
    except OSError:
        return False
    return top == "tmpfs"


def prepare_workdir(root: str, files: dict[str, str]) -> None:
    """Empty the working directory and write the input state's files.

    Most inputs have no files and leave the folder empty: then only the folder's own times are reset
    (the same end state as the full reset, without walking it twice). The files are written with plain
    descriptors (no file object per file), and the folders and files made get the frozen clock's time;
    the folder is walked for that only when something the emptying could not remove is left there."""
    if not files and _is_empty(root):
        _freeze_times(root)
        os.chdir(root)
        return
    emptied = _clear(root)
    made: list[str] = []
    for name, content in files.items():
        path = os.path.normpath(os.path.join(root, name))
        if not path.startswith(root + os.sep):
            continue  # an input file outside the working directory is ignored
        if name.endswith("/"):  # ``folder/``: an empty folder
            _folders(root, path, made)
            continue
        _folders(root, os.path.dirname(path), made)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)  # as open(path, "w")
        try:
            view = memoryview(content.encode("utf-8"))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        made.append(path)
    # file times are ambient state too: the input's files (and the folder) carry the frozen clock's time
    if emptied:
        for path in made:
            _freeze_times(path)
    else:
        for base, dirs, names in os.walk(root):
            for name in names + dirs:
                _freeze_times(os.path.join(base, name))
    _freeze_times(root)
    os.chdir(root)


def _folders(root: str, path: str, made: list[str]) -> None:
    """Make the folder ``path`` inside ``root`` and those above it that are missing (as ``os.makedirs``), each
    made one added to ``made``."""
    if os.path.isdir(path):
        return
    if path == root:  # gone (code outside a sandbox can remove it): made again, as os.makedirs did
        os.makedirs(path, exist_ok=True)
        return
    _folders(root, os.path.dirname(path), made)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    made.append(path)


def _freeze_times(path: str) -> None:
    try:
        os.utime(path, (FROZEN_EPOCH, FROZEN_EPOCH))
    except OSError:
        pass


def files_written(root: str, files: dict[str, str]) -> dict[str, Any]:
    """Files created, changed or deleted in the working directory, relative to the input's files."""
    out: dict[str, Any] = {}
    if not files and _is_empty(root):  # most inputs: none given, none written (what the walk would find)
        return out
    now = _walk(root)
    for rel, (data, whole) in now.items():
        before = files.get(rel)
        if before is not None and whole is None and before.encode("utf-8") == data:
            continue
        if whole is not None:
            out[rel] = {"truncated": data[:MAX_FILE_BYTES].hex(), "sha256": whole}
            continue
        try:
            out[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            out[rel] = {"bytes": data.hex()}
    for rel in files:
        if rel.endswith("/"):  # an empty folder of the input: reported only when it is gone
            if not os.path.isdir(os.path.join(root, rel)):
                out[rel] = None
        elif rel not in now:
            out[rel] = None
    return out


_TMP_KEPT: list[set[str]] = []  # what ``/tmp`` held at the batch's first input (the harness's, the build's)


def tidy_tmp(root: str = "/tmp") -> None:
    """Per input, in the sandbox (whose ``/tmp`` is the batch's own): remove what earlier inputs left in ``/tmp``.
    A temporary name depends on the names already taken (``mkdtemp()`` draws again past one that exists), so
    an input's output depended on the inputs run before it in the same batch, and x's replay, in a batch of
    its own, saw other names: diskcache's ``FanoutCache.index`` was ``nondeterministic`` on 6 inputs of 10."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    if not _TMP_KEPT:
        _TMP_KEPT.append(set(names))
        return
    for name in names:
        if name not in _TMP_KEPT[0]:
            remove(os.path.join(root, name))


def remove(path: str) -> None:
    """Remove a file or a folder with what it holds (what cannot be removed stays)."""
    if os.path.isdir(path) and not os.path.islink(path):
        _clear(path)
        _unlink(path, folder=True)
    else:
        _unlink(path)


def _clear(root: str) -> bool:
    """Remove what the folder ``root`` holds, deepest first (what cannot be removed stays); whether it is empty."""
    emptied = True
    for base, dirs, names in os.walk(root, topdown=False):
        for name in names:
            emptied = _unlink(os.path.join(base, name)) and emptied
        for name in dirs:
            emptied = _unlink(os.path.join(base, name), folder=True) and emptied
    return emptied


def _unlink(path: str, *, folder: bool = False) -> bool:
    try:  # a link to a folder is among os.walk's folders: the link goes, not what it points to
        os.rmdir(path) if folder and not os.path.islink(path) else os.unlink(path)
    except OSError:
        return False
    return True
