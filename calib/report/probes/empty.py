"""Why a finished probes run measured nothing: the report's headline and ``calib study``'s exit 3."""

from __future__ import annotations

from typing import Any

__all__ = ["nothing_measured"]


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished probes run tested no generation (its summary.json says), or None."""
    counts = summary.get("counts") or {}
    if counts.get("tested", counts.get("test_results")):  # missing generations (failed, overflow) are not tested
        return None
    text = f"no generation was tested ({counts.get('generations', 0)} generations, {counts.get('prompts', 0)} prompts)"
    failed = [e for e in summary.get("generation_errors") or [] if isinstance(e, dict) and e.get("errors")]
    if failed:
        facts = max(failed, key=lambda item: item.get("with_error", 0))
        top = facts["errors"][0]
        text += f"; {facts['model']}'s generations failed, most often with: {top['error']} ({top['count']})"
    return text
