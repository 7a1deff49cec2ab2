"""Corpora on the Hugging Face Hub, fetched into the normal HF cache and read like local files.

A :class:`HubCorpus` names a dataset repository, a pinned revision (a commit hash, so a study always
reads the same bytes) and either a list of files or ``allow_patterns`` globs. The files are resolved
with ``huggingface_hub`` (``hf_hub_download`` / ``snapshot_download``) into the HF cache
(``HF_HUB_CACHE``, by default ``~/.cache/huggingface/hub``). With ``HF_HUB_OFFLINE=1`` nothing is
fetched: a study runs from the cache, and a file missing from it is an :class:`~calib.InputError` that
names the repository, revision and file and the command that fetches it.

The resolved files are read by :mod:`calib.data.sources` with the same :class:`CorpusSpec` options
(format, content and metadata columns, chunk size); documents are named ``hf:repo@rev/file#row=17``.

Training corpora of open code models that fit this reader (check each dataset's card and licence
before use; pin the commit you audit):

- ``LLM360/CrystalCoderDatasets`` — the CrystalCoder training data; its ``phase3`` folder holds the
  phase-3 mix, whose Python subset is the member pool for CrystalCoder.
- ``bigcode/starcoderdata`` — StarCoderData, Parquet files per language (``python/*.parquet``), code
  in the ``content`` column and the file path in ``max_stars_repo_path`` (so set
  ``metadata_columns={"path": "max_stars_repo_path", "repo": "max_stars_repo_name"}``); gated: accept
  its terms on the Hub and log in (``hf auth login``) before the first download.
- The OLMo 3 mid-training mix from AI2 (Dolma 3 "Dolmino"), whose code sources include the CraneCode
  and Stack-Edu subsets; look up the repository and commit on the Hub and point ``allow_patterns`` at
  the code subset's files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import filter_repo_objects

from calib._exceptions import InputError, InvalidParameterError
from calib.data.sources import CorpusSpec, Document, iter_file

__all__ = ["HubCorpus", "iter_hub_documents", "resolve_files"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO_TYPES = ("dataset", "model", "space")


@dataclass(frozen=True)
class HubCorpus:
    """A corpus stored in a Hugging Face Hub repository.

    Parameters
    ----------
    repo_id
        ``"org/name"``.
    revision
        The commit hash (40 hex digits) to read; a branch or tag would let the corpus change under a
        finished study.
    files
        Paths of files inside the repository. Give these or ``allow_patterns``.
    allow_patterns
        Glob patterns over the repository's paths (``"python/*.parquet"``), as in
        ``huggingface_hub.snapshot_download``.
    repo_type
        ``"dataset"`` (default), ``"model"`` or ``"space"``.
    cache_dir
        The HF cache to use; ``None`` uses ``HF_HUB_CACHE`` or the library default.
    """

    repo_id: str
    revision: str
    files: tuple[str, ...] = ()
    allow_patterns: tuple[str, ...] = ()
    repo_type: str = "dataset"
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("files", "allow_patterns"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        if not self.repo_id or self.repo_id.count("/") != 1:
            raise InvalidParameterError(f"repo_id must be 'org/name'; got {self.repo_id!r}")
        if not _COMMIT.match(self.revision or ""):
            raise InvalidParameterError(
                f"revision must be a commit hash (40 hex digits) so the corpus is pinned; got {self.revision!r}; "
                f"find it with `python -c \"import huggingface_hub as h; print(h.HfApi().repo_info('{self.repo_id}', "
                f"repo_type='{self.repo_type}').sha)\"` or on the repository's History page"
            )
        if bool(self.files) == bool(self.allow_patterns):
            raise InvalidParameterError("give exactly one of files or allow_patterns (which files of the repo to read)")
        if self.repo_type not in _REPO_TYPES:
            raise InvalidParameterError(f"repo_type must be one of {', '.join(_REPO_TYPES)}; got {self.repo_type!r}")

    @property
    def label(self) -> str:
        """``hf:org/name@<revision>``, the prefix of every document source."""
        return f"hf:{self.repo_id}@{self.revision}"


def resolve_files(corpus: HubCorpus) -> list[tuple[str, Path]]:
    """Fetch (or find in the cache) the corpus files: ``(path in the repo, local path)`` in repo order.

    Honours ``HF_HUB_OFFLINE`` at call time; raises :class:`~calib.InputError` for a file, repository or
    revision that cannot be found, with the command that fetches it.
    """
    offline = _offline()
    cache_dir = _cache_dir(corpus)
    if corpus.files:
        resolved = []
        for name in corpus.files:
            try:
                local = hf_hub_download(
                    corpus.repo_id,
                    name,
                    repo_type=corpus.repo_type,
                    revision=corpus.revision,
                    cache_dir=cache_dir,
                    local_files_only=offline,
                )
            except (HfHubHTTPError, OSError, ValueError) as exc:
                raise _translate(exc, corpus, name, cache_dir, offline) from exc
            resolved.append((name, Path(local)))
        return resolved
    what = "files matching " + " ".join(corpus.allow_patterns)
    try:
        folder = snapshot_download(
            corpus.repo_id,
            repo_type=corpus.repo_type,
            revision=corpus.revision,
            allow_patterns=list(corpus.allow_patterns),
            cache_dir=cache_dir,
            local_files_only=offline,
        )
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise _translate(exc, corpus, what, cache_dir, offline) from exc
    root = Path(folder)
    # The snapshot folder may hold files fetched for other patterns; keep only the ones asked for.
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    names = list(filter_repo_objects(names, allow_patterns=list(corpus.allow_patterns)))
    if not names:
        raise InputError(
            f"{corpus.label}: no {what} in the cached snapshot {root}; "
            + (_fetch_hint(corpus, corpus.allow_patterns) if offline else "check the patterns against the repo's files")
        )
    return [(name, root / name) for name in names]


def iter_hub_documents(corpus: HubCorpus, spec: CorpusSpec | None = None) -> Iterator[Document]:
    """Yield the documents of a Hub corpus, read with ``spec``'s options (its ``paths`` are ignored).

    Files are resolved first (so a missing one fails before any document is read); ``spec.extensions``
    filters them. Sources read ``hf:org/name@<revision>/<file>`` (``#row=N`` for table rows).
    """
    spec = spec or CorpusSpec()
    files = resolve_files(corpus)
    if spec.extensions:
        files = [(name, local) for name, local in files if name.lower().endswith(spec.extensions)]
    return _iter(corpus, spec, files)


def _iter(corpus: HubCorpus, spec: CorpusSpec, files: list[tuple[str, Path]]) -> Iterator[Document]:
    for name, local in files:
        yield from iter_file(local, spec, name=f"{corpus.label}/{name}", path=name)


def _offline() -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once, at import; reading it again here lets a study (or a
    # test) switch to offline mode after the library was imported.
    value = os.environ.get("HF_HUB_OFFLINE", "")
    return constants.HF_HUB_OFFLINE or value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _cache_dir(corpus: HubCorpus) -> str | None:
    # Same reason as _offline: HF_HUB_CACHE set after import must still be honoured.
    return corpus.cache_dir or os.environ.get("HF_HUB_CACHE") or None


def _fetch_hint(corpus: HubCorpus, names: tuple[str, ...] | list[str]) -> str:
    what = " ".join(names) if corpus.files else "--include " + " ".join(f"'{p}'" for p in names)
    return (
        "run once online (unset HF_HUB_OFFLINE) or fetch it with "
        f"`hf download {corpus.repo_id} {what} --repo-type {corpus.repo_type} --revision {corpus.revision}` "
        "(`huggingface-cli download` with the same arguments on older huggingface_hub)"
    )


def _translate(exc: Exception, corpus: HubCorpus, what: str, cache_dir: str | None, offline: bool) -> InputError:
    cache = cache_dir or constants.HF_HUB_CACHE
    names = list(corpus.files) if corpus.files else list(corpus.allow_patterns)
    if isinstance(exc, LocalEntryNotFoundError):
        reason = "HF_HUB_OFFLINE=1" if offline else "the Hub could not be reached"
        return InputError(
            f"{corpus.label}: {what} is not in the Hugging Face cache ({cache}) and {reason}; "
            + _fetch_hint(corpus, [what] if corpus.files else names)
        )
    if isinstance(exc, GatedRepoError):
        return InputError(
            f"{corpus.label}: the repository is gated; accept its terms on the Hub, then log in with `hf auth login`"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return InputError(
            f"{corpus.label}: no {corpus.repo_type} repository {corpus.repo_id!r} (or it is private); "
            "check repo_id and repo_type, or log in with `hf auth login`"
        )
    if isinstance(exc, RevisionNotFoundError):
        return InputError(f"{corpus.label}: the repository has no revision {corpus.revision}; check revision")
    if isinstance(exc, EntryNotFoundError):
        return InputError(f"{corpus.label}: the repository has no file {what} at this revision; check files")
    return InputError(f"{corpus.label}: cannot fetch {what} ({' '.join(str(exc).split())[:200]})")
