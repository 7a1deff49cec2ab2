"""The run record of every report kind: the manifest's ``provenance``, as summary data and as blocks.

:func:`run_record` gives summary.json ``methods.run_record`` the same fixed shape for every study
kind (lists, no keys that are data); :func:`run_record_blocks` renders it at the end of the
Methods section's Provenance part, for the functional, extraction, census and probes reports alike.
"""

from __future__ import annotations

from typing import Any

from calib.report.document import Block, Paragraph, Table
from calib.report.format import DASH
from calib.report.run import setting

__all__ = ["NOT_RECORDED", "run_record", "run_record_blocks"]

#: What a report says of a run whose manifest has no ``provenance`` (a run of an older calib).
NOT_RECORDED = ("Run record: not recorded. The manifest holds no provenance record (a run of an older calib), so "
                "its commit, servers, sandbox, seeds and package versions are unknown.")

# What the report copies of each server's provenance record (never its base URLs).
_RECORD_KEYS = ("kind", "model", "revision", "dtype", "server_version")


def _missing(block: dict[str, Any]) -> list[dict[str, str]]:
    missing = block.get("missing") if isinstance(block.get("missing"), dict) else {}
    return [{"field": str(k), "reason": str(v)} for k, v in sorted(missing.items())]


def run_record(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest's provenance record in the summary's fixed shape (lists, no keys that are data)."""
    record = manifest.get("provenance")
    if not isinstance(record, dict):
        return None
    calib = record.get("calib") or {}
    servers = record.get("servers") or {}
    executor = record.get("executor") or {}
    packages = setting(record, "packages.versions", {}) or {}
    return {
        "calib_commit": calib.get("commit"), "calib_dirty": calib.get("dirty"),
        "python": setting(record, "python.version"), "platform": record.get("platform"),
        "packages": [{"name": k, "version": v} for k, v in sorted(packages.items(), key=lambda kv: kv[0].lower())],
        "servers": [{"server": name, **{k: entry.get(k) for k in _RECORD_KEYS}, "missing": _missing(entry)}
                    for name, entry in sorted(servers.items()) if isinstance(entry, dict)],
        "executor": None if not executor else {
            "python": executor.get("python"), "bwrap": executor.get("bwrap"),
            "pythonhashseed": executor.get("pythonhashseed"),
            "toolchains": [{"language": lang, "tool": tool, "version": line}
                           for lang, tools in sorted((executor.get("toolchains") or {}).items())
                           for tool, line in sorted(tools.items()) if tool not in ("paths", "missing_tools")],
            "missing": _missing(executor)},
        "seeds": [{"key": k, "value": v} for k, v in sorted((record.get("seeds") or {}).items())],
    }


def _code(value: Any) -> str:
    return DASH if value is None else f"`{value}`"


def _reasons(missing: list[dict[str, str]]) -> str:
    return "; ".join(f"{m['field']}: {m['reason']}" for m in missing)


def run_record_blocks(record: dict[str, Any] | None) -> list[Block]:
    """What the manifest's provenance record says: calib's commit, servers, sandbox, seeds, packages.

    The sandbox sentence is there only for a kind that runs code, the compilers only where the samples
    are in a native language; a run without a record says "not recorded".
    """
    if not record:
        return [Paragraph(NOT_RECORDED)]
    dirty = {True: " (with uncommitted changes)", False: ""}.get(record["calib_dirty"], "")
    text = (f"calib commit {_code(record['calib_commit'])}{dirty}; Python {record['python'] or DASH} on "
            f"{record['platform'] or DASH}.")
    seeds = ", ".join(f"{s['key']} = {s['value']}" for s in record["seeds"])
    text += f" Seeds: {seeds or DASH}."
    ex = record["executor"]
    if ex:
        text += (f" Sandbox: Python {ex['python'] or DASH}, {ex['bwrap'] or 'no bubblewrap'}, PYTHONHASHSEED = "
                 f"{ex['pythonhashseed'] if ex['pythonhashseed'] is not None else DASH}.")
        if ex["missing"]:
            text += f" Not reported by the sandbox: {_reasons(ex['missing'])}."
        if ex["toolchains"]:
            text += " Compilers: " + "; ".join(f"{t['language']} `{t['tool']}`: {t['version'] or DASH}"
                                              for t in ex["toolchains"]) + "."
    blocks: list[Block] = [Paragraph(text)]
    if record["servers"]:
        rows = tuple((e["server"], e["kind"] or DASH, _code(e["model"]), _code(e["revision"]), e["dtype"] or DASH,
                      e["server_version"] or DASH, _reasons(e["missing"]) or DASH) for e in record["servers"])
        blocks.append(Table(("server", "kind", "model", "revision", "dtype", "server version", "not reported"), rows,
                            "run-servers-table", "What each server reported about itself (null: why not)."))
    if record["packages"]:
        blocks.append(Paragraph("Packages: " + ", ".join(f"{p['name']} {p['version'] or '(not installed)'}"
                                                         for p in record["packages"]) + "."))
    return blocks
