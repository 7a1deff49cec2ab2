"""What ``calib check`` asks of a probes study's servers, and what the study measures."""

from __future__ import annotations

from typing import Any

__all__ = ["describe", "needs", "nothing_measured"]


def needs(spec: Any) -> dict[str, list[str]]:
    """Server name -> the capabilities beyond completion: CoDeC scores each sample by teacher forcing."""
    codec = spec.probes is not None and spec.probes.codec is not None
    route = "chat" if spec.generation.route == "chat" else "complete"  # [generation] route: how the panel is asked
    return {name: [route, "scoring"] if codec else [route] for name in spec.models.probed()}


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished probes run tested no generation (its summary.json says), or None."""
    from calib.report.probes.empty import nothing_measured as why

    return why(summary)


def describe(spec: Any) -> dict[str, Any]:
    """What the study measures: its condition labels and the task source."""
    from calib.study.probes.stages import labels

    return {"conditions": [label for label, _, _ in labels(spec)], "tasks": spec.probes.tasks}
