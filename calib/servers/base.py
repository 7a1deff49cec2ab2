"""The Server seam (docs/architecture.md "Seams"): one small core protocol plus optional abilities.

Every kind (``openai``, ``tgi``, ``anthropic``, ``embedded``) implements :class:`Server`
(``capabilities`` and ``complete``) and, where its server can, the optional protocols
:class:`Scoring` (teacher-forced log-probs of a continuation), :class:`Tokenizing`, :class:`Chatting`
and :class:`Embedding`. What a server can do is probed once (:class:`Capabilities`) and checked
against what a study needs before any work (:func:`require`).

Log-probabilities are natural logs under the server's base distribution (temperature 1), as the
OpenAI, vLLM and TGI APIs return them; calib converts to log10 only when it scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from calib._exceptions import CalibError
from calib.servers.messages import (
    CHAT_MAX_TOP_LOGPROBS,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Completion,
    SamplingParams,
    ScoredContinuation,
    TokenLogprob,
    Tool,
    ToolCall,
)

__all__ = [
    "CHAT_MAX_TOP_LOGPROBS",
    "Capabilities",
    "CapabilityError",
    "ChatMessage",
    "ChatParams",
    "ChatResponse",
    "Chatting",
    "Completion",
    "Describing",
    "Embedding",
    "RequestFailed",
    "SamplingParams",
    "ScoredContinuation",
    "Scoring",
    "Server",
    "ServerError",
    "TokenLogprob",
    "Tokenizing",
    "Tool",
    "ToolCall",
    "PROCEDURE_NEEDS",
    "allowed_procedures",
    "normal_dtype",
    "require",
    "require_chat_logprobs",
    "server_record",
]


class ServerError(CalibError):
    """A server could not be reached or answered in a way calib cannot use."""


class RequestFailed(ServerError):
    """One request failed after every retry; carries what a run records about it.

    Attributes
    ----------
    server
        The server's name in the spec.
    route
        The route or operation, e.g. ``/v1/completions``.
    attempts
        How many times it was sent.
    error
        The last error, one line (status and a short body, or the exception).
    status
        The last HTTP status, when there was one.
    """

    def __init__(self, server: str, route: str, attempts: int, error: str, status: int | None = None) -> None:
        self.server, self.route, self.attempts, self.error, self.status = server, route, attempts, error, status
        super().__init__(f"server {server!r}: {route} failed after {attempts} attempt(s): {error}")

    def to_dict(self) -> dict[str, Any]:
        """What a run directory records for a failed request."""
        return {"server": self.server, "route": self.route, "attempts": self.attempts,
                "error": self.error, "status": self.status}


class CapabilityError(ServerError):
    """A study needs a capability the server lacks (names the server, the capability, the fix)."""


@dataclass(frozen=True)
class Capabilities:
    """What one server can do, probed once at start and stored with the run.

    Attributes
    ----------
    kind, name, model, server_version
        Identity: the kind, the spec's name for the server, the served model, the version string.
    max_context
        Context length in tokens, when the server says.
    complete
        Text completion answers (``complete``): the completions route (OpenAI ``/v1/completions``, TGI
        ``/generate``) answered a one-token request. False for chat-only hosts.
    batch_prompts
        One request may carry a list of prompts (OpenAI /v1/completions on vLLM).
    echo_logprobs, prompt_logprobs
        Teacher-forced scoring via ``echo`` + ``logprobs`` or vLLM's ``prompt_logprobs``
        (TGI: ``decoder_input_details``).
    max_top_logprobs
        The most top alternatives per position the server returns (vLLM's --max-logprobs, 20 by default).
    output_logprobs
        The completions route returns the log-probs of the tokens it generates (``logprobs=N`` on
        ``/v1/completions``, ``details`` on TGI's ``/generate``).
    token_ids_in
        Prompts may be sent as token ids (exact alignment of scored continuations).
    full_distribution
        The server can score under a temperature other than 1 (it normalises over the whole vocabulary).
    tokenize, chat, tools, embeddings
        The optional abilities.
    chat_logprobs, chat_max_top_logprobs
        The chat route returns output-token log-probs (``logprobs=true``), with at most that many top
        alternatives per token (``top_logprobs``, at most 20 through chat APIs).
    """

    kind: str
    name: str
    model: str
    server_version: str | None = None
    max_context: int | None = None
    complete: bool = True
    batch_prompts: bool = False
    echo_logprobs: bool = False
    prompt_logprobs: bool = False
    max_top_logprobs: int = 0
    output_logprobs: bool = False
    token_ids_in: bool = False
    full_distribution: bool = False
    tokenize: bool = False
    chat: bool = False
    tools: bool = False
    embeddings: bool = False
    chat_logprobs: bool = False
    chat_max_top_logprobs: int = 0
    notes: tuple[str, ...] = ()

    @property
    def scoring(self) -> bool:
        """Teacher-forced scoring is possible one way or another."""
        return self.echo_logprobs or self.prompt_logprobs

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the run directory."""
        return dataclasses.asdict(self)


@runtime_checkable
class Server(Protocol):
    """The core protocol every kind implements."""

    name: str

    async def capabilities(self) -> Capabilities:
        """Probe (once; later calls return the stored result) what the server can do."""
        ...

    async def complete(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions for each prompt, in prompt order.

        Raises :class:`RequestFailed` when a request still fails after its retries.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and worker threads."""
        ...


@runtime_checkable
class Describing(Protocol):
    """A server that says what it runs, for the run's provenance record (``manifest.json``)."""

    def provenance(self) -> dict[str, Any]:
        """What the server reported about itself (see :func:`server_record`), from its capability probe.

        Never sends a request: a server not yet probed reports its fields as null with that reason.
        """
        ...


def normal_dtype(value: Any) -> str | None:
    """A dtype as a plain name (``torch.bfloat16`` -> ``bfloat16``), or None for no value."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    return text[len("torch."):] if text.startswith("torch.") else text


def server_record(kind: str, facts: dict[str, tuple[Any, str]], **extra: Any) -> dict[str, Any]:
    """One server's provenance record: each fact's value, with where it came from or why it is null.

    ``facts`` maps a field (``model``, ``revision``, ``dtype``, ``server_version``, ...) to ``(value,
    note)``: the note is the value's source (``"GET /info model_sha"``) when there is a value, else the
    reason there is none; the record keeps them apart in ``sources`` and ``missing``. ``extra`` adds
    fields as they are (lists of what responses said, e.g. ``system_fingerprints``).
    """
    out: dict[str, Any] = {"kind": kind}
    sources: dict[str, str] = {}
    missing: dict[str, str] = {}
    for field_name, (value, note) in facts.items():
        empty = value is None or value == ""
        out[field_name] = None if empty else value
        (missing if empty else sources)[field_name] = note
    return {**out, **extra, "sources": sources, "missing": missing}


@runtime_checkable
class Scoring(Protocol):
    """Teacher-forced scoring of a continuation given a prompt."""

    async def score(self, prompt: str, continuation: str, *, top_logprobs: int = 0,
                    temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Log-probs of each continuation token, with ``top_logprobs`` alternatives per position.

        ``temperatures`` (only where :attr:`Capabilities.full_distribution`) adds the continuation's
        per-token log-probs under the base policy at those temperatures.
        """
        ...


@runtime_checkable
class Tokenizing(Protocol):
    """The server's own tokenizer."""

    async def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        ...

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``."""
        ...


@runtime_checkable
class Chatting(Protocol):
    """Chat with optional tool use (judges and agents)."""

    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool] = (),
                   params: ChatParams | None = None) -> ChatResponse:
        """The model's next message."""
        ...


@runtime_checkable
class Embedding(Protocol):
    """Text embeddings."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text."""
        ...


_HOW_TO_ENABLE = {
    "complete": "it answers no text completion (a chat-only host: /v1/completions is not served); use a server "
    "with a completions route (vLLM, TGI, calib serve) for this role, or ask it through its chat route (a "
    "functional study's generation.route = \"chat\", docs/hosted.md)",
    "prompt_logprobs": "use vLLM (prompt_logprobs) or an OpenAI-compatible server that accepts echo with "
    "logprobs; for TGI 3 start it with --enable-prefill-logprobs",
    "scoring": "use vLLM (prompt_logprobs) or an OpenAI-compatible server that accepts echo with logprobs; "
    "for TGI 3 start it with --enable-prefill-logprobs",
    "tokenize": "use vLLM (/tokenize), TGI (/tokenize) or calib's embedded server",
    "chat": "serve a chat model (a chat template) or use an anthropic server",
    "tools": "serve a model whose chat template supports tools (vLLM: --enable-auto-tool-choice "
    "--tool-call-parser ...)",
    "output_logprobs": "its completions return no log-probs of the tokens they generate (logprobs=N on "
    "/v1/completions, details on TGI's /generate); use vLLM, TGI or calib serve, or a procedure that needs no "
    "log-probs (greedy_prefix, sampled)",
    "chat_logprobs": "its chat route returns no output-token log-probs (a request with logprobs=true was refused "
    "or answered without them); use a host and model whose chat API offers them (the OpenAI API's logprobs and "
    "top_logprobs, vLLM, calib serve), or a procedure that needs no log-probs (greedy_prefix, sampled)",
    "embeddings": "serve an embedding model (vLLM: --task embed) or use the offline fallback",
    "full_distribution": "score at temperature 1, or use calib's embedded server, which normalises over the "
    "whole vocabulary",
    "token_ids_in": "use vLLM or calib's embedded server, which accept token ids as prompts",
    "echo_logprobs": "its completions route does not echo the prompt's tokens (echo with logprobs), which [prompt] "
    "tokenizer = \"completions\" reads; use vLLM or calib serve, or another [prompt] tokenizer (server, file, hub, "
    "chars)",
}


#: What each study procedure asks of a server (docs/hosted.md "What each capability buys"), in the order
#: ``calib check`` lists what a server allows.
PROCEDURE_NEEDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("functional, completion route", ("complete",)),
    ("functional, chat route (a prompt-selection rule)", ("chat",)),
    ("functional prompts cut by the server's tokenizer", ("tokenize",)),
    ("prompts and windows cut through the completions route ([prompt] tokenizer = completions)",
     ("complete", "echo_logprobs")),
    ("extraction/census greedy, top_k, base (teacher-forced log-probs)", ("scoring", "tokenize")),
    ("extraction near_verbatim_greedy, near_verbatim", ("scoring", "tokenize", "complete")),
    ("extraction/census greedy_prefix, sampled (generations only; [prompt] tokenizer = file, hub, chars or "
     "completions)",
     ("complete",)),
    ("extraction/census greedy_prefix, sampled through chat (a prompt-selection rule)", ("chat",)),
    ("extraction/census greedy_logprob, completion route", ("complete", "output_logprobs")),
    ("extraction/census greedy_logprob, chat route", ("chat", "chat_logprobs")),
    ("probes generations, completion route", ("complete",)),
    ("probes generations, chat route (a prompt-selection rule)", ("chat",)),
    ("probes CoDeC", ("complete", "scoring")),
    ("judge, llm executor", ("chat",)),
    ("agent executor", ("chat", "tools")),
    ("embedding metric, semantic near-duplicates", ("embeddings",)),
)


def allowed_procedures(caps: Capabilities) -> list[str]:
    """The procedures of :data:`PROCEDURE_NEEDS` whose every capability ``caps`` has, in that order."""
    return [name for name, needed in PROCEDURE_NEEDS if all(getattr(caps, n) for n in needed)]


def missing(caps: Capabilities, needed: Sequence[str], *, top_logprobs: int = 0) -> list[str]:
    """Every capability of ``needed`` that ``caps`` lacks, each as ``"NAME: how to enable it"``, in order.

    ``needed`` names attributes of :class:`Capabilities` (``"complete"``, ``"scoring"``, ``"tokenize"``,
    ``"chat"``, ``"tools"``, ``"embeddings"``, ``"full_distribution"``, ...). ``top_logprobs`` checks
    the number of alternatives the server returns per position (``"top_logprobs: ..."``).
    """
    out = [f"{name}: {_HOW_TO_ENABLE.get(name, 'use a server that offers it')}"
           for name in dict.fromkeys(needed) if not getattr(caps, name)]
    if top_logprobs > caps.max_top_logprobs:
        out.append(f"top_logprobs: it returns at most {caps.max_top_logprobs} top log-probs per token, the study "
                   f"needs {top_logprobs}; raise the server's limit (vLLM: --max-logprobs {top_logprobs}) or lower "
                   "the study's top_k")
    return out


def require(caps: Capabilities, needed: Sequence[str], *, top_logprobs: int = 0) -> None:
    """Stop before any work when ``caps`` lacks something in ``needed`` (see :func:`missing`).

    Raises
    ------
    CapabilityError
        One line naming the server and every capability it lacks, each with how to enable it.
    """
    lacks = missing(caps, needed, top_logprobs=top_logprobs)
    if len(lacks) == 1 and lacks[0].startswith("top_logprobs: "):
        raise CapabilityError(
            f"server {caps.name!r} ({caps.kind}) returns at most {caps.max_top_logprobs} top log-probs per "
            f"token, the study needs {top_logprobs}: raise the server's limit (vLLM: --max-logprobs "
            f"{top_logprobs}) or lower the study's top_k"
        )
    if lacks:
        what = "; ".join(f"lacks {item}" for item in lacks)
        raise CapabilityError(f"server {caps.name!r} ({caps.kind}, model {caps.model!r}) {what}")


def require_chat_logprobs(caps: Capabilities, top: int) -> None:
    """Stop a chat request that asks output-token log-probs with ``top`` alternatives the server cannot give.

    Raises
    ------
    CapabilityError
        One line naming the server: it lacks ``chat_logprobs``, or returns fewer top alternatives per token.
    """
    require(caps, ["chat_logprobs"])
    if top > caps.chat_max_top_logprobs:
        raise CapabilityError(
            f"server {caps.name!r} ({caps.kind}, model {caps.model!r}) returns at most {caps.chat_max_top_logprobs} "
            f"top log-probs per chat token, {top} were asked; ask for at most {caps.chat_max_top_logprobs}")
