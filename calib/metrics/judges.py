"""LLM judges of code similarity: ``judge_structure``, ``judge_semantic`` and ``judge_functional``.

The three prompts are those of the functional-memorization paper, Appendix D.1, word for word, in
versioned files under ``calib/metrics/prompts/``:

* ``judge_structure`` (Prompt 1, after Song et al. 2024): the judge answers a score in double brackets,
  ``[[0.777]]``;
* ``judge_semantic`` (Prompt 2, after Nikiema et al. 2025): a JSON object ``{"similarity_rating",
  "category", "reasoning"}``;
* ``judge_functional`` (Prompt 3, the paper's own): a JSON object ``{"equivalence_score", "reasoning"}``.

A prompt file has ``# key: value`` header lines (``name``, ``version``, ``source``, ...), then the
template: the line ``System:`` starts the system message and the line ``User:`` the user message.
``__LANGUAGE__`` becomes the language's name (``C++``), ``{reference_function}`` and
``{generated_function}`` the two codes, in one pass of plain replacement (code is full of braces, and a
placeholder written inside one of the codes stays as written).

Reading an answer is tolerant of how models write but never guesses a number: a reply whose score cannot
be read, lies outside [0, 1], is NaN or a bool, or is missing gives a null with the reason
``judge reply unparsable: <why>`` and the raw reply kept; a failed request gives ``request failed: ...``.
Neither is ever scored 0. See :func:`parse_bracket_score` and :func:`parse_json_score` for the rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.metrics.base import MetricUnavailable, Pair, Score, register
from calib.metrics.judge_prompts import (
    MetricPrompt,
    Verdict,
    language_name,
    load_metric_prompt,
    parse_bracket_score,
    parse_json_score,
)
from calib.metrics.serving import SyncRunner, server_identity
from calib.servers.base import CapabilityError, ChatMessage, ChatParams, RequestFailed, ServerError, require

__all__ = [
    "DEFAULT_PARAMS",
    "JUDGES",
    "JudgeMetric",
    "JudgeSpec",
    "MetricPrompt",
    "SyncRunner",
    "Verdict",
    "language_name",
    "load_metric_prompt",
    "parse_bracket_score",
    "parse_json_score",
    "server_identity",
]

#: Chat parameters of a judge unless ``params=`` says otherwise: greedy, room for a reasoning line.
DEFAULT_PARAMS = ChatParams(max_tokens=512, temperature=0.0)


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


# ----------------------------------------------------------------------------------------- the metric
@dataclass(frozen=True)
class JudgeSpec:
    """One judge: its metric name, its shipped prompt and how its reply is read."""

    name: str
    prompt_file: str
    parse: Callable[[str], Verdict]


JUDGES: dict[str, JudgeSpec] = {
    "judge_structure": JudgeSpec("judge_structure", "judge_structure.v1.txt", parse_bracket_score),
    "judge_semantic": JudgeSpec("judge_semantic", "judge_semantic.v1.txt",
                                lambda reply: parse_json_score(reply, "similarity_rating", ("category", "reasoning"))),
    "judge_functional": JudgeSpec("judge_functional", "judge_functional.v1.txt",
                                  lambda reply: parse_json_score(reply, "equivalence_score", ("reasoning",))),
}


def _chat_params(params: ChatParams | Mapping[str, Any] | None) -> ChatParams:
    if params is None:
        return DEFAULT_PARAMS
    if isinstance(params, ChatParams):
        return params
    if isinstance(params, Mapping):
        fields = {**dataclasses.asdict(DEFAULT_PARAMS), **params}
        try:
            return ChatParams(**{**fields, "stop": tuple(fields["stop"] or ())})
        except TypeError as exc:
            raise InvalidParameterError(f"params: {exc} (ChatParams takes max_tokens, temperature, stop, "
                                        f"seed)") from exc
    raise InvalidParameterError(f"params must be a ChatParams or a table of its fields, got {type(params).__name__}")


class JudgeMetric:
    """An LLM judge over any chat server (:class:`~calib.servers.base.Chatting`).

    Parameters
    ----------
    spec
        Which judge (:data:`JUDGES`).
    server
        A chat server (the paper: LLaMA-3.3-70B-Instruct, or Claude Sonnet-4.6); without one, scoring
        raises :class:`MetricUnavailable` (``no chat server: ...``).
    params
        Chat parameters (default :data:`DEFAULT_PARAMS`: greedy, 512 tokens), or a table of their fields.
    concurrency
        Requests in flight at once in :meth:`ascore_batch`.
    prompt
        A prompt file replacing the shipped one (same layout and placeholders).
    """

    kind = "judge"
    version = "1"

    def __init__(self, spec: JudgeSpec, *, server: Any = None, params: ChatParams | Mapping[str, Any] | None = None,
                 concurrency: int = 8, prompt: str | Path | None = None) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidParameterError(f"{spec.name}: concurrency must be an integer >= 1, got {concurrency!r}")
        if server is not None and not callable(getattr(server, "chat", None)):
            raise InvalidParameterError(f"{spec.name}: server {getattr(server, 'name', server)!r} cannot chat; "
                                        "give a chat server (openai, anthropic or embedded kind; TGI through the "
                                        "openai kind)")
        self.name = spec.name
        self.spec = spec
        self.server = server
        self.params = _chat_params(params)
        self.concurrency = concurrency
        self.prompt = load_metric_prompt(prompt if prompt is not None else spec.prompt_file)
        self._sync = SyncRunner()

    def __repr__(self) -> str:
        return f"JudgeMetric({self.name!r}, prompt={self.prompt.label!r}, server={self.server!r})"

    def fingerprint(self) -> dict[str, Any]:
        """Name, version, prompt (name, version, hash), the server's kind and model, and the chat params."""
        return {"name": self.name, "version": self.version, "prompt": self.prompt.label,
                "prompt_sha256": self.prompt.sha256,
                "server": None if self.server is None else server_identity(self.server),
                "params": {**{k: v for k, v in dataclasses.asdict(self.params).items()
                              if not (k == "logprobs" and v is None)},  # judges ask none: keys stay as they were
                           "stop": list(self.params.stop)}}

    def messages(self, reference_code: str, candidate_code: str, language: str) -> list[ChatMessage]:
        """The system and user messages sent for one pair."""
        return self.prompt.render(language=language_name(language), reference=reference_code,
                                  candidate=candidate_code)

    def _no_server(self) -> MetricUnavailable:
        return MetricUnavailable(f"no chat server: pass --server with a chat model (openai, anthropic or "
                                 f"embedded kind) to score {self.name}", transient=True)

    async def _check_server(self) -> None:
        if self.server is None:
            raise self._no_server()
        probe = getattr(self.server, "capabilities", None)
        if callable(probe):
            require(await probe(), ["chat"])

    async def _judge(self, pair: Pair, semaphore: asyncio.Semaphore) -> Score:
        try:
            messages = self.messages(pair.reference, pair.candidate, pair.language)
        except MetricUnavailable as exc:
            return Score(None, exc.reason)
        async with semaphore:
            try:
                response = await self.server.chat(messages, params=self.params)
            except CapabilityError:
                raise
            except (RequestFailed, ServerError) as failure:
                return Score(None, f"request failed: {_one_line(failure)}", transient=True)
            except Exception as exc:  # noqa: BLE001 - one bad sample is recorded, never fatal (as score_pairs)
                return Score(None, f"error: {type(exc).__name__}: {_one_line(exc)}")
        reply = response.content or ""
        try:
            verdict = self.spec.parse(reply)
        except MetricUnavailable as exc:
            reason = exc.reason
            if response.finish_reason in ("length", "max_tokens"):  # OpenAI and TGI, Anthropic
                reason += f" (the reply was cut at max_tokens={self.params.max_tokens})"
            return Score(None, reason, raw=reply, detail={"raw": reply})
        return Score(verdict.value, raw=reply, detail={"raw": reply, **verdict.detail})

    async def ascore_batch(self, pairs: Sequence[Pair]) -> list[Score]:
        """One :class:`Score` per pair, in order, with up to ``concurrency`` requests in flight.

        Raises
        ------
        MetricUnavailable
            Without a server (``no chat server: ...``): no pair can be scored.
        CapabilityError
            When the server cannot chat.
        """
        await self._check_server()
        semaphore = asyncio.Semaphore(self.concurrency)
        return list(await asyncio.gather(*(self._judge(p, semaphore) for p in pairs)))

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        """The judge's score for one pair; raises :class:`MetricUnavailable` (with the raw reply) instead of 0."""
        if self.server is None:
            raise self._no_server()
        (result,) = self._sync.run(lambda: self.ascore_batch([Pair(reference_code, candidate_code, language)]))
        if result.value is None:
            raise MetricUnavailable(result.reason or "judge gave no score", raw=result.raw)
        return result.value

    def close(self) -> None:
        """Close the private event loop of :meth:`score` (the server itself belongs to the caller)."""
        self._sync.close()


def _factory(name: str) -> Callable[..., JudgeMetric]:
    def make(*, server: Any = None, params: ChatParams | Mapping[str, Any] | None = None, concurrency: int = 8,
             prompt: str | Path | None = None) -> JudgeMetric:
        return JudgeMetric(JUDGES[name], server=server, params=params, concurrency=concurrency, prompt=prompt)

    make.__name__ = name
    make.__doc__ = f"The ``{name}`` metric (:class:`JudgeMetric`); options as its parameters."
    return make


for _name in JUDGES:
    register(_name)(_factory(_name))
