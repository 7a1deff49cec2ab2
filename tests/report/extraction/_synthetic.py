"""A small synthetic ``extraction`` run from explicit log10 scores, for the report's tests.

:func:`write_run` takes, per (role, procedure, ℓ_s), the members' and the controls' log10 scores
(−inf for a zero score; 0 for a binary procedure's 1) and writes the tables the study's analysis
stages would (operating points with ``calib.stats.sweep``, claims at the primary α with
``calib.stats.calibrate``, p-values, BH, Bonferroni), with ``spec.json`` and ``manifest.json``.
No budgets rows and no paired table: those sections have their own tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from calib.stats import alpha_dagger, benjamini_hochberg, calibrate, p_values, parse_alpha, sweep
from calib.study.tables import EXTRACTION_TABLES

__all__ = ["Scores", "write_run"]

#: (role, procedure, suffix_tokens) -> (member log10 scores, control log10 scores), members m000.., controls c000..
Scores = dict[tuple[str, str, int], tuple[list[float], list[float]]]

_ZERO = -1e300  # a zero score sorts below every log10 probability (as the analysis stage does)


def _finite(values: list[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return np.where(np.isneginf(arr), _ZERO, arr)


def _unfinite(value: float | None) -> float | None:
    return None if value is None else (float("-inf") if value <= _ZERO / 2 else float(value))


def write_run(root: Path, scores: Scores, *, alpha: float | str, alphas: list[float],
              decontaminate: list[str] | None = None) -> Path:
    """Write the run under ``root`` (see the module docstring); ``decontaminate`` lists control sample ids."""
    drop = set(decontaminate or [])
    samples, windows, score_rows, ops, claims = {}, {}, [], [], []
    levels = sorted(set(alphas) | {parse_alpha(alpha)})
    for (role, proc, length), (member, control) in scores.items():
        ids = [(f"m{i:03d}", "member", v) for i, v in enumerate(member)]
        ids += [(f"c{i:03d}", "control", v) for i, v in enumerate(control)]
        for sid, membership, value in ids:
            wid = f"w-{sid}-{length}"
            samples[sid] = {"sample_id": sid, "language": "text", "membership": membership, "function": f"text {sid}"}
            windows[wid] = {"window_id": wid, "sample_id": sid, "membership": membership, "prefix_tokens": 8,
                            "suffix_tokens": length, "start_token": 0, "char_start": 10, "char_end": 20,
                            "prefix": f"prefix {sid}", "suffix": f"suffix {sid} {length}"}
            score_rows.append({"window_id": wid, "sample_id": sid, "role": role, "model": f"tiny-{role}",
                               "procedure": proc, "suffix_tokens": length, "value": float(10 ** value),
                               "log10_value": float(value)})
        m = _finite(member)
        keep = [sid not in drop for sid, _, _ in ids if sid.startswith("c")]
        pools = {"all": _finite(control)}
        if drop:
            pools["decontaminated"] = _finite([v for v, k in zip(control, keep) if k])
        for pool, c in pools.items():
            for row in sweep(c, levels, members=m, confidence=0.95).to_dicts():
                t = row.pop("threshold")
                ops.append({**row, "role": role, "model": f"tiny-{role}", "procedure": proc, "suffix_tokens": length,
                            "pool": pool, "n_controls": c.size, "alpha_dagger": alpha_dagger(c),
                            "log10_threshold": _unfinite(t)})
        primary = pools["decontaminated" if drop else "all"]
        cal = calibrate(primary, alpha)
        member_p = p_values(primary, m)
        bh = benjamini_hochberg(member_p, 0.05).rejected
        for j, (sid, membership, value) in enumerate(ids):
            is_member = membership == "member"
            s = _finite([value])
            claim = None if cal.threshold is None else bool(cal.claims(s)[0])
            claims.append({"window_id": f"w-{sid}-{length}", "sample_id": sid, "membership": membership,
                           "role": role, "procedure": proc, "suffix_tokens": length, "log10_value": float(value),
                           "p_value": float(member_p[j] if is_member else p_values(primary, s)[0]), "margin": None,
                           "claim": claim, "bh": bool(bh[j]) if is_member else None,
                           "bonferroni": bool(member_p[j] <= 0.05 / m.size) if is_member else None,
                           "contaminated": sid in drop})
    frames = {"samples": list(samples.values()), "windows": list(windows.values()), "scores": score_rows,
              "operating_points": ops, "extraction_claims": claims, "budgets": []}
    (root / "tables").mkdir(parents=True, exist_ok=True)
    for name, rows in frames.items():
        schema = EXTRACTION_TABLES[name]
        pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).write_parquet(
            root / "tables" / f"{name}.parquet")
    lengths = sorted({length for _, _, length in scores})
    procedures = list(dict.fromkeys(proc for _, proc, _ in scores))
    spec = {"study": {"name": "synthetic", "kind": "extraction", "seed": 0},
            "servers": {"tgt": {"kind": "embedded", "model_dir": "organism:target"}},
            "models": {"target": "tgt", "reference": None},
            "extraction": {"prefix_tokens": 8, "suffix_tokens": lengths, "procedures": procedures, "top_k": 40,
                           "temperatures": [1.0], "epsilon": 5, "offset": 0, "stride": 1},
            "analyze": {"alpha": alpha, "alphas": alphas, "confidence": 0.95, "fdr": 0.05, "fwer": 0.05,
                        "budgets": [1e5], "budget_confidence": 0.95, "decontaminate": sorted(drop), "review": 3}}
    manifest = {"calib_version": "0.1.0.dev0", "started_at": "2026-01-02T03:04:05+00:00",
                "finished_at": "2026-01-02T04:04:05+00:00", "roles": {"target": "tgt"},
                "servers": {"tgt": {"kind": "embedded", "model": "tiny-target"}}, "counts": {"samples": len(samples)}}
    (root / "spec.json").write_text(json.dumps(spec, indent=2))
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root
