"""What an OpenAI-compatible server can do, probed once: the ``openai`` kind's :meth:`capabilities`.

:class:`~calib.servers.openai.OpenAIServer` inherits the probes; the module docstring there says what each
finding changes (token-id prompts, ``prompt_logprobs`` or ``echo`` for scoring, vLLM's token-id keys).
"""

from __future__ import annotations

import asyncio
from typing import Any

from calib.servers._config import checked_dtype, limit_from
from calib.servers._openai_wire import _TOKEN_ID
from calib.servers.base import CHAT_MAX_TOP_LOGPROBS, Capabilities, RequestFailed, ServerError

_PROBE_TEXT = "def add(a, b):\n    return a + b\n"
# A large request whose refusal names the server's limit (vLLM: "... greater than max allowed: 20").
_PROBE_TOP = 1000


class _OpenAIProbe:
    """The capability probes of :class:`~calib.servers.openai.OpenAIServer` (it holds the state they read)."""

    async def capabilities(self) -> Capabilities:
        """Probe once what the server can do; later calls return the stored result."""
        async with self._probe_lock:
            if self._caps is None:
                self._caps = await self._probe()
        return self._caps

    async def _probe(self) -> Capabilities:
        notes: list[str] = []
        models, failure = await self._http.probe("GET", "/v1/models")
        if failure is not None and failure.status is None:
            raise ServerError(f"server {self.name!r}: cannot reach {', '.join(self.base_urls)}: {failure.error}; "
                              f"start the server or correct base_url")
        entries = [m for m in (models or {}).get("data", []) if isinstance(m, dict)]
        if self.model is None:
            if not entries:
                why = failure.error if failure else "it lists no model"
                raise ServerError(f"server {self.name!r}: cannot learn the model from /v1/models ({why}); set "
                                  f"model in the server's spec")
            self.model = str(entries[0]["id"])
        self._http.identity["model"] = self.model
        entry = next((m for m in entries if m.get("id") == self.model), entries[0] if entries else {})
        max_context = entry.get("max_model_len")

        version, _ = await self._http.probe("GET", "/version")
        server_version = version.get("version") if isinstance(version, dict) else None
        info, _ = await self._http.probe("GET", "/info")  # TGI's Messages API and calib serve have it, vLLM not
        info = info if isinstance(info, dict) else {}
        self._about = {"entry": entry, "server_version": server_version, "info": info,
                       "dtype": checked_dtype(self.name, self.dtype, info.get("model_dtype"), "GET /info model_dtype")}
        tok, _ = await self._http.probe("POST", "/tokenize", {"model": self.model, "prompt": _PROBE_TEXT,
                                                       "add_special_tokens": True})
        ids = tok.get("tokens") if isinstance(tok, dict) else None
        tokenize = isinstance(ids, list) and bool(ids) and all(isinstance(i, int) for i in ids)
        if not tokenize:
            notes.append("no /tokenize: scoring needs the server's own tokenizer (vLLM and calib's embedded "
                         "server have it)")
        if max_context is None and isinstance(tok, dict):
            max_context = tok.get("max_model_len")

        (complete, token_ids_in, batch, echo, prompt_lp, extensions, (max_top, output_lp), (chat, chat_top), tools,
         embeddings) = await asyncio.gather(
            self._probe_complete(), self._probe_token_ids(ids if tokenize else None), self._probe_batch(),
            self._probe_echo(),
            self._probe_prompt_logprobs(), self._probe_extensions(), self._probe_max_top(), self._probe_chat(),
            self._probe_tools(), self._probe_embeddings())
        self._return_token_ids, self._ids_as_tokens = extensions
        self._plp_max_tokens = 1 if prompt_lp is None else prompt_lp
        self._echo_max_tokens = 1 if echo is None else echo
        if (prompt_lp if prompt_lp is not None else echo) == 1:
            notes.append("scoring requests generate one token (the server refuses max_tokens 0); it is discarded")
        if not token_ids_in:
            notes.append("prompts as text only: a scored continuation is checked against the server's "
                         "re-tokenization of prompt + continuation and refused where they differ")
        if tools and not chat:
            tools = False
        if not complete:
            notes.append("no text completion (/v1/completions did not answer): chat only")
        if chat and chat_top is None:
            notes.append("chat without output-token log-probs (logprobs=true was refused or answered without them)")
        return Capabilities(
            kind=self.kind, name=self.name, model=self.model, server_version=server_version,
            max_context=max_context if isinstance(max_context, int) else None, complete=complete,
            batch_prompts=batch,
            echo_logprobs=echo is not None, prompt_logprobs=prompt_lp is not None, max_top_logprobs=max_top,
            output_logprobs=complete and output_lp, token_ids_in=token_ids_in, full_distribution=False,
            tokenize=tokenize, chat=chat, tools=tools, embeddings=embeddings, chat_logprobs=chat_top is not None,
            chat_max_top_logprobs=chat_top or 0, notes=tuple(notes))

    def _completion_body(self, prompt: Any, **extra: Any) -> dict[str, Any]:
        return {"model": self.model, "prompt": prompt, "temperature": 0.0, **extra}

    async def _probe_complete(self) -> bool:
        answer, _ = await self._http.probe("POST", "/v1/completions", self._completion_body("a", max_tokens=1))
        return bool(isinstance(answer, dict) and answer.get("choices"))

    async def _probe_token_ids(self, ids: list[int] | None) -> bool:
        if not ids:
            return False
        answer, _ = await self._http.probe("POST", "/v1/completions", self._completion_body(ids, max_tokens=1))
        return bool(isinstance(answer, dict) and answer.get("choices"))

    async def _probe_batch(self) -> bool:
        answer, _ = await self._http.probe("POST", "/v1/completions",
                                    self._completion_body(["a", "b"], max_tokens=1))
        return isinstance(answer, dict) and len(answer.get("choices") or []) == 2

    async def _probe_echo(self) -> int | None:
        """The max_tokens that echo + logprobs scoring works with (0, else 1), or None."""
        for max_tokens in (0, 1):
            answer, _ = await self._http.probe("POST", "/v1/completions", self._completion_body(
                _PROBE_TEXT, max_tokens=max_tokens, echo=True, logprobs=1))
            try:
                lps = answer["choices"][0]["logprobs"]["token_logprobs"]
            except (TypeError, KeyError, IndexError):
                continue
            if isinstance(lps, list) and len(lps) >= 2 and lps[0] is None and isinstance(lps[1], (int, float)):
                return max_tokens
        return None

    async def _probe_prompt_logprobs(self) -> int | None:
        for max_tokens in (0, 1):
            answer, _ = await self._http.probe("POST", "/v1/completions", self._completion_body(
                _PROBE_TEXT, max_tokens=max_tokens, prompt_logprobs=1))
            try:
                plp = answer["choices"][0]["prompt_logprobs"]
            except (TypeError, KeyError, IndexError):
                continue
            if isinstance(plp, list) and len(plp) >= 2 and isinstance(plp[1], dict):
                return max_tokens
        return None

    async def _probe_extensions(self) -> tuple[bool, bool]:
        """(return_token_ids, return_tokens_as_token_ids): vLLM's ways of naming tokens by id."""
        answer, _ = await self._http.probe("POST", "/v1/completions", self._completion_body(
            "a", max_tokens=1, logprobs=1, return_token_ids=True, return_tokens_as_token_ids=True))
        try:
            choice = answer["choices"][0]
        except (TypeError, KeyError, IndexError):
            return False, False
        return (isinstance(choice.get("token_ids"), list),
                any(_TOKEN_ID.match(str(t)) for t in ((choice.get("logprobs") or {}).get("tokens") or [])))

    async def _probe_max_top(self) -> tuple[int, bool]:
        """(the most top alternatives a completion returns per token, whether it gives generated tokens' log-probs)."""
        asked = _PROBE_TOP
        for _ in range(4):
            answer, failure = await self._http.probe("POST", "/v1/completions",
                                              self._completion_body("a", max_tokens=1, logprobs=asked))
            if answer is not None:
                try:
                    logprobs = answer["choices"][0]["logprobs"]
                    top, value = logprobs["top_logprobs"][0], logprobs["token_logprobs"][0]
                except (TypeError, KeyError, IndexError):
                    return 0, False
                # Accepted: the server returns that many (or its whole vocabulary). Counting the answer's
                # entries would undercount, as alternatives keyed by text collide.
                output = isinstance(value, (int, float)) and not isinstance(value, bool)
                return (asked if isinstance(top, dict) else 0), output
            limit = limit_from(failure.error, asked) if failure else None
            if limit is None:
                limit = {_PROBE_TOP: 20, 20: 5, 5: 1}.get(asked)
            if not limit:
                return 0, False
            asked = limit
        return 0, False

    def _chat_body(self, **extra: Any) -> dict[str, Any]:
        return {"model": self.model, "messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 1,
                "temperature": 0.0, **extra}

    async def _probe_chat(self) -> tuple[bool, int | None]:
        """(chat answers, the most top alternatives its output-token log-probs carry; None: no log-probs).

        Where chat answers, log-probs are asked with 20 alternatives (the chat APIs' limit); a refusal
        naming a lower limit is asked again at that limit, any other at 1 alternative (0 where a refusal
        names 0: log-probs of the chosen tokens only).
        """
        answer, _ = await self._http.probe("POST", "/v1/chat/completions", self._chat_body())
        if not (isinstance(answer, dict) and answer.get("choices")):
            return False, None
        asked = CHAT_MAX_TOP_LOGPROBS
        for _ in range(4):
            accepted, failure = await self._chat_logprobs_at(asked)
            if accepted:
                return True, asked
            limit = limit_from(failure.error, asked) if failure else None
            if limit is None and asked <= 1:
                break
            asked = 1 if limit is None else limit
        return True, None

    async def _chat_logprobs_at(self, top: int) -> tuple[bool, RequestFailed | None]:
        """Whether a one-token chat answer asked ``top`` alternatives carries a log-prob and some; the refusal."""
        answer, failure = await self._http.probe("POST", "/v1/chat/completions",
                                                 self._chat_body(logprobs=True, top_logprobs=top))
        try:
            item = answer["choices"][0]["logprobs"]["content"][0]
            ok = isinstance(item["logprob"], (int, float)) and len(item["top_logprobs"]) >= min(top, 1)
        except (TypeError, KeyError, IndexError):
            ok = False
        return ok, failure

    async def _probe_tools(self) -> bool:
        tool = {"type": "function", "function": {"name": "probe", "description": "A probe.",
                                                 "parameters": {"type": "object", "properties": {}}}}
        answer, _ = await self._http.probe("POST", "/v1/chat/completions", {
            "model": self.model, "messages": [{"role": "user", "content": "Call probe."}], "max_tokens": 1,
            "temperature": 0.0, "tools": [tool], "tool_choice": "auto"})
        return isinstance(answer, dict) and bool(answer.get("choices"))

    async def _probe_embeddings(self) -> bool:
        answer, _ = await self._http.probe("POST", "/v1/embeddings", {"model": self.model, "input": ["probe"]})
        try:
            return isinstance(answer["data"][0]["embedding"], list)
        except (TypeError, KeyError, IndexError):
            return False
