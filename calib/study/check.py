"""``calib check``: validate a spec, probe every server it names, say what will run and how big it is."""

from __future__ import annotations

from typing import Any

from calib.study.kinds import study_kind
from calib.study.spec import ORGANISM_MODEL_PREFIX, StudySpec

__all__ = ["check", "needs", "top_logprobs_needed", "unmatched_globs", "verify_servers"]


def top_logprobs_needed(spec: StudySpec) -> int:
    """Alternatives per position the scoring servers must return (top-k scoring needs k, greedy needs 1)."""
    if spec.study.kind not in ("extraction", "census"):
        return 0
    procedures = spec.extraction.procedures
    if "top_k" in procedures:
        return spec.extraction.top_k
    return 1 if any(p in procedures for p in ("greedy",)) else 0


def needs(spec: StudySpec) -> dict[str, list[str]]:
    """Server name -> the capabilities the study needs from it (``calib.servers.base.Capabilities`` fields).

    The study kind's record says (``StudyKind.needs``: each built-in kind's ``check`` module); a kind
    that does not needs completion, of its target and reference models.
    """
    record = study_kind(spec.study.kind)
    if record.needs is not None:
        return {name: list(capabilities) for name, capabilities in record.needs(spec).items()}
    return {name: ["complete"] for name in (spec.models.target, spec.models.reference) if name is not None}


def _measures(spec: StudySpec) -> dict[str, Any]:
    """What the study measures, as its kind describes it (``StudyKind.describe``): metrics (functional),
    procedures (extraction, census), condition labels and the task source (probes)."""
    describe = study_kind(spec.study.kind).describe
    return {} if describe is None else dict(describe(spec))


def _organism_model(spec: StudySpec, name: str) -> bool:
    model_dir = spec.servers[name].get("model_dir")
    return isinstance(model_dir, str) and model_dir.startswith(ORGANISM_MODEL_PREFIX)


async def verify_servers(spec: StudySpec, resources: Any) -> None:
    """Before any stage works: probe every server the study needs and stop if one lacks something.

    Every server of :func:`needs` is probed through ``resources`` (its capabilities are kept for the
    manifest and the stages), except a model of the study's organism that is not built yet (calib's
    own embedded server, built by the first stage).

    Raises
    ------
    CapabilityError
        One line naming every server that lacks a capability, each capability it lacks and the remedy.
    ServerError
        When a server cannot be reached (one line: which, and how to fix it).
    """
    from calib.servers.base import CapabilityError, missing

    built = _organism_built(spec) if spec.organism is not None else False
    problems: list[str] = []
    for name, capabilities in needs(spec).items():
        if _organism_model(spec, name) and not _model_built(spec, name, built):
            continue
        caps = await resources.server(name).capabilities()
        resources.capabilities[name] = caps.to_dict()
        top = top_logprobs_needed(spec) if "scoring" in capabilities else 0
        lacks = missing(caps, capabilities, top_logprobs=top)
        if lacks:
            problems.append(f"server {name!r} ({caps.kind}, model {caps.model!r}) lacks " + "; lacks ".join(lacks))
    if problems:
        raise CapabilityError(f"the {spec.study.kind} study cannot run, nothing was started: {' | '.join(problems)}"
                              " (`calib check SPEC` lists what each server offers)")


def _model_built(spec: StudySpec, name: str, built: bool) -> bool:
    """Whether server ``name``'s organism model is in the cache: the organism (``built``) and, for
    ``organism:chat-target`` / ``organism:chat-reference``, its chat variant (built on first use)."""
    from calib.organism.chat import CHAT_MODELS

    if not built or spec.servers[name]["model_dir"][len(ORGANISM_MODEL_PREFIX):] not in CHAT_MODELS:
        return built
    from calib.organism.build import organism_folder
    from calib.organism.chat import chat_built

    org = spec.organism
    return chat_built(organism_folder(org.preset, seed=org.seed, cache_dir=org.cache_dir))


def _organism_built(spec: StudySpec) -> bool:
    """Whether the spec's organism is already in the cache (building it takes minutes)."""
    from calib.organism.build import organism_folder

    org = spec.organism
    return (organism_folder(org.preset, seed=org.seed, cache_dir=org.cache_dir) / "organism.json").is_file()


def _extra_controls(spec: StudySpec, truth_sources: set[str]) -> int:
    """How many ``[organism] extra_controls`` an extraction study adds: the number asked, at most the pool.

    Counted by the extraction stage's own draw, so the check and the run cannot disagree.
    """
    if spec.study.kind != "extraction" or spec.organism is None or not spec.organism.extra_controls:
        return 0
    from types import SimpleNamespace

    from calib.study.extraction.samples import extra_controls as draw

    return len(draw(SimpleNamespace(spec=spec), truth_sources))  # type: ignore[arg-type]


def unmatched_globs(spec: StudySpec) -> None:
    """Raise a one-line InputError for a ``data.paths``, ``dedup.paths`` or ``extraction.screen.paths`` glob that
    matches no file.

    The spec loads without its data (it may be downloaded later); the check says whether the study can run.
    """
    import glob

    from calib._exceptions import InputError

    sections = [("data", spec.data.paths if spec.data.source != "organism" and spec.data.hub is None else ())]
    if spec.dedup is not None:
        sections.append(("dedup", spec.dedup.paths))
    screen = getattr(spec.extraction, "screen", None)
    if screen is not None and screen.source == "corpus":
        sections.append(("extraction.screen", screen.paths))
    for section, paths in sections:
        for item in paths:
            if glob.has_magic(item) and next(glob.iglob(item, recursive=True), None) is None:
                raise InputError(f"{section}.paths: the glob {item!r} matches no file; fix the pattern (relative "
                                 "paths are read from the spec's folder) or fetch the data first")


async def _runner_check(spec: StudySpec) -> dict[str, Any]:
    """``[runner] kind = "ray"``: the cluster's nodes and CPUs, and what stops it from running the study
    (:func:`calib.scale.cluster.check_cluster`, the check the study itself makes at its first chunk)."""
    import asyncio

    from calib._exceptions import CalibError
    from calib.scale.cluster import check_cluster

    address = spec.runner.address
    try:
        found = await asyncio.to_thread(check_cluster, address, need_sandbox=True)
    except CalibError as exc:
        return {"kind": "ray", "address": address, "nodes": 0, "cpus": 0.0, "problems": [" ".join(str(exc).split())]}
    return {"kind": "ray", "address": address, "nodes": len(found.nodes), "cpus": found.cpus,
            "problems": list(found.problems)}


async def check(spec: StudySpec, *, probe: bool = True, estimate: bool = False) -> dict[str, Any]:
    """The check's findings as JSON data; ``ok`` is False when a server is unreachable or lacks a capability.

    ``estimate``: add the ``estimate`` object (:mod:`calib.study.estimate`): requests and tokens per stage
    and server, and their cost at ``[budget.prices]``; it sends no generation request.
    """
    from calib.servers.base import CapabilityError, ServerError, allowed_procedures, missing, require
    from calib.study.resources import Resources

    unmatched_globs(spec)
    stages = study_kind(spec.study.kind).stages(spec)
    report: dict[str, Any] = {"study": spec.study.name, "kind": spec.study.kind,
                              "stages": [s.name for s in stages], "servers": {}, "ok": True,
                              **_measures(spec)}
    built = _organism_built(spec) if spec.organism is not None else None
    if spec.organism is not None:
        report["organism"] = {"preset": spec.organism.preset, "seed": spec.organism.seed, "built": built}
    resources = Resources(spec)
    try:
        for name, capabilities in needs(spec).items():
            entry: dict[str, Any] = {"kind": spec.servers[name].get("kind"), "needs": list(capabilities)}
            organism_model = _organism_model(spec, name)
            unbuilt = organism_model and not _model_built(spec, name, bool(built))
            if not probe or unbuilt:
                entry["probed"] = False
                entry["note"] = "the organism is built on the study's first run" if unbuilt else "not probed"
            else:
                try:
                    caps = await resources.server(name).capabilities()
                    entry["capabilities"] = caps.to_dict()
                    entry["probed"] = True
                    entry["allows"] = allowed_procedures(caps)
                    top = top_logprobs_needed(spec) if "scoring" in capabilities else 0
                    entry["missing"] = missing(caps, capabilities, top_logprobs=top)
                    require(caps, capabilities, top_logprobs=top)  # one line naming all of them
                except (CapabilityError, ServerError, OSError) as exc:
                    entry["error"] = " ".join(str(exc).split())
                    report["ok"] = False
            report["servers"][name] = entry
        if spec.data.source == "organism" and built and spec.study.kind in ("functional", "extraction", "census"):
            import polars as pl

            truth = pl.read_parquet(resources.organism().truth)
            total = truth.filter(pl.col("kind").is_in(list(spec.data.kinds))).height
            total += _extra_controls(spec, set(truth["source"]))
            report["samples"] = total if not spec.data.limit else min(total, spec.data.limit)
        if probe and spec.runner.kind == "ray":
            report["runner"] = await _runner_check(spec)
            report["ok"] = report["ok"] and not report["runner"]["problems"]
        if estimate:
            from calib.study.estimate import estimate_study

            caps = {name: entry.get("capabilities") for name, entry in report["servers"].items()}
            report["estimate"] = await estimate_study(spec, resources, caps)
    finally:
        await resources.aclose()
    return report
