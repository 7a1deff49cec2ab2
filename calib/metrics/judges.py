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

import ast
import asyncio
import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from calib._exceptions import InvalidParameterError
from calib.data.judge import read_prompt_header
from calib.metrics.base import LANGUAGE_NAMES, MetricUnavailable, Pair, Score, normalize_language, register
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

T = TypeVar("T")

#: Chat parameters of a judge unless ``params=`` says otherwise: greedy, room for a reasoning line.
DEFAULT_PARAMS = ChatParams(max_tokens=512, temperature=0.0)

_PLACEHOLDERS = re.compile(r"__LANGUAGE__|\{reference_function\}|\{generated_function\}")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_BRACKETS = re.compile(r"\[\[\s*(" + _NUMBER + r")\s*\]\]")
# Python-dict style answers are tried on at most this many candidate ends per opening brace.
_MAX_LITERAL_ENDS = 64


# ----------------------------------------------------------------------------------------- prompt files
@dataclass(frozen=True)
class MetricPrompt:
    """A versioned judge prompt: header fields and the system and user templates.

    Attributes
    ----------
    name, version, source
        From the file's header.
    system, user
        The templates of the system and the user message.
    sha256
        Hash of the file's template part (keys cached values together with name and version).
    """

    name: str
    version: str
    source: str
    system: str
    user: str
    sha256: str

    @property
    def label(self) -> str:
        """``name.vVERSION``, as recorded with results."""
        return f"{self.name}.v{self.version}"

    def render(self, *, language: str, reference: str, candidate: str) -> list[ChatMessage]:
        """The system and user messages for one pair (one pass of plain replacement, see the module doc)."""
        values = {"__LANGUAGE__": language, "{reference_function}": reference.strip("\n"),
                  "{generated_function}": candidate.strip("\n")}

        def fill(template: str) -> str:
            return _PLACEHOLDERS.sub(lambda m: values[m.group(0)], template)

        return [ChatMessage(role="system", content=fill(self.system)),
                ChatMessage(role="user", content=fill(self.user))]


def load_metric_prompt(path: str | Path) -> MetricPrompt:
    """Read a judge prompt file (module docstring: header, ``System:`` and ``User:`` lines, placeholders).

    ``path`` is a file, or the bare name of one shipped with calib (``judge_functional.v1.txt``).

    Raises
    ------
    InvalidParameterError
        When the file lacks a header field, the ``System:``/``User:`` lines or a code placeholder.
    """
    shipped = resources.files("calib.metrics").joinpath("prompts").joinpath(str(path))
    if not Path(path).exists() and shipped.is_file():
        text, where = shipped.read_text(encoding="utf-8"), f"calib.metrics/prompts/{path}"
    else:
        try:
            text, where = Path(path).read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise InvalidParameterError(f"judge prompt {path}: cannot read it ({exc.strerror})") from exc
    lines = text.splitlines()
    header, start = read_prompt_header(lines)
    body = lines[start:]
    missing = [k for k in ("name", "version", "source") if not header.get(k)]
    if missing:
        raise InvalidParameterError(f"judge prompt {where}: header lacks {', '.join(missing)} "
                                    f"('# name:', '# version:' and '# source:' lines)")
    if "System:" not in body or "User:" not in body or body.index("System:") > body.index("User:"):
        raise InvalidParameterError(f"judge prompt {where}: needs a line 'System:' and, after it, a line 'User:' "
                                    f"starting the two messages")
    s, u = body.index("System:"), body.index("User:")
    system, user = "\n".join(body[s + 1:u]).strip("\n"), "\n".join(body[u + 1:]).strip("\n")
    absent = [p for p in ("{reference_function}", "{generated_function}") if p not in user]
    if absent:
        raise InvalidParameterError(f"judge prompt {where}: the user message lacks {' and '.join(absent)}")
    digest = hashlib.sha256("\n".join(body).encode("utf-8")).hexdigest()
    return MetricPrompt(name=header["name"], version=header["version"], source=header["source"], system=system,
                        user=user, sha256=digest)


def language_name(language: str) -> str:
    """How a prompt names ``language``: ``C++`` for ``cpp``; a language calib does not list is named as given.

    Raises
    ------
    MetricUnavailable
        When no language is given.
    """
    if not str(language or "").strip():
        raise MetricUnavailable("no language given for the pair")
    try:
        return LANGUAGE_NAMES[normalize_language(language)]
    except InvalidParameterError:
        return str(language).strip()


# ----------------------------------------------------------------------------------------- reading replies
@dataclass(frozen=True)
class Verdict:
    """A judge's score read from its reply and what else the reply says (``category``, ``reasoning``)."""

    value: float
    detail: dict[str, Any]


def _unparsable(why: str, reply: str) -> MetricUnavailable:
    return MetricUnavailable(f"judge reply unparsable: {why}", raw=reply)


def _as_score(value: Any, what: str, reply: str) -> float:
    """``value`` as a float in [0, 1] (a number or a numeric string), else :class:`MetricUnavailable`."""
    if isinstance(value, bool):
        raise _unparsable(f"{what} is a bool ({value})", reply)
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(_NUMBER + r"|nan|inf|-inf", text, flags=re.IGNORECASE):
            raise _unparsable(f"{what} is not a number: {value[:40]!r}", reply)
        value = float(text)
    if not isinstance(value, int | float):
        raise _unparsable(f"{what} is not a number: {str(value)[:40]!r}", reply)
    value = float(value)
    if not math.isfinite(value):
        raise _unparsable(f"{what} is {value}", reply)
    if not 0.0 <= value <= 1.0:
        raise _unparsable(f"{what} {value:g} outside [0, 1]", reply)
    return value


def parse_bracket_score(reply: str) -> Verdict:
    """Read a ``[[0.777]]`` score (``judge_structure``).

    Spaces inside the brackets (``[[ 0.8 ]]``), integers (``[[1]]``) and a leading point (``[[.5]]``) are
    read. When the reply holds several, the **last** one wins: models that explain themselves put the
    answer last, and one that repeats the prompt's example ``[[0.777]]`` does so before answering. The
    last score outside [0, 1] makes the reply unparsable (it is not skipped for an earlier one).

    Raises
    ------
    MetricUnavailable
        ``judge reply unparsable: <why>``, with the reply as ``raw``.
    """
    if not reply.strip():
        raise _unparsable("empty reply", reply)
    found = _BRACKETS.findall(reply)
    if not found:
        raise _unparsable("no [[score]] in the reply", reply)
    return Verdict(_as_score(found[-1], "[[score]]", reply), {})


def _literal_dict(text: str, start: int) -> dict | None:
    """A Python-style dict literal (single quotes, True/None) starting at ``text[start]``, if one does."""
    end = text.find("}", start)
    for _ in range(_MAX_LITERAL_ENDS):
        if end == -1:
            return None
        try:
            obj = ast.literal_eval(text[start:end + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return obj
        end = text.find("}", end + 1)
    return None


def _objects(text: str) -> Iterator[dict]:
    """Every JSON (or Python-dict style) object in ``text``, in the order of its opening brace."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            obj = _literal_dict(text, start)
        if isinstance(obj, dict):
            yield obj
        start = text.find("{", start + 1)


def parse_json_score(reply: str, key: str, keep: Sequence[str] = ()) -> Verdict:
    """Read the score ``key`` from a JSON object in ``reply`` (``judge_semantic``, ``judge_functional``).

    The object may sit in a code fence or in prose, be written Python-style (single quotes, read with
    :func:`ast.literal_eval`) and give its numbers as strings (``"0.8"``). The **first** object holding
    ``key`` wins, nested objects included; its value must be a finite number in [0, 1] (not a bool).
    The fields named in ``keep`` are copied into the verdict's detail (``None`` where absent).

    Raises
    ------
    MetricUnavailable
        ``judge reply unparsable: <why>``, with the reply as ``raw``.
    """
    if not reply.strip():
        raise _unparsable("empty reply", reply)
    obj = next((o for o in _objects(reply) if key in o), None)
    if obj is None:
        raise _unparsable(f"no JSON object with {key!r}", reply)
    detail = {k: obj.get(k) if isinstance(obj.get(k), str | int | float | type(None)) else str(obj.get(k))
              for k in keep}
    return Verdict(_as_score(obj[key], key, reply), detail)


# ----------------------------------------------------------------------------------------- servers
def server_identity(server: Any) -> dict[str, Any]:
    """What identifies a server's model in a fingerprint: ``kind``, ``model`` and ``revision`` (no keys).

    Read from the server's attributes (its spec), never from a probe, so that it is the same before and
    after the first request; give ``model`` in an openai server's spec for it to be known up front. A
    server whose model is not known up front (TGI) is identified by its base URLs as well.
    """
    kind = getattr(server, "kind", None)
    model = getattr(server, "model", None)
    if not isinstance(model, str):
        model = getattr(server, "model_dir", None)
        model = None if model is None else str(model)
    revision = getattr(server, "revision", None)
    identity: dict[str, Any] = {"kind": kind if isinstance(kind, str) else type(server).__name__, "model": model,
                                "revision": revision if isinstance(revision, str) else None}
    if model is None:  # a TGI server names its model only once probed: its address stands in
        urls = getattr(server, "base_urls", None) or [getattr(server, "base_url", None)]
        urls = sorted(u for u in urls if isinstance(u, str))
        if urls:
            identity["base_urls"] = urls
    return identity


class SyncRunner:
    """Runs coroutines for a metric's synchronous ``score`` on one private event loop.

    Server clients keep connection pools bound to the loop that opened them, so successive sync calls
    must share one loop (a fresh ``asyncio.run`` per call would strand the pool).
    """

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` to completion; refuses inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("score() is synchronous and cannot run inside an event loop; await ascore_batch()")
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(make())

    def close(self) -> None:
        """Close the private loop (after the server's pool on it has been closed)."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None


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
                "params": {**dataclasses.asdict(self.params), "stop": list(self.params.stop)}}

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
