"""The ``llm`` executor: the non-agentic execution levels of the functional-memorization paper (App. C).

A chat model proposes what the deterministic sandbox executor would otherwise synthesise — the input
states (the paper's one-shot input-generation prompt) and, at levels 3–4, a preamble of imports,
globals and helpers — and :class:`~calib.executors.python.SandboxExecutor` runs x and every candidate
on those states with the usual validity criteria. calib, not the model, decides: whatever the model
claims, the Comparison comes from the sandbox.

Levels ([FM] App. C, Table 3):

1. ``bare`` — x alone (``ExecutorConfig(bare=True)``: no context, no stand-ins);
2. ``common_imports`` — the fixed preamble ``calib/executors/llm/prompts/python/v1/common_imports.py``;
3. ``preamble`` — the common imports and the model's preamble from x and its file context;
4. ``preamble_retry`` — as 3; if that is inconclusive, the model sees its preamble and the execution
   error once and the corrected preamble is run.

Difference from the paper: the sandbox executor cannot run a context without its scaffolding (a
failing import or statement binds stand-ins, unresolved names are stand-ins; ``bare`` drops the
context). With ``strict=True`` (the default) the executor reads the sandbox's report and counts what
the scaffolding papered over as failures, as one script would have failed: a context statement that
failed (``preamble_failed``) and inputs on which x used a stand-in (reason ``standin``, the rest run
again alone). See docs/llm-executor.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from calib.executors.base import CandidateResult, Comparison, ExecutorConfig, register
from calib.executors.llm.prompting import (
    PROMPTS_VERSION,
    AnswerError,
    common_imports,
    input_states,
    load_prompt,
    parse_json_answer,
    preamble_from_answer,
)
from calib.executors.python import SandboxExecutor
from calib.executors.validity import validity

__all__ = ["LEVELS", "Exchange", "LLMExecutor", "Level", "execution_error"]

Level = Literal["bare", "common_imports", "preamble", "preamble_retry"]
#: The four non-agentic levels, in the order of [FM] Table 3.
LEVELS: tuple[str, ...] = ("bare", "common_imports", "preamble", "preamble_retry")
_ANSWER_CHARS = 2000  # raw answers kept in a Comparison's warnings are cut to this length
_LINE = re.compile(r"^line (\d+):")


@dataclass(frozen=True)
class Exchange:
    """One chat request of a comparison: which prompt, and the model's raw answer (cut)."""

    prompt: str
    answer: str

    def warning(self) -> str:
        return f"llm answer {self.prompt}: {self.answer}"


def execution_error(comparison: Comparison, *, preamble_first: int = 1, preamble_lines: int = 0,
                    limit: int = 1500) -> str:
    """A short error text for the retry prompt, from what the sandbox reported.

    Parameters
    ----------
    comparison
        The inconclusive result of running x with the preamble.
    preamble_first, preamble_lines
        Where the preamble sits in the executed module (line numbers of the sandbox's warnings are
        turned into preamble line numbers).
    limit
        Most characters returned.
    """
    lines = []
    for warning in comparison.warnings:
        if warning.startswith("llm "):
            continue
        lines.append(f"while building the module: {_renumber(warning, preamble_first, preamble_lines)}")
    seen: set[str] = set()
    for row in comparison.inputs:
        if row.valid:
            continue
        try:
            detail = json.loads(row.output).get("exception", "") if row.output else ""
        except (ValueError, AttributeError):
            detail = ""
        key = f"{row.reason} {detail}"
        if key in seen:
            continue
        seen.add(key)
        args = ", ".join(f"{k}={v}" for k, v in dict(row.state.get("args", {})).items())
        lines.append(f"f({args}): {row.reason}" + (f" ({detail})" if detail else ""))
    lines.append(f"not a valid execution: {comparison.reason or 'inconclusive'}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _touches_standin(output: str) -> bool:
    """Whether x's canonical output state records a stand-in: a logged operation on one (``calls``) or a
    stand-in value (``{"standin": name}``; inside a JSON string its quotes would be escaped)."""
    try:
        data = json.loads(output)
    except (ValueError, RecursionError):
        return False
    return bool(isinstance(data, dict) and data.get("calls")) or '"standin":' in output


def _renumber(warning: str, first: int, count: int) -> str:
    m = _LINE.match(warning)
    if m and first <= int(m.group(1)) < first + count:
        return f"preamble line {int(m.group(1)) - first + 1}:{warning[m.end():]}"
    return warning


def _with_invalid(config: ExecutorConfig, first: Comparison, invalid: Mapping[int, str],
                  rerun: Comparison | None, reason: str = "") -> Comparison:
    """``first`` with the inputs in ``invalid`` made invalid (index -> reason) and the others taken from
    ``rerun`` (x and the candidates run again on those inputs alone, in order), validity recomputed."""
    keep = [r.index for r in first.inputs if r.index not in invalid]
    # the rerun's rows are numbered by their position among the inputs it was given (``keep``)
    back = [keep[r.index] if 0 <= r.index < len(keep) else None for r in rerun.inputs] if rerun is not None else []
    mapped = {i: row for i, row in zip(back, rerun.inputs) if i is not None} if rerun is not None else {}
    rows = []
    for r in first.inputs:
        if r.index in mapped:
            rows.append(dataclasses.replace(mapped[r.index], index=r.index))
        else:
            why = invalid.get(r.index) or (r.reason if not r.valid else "") or "rerun_failed"
            rows.append(dataclasses.replace(r, valid=False, status="invalid", reason=why))
    coverage = rerun.coverage if rerun is not None else 0.0
    distinct = len({r.output for r in rows if r.valid})
    valid = sum(1 for r in rows if r.valid)
    verdict = validity(config, valid_inputs=valid, distinct_outputs=distinct, coverage=coverage,
                       invalid_reasons=[r.reason for r in rows if not r.valid])
    conclusive = verdict.conclusive
    candidates = []
    for i, cand in enumerate(first.candidates):
        again = rerun.candidates[i] if rerun is not None else None
        by_index = {i: m for i, m in zip(back, again.matches) if i is not None} if again is not None else {}
        by_output = {i: o for i, o in zip(back, again.outputs) if i is not None} if again is not None else {}
        matches = tuple(by_index.get(r.index) if r.valid else None for r in rows)
        hits = sum(1 for m in matches if m)
        candidates.append(dataclasses.replace(
            again or cand, matches=matches, sim_func=hits / valid if conclusive and valid else None,
            outputs=tuple(by_output.get(r.index) for r in rows)))
    return dataclasses.replace(first, conclusive=conclusive, reason=reason or verdict.reason,
                               valid_inputs=valid, coverage=coverage, distinct_outputs=distinct, inputs=tuple(rows),
                               candidates=tuple(candidates),
                               uncovered_lines=rerun.uncovered_lines if rerun is not None else (),
                               runs=first.runs + (rerun.runs if rerun is not None else 0))


class LLMExecutor:
    """Runs x and candidates on input states (and, at levels 3–4, a preamble) proposed by a chat model.

    Parameters
    ----------
    config
        Validity settings (N, N_in, C, N_out, ...) and sandbox settings; ``bare`` is set per level.
    server
        A server that can chat (``anthropic``, ``openai``, ``embedded``; :mod:`calib.servers`).
    level
        ``bare``, ``common_imports``, ``preamble`` or ``preamble_retry`` ([FM] App. C).
    chat_params
        Decoding parameters of every request (default: 4,096 tokens, temperature 0).
    prompts_version
        The prompt folder under ``calib/executors/llm/prompts/`` (default ``python/v1``).
    strict
        At levels 2–4, count what the sandbox's scaffolding papered over as failures, as running the
        preamble and x as one script would ([FM] App. C): a statement of the context that fails (the
        preamble crashed) makes every input invalid (reason ``preamble``), and an input on which x used
        a stand-in (an unresolved name, a failed import) is invalid (reason ``standin``). ``False``
        keeps the sandbox executor's lenient scaffolding.
    """

    kind = "llm"

    def __init__(self, config: ExecutorConfig | None, server: Any, *, level: Level = "preamble_retry",
                 chat_params: Any = None, prompts_version: str = PROMPTS_VERSION, strict: bool = True) -> None:
        from calib._exceptions import InvalidParameterError
        from calib.servers.base import ChatParams

        if level not in LEVELS:
            raise InvalidParameterError(f"level={level!r}: choose one of {', '.join(LEVELS)}")
        if not callable(getattr(server, "chat", None)):
            raise InvalidParameterError(f"server={server!r}: the llm executor needs a server that can chat "
                                        "(kinds anthropic, openai, embedded)")
        self.config = config or ExecutorConfig()
        self.server = server
        self.level: str = level
        self.chat_params = chat_params or ChatParams(max_tokens=4096, temperature=0.0)
        self.prompts_version = prompts_version
        self.strict = strict
        # as one script would run: no scaffold fix-ups (an optional import's handler runs, as in Python)
        self._bare = SandboxExecutor(dataclasses.replace(self.config, bare=True), fixups=False)
        self._scaffolded = SandboxExecutor(dataclasses.replace(self.config, bare=False), fixups=False)

    # --- chat ----------------------------------------------------------------------------------------
    async def _ask(self, prompt_name: str, transcript: list[Exchange], **values: str) -> str:
        """The model's answer to one prompt (recorded in ``transcript``); raises RequestFailed."""
        from calib.servers.base import ChatMessage

        prompt = load_prompt(prompt_name, self.prompts_version)
        messages = [ChatMessage("system", prompt.system), ChatMessage("user", prompt.render(**values))]
        response = await self.server.chat(messages, params=self.chat_params)
        answer = response.content or ""
        transcript.append(Exchange(prompt_name, answer[:_ANSWER_CHARS]))
        return answer

    def _inconclusive(self, reason: str, level: str, candidates: int, names: Sequence[str] | None,
                      transcript: list[Exchange]) -> Comparison:
        names = list(names) if names is not None else [f"candidate {i + 1}" for i in range(candidates)]
        return Comparison(conclusive=False, reason=reason, valid_inputs=0, coverage=0.0, distinct_outputs=0,
                          inputs=(), candidates=tuple(CandidateResult(n, (), None, "not_run") for n in names),
                          executor=self.kind, warnings=self._notes(level, transcript),
                          config=self._settings(level))

    def _notes(self, level: str, transcript: Sequence[Exchange]) -> tuple[str, ...]:
        return (f"llm level: {level}", f"llm prompts: {self.prompts_version}",
                *(e.warning() for e in transcript))

    def _settings(self, level: str) -> dict[str, Any]:
        settings = {k: v for k, v in dataclasses.asdict(self.config).items()
                    if k not in ("workers", "unsafe_no_sandbox")}
        settings.update(bare=level == "bare", llm_level=level, llm_prompts=self.prompts_version,
                        llm_server=getattr(self.server, "name", ""))
        return settings

    def _recorded(self, result: Comparison, level: str, transcript: Sequence[Exchange]) -> Comparison:
        return dataclasses.replace(result, executor=self.kind,
                                   warnings=(*self._notes(level, transcript), *result.warnings),
                                   config={**result.config, **self._settings(level)})

    async def generate_inputs(self, truth: str, transcript: list[Exchange]) -> tuple[list[dict[str, Any]], str]:
        """Input states from the one-shot input-generation prompt, or ``([], reason)`` when there are none.

        Raises :class:`~calib.servers.base.RequestFailed` when the request fails.
        """
        answer = await self._ask("input_generation", transcript, function_code=truth)
        try:
            states, dropped = input_states(parse_json_answer(answer, "test_inputs"), self.config.n_inputs)
        except AnswerError as exc:
            return [], f"llm_inputs: {exc}"
        if not states:
            return [], f"llm_inputs: no usable input state ({dropped} entries dropped: not objects of arguments)"
        return states, ""

    async def run_strict(self, truth: str, candidates: Sequence[str], context: str, states: list[dict[str, Any]],
                         names: Sequence[str] | None, preamble_first: int = 0, preamble_lines: int = 0
                         ) -> Comparison:
        """x and the candidates with ``context`` (levels 2–4; the agent executor's harness), on ``states``,
        made strict when ``self.strict``: a preamble statement that fails, or an input whose output
        touches a stand-in, makes inputs invalid (docs/llm-executor.md)."""
        out = await self._scaffolded.compare(truth, candidates, context=context, inputs=states, names=names)
        if not self.strict:
            return out
        failed = [w for w in out.warnings if _LINE.match(w)]
        if failed:
            where = "; ".join(_renumber(w, preamble_first, preamble_lines) for w in failed[:3])
            return _with_invalid(self.config, out, {r.index: "preamble" for r in out.inputs}, None,
                                 reason=f"preamble_failed: {where}")
        tainted = {r.index: "standin" for r in out.inputs if r.valid and _touches_standin(r.output)}
        if not tainted:
            return out
        clean = [states[r.index] for r in out.inputs if r.index not in tainted]
        rerun = (await self._scaffolded.compare(truth, candidates, context=context, inputs=clean, names=names)
                 if clean else None)
        return _with_invalid(self.config, out, tainted, rerun)

    # --- levels --------------------------------------------------------------------------------------
    async def compare_levels(self, truth: str, candidates: Sequence[str], *, levels: Sequence[str] = LEVELS,
                             context: str = "", inputs: Sequence[Mapping[str, Any]] | None = None,
                             names: Sequence[str] | None = None) -> dict[str, Comparison]:
        """One Comparison per level, sharing the input states and the first preamble ([FM] App. C: "we
        reuse the same generated inputs across all levels"); ``preamble_retry`` asks for a corrected
        preamble only when ``preamble`` is inconclusive, so it is never below it."""
        from calib._exceptions import InvalidParameterError
        from calib.servers.base import RequestFailed

        unknown = [lv for lv in levels if lv not in LEVELS]
        if unknown:
            raise InvalidParameterError(f"levels {unknown}: choose from {', '.join(LEVELS)}")
        transcript: list[Exchange] = []
        n = len(candidates)
        if inputs is None:
            try:
                states, why = await self.generate_inputs(truth, transcript)
            except RequestFailed as exc:
                return {lv: self._inconclusive(f"llm_request: {exc.error}", lv, n, names, transcript)
                        for lv in levels}
            if why:
                return {lv: self._inconclusive(why, lv, n, names, transcript) for lv in levels}
        else:
            states = [dict(s) for s in inputs]
        common = common_imports(self.prompts_version)
        results: dict[str, Comparison] = {}
        shared = list(transcript)
        if "bare" in levels:
            out = await self._bare.compare(truth, candidates, context="", inputs=states, names=names)
            results["bare"] = self._recorded(out, "bare", shared)
        if "common_imports" in levels:
            out = await self.run_strict(truth, candidates, common, states, names)
            results["common_imports"] = self._recorded(out, "common_imports", shared)
        if "preamble" not in levels and "preamble_retry" not in levels:
            return results
        first_line = common.count("\n") + 1
        transcript = list(shared)
        try:
            answer = await self._ask("preamble", transcript, file_context=context, function_code=truth,
                                     common_imports=common)
        except RequestFailed as exc:
            for lv in ("preamble", "preamble_retry"):
                if lv in levels:
                    results[lv] = self._inconclusive(f"llm_request: {exc.error}", lv, n, names, transcript)
            return results
        try:
            preamble = preamble_from_answer(answer)
            out = await self.run_strict(truth, candidates, common + preamble + "\n", states, names, first_line,
                                  preamble.count("\n") + 1)
            first = self._recorded(out, "preamble", transcript)
            previous, error = preamble, execution_error(out, preamble_first=first_line,
                                                        preamble_lines=preamble.count("\n") + 1)
        except AnswerError as exc:
            first = self._inconclusive(f"llm_preamble: {exc}", "preamble", n, names, transcript)
            previous, error = answer[:_ANSWER_CHARS], str(exc)
        if "preamble" in levels:
            results["preamble"] = first
        if "preamble_retry" not in levels:
            return results
        if first.conclusive:
            results["preamble_retry"] = dataclasses.replace(
                first, warnings=tuple(w.replace("llm level: preamble", "llm level: preamble_retry", 1)
                                      for w in first.warnings),
                config={**first.config, "llm_level": "preamble_retry"})
            return results
        try:
            answer = await self._ask("preamble_retry", transcript, file_context=context, function_code=truth,
                                     previous_preamble=previous, execution_error=error)
        except RequestFailed as exc:
            results["preamble_retry"] = self._inconclusive(f"llm_request: {exc.error}", "preamble_retry", n,
                                                           names, transcript)
            return results
        try:
            preamble = preamble_from_answer(answer)
        except AnswerError as exc:
            results["preamble_retry"] = self._inconclusive(f"llm_preamble: {exc}", "preamble_retry", n, names,
                                                           transcript)
            return results
        out = await self.run_strict(truth, candidates, common + preamble + "\n", states, names, first_line,
                              preamble.count("\n") + 1)
        results["preamble_retry"] = self._recorded(out, "preamble_retry", transcript)
        return results

    async def compare(self, truth: str, candidates: Sequence[str], *, context: str = "",
                      inputs: Sequence[Mapping[str, Any]] | None = None,
                      names: Sequence[str] | None = None) -> Comparison:
        """Run x and every candidate at this executor's level (the :class:`~calib.executors.base.Executor`
        protocol); ``inputs`` given skip the input-generation request."""
        results = await self.compare_levels(truth, candidates, levels=(self.level,), context=context, inputs=inputs,
                                            names=names)
        return results[self.level]


@register("llm")
def _factory(config: ExecutorConfig, *, server: Any, **options: Any) -> LLMExecutor:
    """``create_executor("llm", config, server=CHAT_SERVER, level=...)``."""
    return LLMExecutor(config, server, **options)
