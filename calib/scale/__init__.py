"""Beyond one machine (docs/scale.md): the Ray runner of a study's stages and the check of a Ray cluster.

calib runs on one machine without Ray (the local runner, the default). With ``[runner] kind = "ray"`` the
stages that map over samples with no server to ask (execute with the sandbox and native executors, measure's
offline metrics) send their chunks to a Ray cluster as tasks; the chunks come back as the same Parquet chunk
files, so resume, caching and the report do not change. ``calib cluster check ADDRESS`` says what a cluster
offers before a study uses it. Ray is imported only here, and only when a Ray runner or check is asked for.
"""

from __future__ import annotations

from calib.scale.connect import RAY_EXTRA, connect, disconnect, import_ray

__all__ = ["RAY_EXTRA", "connect", "disconnect", "import_ray"]
