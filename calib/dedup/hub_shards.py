"""Band-table shards stored on the Hugging Face Hub: ``hf://datasets/OWNER/NAME@COMMIT/PATTERN``.

A shard argument of that form names files of a dataset repository at one pinned commit (40 hex digits: a
branch or tag could change the corpus under a finished table): ``PATTERN`` is a file path inside the repository
(``python/train-0.parquet``), a glob over its paths (``python/*.parquet``, matched as ``huggingface_hub``'s
``allow_patterns``: ``*`` also matches ``/``) or a folder (``python``: its Parquet and JSONL files). The files
are resolved by :func:`calib.data.hub.resolve_files` into the HF cache (``HF_HUB_CACHE``), downloaded there
unless ``HF_HUB_OFFLINE=1``, and from then on are ordinary shards whose :class:`~calib.dedup.shards.Shard`
records its origin, ``hub`` = ``hf://datasets/OWNER/NAME@COMMIT/FILE`` of that one file.

A node that does not have the shard's path (a Ray worker on another machine, a search on another machine than
the build) resolves the file again from its origin, in its own HF cache (:func:`local_path`): the commit pins
the bytes, so the file is the one the table was built from.
"""

from __future__ import annotations

import re
from pathlib import Path

from calib._exceptions import InputError

__all__ = ["HUB_PREFIX", "is_hub", "local_path", "parse", "resolve"]

#: The prefix of a shard argument naming files of a Hub dataset repository.
HUB_PREFIX = "hf://datasets/"
_FORM = "hf://datasets/OWNER/NAME@COMMIT/PATTERN"
_URL = re.compile(r"^hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<revision>[^/]*))?(?:/(?P<pattern>.*))?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHARD_SUFFIXES = (".parquet", ".pq", ".jsonl", ".ndjson")


def is_hub(arg: str) -> bool:
    """Whether a shard argument names Hub files (``hf://...``) rather than a local path."""
    return arg.startswith("hf://")


def parse(arg: str) -> tuple[str, str, str]:
    """``(repo, commit, pattern)`` of ``hf://datasets/OWNER/NAME@COMMIT/PATTERN``; a one-line error otherwise."""
    if not arg.startswith(HUB_PREFIX):
        raise InputError(f"only dataset repositories are read: give {_FORM}", path=arg)
    match = _URL.match(arg)
    if match is None:
        raise InputError(f"not a Hub dataset path; give {_FORM}", path=arg)
    repo, revision, pattern = match.group("repo", "revision", "pattern")
    if not revision or not _COMMIT.match(revision):
        got = f"revision {revision!r}" if revision else "no revision"
        raise InputError(f"{got}: pin the commit (40 hex digits) as {HUB_PREFIX}{repo}@COMMIT/...; find it on the "
                         "repository's History page or with `python -c \"import huggingface_hub as h; "
                         f"print(h.HfApi().repo_info('{repo}', repo_type='dataset').sha)\"`", path=arg)
    pattern = (pattern or "").strip("/")
    if not pattern:
        raise InputError(f"no file: name a file, glob or folder of the repository after the commit, as {_FORM}",
                         path=arg)
    return repo, revision, pattern


def _url(repo: str, commit: str, name: str) -> str:
    return f"{HUB_PREFIX}{repo}@{commit}/{name}"


def resolve(arg: str) -> list[tuple[str, Path]]:
    """The files ``arg`` names, each as ``(its hf://datasets/OWNER/NAME@COMMIT/FILE, its path in the HF cache)``.

    Files are fetched into the HF cache unless ``HF_HUB_OFFLINE=1``; a file, revision or repository that cannot be
    found is :func:`calib.data.hub.resolve_files`'s one-line :class:`~calib.InputError` (naming the repository,
    revision and file and the command that fetches it).
    """
    from calib.data.hub import HubCorpus, resolve_files

    repo, commit, pattern = parse(arg)
    if any(c in pattern for c in "*?["):
        found = resolve_files(HubCorpus(repo, commit, allow_patterns=(pattern,)))
    elif pattern.lower().endswith(_SHARD_SUFFIXES):
        found = resolve_files(HubCorpus(repo, commit, files=(pattern,)))
    else:  # a folder of the repository (its Parquet and JSONL files), or a file that is not a shard
        found = resolve_files(HubCorpus(repo, commit, allow_patterns=(pattern, f"{pattern}/*")))
        shards = [(name, local) for name, local in found if name.lower().endswith(_SHARD_SUFFIXES)]
        if not shards:
            names = ", ".join(name for name, _ in found[:3]) + (", ..." if len(found) > 3 else "")
            raise InputError(f"no .parquet or .jsonl file at this commit (only {names}); name a shard, a glob or a "
                             "folder of shards of the repository", path=arg)
        found = shards
    return [(_url(repo, commit, name), local) for name, local in found]


def local_path(hub: str) -> Path:
    """The path in this node's HF cache of the one file ``hub`` (``hf://datasets/OWNER/NAME@COMMIT/FILE``),
    downloaded there unless ``HF_HUB_OFFLINE=1`` (then a file missing from the cache is a one-line error)."""
    from calib.data.hub import HubCorpus, resolve_files

    repo, commit, name = parse(hub)
    ((_, local),) = resolve_files(HubCorpus(repo, commit, files=(name,)))
    return local
