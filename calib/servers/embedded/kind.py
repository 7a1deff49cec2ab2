"""The ``embedded`` server kind: a local Hugging Face causal LM served in-process (the model organism).

Spec table::

    [servers.target]
    kind = "embedded"
    model_dir = "organism/target"   # a Hugging Face-format directory
    max_model_len = 512             # optional: default the model's positions
    threads = 2                     # optional: torch intra-op threads

The model loads on first use, in the server's one worker thread; every model call runs there, so
calls never overlap and the event loop stays free.

Provenance (:meth:`EmbeddedServer.provenance`): the model directory, the loaded weights' dtype and
device, calib's version as the server version, the SHA-256 of each weight file, and the revision where
the directory is a Hugging Face cache snapshot (``.../snapshots/<commit>``).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from calib._exceptions import InvalidParameterError
from calib._version import __version__
from calib.servers._config import check_config, positive
from calib.servers.base import (
    CHAT_MAX_TOP_LOGPROBS,
    Capabilities,
    CapabilityError,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Completion,
    RequestFailed,
    SamplingParams,
    ScoredContinuation,
    Tool,
    server_record,
)
from calib.servers.embedded.model import ContextLengthError, EmbeddedModel
from calib.servers.embedded.modeldir import check_model_dir
from calib.servers.registry import register

__all__ = ["EmbeddedServer", "embedded"]

T = TypeVar("T")


class EmbeddedServer:
    """A Server (with Scoring, Tokenizing, Chatting and Embedding) running a local model in-process.

    Parameters
    ----------
    name
        The server's name in the spec.
    model_dir
        The Hugging Face-format model directory.
    max_model_len, threads
        As :class:`~calib.servers.embedded.model.EmbeddedModel`.
    """

    kind = "embedded"

    def __init__(self, name: str, model_dir: str | Path, *, max_model_len: int | None = None,
                 threads: int | None = None) -> None:
        self.name = name
        self.model_dir = check_model_dir(model_dir)
        self._max_model_len = max_model_len
        self._threads = threads
        self._model: EmbeddedModel | None = None
        self._caps: Capabilities | None = None
        self._about: dict[str, Any] | None = None  # dtype, device, weight hashes (provenance)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"calib-embedded-{name}")

    def _loaded(self) -> EmbeddedModel:
        # Runs in the worker thread only, so the model loads once.
        if self._model is None:
            self._model = EmbeddedModel(self.model_dir, max_model_len=self._max_model_len, threads=self._threads)
        return self._model

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def run() -> T:
            return fn(self._loaded(), *args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def model(self) -> EmbeddedModel:
        """The loaded model (loading it on first use)."""
        return await self._call(lambda m: m)

    async def capabilities(self) -> Capabilities:
        """What the embedded server can do (everything but tool calls)."""
        if self._caps is None:
            m = await self.model()
            self._caps = Capabilities(
                kind="embedded", name=self.name, model=str(self.model_dir), server_version=__version__,
                max_context=m.max_model_len, batch_prompts=True, echo_logprobs=True, prompt_logprobs=True,
                max_top_logprobs=m.vocab_size, output_logprobs=True, token_ids_in=True, full_distribution=True,
                tokenize=True, chat=m.has_chat_template, tools=False, embeddings=True,
                chat_logprobs=m.has_chat_template, chat_max_top_logprobs=min(CHAT_MAX_TOP_LOGPROBS, m.vocab_size),
                notes=("in-process transformers on the CPU, float32; no tool calling",))
            self._about = await self._call(lambda m: {"dtype": m.dtype, "device": m.device,
                                                      "weights": weight_hashes(self.model_dir)})
        return self._caps

    def provenance(self) -> dict[str, Any]:
        """The model directory, dtype, device, version and weight hashes, each with its source or why null."""
        about = self._about
        snapshot = self.model_dir.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", self.model_dir.name)
        revision = ((self.model_dir.name, "model_dir is a Hugging Face cache snapshot") if snapshot else
                    (None, "a local model directory has no hub revision; weights_sha256 identifies the weights"))
        if about is None:
            why = "the server was not probed in this run"
            return server_record(self.kind, {"model": (str(self.model_dir), "spec model_dir"), "revision": revision,
                                             "dtype": (None, why), "server_version": (None, why)})
        return server_record(self.kind, {
            "model": (str(self.model_dir), "spec model_dir"), "revision": revision,
            "dtype": (about["dtype"].removeprefix("torch."), "the loaded weights (torch)"),
            "device": (about["device"], "the loaded weights (torch)"),
            "server_version": (__version__, "calib (the embedded server runs in-process)")},
            weights_sha256=about["weights"])

    async def complete(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions of each prompt, in prompt order."""
        def run(m: EmbeddedModel) -> list[list[Completion]]:
            return [[g.to_completion() for g in m.generate(m.tokenize(p), params)] for p in prompts]

        return await self._call(run)

    async def score(self, prompt: str, continuation: str, *, top_logprobs: int = 0,
                    temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Teacher-forced log-probs of ``continuation`` after ``prompt``.

        The two are tokenized separately and their ids concatenated, so the boundary is exactly where the
        caller put it (a tokenizer that would merge tokens across it is not consulted). The prompt gets the
        tokenizer's special tokens (e.g. BOS) as a text prompt would on vLLM, the continuation none, as
        the ``openai`` kind does.
        """
        def run(m: EmbeddedModel) -> ScoredContinuation:
            return m.score(m.tokenize(prompt, add_special_tokens=True), m.tokenize(continuation), top_logprobs,
                           temperatures)

        return await self._call(run)

    async def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return await self._call(lambda m: m.tokenize(text))

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``."""
        return await self._call(lambda m: m.detokenize(list(token_ids)))

    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool] = (),
                   params: ChatParams | None = None) -> ChatResponse:
        """The model's next message, through its chat template (no tool calls)."""
        if tools:
            raise CapabilityError(f"server {self.name!r} (embedded, model {str(self.model_dir)!r}) lacks tools: "
                                  "the embedded server does not call tools; use an openai or anthropic server")
        params = params or ChatParams()

        def run(m: EmbeddedModel) -> ChatResponse:
            if not m.has_chat_template:
                raise CapabilityError(f"server {self.name!r} (embedded, model {str(self.model_dir)!r}) lacks chat: "
                                      "the model has no chat template")
            prompt = m.apply_chat_template([{"role": msg.role, "content": msg.content} for msg in messages])
            ids = m.tokenize(prompt)
            max_tokens = min(params.max_tokens, m.max_model_len - len(ids))
            (g,) = m.generate(ids, SamplingParams(max_tokens=max(max_tokens, 0), temperature=params.temperature,
                                                  stop=params.stop, seed=params.seed, logprobs=params.logprobs))
            return ChatResponse(content=g.text, finish_reason=g.finish_reason, input_tokens=len(ids),
                                output_tokens=len(g.token_ids),
                                logprobs=None if params.logprobs is None else g.logprobs)

        return await self._call(run)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (mean-pooled last hidden state).

        A text longer than the model's context fails the request as an HTTP server's 400 would
        (:class:`~calib.servers.base.RequestFailed`): an embedding metric then records that pair's reason
        instead of stopping the study.
        """
        try:
            return await self._call(lambda m: m.embed(list(texts)))
        except ContextLengthError as exc:
            raise RequestFailed(self.name, "embed", 1, " ".join(str(exc).split()), status=400) from None

    async def aclose(self) -> None:
        """Stop the worker thread (after the call in progress)."""
        await asyncio.get_running_loop().run_in_executor(None, partial(self._executor.shutdown, wait=True))


_KEYS = frozenset({"kind", "model_dir", "max_model_len", "threads"})


def weight_hashes(model_dir: Path) -> dict[str, str]:
    """SHA-256 of each weight file (``*.safetensors``, ``*.bin``) in ``model_dir``, by file name.

    For a LoRA adapter folder, the base model's weight files too, named ``base/<file>``.
    """
    from calib.servers.embedded.modeldir import ADAPTER_CONFIG, adapter_base

    out = {}
    if (model_dir / ADAPTER_CONFIG).is_file():
        out.update({f"base/{name}": digest for name, digest in weight_hashes(adapter_base(model_dir)).items()})
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in (".safetensors", ".bin"):
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            out[path.name] = digest.hexdigest()
    return out


def _optional_int(name: str, config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return None if value is None else positive(name, key, value)


@register("embedded")
def embedded(name: str, config: Mapping[str, Any]) -> EmbeddedServer:
    """Build the ``embedded`` server ``name`` from its spec table (``model_dir``, ``max_model_len``, ``threads``)."""
    check_config(name, "embedded", config, _KEYS)
    model_dir = config.get("model_dir")
    if not isinstance(model_dir, str | Path) or not str(model_dir):
        raise InvalidParameterError(f"server {name!r}: kind 'embedded' needs model_dir, the path of a Hugging "
                                    f"Face-format model directory (got {model_dir!r})")
    return EmbeddedServer(name, model_dir, max_model_len=_optional_int(name, config, "max_model_len"),
                          threads=_optional_int(name, config, "threads"))
