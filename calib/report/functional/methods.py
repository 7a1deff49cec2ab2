"""The facts of the methods section, taken from the resolved spec and the manifest.

Only the keys named here are copied from a server table (never its secrets: a spec names the
environment variable holding a key, and even that name is left out).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from calib._version import __version__
from calib.executors.validity import criteria_of
from calib.report.functional.samples import ROLES
from calib.report.record import run_record
from calib.report.run import RunData, setting

__all__ = ["methods_facts", "server_names"]

_SERVER_KEYS = ("kind", "model", "revision", "model_dir")


def _model(run: RunData, role: str) -> dict[str, Any]:
    name = setting(run.manifest, f"roles.{role}") or setting(run.spec, f"models.{role}")
    caps = setting(run.manifest, f"servers.{name}", {}) if name else {}
    table = setting(run.spec, f"servers.{name}", {}) if name else {}
    used = sorted(set(run.generations.filter(pl.col("role") == role)["model"].drop_nulls().to_list()))
    return {"role": role, "server": name, "kind": caps.get("kind") or table.get("kind"),
            "model": caps.get("model") or table.get("model") or table.get("model_dir"),
            "revision": table.get("revision") or caps.get("revision"),
            "server_version": caps.get("server_version"), "max_context": caps.get("max_context"),
            "models_in_generations": used}


def _context_tokens(run: RunData) -> dict[str, float] | None:
    if "prompt_context_tokens" not in run.samples.columns:
        return None
    tokens = run.samples["prompt_context_tokens"].drop_nulls()
    if not len(tokens):
        return None
    return {"min": int(tokens.min()), "mean": float(tokens.mean()), "max": int(tokens.max())}


def _stages(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    stages = manifest.get("stages") or {}
    if not isinstance(stages, dict):
        return []
    return [{"stage": name, "rows": facts.get("rows"), "seconds": facts.get("seconds"),
             "fingerprint": facts.get("fingerprint"), "finished_at": facts.get("finished_at")}
            for name, facts in stages.items() if isinstance(facts, dict)]


def _dropped(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Functions extraction dropped, per reason (manifest ``counts.dropped``), most first."""
    dropped = setting(manifest, "counts.dropped", {})
    if not isinstance(dropped, dict):
        return []
    items = [(str(k), int(v)) for k, v in dropped.items() if isinstance(v, int | float)]
    return [{"reason": k, "count": v} for k, v in sorted(items, key=lambda kv: (-kv[1], kv[0]))]


def _server_entry(run: RunData, name: str | None) -> dict[str, Any] | None:
    if name is None:
        return None
    table = setting(run.spec, f"servers.{name}", {})
    caps = setting(run.manifest, f"servers.{name}", {})
    return {"server": name, **{k: table.get(k) for k in _SERVER_KEYS if table.get(k) is not None},
            **({"model": caps["model"]} if caps.get("model") else {})}


def server_names(value: Any) -> list[str]:
    """``measure.judge_server`` or ``measure.embedding_server`` as a list: one name, a list of them, or none."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(name) for name in value]


def _metrics(run: RunData) -> dict[str, Any]:
    """The metrics measured and their servers: ``judge`` and ``embedding`` (the first server of each, as before
    a spec could name several), ``judges`` and ``embeddings`` (every server, each with the ``suffix`` its
    metrics' names carry: none for the first, ``@NAME`` for the others)."""
    out: dict[str, Any] = {"measured": list(setting(run.spec, "measure.metrics", []))}
    for role, key in (("judge", "measure.judge_server"), ("embedding", "measure.embedding_server")):
        names = server_names(setting(run.spec, key))
        entries = [{**(_server_entry(run, name) or {}), "suffix": "" if i == 0 else f"@{name}"}
                   for i, name in enumerate(names)]
        out[role] = _server_entry(run, names[0]) if names else None
        out[f"{role}s"] = entries
    return out


def _budgets(run: RunData) -> list[dict[str, Any]]:
    """Per role how completion budgets were set: ahead with the server's tokenizer, or after its refusals."""
    lowered = setting(run.manifest, "counts.max_tokens_lowered", {}) or {}
    out = []
    for role in ROLES:
        name = setting(run.spec, f"models.{role}")
        caps = setting(run.manifest, f"servers.{name}", {}) if name else {}
        if not name or not caps:
            continue
        out.append({"role": role, "tokenizer": bool(caps.get("tokenize")), "max_context": caps.get("max_context"),
                    "lowered_after_refusal": int(lowered.get(role, 0))})
    return out


def _route(run: RunData) -> dict[str, Any]:
    """How the models were asked: ``route`` (complete | chat) and the chat route's prompt-selection ``rule``.

    Read from the manifest's ``generation`` (what the generate stage used; its rule's name, version,
    SHA-256, description, reply mode), else from the spec (a run from before calib recorded it: the
    completion route).
    """
    recorded = run.manifest.get("generation")
    if isinstance(recorded, dict) and recorded.get("route") in ("complete", "chat"):
        return {"route": recorded["route"], "rule": recorded.get("rule")}
    return {"route": setting(run.spec, "generation.route", "complete"), "rule": None}


def methods_facts(run: RunData, analyze: dict[str, Any]) -> dict[str, Any]:
    """Everything the methods section states, as JSON data (see docs/report.md, "Methods")."""
    spec, manifest = run.spec, run.manifest
    study = {k: setting(manifest, f"study.{k}", setting(spec, f"study.{k}")) for k in ("name", "kind", "description")}
    temperature = float(setting(spec, "generation.temperature", 0.0))
    executors = sorted(set(run.executions["executor"].drop_nulls().to_list()))
    samples = run.executions.group_by("executor").agg(pl.col("sample_id").n_unique().alias("n"))
    per_executor = dict(zip(samples["executor"].to_list(), samples["n"].to_list()))
    # an executor kind that measured no line coverage on any sample did not apply the criterion (a run made
    # before the Java, Rust and Go executors measured it; or every sample's coverage unavailable)
    cov = run.executions["coverage"].cast(pl.Float64).fill_nan(None) if "coverage" in run.executions.columns \
        else pl.Series([None] * run.executions.height, dtype=pl.Float64)
    measured = set(run.executions.filter(cov.is_not_null())["executor"].drop_nulls().to_list())
    criteria = {e: [c for c in criteria_of(e) if c != "coverage" or e in measured] for e in executors}
    return {
        "study": study,
        "calib_version": manifest.get("calib_version"),
        "report_calib_version": __version__,
        "started_at": manifest.get("started_at"),
        "finished_at": manifest.get("finished_at"),
        "models": [_model(run, role) for role in ROLES],
        "organism": manifest.get("organism") if "organism" in manifest else spec.get("organism"),
        "decoding": {"strategy": "greedy" if temperature == 0.0 else "sampling", "temperature": temperature,
                     "max_tokens": setting(spec, "generation.max_tokens"),
                     "stop": list(setting(spec, "generation.stop", [])), "budgets": _budgets(run),
                     **_route(run)},
        "prompt": {"max_context_tokens": setting(spec, "prompt.max_context_tokens"),
                   "context_tokens": _context_tokens(run), "tokenizer": manifest.get("prompt_tokenizer")},
        "data": {**{k: setting(spec, f"data.{k}") for k in ("source", "paths", "format", "language", "min_lines",
                                                            "max_lines", "limit", "kinds")},
                 "dropped": _dropped(manifest)},
        "execution": {"executor": setting(spec, "execute.executor"), "executors_in_table": executors,
                      # the validity criteria each executor applied (calib.executors.validity), and the samples
                      # judged without line coverage (an executor that measured it on none), counted apart
                      "criteria": [{"executor": e, "applied": c} for e, c in criteria.items()],
                      "samples_without_coverage": [{"executor": e, "samples": int(per_executor.get(e, 0))}
                                                   for e, c in criteria.items() if "coverage" not in c],
                      **{k: setting(spec, f"execute.{k}") for k in ("n_inputs", "min_valid", "coverage",
                                                                    "min_distinct", "input_timeout")},
                      "tau_func": analyze["tau_func"]},
        "metrics": _metrics(run),
        "analysis": dict(analyze),
        "manifest_counts": manifest.get("counts"),
        "stages": _stages(manifest),
        "run_record": run_record(manifest),
    }
