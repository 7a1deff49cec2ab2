"""What a TGI server can do, probed once: the ``tgi`` kind's :meth:`capabilities`.

:class:`~calib.servers.tgi.TGIServer` inherits the probes (``GET /info``, ``POST /tokenize``, prefill
log-probs, the most top alternatives the server gives).
"""

from __future__ import annotations

import asyncio
from typing import Any

from calib.servers._config import checked_dtype, limit_from
from calib.servers._http import with_retries
from calib.servers._tgi_wire import PREFILL_FIX, classify_tgi
from calib.servers.base import Capabilities, RequestFailed, ServerError

_PROBE_TEXT = "def add(a, b):\n    return a + b\n"
_PROBE_TOP = 1000


class _TGIProbe:
    """The capability probes of :class:`~calib.servers.tgi.TGIServer` (it holds the state they read)."""

    async def capabilities(self) -> Capabilities:
        """Probe once what the server can do; later calls return the stored result."""
        async with self._probe_lock:
            if self._caps is None:
                self._caps = await self._probe()
        return self._caps

    async def _probe_request(self, route: str, call) -> tuple[Any, RequestFailed | None]:
        """A probe through the text-generation client: its answer, or the failure (a refusal is an answer)."""
        try:
            return await with_retries(self.name, route, call, self.policy, classify=classify_tgi), None
        except RequestFailed as failure:
            return None, failure

    async def _probe(self) -> Capabilities:
        notes = ["no /detokenize route: TGI offers /tokenize only"]
        info, failure = await self._http.probe("GET", "/info", classify=classify_tgi)
        if info is None:
            raise ServerError(f"server {self.name!r}: GET {self.base_url}/info failed ({failure.error}); start TGI "
                              f"or correct base_url")
        self.model = str(info.get("model_id") or "")
        self._info = {**info, "dtype": checked_dtype(self.name, self.dtype, info.get("model_dtype"),
                                                     "GET /info model_dtype")}
        self._http.identity["model"] = self.model
        if info.get("model_sha"):
            self._http.identity["model_sha"] = info["model_sha"]
        tokens, _ = await self._http.probe("POST", "/tokenize", {"inputs": _PROBE_TEXT}, classify=classify_tgi)
        tokenize = isinstance(tokens, list) and bool(tokens) and all(isinstance(t, dict) for t in tokens)
        (complete, output_lp), prefill, max_top = await asyncio.gather(
            self._probe_complete(), self._probe_prefill(), self._probe_top())
        if not complete:
            notes.append("no text generation (/generate did not answer)")
        if not prefill:
            notes.append(PREFILL_FIX)
        if max_top:
            notes.append("top alternatives of a scored continuation cost one request per continuation token "
                         "(TGI returns top_n_tokens for generated tokens only)")
        max_context = info.get("max_total_tokens") or info.get("max_input_length")
        return Capabilities(
            kind=self.kind, name=self.name, model=self.model, server_version=info.get("version"),
            max_context=max_context if isinstance(max_context, int) else None, complete=complete,
            prompt_logprobs=prefill, output_logprobs=output_lp,
            max_top_logprobs=max_top, tokenize=tokenize, notes=tuple(notes))

    async def _probe_complete(self) -> tuple[bool, bool]:
        """(``/generate`` answers, its ``details.tokens`` carry the generated tokens' log-probs)."""
        answer, _ = await self._probe_request("/generate", lambda: self._client.generate("a", max_new_tokens=1))
        if answer is None:
            return False, False
        tokens = answer.details.tokens if answer.details is not None else []
        return True, bool(tokens) and all(isinstance(t.logprob, (int, float)) for t in tokens)

    async def _probe_prefill(self) -> bool:
        answer, _ = await self._probe_request("/generate", lambda: self._client.generate(
            _PROBE_TEXT, max_new_tokens=1, decoder_input_details=True))
        if answer is None:
            return False
        prefill = answer.details.prefill
        return len(prefill) >= 2 and all(t.logprob is not None for t in prefill[1:])

    async def _probe_top(self) -> int:
        asked = _PROBE_TOP
        for _ in range(4):
            answer, failure = await self._probe_request("/generate", lambda n=asked: self._client.generate(
                "a", max_new_tokens=1, top_n_tokens=n))
            if answer is not None:
                top = answer.details.top_tokens
                return min(asked, len(top[0])) if top else 0
            limit = limit_from(failure.error, asked) if failure else None
            if limit is None:
                limit = {_PROBE_TOP: 5, 5: 1}.get(asked)
            if not limit:
                return 0
            asked = limit
        return 0
