"""Synthetic run directories of a ``functional`` study with known counts, for the report's tests.

:data:`DEFAULT` holds 40 samples (30 members, 10 controls; three kinds) built so that every count of
the report is known by hand (``tests/report/functional/test_report.py`` states them). Each :class:`FakeSample`
says what the tables should record; :func:`make_run` writes them with the schemas of
``calib/study/tables.py``, plus ``spec.json`` and ``manifest.json``.

Similarities of a completion with x: ``bleu`` is the sample's SIM_text, ``exact`` is 1 when it is at
least 0.95, ``codebleu``, ``tsed`` and ``judge_functional`` are deterministic mixtures of SIM_text and
SIM_func (so the proxies have something to find).

``make_run(..., duplicates=FRAME)`` also writes ``tables/duplicates.parquet`` (the ``dedup`` stage's
table; :func:`duplicates_table` builds one) and a ``[dedup]`` table in the spec (``dedup`` overrides
its keys).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from calib.study.spec import StudySpec
from calib.study.tables import TABLES

__all__ = ["DEFAULT", "METRICS", "FakeSample", "claim", "default_samples", "duplicates_table", "make_run",
           "variant"]

KINDS = ("verbatim", "business_rule", "near_duplicate")
METRICS = ("exact", "bleu", "codebleu", "tsed", "judge_functional")
N_INPUTS = 10
TAU_TEXT, TAU_FUNC = 0.75, 0.8


@dataclass(frozen=True)
class FakeSample:
    """What the tables record for one sample.

    ``text`` is (SIM_text target, reference); None: no bleu value (reason ``no code tokens``).
    ``matched`` is how many of the ``valid`` inputs each completion matches (SIM_func = matched/valid).
    ``executed`` False: no executions rows; ``conclusive`` False with ``reason``: inconclusive.
    ``error`` maps a role to its generation error (that role then has no function and no similarity).
    ``judge_null`` lists roles whose judge reply was unparsable.
    """

    index: int
    membership: str
    text: tuple[float | None, float | None]
    matched: tuple[int, int] = (0, 0)
    valid: int = N_INPUTS
    executed: bool = True
    conclusive: bool = True
    reason: str = ""
    coverage: float = 0.9
    distinct: int = 4
    error: dict[str, str] = field(default_factory=dict)
    judge_null: tuple[str, ...] = ()
    exec_roles: tuple[str, ...] = ("truth", "target", "reference")

    @property
    def sample_id(self) -> str:
        return f"s{self.index:02d}"

    @property
    def kind(self) -> str:
        return KINDS[self.index % 3]

    def sim_func(self, role: str) -> float | None:
        if not (self.executed and self.conclusive and role in self.exec_roles):
            return None
        return self.matched[("target", "reference").index(role)] / self.valid


def _m(i: int, text: tuple[float | None, float | None], matched: tuple[int, int] = (0, 0), **kw: Any) -> FakeSample:
    return FakeSample(index=i, membership="member" if i < 30 else "control", text=text, matched=matched, **kw)


FEW_VALID = "too few valid input states (5 < N_in = 8)"


def default_samples() -> list[FakeSample]:
    """The 40 samples of :data:`DEFAULT` (see the table in test_report.py)."""
    out = [_m(i, (0.30, 0.20), (9, 1)) for i in range(0, 6)]  # functionally memorized
    out += [_m(i, (0.90, 0.30), (10, 2)) for i in (6, 7)]  # textually memorized, functional too
    out += [_m(i, (0.90, 0.30), (5, 2)) for i in (8, 9)]  # textually memorized, not functional
    out += [_m(i, (0.95, 0.80), (10, 10)) for i in (10, 11)]  # both models near-verbatim
    out += [_m(i, (0.40, 0.35), (8, 9)) for i in (12, 13)]  # both functional (target exactly at tau)
    out.append(_m(14, (0.75, 0.7499), (3, 3)))  # textually memorized at exactly tau_text
    out.append(_m(15, (0.20, 0.80), (1, 1), judge_null=("target",)))  # reference near-verbatim only
    out.append(_m(16, (0.90, 0.10), conclusive=False, reason=FEW_VALID, valid=5))  # textual, inconclusive
    out.append(_m(17, (0.30, 0.30), conclusive=False, reason=FEW_VALID, valid=5))
    out.append(_m(18, (0.30, 0.30), conclusive=False, reason="line coverage 0.55 < C = 0.8", coverage=0.55))
    out.append(_m(19, (0.30, 0.30), conclusive=False, reason="too few distinct output states (1 < N_out = 2)",
                  distinct=1))
    out.append(_m(20, (None, 0.30), executed=False, error={"target": "request failed: HTTP 503 after 5 retries"}))
    out.append(_m(21, (0.30, None), (6, 0), error={"reference": "unparsable: no function in the completion"},
                  exec_roles=("truth", "target")))
    out.append(_m(22, (None, 0.20), (4, 0)))  # bleu could not score the target completion
    out += [_m(i, (0.10 + 0.05 * (i - 23), 0.15), (i - 23, 1), valid=9 if i < 26 else 10) for i in range(23, 30)]
    out.append(_m(30, (0.20, 0.10), (9, 0)))  # a control functionally memorized: a false positive
    out.append(_m(31, (0.20, 0.30), (1, 9), judge_null=("reference",)))  # reference functional only
    out.append(_m(32, (0.30, 0.30), conclusive=False, reason="too few valid input states (3 < N_in = 8)", valid=3))
    out += [_m(i, (0.05 * (i - 32), 0.1), (i - 33, 2)) for i in range(33, 40)]
    return out


DEFAULT = default_samples()


def _x(s: FakeSample) -> str:
    if s.index == 0:  # characters that must be escaped in HTML
        return 'def f00(a, b):\n    if a < b and b > 0:\n        return "<tag> & \'x\'"\n    return a\n'
    return f"def f{s.index:02d}(a, b):\n    return a + b * {s.index}\n"


def _completion(s: FakeSample, role: str) -> str:
    return f"def f{s.index:02d}(a, b):\n    c = b * {s.index}  # {role}\n    return c + a\n"


def _samples(samples: list[FakeSample]) -> pl.DataFrame:
    rows = [{"sample_id": s.sample_id, "language": "python", "membership": s.membership, "kind": s.kind,
             "source": f"organism:{s.kind}/{s.sample_id}", "context": "import math\n",
             "signature": f"def f{s.index:02d}(a, b):", "body": _x(s).split("\n", 1)[1], "function": _x(s),
             "prompt": f"import math\ndef f{s.index:02d}(a, b):", "prompt_context_tokens": 3 + s.index % 4}
            for s in samples]
    return pl.DataFrame(rows, schema=TABLES["samples"])


def _generations(samples: list[FakeSample]) -> pl.DataFrame:
    rows = []
    for s in samples:
        for role in ("target", "reference"):
            error = s.error.get(role)
            text = None if error and error.startswith("request failed") else _completion(s, role)
            rows.append({"sample_id": s.sample_id, "role": role, "model": f"tiny-{role}", "params_hash": "0" * 16,
                         "text": text, "function": None if error else _completion(s, role),
                         "finish_reason": None if text is None else "stop", "error": error})
    return pl.DataFrame(rows, schema=TABLES["generations"])


def _matches(s: FakeSample, role: str) -> list[bool | None]:
    if role == "truth":
        marks: list[bool | None] = [True] * s.valid
    else:
        k = s.matched[("target", "reference").index(role)]
        marks = [True] * k + [False] * (s.valid - k)
    # x's invalid inputs (null) sit after the third input
    return marks[:3] + [None] * (N_INPUTS - s.valid) + marks[3:]


def _executions(samples: list[FakeSample]) -> pl.DataFrame:
    rows = []
    for s in samples:
        if not s.executed:
            continue
        for role in s.exec_roles:
            sim = (1.0 if s.conclusive else None) if role == "truth" else s.sim_func(role)
            rows.append({"sample_id": s.sample_id, "role": role, "executor": "sandbox", "valid_inputs": s.valid,
                         "coverage": s.coverage, "distinct_outputs": s.distinct, "conclusive": s.conclusive,
                         "reason": s.reason, "sim_func": sim, "matches": _matches(s, role)})
    return pl.DataFrame(rows, schema=TABLES["executions"])


def _metric_value(s: FakeSample, role: str, metric: str) -> tuple[float | None, str | None]:
    text = s.text[("target", "reference").index(role)]
    func = s.sim_func(role) or 0.0
    if metric == "bleu":
        return (text, None) if text is not None else (None, "no code tokens")
    base = text if text is not None else 0.2
    if metric == "exact":
        return (1.0 if base >= 0.95 else 0.0), None
    if metric == "codebleu":
        return round(0.6 * base + 0.3 * func + 0.01 * (s.index % 7), 6), None
    if metric == "tsed":
        return round(0.5 * base + 0.2 * func + 0.02 * (s.index % 5), 6), None
    if role in s.judge_null:
        return None, "unparsable reply: no score found"
    return round(0.2 * base + 0.75 * func + 0.001 * s.index, 6), None


def _similarities(samples: list[FakeSample]) -> pl.DataFrame:
    rows = []
    for s in samples:
        for role in ("target", "reference"):
            if role in s.error:
                continue
            for metric in METRICS:
                value, reason = _metric_value(s, role, metric)
                rows.append({"sample_id": s.sample_id, "role": role, "metric": metric, "value": value,
                             "reason": reason, "detail": None})
    return pl.DataFrame(rows, schema=TABLES["similarities"])


def claim(s: FakeSample) -> dict[str, Any]:
    """The claims row of one sample, from the definitions (functional-memorization paper §3)."""
    tt, tr = s.text
    ft, fr = s.sim_func("target"), s.sim_func("reference")
    scored = tt is not None and tr is not None
    conclusive = s.executed and s.conclusive and ft is not None and fr is not None
    textual = scored and tt >= TAU_TEXT and tr < TAU_TEXT
    functional = scored and conclusive and ft >= TAU_FUNC and fr < TAU_FUNC and tt < TAU_TEXT
    verdict = ("unscored" if not scored else "functional" if functional else "textual" if textual
               else "inconclusive" if not conclusive else "none")
    return {"sample_id": s.sample_id, "membership": s.membership, "kind": s.kind, "text_target": tt,
            "text_reference": tr, "func_target": ft, "func_reference": fr, "conclusive": bool(conclusive),
            "reason": s.reason or None, "textual_target": None if tt is None else tt >= TAU_TEXT,
            "textual_reference": None if tr is None else tr >= TAU_TEXT,
            "functional_target": None if ft is None else ft >= TAU_FUNC,
            "functional_reference": None if fr is None else fr >= TAU_FUNC,
            "textually_memorized": textual, "functionally_memorized": functional, "verdict": verdict}


def _spec(examples: int, analyze: dict[str, Any] | None, dedup: dict[str, Any] | None = None) -> dict[str, Any]:
    data = {
        "study": {"name": "fake", "kind": "functional", "description": "A synthetic run for the report's tests."},
        "organism": {"preset": "tiny", "seed": 0},
        "servers": {"target": {"kind": "embedded", "model_dir": "organism:target"},
                    "reference": {"kind": "embedded", "model_dir": "organism:reference"},
                    "judge": {"kind": "anthropic", "model": "claude-judge", "api_key_env": "ANTHROPIC_API_KEY"}},
        "models": {"target": "target", "reference": "reference"},
        "data": {"source": "organism"},
        "generation": {"max_tokens": 500, "temperature": 0.0, "stop": ["\nclass "]},
        "measure": {"metrics": ["exact", "bleu", "codebleu", "tsed", "judge_functional"], "judge_server": "judge"},
        "analyze": analyze or {},
        "report": {"examples": examples},
    }
    if dedup is not None:
        data["dedup"] = dedup
    return StudySpec.model_validate(data).public()


def _manifest(samples: list[FakeSample], gens: pl.DataFrame, execs: pl.DataFrame) -> dict[str, Any]:
    def caps(role: str) -> dict[str, Any]:
        return {"kind": "embedded", "name": role, "model": f"tiny-{role}", "server_version": "calib-embedded 0.1",
                "max_context": 1024}

    return {
        "calib_version": "0.1.0.dev0",
        "study": {"name": "fake", "kind": "functional", "description": "A synthetic run for the report's tests."},
        "started_at": "2026-01-02T03:04:05+00:00", "finished_at": "2026-01-02T03:14:05+00:00",
        "servers": {"target": caps("target"), "reference": caps("reference"),
                    "judge": {"kind": "anthropic", "name": "judge", "model": "claude-judge"}},
        "roles": {"target": "target", "reference": "reference"},
        "organism": {"preset": "tiny", "seed": 0, "root": "/cache/organism/tiny-0"},
        "counts": {"functions": 120, "samples": len(samples), "dropped": {"too short": 31, "fill-in-the-middle": 4},
                   "members": sum(s.membership == "member" for s in samples),
                   "controls": sum(s.membership == "control" for s in samples),
                   "generated": {r: int(gens.filter((pl.col("role") == r) & pl.col("text").is_not_null()).height)
                                 for r in ("target", "reference")},
                   "parsed": {r: int(gens.filter((pl.col("role") == r) & pl.col("function").is_not_null()).height)
                              for r in ("target", "reference")},
                   "executed": execs["sample_id"].n_unique(),
                   "conclusive": execs.filter(pl.col("conclusive"))["sample_id"].n_unique()},
        "stages": {"generate": {"fingerprint": "abcdef0123456789", "rows": gens.height, "seconds": 12.5,
                                "finished_at": "2026-01-02T03:06:05+00:00"},
                   "execute": {"fingerprint": "0123456789abcdef", "rows": execs.height, "seconds": 301.25,
                               "finished_at": "2026-01-02T03:12:05+00:00"}},
    }


def duplicates_table(rows: list[tuple[str, str, str, float, int]]) -> pl.DataFrame:
    """The duplicates table of ``(sample_id, corpus_id, kind, similarity, copies)`` rows (``DUPLICATES_SCHEMA``)."""
    from calib.dedup.counts import DUPLICATES_SCHEMA

    return pl.DataFrame(rows, schema=DUPLICATES_SCHEMA, orient="row")


def make_run(root: Path, samples: list[FakeSample] | None = None, *, examples: int = 10,
             analyze: dict[str, Any] | None = None, claims: pl.DataFrame | None = None,
             duplicates: pl.DataFrame | None = None, dedup: dict[str, Any] | None = None) -> Path:
    """Write a run directory for ``samples`` (default :data:`DEFAULT`) under ``root``; returns ``root``.

    With ``duplicates`` also ``tables/duplicates.parquet`` and a ``[dedup]`` spec table (``dedup``: its
    keys, default the spec's defaults).
    """
    samples = DEFAULT if samples is None else samples
    tables = root / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    gens, execs = _generations(samples), _executions(samples)
    frames = {"samples": _samples(samples), "generations": gens, "executions": execs,
              "similarities": _similarities(samples),
              "claims": claims if claims is not None else pl.DataFrame([claim(s) for s in samples],
                                                                       schema=TABLES["claims"])}
    if duplicates is not None:
        frames["duplicates"] = duplicates
    for name, frame in frames.items():
        frame.write_parquet(tables / f"{name}.parquet")
    spec = _spec(examples, analyze, None if duplicates is None and dedup is None else dict(dedup or {}))
    (root / "spec.json").write_text(json.dumps(spec, indent=2))
    (root / "manifest.json").write_text(json.dumps(_manifest(samples, gens, execs), indent=2))
    return root


def variant(samples: list[FakeSample], **changes: Any) -> list[FakeSample]:
    """Every sample with ``changes`` applied (``dataclasses.replace``)."""
    return [replace(s, **changes) for s in samples]
