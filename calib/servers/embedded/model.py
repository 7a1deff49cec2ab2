"""A local Hugging Face causal LM on the CPU: generation, teacher-forced scoring, tokens, embeddings.

:class:`EmbeddedModel` is what the embedded server (in-process kind and ``calib serve``) runs. Its
methods are synchronous and not thread-safe: callers run them in one worker thread, so that requests
never run the model concurrently.

Log-probs follow vLLM: natural-log softmax at temperature 1 of the raw logits over the whole
vocabulary, whatever the sampling parameters (``processed_logprobs=True`` gives TGI's log-probs of the
distribution after temperature, top-k and top-p instead).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from calib._exceptions import InvalidParameterError
from calib.servers.base import Completion, SamplingParams, ScoredContinuation, TokenLogprob
from calib.servers.embedded.modeldir import ADAPTER_CONFIG, adapter_base, check_model_dir

__all__ = ["ContextLengthError", "EmbeddedModel", "Generation"]


class ContextLengthError(InvalidParameterError):
    """A request needs more tokens than the model's context (prompt plus completion)."""


@dataclass(frozen=True)
class Generation:
    """One generated sequence, with what both the OpenAI and the TGI routes need to describe it.

    ``text`` ends before the first stop sequence (OpenAI/vLLM semantics); ``full_text`` is every
    generated token decoded, stop sequence included (TGI semantics). ``finish_reason`` is ``"stop"``
    (EOS or a stop sequence) or ``"length"``; ``stop_reason`` is the stop sequence that ended it, else
    ``None``. ``logprobs`` holds one entry per generated token when log-probs were asked for. ``seed``
    is the seed sampling used (``None`` for greedy decoding).
    """

    token_ids: tuple[int, ...]
    text: str
    full_text: str
    finish_reason: str
    stop_reason: str | None
    logprobs: tuple[TokenLogprob, ...]
    seed: int | None

    @property
    def eos(self) -> bool:
        """The sequence ended on the end-of-sequence token."""
        return self.finish_reason == "stop" and self.stop_reason is None

    def to_completion(self) -> Completion:
        """The Server seam's view of this sequence."""
        return Completion(text=self.text, finish_reason=self.finish_reason, tokens=self.logprobs)


#: One model load at a time in a process: transformers builds a model on the meta device under a context that
#: patches torch globally, so two loads in two threads at once can leave one model's weights on the meta device.
_LOADING = threading.Lock()


def _load_model(model_dir: Path) -> torch.nn.Module:
    """The causal LM of ``model_dir``, float32; a LoRA adapter folder is merged into its base (needs ``peft``)."""
    with _LOADING:
        return _load_unlocked(model_dir)


def _load_unlocked(model_dir: Path) -> torch.nn.Module:
    if not (model_dir / ADAPTER_CONFIG).is_file():
        return AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)
    try:
        from peft import PeftModel
    except ImportError:
        raise InvalidParameterError(f"{model_dir} is a LoRA adapter folder; serving it needs peft "
                                    "(pip install 'calib[mitigate]')") from None
    base = AutoModelForCausalLM.from_pretrained(adapter_base(model_dir), local_files_only=True, dtype=torch.float32)
    return PeftModel.from_pretrained(base, model_dir, is_trainable=False).merge_and_unload()


class EmbeddedModel:
    """A causal LM and its tokenizer loaded from a local directory, float32 on the CPU.

    Parameters
    ----------
    model_dir
        A Hugging Face-format directory (``config.json``, weights, tokenizer files).
    max_model_len
        Context limit in tokens (prompt plus completion); default and maximum: the model's positions.
    threads
        Torch intra-op threads (``torch.set_num_threads``); ``None`` leaves torch's default.
    """

    def __init__(self, model_dir: str | Path, *, max_model_len: int | None = None,
                 threads: int | None = None) -> None:
        self.model_dir = check_model_dir(model_dir)
        if threads is not None:
            if threads < 1:
                raise InvalidParameterError(f"threads must be >= 1, got {threads}")
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
        # calib checks context lengths itself; this silences the tokenizer's own warning about long texts.
        self.tokenizer.model_max_length = 1 << 62
        self.model = _load_model(self.model_dir)
        self.model.eval()
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if max_model_len is None:
            max_model_len = positions
        elif positions is not None and max_model_len > positions:
            raise InvalidParameterError(
                f"max_model_len={max_model_len} exceeds the model's {positions} positions ({self.model_dir})")
        if max_model_len is None or max_model_len < 1:
            raise InvalidParameterError(f"max_model_len must be >= 1; the model at {self.model_dir} does not "
                                        "say its context length, so pass it explicitly")
        self.max_model_len: int = int(max_model_len)
        self.vocab_size: int = int(self.model.get_output_embeddings().weight.shape[0])
        self.eos_token_id: int | None = self.tokenizer.eos_token_id
        self.special_ids = frozenset(self.tokenizer.all_special_ids)
        self._token_texts: list[str] | None = None

    @property
    def dtype(self) -> str:
        """The dtype of the loaded weights, as torch writes it (``torch.float32``; TGI's ``model_dtype``)."""
        return str(next(self.model.parameters()).dtype)

    @property
    def device(self) -> str:
        """The device type the weights are on (``cpu``; TGI's ``model_device_type``)."""
        return next(self.model.parameters()).device.type

    # -- tokens ---------------------------------------------------------------------------------

    @property
    def has_chat_template(self) -> bool:
        """The tokenizer carries a chat template."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    def tokenize(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text`` (by default without special tokens)."""
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def tokenize_with_offsets(self, text: str) -> list[tuple[int, int, int]]:
        """``(token_id, start, stop)`` character offsets of each token of ``text``."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(i, s, e) for i, (s, e) in zip(enc["input_ids"], enc["offset_mapping"])]

    def detokenize(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``."""
        self.check_ids(ids)
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """The tokenizer's own token strings (e.g. ``'Ġdef'``), as vLLM's ``return_token_strs``."""
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def token_text(self, token_id: int) -> str:
        """Text of one token on its own (U+FFFD where it is part of a multi-byte character), as vLLM."""
        if self._token_texts is None:
            pieces = self.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))
            self._token_texts = [self.tokenizer.convert_tokens_to_string([p]) if p is not None else ""
                                 for p in pieces]
        return self._token_texts[token_id]

    def apply_chat_template(self, messages: Sequence[dict], *, add_generation_prompt: bool = True) -> str:
        """The chat prompt text of ``messages`` (dicts with ``role`` and ``content``)."""
        if not self.has_chat_template:
            raise InvalidParameterError(f"the model at {self.model_dir} has no chat template; use completions")
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    def check_ids(self, ids: Sequence[int]) -> None:
        """Raise when a token id lies outside the vocabulary."""
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.vocab_size:
                raise InvalidParameterError(f"token id {i!r} is outside the vocabulary [0, {self.vocab_size})")

    def check_length(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raise :class:`ContextLengthError` when prompt plus completion exceed ``max_model_len``."""
        if prompt_tokens + max_tokens > self.max_model_len:
            raise ContextLengthError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} in the "
                "completion). Please reduce the length of the prompt or the completion.")

    # -- log-probs ------------------------------------------------------------------------------

    def _entry(self, logprobs: torch.Tensor, token_id: int, top: int) -> TokenLogprob:
        """``token_id``'s log-prob, 1-based rank and the ``top`` best alternatives under ``logprobs``."""
        chosen = logprobs[token_id]
        rank = int((logprobs > chosen).sum().item()) + 1
        alternatives: tuple[tuple[int, str, float], ...] = ()
        if top > 0:
            values, indices = torch.topk(logprobs, min(top, logprobs.shape[0]))
            alternatives = tuple((int(i), self.token_text(int(i)), float(v))
                                 for v, i in zip(values.tolist(), indices.tolist()))
        return TokenLogprob(token_id=token_id, token=self.token_text(token_id), logprob=float(chosen),
                            top=alternatives, rank=rank)

    def _logits(self, ids: Sequence[int]) -> torch.Tensor:
        """Logits at every position of ``ids`` (shape ``[len(ids), vocab]``), one forward pass."""
        return self.model(torch.tensor([list(ids)], dtype=torch.long)).logits[0].float()

    @torch.inference_mode()
    def prompt_logprobs(self, ids: Sequence[int], top: int = 0) -> list[TokenLogprob | None]:
        """Log-prob of every prompt token given the ones before it (``None`` for the first, as vLLM)."""
        self.check_ids(ids)
        if not ids:
            return []
        self.check_length(len(ids), 0)
        logprobs = torch.log_softmax(self._logits(ids), dim=-1)
        return [None] + [self._entry(logprobs[i - 1], int(ids[i]), top) for i in range(1, len(ids))]

    @torch.inference_mode()
    def score(self, prompt_ids: Sequence[int], continuation_ids: Sequence[int], top_logprobs: int = 0,
              temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Teacher-forced log-probs of ``continuation_ids`` after ``prompt_ids`` in one forward pass.

        Each continuation token gets its log-prob at temperature 1, its rank in the whole vocabulary and
        the ``top_logprobs`` best alternatives; for each temperature T, the log-softmax of logits / T
        (normalised over the whole vocabulary).
        """
        self.check_ids(prompt_ids)
        self.check_ids(continuation_ids)
        if not prompt_ids:
            raise InvalidParameterError("prompt must hold at least one token to score a continuation after it")
        for t in temperatures:
            if not t > 0:
                raise InvalidParameterError(f"temperatures must be > 0, got {t!r}")
        ids = list(prompt_ids) + list(continuation_ids)
        self.check_length(len(ids), 0)
        n_prompt = len(prompt_ids)
        if not continuation_ids:
            return ScoredContinuation(tuple(prompt_ids), (), (), {float(t): () for t in temperatures})
        logits = self._logits(ids)[n_prompt - 1:len(ids) - 1]
        targets = torch.tensor(list(continuation_ids), dtype=torch.long)
        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = tuple(self._entry(logprobs[j], int(t), top_logprobs) for j, t in enumerate(continuation_ids))
        by_temperature = {}
        for t in temperatures:
            scaled = torch.log_softmax(logits / float(t), dim=-1)
            by_temperature[float(t)] = tuple(scaled.gather(1, targets[:, None])[:, 0].tolist())
        return ScoredContinuation(prompt_token_ids=tuple(prompt_ids), continuation_token_ids=tuple(continuation_ids),
                                  tokens=tokens, temperature_logprobs=by_temperature)

    # -- generation -----------------------------------------------------------------------------

    @staticmethod
    def _warp(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        """Logits after temperature, top-k and top-p (removed tokens at -inf), in vLLM's order."""
        scores = logits / params.temperature
        if params.top_k is not None and params.top_k < scores.shape[0]:
            kth = torch.topk(scores, params.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if params.top_p < 1.0:
            probs, order = torch.sort(torch.softmax(scores, dim=-1), descending=True)
            # Keep the smallest set of most probable tokens whose mass reaches top_p (at least one).
            remove = (torch.cumsum(probs, dim=-1) - probs) >= params.top_p
            remove[0] = False
            scores = scores.masked_fill(torch.zeros_like(remove).scatter(0, order, remove), float("-inf"))
        return scores

    @torch.inference_mode()
    def generate(self, prompt_ids: Sequence[int], params: SamplingParams, *,
                 processed_logprobs: bool = False) -> list[Generation]:
        """``params.n`` sequences continuing ``prompt_ids``.

        Greedy (argmax) when ``params.temperature == 0``, else sampled from a ``torch.Generator`` seeded
        with ``params.seed`` (a fresh random seed when ``None``; each :class:`Generation` reports it).
        A sequence ends on EOS or a stop sequence (``"stop"``) or after ``params.max_tokens``
        (``"length"``).
        """
        self.check_ids(prompt_ids)
        if not prompt_ids:
            raise InvalidParameterError("prompt must hold at least one token")
        self.check_length(len(prompt_ids), params.max_tokens)
        seed = None
        generator = None
        if not params.greedy:
            seed = params.seed if params.seed is not None else secrets.randbits(63)
            generator = torch.Generator().manual_seed(seed)
        if params.greedy:  # argmax decoding on the CPU is deterministic: the n sequences are one
            return [self._generate_one(list(prompt_ids), params, generator, seed, processed_logprobs)] * params.n
        return [self._generate_one(list(prompt_ids), params, generator, seed, processed_logprobs)
                for _ in range(params.n)]

    def _generate_one(self, prompt_ids: list[int], params: SamplingParams, generator: torch.Generator | None,
                      seed: int | None, processed_logprobs: bool) -> Generation:
        out_ids: list[int] = []
        entries: list[TokenLogprob] = []
        text = ""
        finish, stop_reason = "length", None
        past = None
        step_input = torch.tensor([prompt_ids], dtype=torch.long)
        for _ in range(params.max_tokens):
            out = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].float()
            if params.greedy:
                scores = logits
                token = int(torch.argmax(logits).item())
            else:
                scores = self._warp(logits, params)
                token = int(torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator).item())
            if params.logprobs is not None:
                source = scores if processed_logprobs else logits
                entries.append(self._entry(torch.log_softmax(source, dim=-1), token, params.logprobs))
            out_ids.append(token)
            if token == self.eos_token_id:
                finish = "stop"
                break
            if params.stop:
                previous = len(text)
                text = self.tokenizer.decode(out_ids, skip_special_tokens=True)
                hit = _first_stop(text, params.stop, previous)
                if hit is not None:
                    finish, stop_reason = "stop", hit[1]
                    break
            step_input = torch.tensor([[token]], dtype=torch.long)
        full_text = self.tokenizer.decode(out_ids, skip_special_tokens=True)
        text = full_text
        if stop_reason is not None:
            text = full_text[:_first_stop(full_text, params.stop, 0)[0]]
        return Generation(token_ids=tuple(out_ids), text=text, full_text=full_text, finish_reason=finish,
                          stop_reason=stop_reason, logprobs=tuple(entries), seed=seed)

    # -- embeddings -----------------------------------------------------------------------------

    @torch.inference_mode()
    def embed(self, texts: Sequence[str | Sequence[int]]) -> list[list[float]]:
        """Mean-pooled last hidden state of each text (or token-id list), L2-normalised."""
        vectors = []
        for item in texts:
            ids = self.tokenize(item) if isinstance(item, str) else list(item)
            self.check_ids(ids)
            if not ids:
                raise InvalidParameterError("cannot embed an empty input: it has no tokens")
            self.check_length(len(ids), 0)
            out = self.model(torch.tensor([ids], dtype=torch.long), output_hidden_states=True)
            pooled = out.hidden_states[-1][0].float().mean(dim=0)
            vectors.append(torch.nn.functional.normalize(pooled, dim=0).tolist())
        return vectors


def _first_stop(text: str, stops: Sequence[str], previous: int) -> tuple[int, str] | None:
    """Earliest ``(index, stop)`` of a stop sequence in ``text`` that ends after ``previous`` chars."""
    best: tuple[int, str] | None = None
    for stop in stops:
        if not stop:
            continue
        idx = text.find(stop, max(0, previous - len(stop) + 1))
        if idx >= 0 and (best is None or idx < best[0]):
            best = (idx, stop)
    return best
