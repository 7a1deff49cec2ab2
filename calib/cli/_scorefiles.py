"""Reading score files for ``calib stats``: one score per line (.txt) or a table column.

Every bad value is reported with the file and the line (or row) and how to fix it; NaN and infinite
scores are rejected, never silently dropped.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from calib._exceptions import InputError

__all__ = ["read_scores", "read_table"]

TABLE_SUFFIXES = {".csv", ".tsv", ".parquet", ".jsonl", ".ndjson"}


def _suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".zst"):
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _require_file(p: Path) -> None:
    """Raise a one-line InputError unless ``p`` is a regular file (a folder, a FIFO, a missing path)."""
    if p.is_file():
        return
    if p.is_dir():
        raise InputError("is a folder; give the path of a score file", path=str(p))
    if p.exists():
        raise InputError("is not a regular file (a FIFO, socket or device); give the path of a score file",
                         path=str(p))
    raise InputError("no such file; give the path of a score file", path=str(p))


def read_table(path: str | Path) -> pl.DataFrame:
    """Read a CSV/TSV/Parquet/JSON-lines table; raise :class:`InputError` naming the file on failure."""
    p = Path(path)
    _require_file(p)
    suffix = _suffix(p)
    try:
        if suffix == ".parquet":
            return pl.read_parquet(p)
        if suffix in (".jsonl", ".ndjson"):
            return pl.read_ndjson(p)
        return pl.read_csv(p, separator="\t" if suffix == ".tsv" else ",", infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read this {suffix or 'file'} table: {first}", path=str(p)) from exc


def _row_location(path: Path, suffix: str, row: int) -> tuple[int | None, str]:
    """The file line of table row ``row`` (0-based), or a "row N: " prefix where lines mean nothing.

    CSV/TSV: the header is line 1. JSON lines: blank lines are skipped by the reader, so the file is
    scanned for the ``row``-th non-blank line. Parquet has rows only.
    """
    if suffix in (".csv", ".tsv"):
        return row + 2, ""
    if suffix in (".jsonl", ".ndjson") and not str(path).endswith((".gz", ".zst")):
        with path.open("rb") as handle:
            seen = -1
            for number, raw in enumerate(handle, start=1):
                if raw.strip():
                    seen += 1
                    if seen == row:
                        return number, ""
    return None, f"row {row + 1}: "


def column_values(table: pl.DataFrame, column: str, path: Path, *, what: str = "score") -> NDArray[np.float64]:
    """Return ``column`` of ``table`` as finite floats, naming the line of the first bad value."""
    suffix = _suffix(path)
    if column not in table.columns:
        raise InputError(
            f"no column {column!r}; the table has {', '.join(map(repr, table.columns)) or 'no columns'} "
            f"(choose one with --column)",
            path=str(path),
        )
    series = table.get_column(column)
    if series.dtype == pl.String:
        cast = series.cast(pl.Float64, strict=False)
        bad = (cast.is_null() & series.is_not_null()).arg_true()
        if bad.len():
            row = int(bad[0])
            line, prefix = _row_location(path, suffix, row)
            raise InputError(f"{prefix}{what} {series[row]!r} in column {column!r} is not a number",
                             path=str(path), line=line)
        series = cast
    elif not series.dtype.is_numeric():
        raise InputError(f"column {column!r} holds {series.dtype}, not numbers", path=str(path))
    nulls = series.is_null().arg_true()
    if nulls.len():
        line, prefix = _row_location(path, suffix, int(nulls[0]))
        raise InputError(f"{prefix}{what} in column {column!r} is empty; every row needs a number",
                         path=str(path), line=line)
    values = series.cast(pl.Float64).to_numpy()
    finite = np.isfinite(values)
    if not finite.all():
        row = int(np.argmin(finite))
        line, prefix = _row_location(path, suffix, row)
        raise InputError(f"{prefix}{what} {float(values[row])} in column {column!r} is not finite; "
                         f"remove the row or fix the score", path=str(path), line=line)
    return values


def read_scores(path: str | Path, column: str = "score") -> NDArray[np.float64]:
    """Read scores from ``path``: one number per line, or the ``column`` of a CSV/TSV/Parquet/JSONL table.

    Blank lines and lines starting with ``#`` are skipped in plain-text files. An empty file, a
    line that is not a number, and NaN or infinite scores raise :class:`InputError` with the line.
    """
    p = Path(path)
    if _suffix(p) in TABLE_SUFFIXES:
        values = column_values(read_table(p), column, p)
    else:
        _require_file(p)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc.strerror or exc}); check its permissions",
                             path=str(p)) from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); give "
                             "one score per line, or a .csv/.tsv/.parquet/.jsonl table", path=str(p)) from exc
        out: list[float] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                value = float(line)
            except ValueError:
                raise InputError(f"{line[:40]!r} is not a number; write one score per line",
                                 path=str(p), line=number) from None
            if not math.isfinite(value):
                raise InputError(f"score {line!r} is not finite; remove the line or fix the score",
                                 path=str(p), line=number)
            out.append(value)
        values = np.asarray(out, dtype=np.float64)
    if values.size == 0:
        raise InputError("holds no scores; give at least one", path=str(p))
    return values
