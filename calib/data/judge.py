"""The optional LLM-judge filter: keep functions with meaningful logic their author would want to protect.

The functional-memorization paper (§3 "Data filtering") has a judge (LLaMA-3.1-8B-Instruct) rate
functions drawn at random until 5,000 pass, so that the audit studies code whose leak would matter.
:func:`judge_filter` does the same over any chat :class:`~calib.servers.base.Chatting` server: the
prompt is a versioned file (``calib/data/prompts/judge_meaningful_logic.v1.txt``), the judge answers a
severity from 1 to 10 as JSON, and every verdict is recorded, including answers that cannot be parsed
(``judge_unparsable``) and requests that failed, neither of which stops the run.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import InvalidParameterError
from calib.servers.base import ChatMessage, ChatParams, Chatting, RequestFailed

__all__ = ["JUDGE_PROMPT_FILE", "VERDICTS_SCHEMA", "JudgePrompt", "JudgeResult", "Verdict", "judge_filter",
           "load_judge_prompt", "parse_verdict", "read_prompt_header"]

#: The judge prompt shipped with calib (package data).
JUDGE_PROMPT_FILE = "judge_meaningful_logic.v1.txt"

#: One row per judged function, in the order they were drawn.
VERDICTS_SCHEMA: dict[str, pl.DataType] = {
    "order": pl.Int64(),  # 0-based position in the seeded draw
    "function_id": pl.String(),
    "severity": pl.Int64(),  # 1-10, null when the answer was unparsable or the request failed
    "reason": pl.String(),
    "passed": pl.Boolean(),  # severity >= threshold
    "error": pl.String(),  # null, "judge_unparsable" or "request_failed: ..."
    "answer": pl.String(),  # the judge's raw answer (null when the request failed)
}

UNPARSABLE = "judge_unparsable"


@dataclass(frozen=True)
class JudgePrompt:
    """A versioned judge prompt: the header's ``name``, ``version`` and ``source``, and the template with
    ``{language}`` and ``{function}`` placeholders."""

    name: str
    version: str
    source: str
    template: str

    def render(self, *, language: str, function: str) -> str:
        """The prompt for one function (plain replacement: code is full of braces ``str.format`` would eat)."""
        return self.template.replace("{language}", language).replace("{function}", function)


def read_prompt_header(lines: list[str]) -> tuple[dict[str, str], int]:
    """A prompt file's ``# key: value`` lines (continuations indented two spaces or more) and where the template starts.

    Shared by every versioned prompt file calib ships (this judge's and the similarity judges').
    """
    header: dict[str, str] = {}
    key = None
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            return header, i
        body = line[1:].strip()
        match = re.match(r"^(\w+):\s*(.*)$", body)
        if match and not line.startswith("#  "):
            key = match.group(1)
            header[key] = match.group(2)
        elif key is not None:
            header[key] += " " + body
    return header, len(lines)


def load_judge_prompt(path: str | Path | None = None) -> JudgePrompt:
    """Read a judge prompt file: ``# key: value`` header lines (continuations indented), then the template.

    ``path=None`` reads the prompt shipped with calib (:data:`JUDGE_PROMPT_FILE`).
    """
    if path is None:
        text = resources.files("calib.data").joinpath("prompts").joinpath(JUDGE_PROMPT_FILE).read_text(encoding="utf-8")
        where = f"calib.data/prompts/{JUDGE_PROMPT_FILE}"
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    lines = text.splitlines(keepends=True)
    header, i = read_prompt_header(lines)
    template = "".join(lines[i:]).strip("\n")
    missing = [k for k in ("name", "version", "source") if not header.get(k)]
    if missing or "{function}" not in template:
        raise InvalidParameterError(f"judge prompt {where}: needs '# name:', '# version:' and '# source:' header "
                                    f"lines and a {{function}} placeholder (missing: {missing or ['{function}']})")
    return JudgePrompt(name=header["name"], version=header["version"], source=header["source"], template=template)


@dataclass(frozen=True)
class Verdict:
    """The judge's answer about one function: a severity 1-10 and a reason, or why there is none."""

    severity: int | None
    reason: str | None
    error: str | None = None


def parse_verdict(answer: str) -> Verdict:
    """Read ``{"severity": n, "reason": ...}`` from a judge's answer, wherever the object sits in the text.

    The first JSON object holding an integer ``severity`` in 1..10 wins (code fences and prose around it
    are ignored). Anything else gives ``Verdict(None, None, "judge_unparsable")``; it never raises.
    """
    decoder = json.JSONDecoder()
    start = answer.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(answer, start)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "severity" in obj:
            severity = _as_severity(obj["severity"])
            if severity is not None:
                reason = obj.get("reason")
                return Verdict(severity, None if reason is None else str(reason))
        start = answer.find("{", start + 1)
    return Verdict(None, None, UNPARSABLE)


def _as_severity(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= 10 else None


@dataclass(frozen=True)
class JudgeResult:
    """What :func:`judge_filter` kept and every verdict behind it.

    Attributes
    ----------
    kept
        The functions that passed, in the order they were drawn (at most ``want``).
    verdicts
        One row per judged function (:data:`VERDICTS_SCHEMA`).
    want, threshold, prompt_version
        The settings, to record with the run.
    exhausted
        Every function was judged and fewer than ``want`` passed.
    """

    kept: pl.DataFrame
    verdicts: pl.DataFrame
    want: int
    threshold: int
    prompt_version: str
    exhausted: bool = field(default=False)


async def judge_filter(server: Chatting, functions: pl.DataFrame, *, want: int, seed: int, threshold: int = 5,
                       concurrency: int = 8, prompt: JudgePrompt | None = None,
                       params: ChatParams | None = None) -> JudgeResult:
    """Judge functions in a seeded random order until ``want`` pass (severity >= ``threshold``).

    Functions are drawn in the order of a permutation seeded by ``seed`` and judged in waves of at most
    ``concurrency`` requests; a wave never holds more requests than passes still needed, so no function
    is judged after the ``want``-th pass and the verdicts are the same whatever order answers arrive in.
    An unparsable answer or a failed request is recorded and counts as not passed.

    Parameters
    ----------
    server
        A chat server (the paper used LLaMA-3.1-8B-Instruct).
    functions
        A functions table; needs ``function_id``, ``signature`` and ``body`` (``language`` when present).
    want
        How many passing functions to keep (>= 1).
    seed
        Seeds the draw order (and is sent as the chat seed).
    threshold
        The least severity that passes, 1..10.
    concurrency
        Requests in flight at once.
    prompt, params
        The judge prompt (default: the shipped v1 file) and the chat parameters (default: greedy, 256
        tokens, ``seed``).
    """
    for name, value, low in (("want", want, 1), ("concurrency", concurrency, 1), ("threshold", threshold, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    if threshold > 10:
        raise InvalidParameterError(f"threshold must lie in 1..10 (the judge's severity scale), got {threshold}")
    missing = [c for c in ("function_id", "signature", "body") if c not in functions.columns]
    if missing:
        raise InvalidParameterError(f"functions lacks column(s) {missing}: judge a functions table "
                                    f"(calib.data.schema.FUNCTIONS_SCHEMA)")
    prompt = prompt or load_judge_prompt()
    params = params or ChatParams(max_tokens=256, temperature=0.0, seed=seed)
    order = np.random.default_rng(seed).permutation(functions.height)
    languages = functions["language"] if "language" in functions.columns else pl.Series([None] * functions.height)

    async def judge(row: int) -> tuple[Verdict, str | None]:
        text = _function_text(functions["signature"][row], functions["body"][row])
        message = prompt.render(language=languages[row] or "code", function=text)
        try:
            response = await server.chat([ChatMessage(role="user", content=message)], params=params)
        except RequestFailed as failure:
            return Verdict(None, None, f"request_failed: {failure.error}"), None
        return parse_verdict(response.content), response.content

    records: list[dict[str, Any]] = []
    kept_rows: list[int] = []
    position = 0
    while len(kept_rows) < want and position < len(order):
        wave = [int(r) for r in order[position:position + min(concurrency, want - len(kept_rows))]]
        results = await asyncio.gather(*(judge(r) for r in wave))
        for offset, (row, (verdict, answer)) in enumerate(zip(wave, results)):
            passed = verdict.severity is not None and verdict.severity >= threshold
            records.append({"order": position + offset, "function_id": functions["function_id"][row],
                            "severity": verdict.severity, "reason": verdict.reason, "passed": passed,
                            "error": verdict.error, "answer": answer})
            if passed:
                kept_rows.append(row)
        position += len(wave)
    kept = functions.select(pl.all().gather(kept_rows)) if kept_rows else functions.clear()
    return JudgeResult(kept=kept, verdicts=pl.DataFrame(records, schema=VERDICTS_SCHEMA), want=want,
                       threshold=threshold, prompt_version=f"{prompt.name}.v{prompt.version}",
                       exhausted=len(kept_rows) < want)


def _function_text(signature: str | None, body: str | None) -> str:
    signature, body = (signature or "").rstrip(), body or ""
    return signature + ("" if body.startswith("\n") else "\n") + body
