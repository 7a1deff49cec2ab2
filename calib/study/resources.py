"""What a study run holds open: its servers and the organism, made on first use, and the run's counts.

Every study kind's stages reach the servers through :class:`Resources` (``ctx.resources``); the runner
closes them when the run ends and writes :meth:`Resources.manifest` into ``manifest.json``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InvalidParameterError
from calib.study.sections import ORGANISM_MODEL_PREFIX
from calib.study.spec import StudySpec

__all__ = ["ROLES", "Resources", "table_counts"]

#: The two models of a counterfactual study: the one trained on the audited data and the one not.
ROLES = ("target", "reference")


class Resources:
    """Servers and the organism, made on first use (a stage that is skipped never starts a server)."""

    def __init__(self, spec: StudySpec) -> None:
        self.spec = spec
        self._organism: Any = None
        self._servers: dict[str, Any] = {}
        self.capabilities: dict[str, dict[str, Any]] = {}
        self.request_cache: Any = None
        self.cache_path: Path | None = None
        self.counts: dict[str, Any] = {}
        #: Facts a stage states for the manifest beside the counts (e.g. ``generation``: route and prompt rule).
        self.facts: dict[str, Any] = {}

    def organism(self, progress: Any = None) -> Any:
        """The built organism's paths (built once; cached on disk across runs)."""
        if self._organism is None:
            from calib.organism.build import build_organism

            org = self.spec.organism
            if org is None:
                raise InvalidParameterError("this study has no [organism] table")
            self._organism = build_organism(org.preset, seed=org.seed, cache_dir=org.cache_dir, progress=progress)
        return self._organism

    def server(self, name: str) -> Any:
        """The server ``name`` of the spec, built on first use (organism models resolved)."""
        if name not in self._servers:
            from calib.servers import RequestCache, create_server
            from calib.servers.registry import config_keys

            config = dict(self.spec.servers[name])
            model_dir = config.get("model_dir")
            if isinstance(model_dir, str) and model_dir.startswith(ORGANISM_MODEL_PREFIX):
                from calib.organism.chat import organism_model

                # organism:chat-target / chat-reference build the chat variant on first use (cached).
                config["model_dir"] = str(organism_model(self.organism(), model_dir[len(ORGANISM_MODEL_PREFIX):]))
            if "cache" in config_keys(config["kind"]) and self.cache_path is not None:
                if self.request_cache is None:
                    self.request_cache = RequestCache(self.cache_path)
                config["cache"] = self.request_cache
            self._servers[name] = create_server(name, config)
        return self._servers[name]

    def manifest(self, run: Any) -> dict[str, Any]:
        """What the manifest records about this run: servers probed, roles, the organism, counts."""
        info: dict[str, Any] = {"roles": {role: getattr(self.spec.models, role) for role in ROLES},
                                "servers": dict(self.capabilities), "counts": dict(self.counts)}
        if self._organism is not None:
            info["organism"] = {"preset": self.spec.organism.preset, "seed": self.spec.organism.seed,
                                "root": str(self._organism.root)}
        info["counts"].update(table_counts(run))
        info.update(self.facts)
        from calib.study.spending import spent

        spending = spent(self)
        if spending["servers"]:  # what this invocation asked of the servers that count (docs/hosted.md)
            info["spending"] = spending
        return info

    def started_servers(self) -> dict[str, Any]:
        """The servers this run built so far, by name (their provenance goes into the manifest)."""
        return dict(self._servers)

    async def probe(self, name: str) -> dict[str, Any]:
        caps = (await self.server(name).capabilities()).to_dict()
        self.capabilities[name] = caps
        return caps

    async def aclose(self) -> None:
        for server in self._servers.values():
            await server.aclose()
        self._servers.clear()

    def close(self) -> None:
        if self._servers:
            asyncio.run(self.aclose())
        if self.request_cache is not None:
            self.request_cache.close()
            self.request_cache = None


def table_counts(run: Any) -> dict[str, Any]:
    """Counts at every filter, read from the tables that exist."""
    counts: dict[str, Any] = {}
    if run.has_table("samples"):
        samples = run.read_table("samples")
        counts.update(samples=samples.height, members=int((samples["membership"] == "member").sum()),
                      controls=int((samples["membership"] == "control").sum()))
    if run.has_table("generations"):
        gen = run.read_table("generations")
        counts["generated"] = {r: int(gen.filter(pl.col("role") == r)["text"].is_not_null().sum()) for r in ROLES}
        counts["parsed"] = {r: int(gen.filter(pl.col("role") == r)["function"].is_not_null().sum()) for r in ROLES}
    if run.has_table("windows"):
        windows = run.read_table("windows")
        counts.update(windows=int(windows["error"].is_null().sum()),
                      windows_skipped=int(windows["error"].is_not_null().sum()))
    if run.has_table("scores"):
        scores = run.read_table("scores")
        counts.update(scores=int(scores["error"].is_null().sum()), unscored=int(scores["error"].is_not_null().sum()))
    if run.has_table("executions"):
        target = run.read_table("executions").filter(pl.col("role") == "target")
        counts.update(executed=target.height, conclusive=int(target["conclusive"].sum()))
    return counts
