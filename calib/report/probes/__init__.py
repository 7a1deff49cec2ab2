"""The ``probes`` study's report: pass@k under perturbations and isomorphisms, opcode divergence, CoDeC.

:func:`~calib.report.probes.summary.probes_report` derives the numbers from the run's tables and
:mod:`calib.report.probes.blocks` lays them out (docs/report.md, docs/probes.md).
"""

from __future__ import annotations

from calib.report.probes.summary import probes_report

__all__ = ["probes_report"]
