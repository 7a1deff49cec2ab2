"""The run directory: tables written atomically and per chunk, the manifest, the event log.

Layout (docs/architecture.md "Run directory")::

    RUN/study.toml            the spec as written
    RUN/spec.json             the resolved spec
    RUN/manifest.json         what ran: versions, servers, counts, each finished stage's fingerprint
    RUN/events.jsonl          progress, retries and per-sample errors, one JSON object a line
    RUN/cache.sqlite          server requests and metric values (calib.servers.cache.RequestCache)
    RUN/tables/NAME.parquet   the tables (calib.study.tables); each records the fingerprint of the stage
                              that wrote it (Parquet key ``calib.fingerprint``), the manifest its sha256
    RUN/chunks/STAGE-FP/      a running stage's finished chunks (removed once its table is written)
    RUN/report/               report.html, report.md, summary.json, figures/

Every file is written to a temporary name and renamed into place, so a run killed at any moment
(even ``kill -9``) leaves whole files only: a chunk is either done or absent. What happens to the
files afterwards (a disk filling up, a copy cut short, an editor) is checked when a stage would be
skipped: :meth:`RunDir.check_table` compares a table with the sha256 recorded when it was written and
reads its Parquet footer, and :meth:`RunDir.read_manifest` reports a manifest that is not a JSON object.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from calib._files import atomic_write, atomic_write_bytes

__all__ = ["FINGERPRINT_KEY", "RunDir", "atomic_write_parquet", "file_sha256", "now_iso"]

#: The Parquet key-value metadata key holding the fingerprint of the stage that wrote a table.
FINGERPRINT_KEY = "calib.fingerprint"


def now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def atomic_write_parquet(path: Path, frame: pl.DataFrame, metadata: dict[str, str] | None = None) -> None:
    """Write ``frame`` as Parquet to ``path`` atomically (temporary file + rename).

    The bytes depend on the frame (and ``metadata``) alone: Parquet files hold no write time.
    """
    atomic_write(path, lambda target: frame.write_parquet(target, metadata=metadata), suffix=".parquet")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class RunDir:
    """One study's run directory (created on first use)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.tables = self.root / "tables"
        self.chunks = self.root / "chunks"
        self.report = self.root / "report"
        self.cache_path = self.root / "cache.sqlite"
        self._lock = threading.Lock()

    # -- tables ----------------------------------------------------------------------------------
    def table_path(self, name: str) -> Path:
        return self.tables / f"{name}.parquet"

    def has_table(self, name: str) -> bool:
        return self.table_path(name).is_file()

    def read_table(self, name: str) -> pl.DataFrame:
        return pl.read_parquet(self.table_path(name))

    def write_table(self, name: str, frame: pl.DataFrame, *, fingerprint: str | None = None) -> str:
        """Write the table (with the fingerprint of the stage that computed it); returns the file's sha256."""
        metadata = {FINGERPRINT_KEY: fingerprint} if fingerprint is not None else None
        atomic_write_parquet(self.table_path(name), frame, metadata)
        return file_sha256(self.table_path(name))

    def check_table(self, name: str, sha256: str | None = None) -> str | None:
        """Why the table cannot be trusted (``None`` when it is intact).

        With ``sha256`` (recorded when it was written) the file must have exactly that content;
        without, its Parquet footer must read.
        """
        path = self.table_path(name)
        if not path.is_file():
            return "it is missing"
        if sha256 is not None:
            found = file_sha256(path)
            return None if found == sha256 else (f"its sha256 {found[:12]}… differs from the {sha256[:12]}… "
                                                 "recorded when it was written")
        try:
            pq.read_metadata(path)
        except (OSError, ValueError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(".")
            return f"it is not a readable Parquet file ({first})"
        return None

    def table_fingerprint(self, name: str) -> str | None:
        """The fingerprint recorded in the table's Parquet metadata (``None``: absent, unreadable or none)."""
        try:
            metadata = pq.read_metadata(self.table_path(name)).metadata or {}
        except (OSError, ValueError):
            return None
        value = metadata.get(FINGERPRINT_KEY.encode())
        return value.decode("utf-8", "replace") if value is not None else None

    # -- chunks of a running stage ----------------------------------------------------------------
    def chunk_folder(self, stage: str, fingerprint: str) -> Path:
        return self.chunks / f"{stage}-{fingerprint}"

    def done_chunks(self, stage: str, fingerprint: str) -> dict[int, Path]:
        """Finished chunks of ``stage`` under ``fingerprint``: chunk index -> file."""
        folder = self.chunk_folder(stage, fingerprint)
        if not folder.is_dir():
            return {}
        return {int(p.stem.split("-")[1]): p for p in folder.glob("chunk-*.parquet")}

    def write_chunk(self, stage: str, fingerprint: str, index: int, frame: pl.DataFrame) -> None:
        atomic_write_parquet(self.chunk_folder(stage, fingerprint) / f"chunk-{index:06d}.parquet", frame)

    def clear_chunks(self, stage: str) -> None:
        """Remove every chunk folder of ``stage`` (its table is written, or its fingerprint changed)."""
        if self.chunks.is_dir():
            for folder in self.chunks.glob(f"{stage}-*"):
                shutil.rmtree(folder, ignore_errors=True)

    # -- manifest and spec ------------------------------------------------------------------------
    def read_manifest(self) -> tuple[dict[str, Any], str | None]:
        """``manifest.json`` and, when it cannot be used, why (the manifest is then empty).

        A damaged manifest is kept beside as ``manifest.json.damaged`` (the next one overwrites it).
        """
        path = self.root / "manifest.json"
        if not path.is_file():
            return {}, None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            return {}, f"unreadable ({exc.strerror or exc})"
        except (UnicodeDecodeError, ValueError) as exc:
            problem = f"not valid JSON ({exc})"
        else:
            if not isinstance(data, dict):
                problem = f"a JSON {type(data).__name__}, not an object"
            elif not all(isinstance(data.get(key, {}), dict) for key in ("stages", "tables", "checksums")):
                problem = "its stages, tables or checksums are not JSON objects"
            elif not all(isinstance(v, dict) for v in data.get("stages", {}).values()):
                problem = "a stage entry is not a JSON object"
            else:
                return data, None
        shutil.copyfile(path, self.root / "manifest.json.damaged")
        return {}, f"{problem}; kept as manifest.json.damaged"

    def read_json(self, name: str) -> dict[str, Any]:
        path = self.root / name
        if not path.is_file():
            return {}
        return json.loads(path.read_text(encoding="utf-8"))

    def write_json(self, name: str, data: Any) -> None:
        text = json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n"
        atomic_write_bytes(self.root / name, text.encode("utf-8"))

    # -- events -----------------------------------------------------------------------------------
    def event(self, event: str, **fields: Any) -> None:
        """Append one event (``{"time", "event", ...}``) to events.jsonl; one line, written whole."""
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": now_iso(), "t": round(time.time(), 3), "event": event, **fields},
                          default=str, ensure_ascii=False) + "\n"
        with self._lock, open(self.root / "events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line)

    def events(self) -> Iterator[dict[str, Any]]:
        path = self.root / "events.jsonl"
        if not path.is_file():
            return
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)

    def wipe(self) -> None:
        """Remove everything calib wrote here (``--fresh``)."""
        for name in ("tables", "chunks", "report"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        for name in ("manifest.json", "spec.json", "study.toml", "events.jsonl", "cache.sqlite",
                     "cache.sqlite-wal", "cache.sqlite-shm"):
            (self.root / name).unlink(missing_ok=True)
