"""The ``agent`` executor: a tool-use loop over a chat server builds x's harness; calib decides the similarity.

The functional-memorization paper [FM] (§3, App. C) measured SIM_func with a coding agent (Claude Code)
that builds an executable environment for x, proposes input states and iterates until the validity
criteria hold — conclusive for about 90 % of Python functions, about 2 minutes per sample. This executor
offers that loop through any chat :class:`~calib.servers.base.Server` with tool calling. The model gets x,
its file context and three tools:

- ``write_preamble(code)`` — the scaffolding that precedes x (imports, globals, helpers, mocks);
- ``run(inputs)`` — calib runs x, and only x, with the current preamble on those input states in the
  sandbox and answers with the validity of each input, x's output states, coverage and distinct outputs;
- ``submit(inputs)`` — ends the loop with the final input states.

After ``submit`` calib itself runs the submitted preamble on x and every candidate in the sandbox with
the usual validity criteria, strict as the ``llm`` executor is (:mod:`calib.executors.llm`). The model
never sees a candidate, its code or its outputs, and whatever it claims is ignored. Budgets on turns,
tokens and wall time end a model that never submits (``agent_budget``). See docs/agent-executor.md.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.executors.base import CandidateResult, Comparison, ExecutorConfig, register
from calib.executors.llm import LLMExecutor, execution_error
from calib.executors.llm.prompting import (
    PROMPTS_DIR,
    PROMPTS_VERSION,
    AnswerError,
    common_imports,
    input_states,
    preamble_from_answer,
)
from calib.executors.sandbox.harness.scaffold import trim_context, unresolved_names
from calib.servers.base import (
    CapabilityError,
    ChatMessage,
    ChatParams,
    RequestFailed,
    ServerError,
    Tool,
    ToolCall,
)

__all__ = ["TOOLS", "AgentExecutor", "Transcript", "agent_system_prompt", "transcript_lines"]

#: One comparison's conversation: every message sent and received, tool calls and tool results included.
Transcript = tuple[ChatMessage, ...]

_INPUTS = {"type": "array", "items": {"type": "object", "additionalProperties": True},
           "description": "Input states: one JSON object per call of x, mapping each parameter name (no self) "
                          "to a JSON value."}
#: The tools offered to the model (JSON-schema parameters, as every chat kind sends them).
TOOLS: tuple[Tool, ...] = (
    Tool("write_preamble", "Store the preamble: Python code run after the common imports and before x (imports, "
         "constants, globals, helpers, mocks). Replaces the previous preamble; it must compile.",
         {"type": "object", "properties": {"code": {"type": "string", "description": "The preamble's code."}},
          "required": ["code"]}),
    Tool("run", "Run x with the current preamble on these input states in the sandbox. Answers, per input, "
         "whether the run was valid (and why not) and x's output state, plus line coverage, uncovered lines "
         "and distinct outputs, and whether submitting these inputs would count.",
         {"type": "object", "properties": {"inputs": _INPUTS}, "required": ["inputs"]}),
    Tool("submit", "Finish: submit the final input states (the current preamble is used). Ends the task.",
         {"type": "object", "properties": {"inputs": _INPUTS}, "required": ["inputs"]}),
)
_NUDGE = ("Please continue by calling one of the tools (write_preamble, run or submit); a reply without a "
          "tool call ends the task without a result.")
_OUTPUT_CHARS = 300  # x's output state per input in a run result
_LINE_CHARS = 1000  # one transcript message in a Comparison's warnings
_RUN_FACTOR = 3  # a run may try up to this many times n_inputs states


@cache
def agent_system_prompt(version: str = PROMPTS_VERSION) -> str:
    """The agent's system prompt template (``calib/executors/llm/prompts/<version>/agent_system.txt``)."""
    path = PROMPTS_DIR / version / "agent_system.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError(f"agent prompt of version {version!r}: cannot read {path}: {exc}") from None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _output(text: str) -> Any:
    """x's canonical output state for a run result: the JSON object without its empty fields, or the text
    cut to :data:`_OUTPUT_CHARS` when it is long or not JSON."""
    if len(text) <= _OUTPUT_CHARS:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v not in ("", [], {})}
    return _cut(text, _OUTPUT_CHARS)


def _undefined(context: str, truth: str) -> list[str]:
    """Names x's module (context + x) reads but defines nowhere: the sandbox binds stand-ins for them."""
    try:
        return sorted(unresolved_names(ast.parse(trim_context(context, truth) + truth)))
    except (SyntaxError, ValueError):
        return []


def transcript_lines(transcript: Sequence[ChatMessage], limit: int = _LINE_CHARS) -> tuple[str, ...]:
    """One warning line per message (``agent <role>: ...``; tool calls as ``name {arguments}``), each cut
    to ``limit`` characters; this is what a Comparison's ``warnings`` keep of the conversation."""
    lines = []
    for m in transcript:
        text = " ".join(m.content.split())
        if m.role == "tool":
            lines.append(_cut(f"agent tool result {m.tool_call_id}: {text}", limit))
            continue
        calls = " ".join(f"[call {c.name} {json.dumps(c.arguments, sort_keys=True)}]" for c in m.tool_calls)
        lines.append(_cut(f"agent {m.role}: {text}{' ' if text and calls else ''}{calls}", limit))
    return tuple(lines)


@dataclasses.dataclass
class _Session:
    """The state of one comparison's loop."""

    preamble: str = ""
    submitted: list[dict[str, Any]] | None = None
    tokens: int = 0


class AgentExecutor:
    """A tool-use loop over a chat server proposes x's preamble and input states; calib runs and decides.

    Parameters
    ----------
    config
        Validity settings (N, N_in, C, N_out, ...) and sandbox settings.
    server
        A chat server with tool calling (:mod:`calib.servers`; the ``anthropic`` kind, or ``openai`` on a
        server whose chat template supports tools). A server without tools makes every sample
        inconclusive (``agent_tools: ...``), not an exception.
    max_turns
        Most chat requests per comparison (a nudge after an answer without a tool call counts as one).
    max_tokens
        Most tokens per comparison: the sum of the requests' input and output tokens as the server
        reports them (a server that reports none is bounded by turns and time only).
    max_seconds
        Most wall-clock seconds per comparison for the loop (requests and ``run`` calls); the final
        run after ``submit`` is not counted.
    chat_params
        Decoding parameters of each request (default: 4,096 tokens per answer, temperature 0).
    strict
        Count what the sandbox's scaffolding papered over as failures, as the ``llm`` executor does
        (a failing preamble statement invalidates every input, a stand-in used invalidates the input);
        applies to ``run`` results and to the final run alike.
    prompts_version
        The prompt folder under ``calib/executors/llm/prompts/`` (default ``python/v1``).
    result_chars
        Most characters of one tool result sent to the model.
    """

    kind = "agent"

    def __init__(self, config: ExecutorConfig | None, server: Any, *, max_turns: int = 20,
                 max_tokens: int = 400_000, max_seconds: float = 600.0, chat_params: ChatParams | None = None,
                 strict: bool = True, prompts_version: str = PROMPTS_VERSION, result_chars: int = 6000) -> None:
        if not callable(getattr(server, "chat", None)):
            raise InvalidParameterError(f"server={server!r}: the agent executor needs a server that can chat with "
                                        "tools (kind anthropic, or openai on a server that calls tools)")
        for name, value in (("max_turns", max_turns), ("max_tokens", max_tokens), ("result_chars", result_chars)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidParameterError(f"{name}={value!r}: need an integer >= 1")
        if not isinstance(max_seconds, int | float) or isinstance(max_seconds, bool) or not max_seconds > 0:
            raise InvalidParameterError(f"max_seconds={max_seconds!r}: need a number of seconds > 0")
        self.config = config or ExecutorConfig()
        self.server = server
        self.max_turns, self.max_tokens, self.max_seconds = max_turns, max_tokens, float(max_seconds)
        self.chat_params = chat_params or ChatParams(max_tokens=4096, temperature=0.0)
        self.strict = strict
        self.prompts_version = prompts_version
        self.result_chars = result_chars
        self.system = agent_system_prompt(prompts_version).format(
            n_inputs=self.config.n_inputs, min_valid=self.config.min_valid,
            coverage_pct=f"{100 * self.config.coverage:g}", min_distinct=self.config.min_distinct)
        # the llm executor's strict run of x and candidates with a preamble (levels 2-4), reused as is
        self._llm = LLMExecutor(self.config, server, level="preamble", strict=strict, prompts_version=prompts_version)

    # --- results -------------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        settings = {k: v for k, v in dataclasses.asdict(self.config).items()
                    if k not in ("workers", "unsafe_no_sandbox")}
        settings.update(bare=False, agent_server=getattr(self.server, "name", ""), agent_prompts=self.prompts_version,
                        agent_max_turns=self.max_turns, agent_max_tokens=self.max_tokens,
                        agent_max_seconds=self.max_seconds, agent_strict=self.strict)
        return settings

    def _notes(self, transcript: Sequence[ChatMessage], session: _Session, turns: int) -> tuple[str, ...]:
        return (f"agent prompts: {self.prompts_version}", f"agent turns: {turns}", f"agent tokens: {session.tokens}",
                *transcript_lines(transcript))

    def _inconclusive(self, reason: str, candidates: int, names: Sequence[str] | None,
                      transcript: Sequence[ChatMessage], session: _Session, turns: int) -> Comparison:
        names = list(names) if names is not None else [f"candidate {i + 1}" for i in range(candidates)]
        return Comparison(conclusive=False, reason=reason, valid_inputs=0, coverage=0.0, distinct_outputs=0,
                          inputs=(), candidates=tuple(CandidateResult(n, (), None, "not_run") for n in names),
                          executor=self.kind, warnings=self._notes(transcript, session, turns),
                          config=self._settings())

    # --- tools ---------------------------------------------------------------------------------------
    def _context(self, preamble: str) -> tuple[str, int, int]:
        """The module text before x (common imports + preamble) and where the preamble sits in it."""
        common = common_imports(self.prompts_version)
        return common + preamble + "\n", common.count("\n") + 1, preamble.count("\n") + 1

    def _states(self, call: ToolCall, limit: int) -> list[dict[str, Any]]:
        states, dropped = input_states(call.arguments.get("inputs"), limit)
        if not states:
            raise AnswerError(f"no usable input state ({dropped} entries dropped: each must be a JSON object of "
                              "parameter name to value)")
        return states

    def _report(self, out: Comparison, first: int, lines: int, asked: int, used: int, undefined: list[str]) -> str:
        """What the model learns from a run: x's validity facts and outputs (there is no candidate)."""
        rows = []
        for r in out.inputs:
            row: dict[str, Any] = {"index": r.index, "args": dict(r.state.get("args", {})), "valid": r.valid}
            if r.reason:
                row["reason"] = r.reason
            if r.output:
                row["output"] = _output(r.output)
            rows.append(row)
        report: dict[str, Any] = {
            "valid_inputs": out.valid_inputs, "of": len(out.inputs),
            "coverage": round(out.coverage, 3), "uncovered_lines_of_x": list(out.uncovered_lines),
            "distinct_outputs": out.distinct_outputs,
            "would_count": out.conclusive and len(out.inputs) <= self.config.n_inputs,
        }
        if undefined:
            report["undefined_names"] = undefined
        if asked > used:
            report["note"] = f"only the first {used} of {asked} input states were run"
        if not out.conclusive:
            report["errors"] = execution_error(out, preamble_first=first, preamble_lines=lines, limit=1500)
        report["inputs"] = rows
        text = json.dumps(report)
        while len(text) > self.result_chars and rows:  # drop inputs from the end rather than cut JSON mid-way
            rows.pop()
            report["note"] = f"{report.get('note', '')} (result cut: {len(out.inputs) - len(rows)} inputs not shown)"
            text = json.dumps(report)
        return _cut(text, self.result_chars)

    async def _tool(self, call: ToolCall, truth: str, session: _Session,
                    given: list[dict[str, Any]] | None) -> str:
        """Carry out one tool call (``submit`` records the states in ``session``); returns the tool result."""
        if call.name == "write_preamble":
            code = call.arguments.get("code")
            if not isinstance(code, str):
                return "error: write_preamble needs {\"code\": \"<python code>\"}"
            try:
                session.preamble = preamble_from_answer(json.dumps({"preamble": code}))
            except AnswerError as exc:
                return f"error: {exc}; the previous preamble is kept"
            return f"ok: preamble stored ({len(session.preamble.splitlines())} lines)"
        if call.name == "run":
            limit = _RUN_FACTOR * self.config.n_inputs
            try:
                states = self._states(call, limit)
            except AnswerError as exc:
                return f"error: {exc}"
            asked = len(call.arguments["inputs"]) if isinstance(call.arguments.get("inputs"), list) else 0
            context, first, lines = self._context(session.preamble)
            out = await self._llm.run_strict(truth, [], context, states, None, first, lines)
            return self._report(out, first, lines, asked, min(asked, limit), _undefined(context, truth))
        if call.name == "submit":
            if given is not None:
                session.submitted = given
                return "ok: submitted (the given input states are used)"
            try:
                session.submitted = self._states(call, self.config.n_inputs)
            except AnswerError as exc:
                return f"error: {exc}; nothing submitted"
            return f"ok: submitted {len(session.submitted)} input states"
        return f"error: unknown tool {call.name!r}; the tools are write_preamble, run and submit"

    # --- the loop ------------------------------------------------------------------------------------
    def _opening(self, truth: str, context: str, given: list[dict[str, Any]] | None) -> str:
        parts = [f"The function x:\n```python\n{truth.rstrip()}\n```",
                 f"Its file context:\n```python\n{context.rstrip() or '# (none given)'}\n```",
                 f"Common imports, always present before your preamble:\n```python\n"
                 f"{common_imports(self.prompts_version).rstrip()}\n```"]
        if given is not None:
            parts.append("Use exactly these input states (build the preamble they need, then submit them):\n"
                         + json.dumps([s.get("args", s) for s in given]))
        return "\n\n".join(parts)

    async def compare_with_transcript(self, truth: str, candidates: Sequence[str], *, context: str = "",
                                      inputs: Sequence[Mapping[str, Any]] | None = None,
                                      names: Sequence[str] | None = None) -> tuple[Comparison, Transcript]:
        """:meth:`compare`, and the whole conversation (untruncated) of this comparison.

        ``inputs`` given are shown to the model and used whatever it submits (it then only builds the
        preamble). Every failure of the loop is an inconclusive Comparison, never an exception.
        """
        given = [dict(s) for s in inputs] if inputs is not None else None
        messages: list[ChatMessage] = [ChatMessage("system", self.system),
                                       ChatMessage("user", self._opening(truth, context, given))]
        session = _Session()
        n, start, turns, nudged = len(candidates), time.monotonic(), 0, False

        def stop(reason: str) -> tuple[Comparison, Transcript]:
            return self._inconclusive(reason, n, names, messages, session, turns), tuple(messages)

        while session.submitted is None:
            left = self.max_seconds - (time.monotonic() - start)
            if turns >= self.max_turns:
                return stop(f"agent_budget: {turns} turns without a submission (max_turns={self.max_turns})")
            if session.tokens >= self.max_tokens:
                return stop(f"agent_budget: {session.tokens} tokens without a submission "
                            f"(max_tokens={self.max_tokens})")
            if left <= 0:
                return stop(f"agent_budget: {self.max_seconds:g} s without a submission "
                            f"(max_seconds={self.max_seconds:g})")
            turns += 1
            try:
                response = await asyncio.wait_for(self.server.chat(messages, tools=TOOLS, params=self.chat_params),
                                                  timeout=left)
            except TimeoutError:
                return stop(f"agent_budget: {self.max_seconds:g} s without a submission "
                            f"(max_seconds={self.max_seconds:g})")
            except RequestFailed as exc:
                return stop(f"agent_request: {exc.error}")
            except CapabilityError as exc:
                return stop(f"agent_tools: {' '.join(str(exc).split())}")
            except ServerError as exc:
                return stop(f"agent_request: {' '.join(str(exc).split())[:300]}")
            session.tokens += (response.input_tokens or 0) + (response.output_tokens or 0)
            # an empty assistant turn is refused by some APIs (Anthropic) when the conversation goes on
            content = response.content or ("" if response.tool_calls else "(no answer)")
            messages.append(ChatMessage("assistant", content, tool_calls=response.tool_calls))
            if not response.tool_calls:
                if nudged:
                    return stop("agent_no_tool_call: the model answered twice without calling a tool")
                nudged = True
                messages.append(ChatMessage("user", _NUDGE))
                continue
            for call in response.tool_calls:
                result = await self._tool(call, truth, session, given)
                messages.append(ChatMessage("tool", result, tool_call_id=call.id))
                if session.submitted is not None:
                    break
        context, first, lines = self._context(session.preamble)
        out = await self._llm.run_strict(truth, candidates, context, session.submitted, names, first, lines)
        result = dataclasses.replace(out, executor=self.kind,
                                     warnings=(*self._notes(messages, session, turns), *out.warnings),
                                     config={**out.config, **self._settings()})
        return result, tuple(messages)

    async def compare(self, truth: str, candidates: Sequence[str], *, context: str = "",
                      inputs: Sequence[Mapping[str, Any]] | None = None,
                      names: Sequence[str] | None = None) -> Comparison:
        """Let the model build x's harness and choose input states, then run x and every candidate on them
        (the :class:`~calib.executors.base.Executor` protocol)."""
        result, _ = await self.compare_with_transcript(truth, candidates, context=context, inputs=inputs,
                                                       names=names)
        return result


@register("agent")
def _factory(config: ExecutorConfig, *, server: Any, **options: Any) -> AgentExecutor:
    """``create_executor("agent", config, server=CHAT_SERVER, max_turns=..., max_seconds=...)``."""
    return AgentExecutor(config, server, **options)
