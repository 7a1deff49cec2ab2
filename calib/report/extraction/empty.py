"""Why a finished extraction or census run measured nothing: the report's headline and ``calib study``'s exit 3."""

from __future__ import annotations

from typing import Any

__all__ = ["EMPTY_NOTE", "nothing_measured"]

#: What the headline adds after the cause (the functional report says the same).
EMPTY_NOTE = "Every rate below is undefined; fix the cause and run the study again (finished work is kept)."


def _top(tally: list[dict[str, Any]]) -> str:
    top = max(tally, key=lambda item: item["count"], default=None)
    return "" if top is None else f"; most often: {top['reason']} ({top['count']})"


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished extraction or census run scored no window (its summary.json says), or None."""
    counts = summary.get("counts") or {}
    if summary.get("kind") == "census":
        if counts.get("scored"):
            return None
        return (f"no window was scored ({counts.get('unscored', 0)} unscored, {counts.get('windows_with_error', 0)} "
                "windows could not be cut)")
    groups = counts.get("scores") or []
    if any(g.get("scored") for g in groups):
        return None
    errors = [e for g in groups for e in g.get("errors") or []]
    if errors:
        return f"no window was scored by any model and procedure{_top(errors)}"
    windows = counts.get("windows") or {}
    return f"no window was scored: no sample gave a window{_top(windows.get('errors') or [])}"
