"""The base of every statistics result: a frozen dataclass that turns itself into plain JSON data."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

__all__ = ["Result", "plain"]


def plain(value: Any) -> Any:
    """Return ``value`` as JSON-ready Python data: numpy scalars and arrays become numbers and lists,
    tuples become lists, and NaN or infinite floats become ``None`` (JSON has no NaN)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Result:
    """Mixin for the frozen dataclasses that statistics functions return."""

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (NaN and infinities become ``None``)."""
        return plain(self)
