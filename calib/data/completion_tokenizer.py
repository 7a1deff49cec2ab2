"""``[prompt] tokenizer = "completions"``: the target server's completions route as its own tokenizer.

A host without ``/tokenize`` still tokenizes whatever it completes. Sent as a prompt with ``echo``,
``logprobs`` 0 and no tokens to generate (one where the server demands it, then left out), a text comes back
as the model's tokens (:meth:`calib.servers.openai.OpenAIServer.prompt_tokens`):

* the ids: vLLM's ``return_token_ids`` (``prompt_token_ids`` of the choice; ``via = "return_token_ids"``), else
  the ``token_id:N`` names of vLLM's ``return_tokens_as_token_ids`` in a second answer (``via = "echo"``);
* each token's text: the echoed ``logprobs.tokens`` (vLLM decodes each token on its own, as does
  ``text_offset``, the running sum of their lengths).

The tokens are laid over the text's UTF-8 bytes (:func:`align_tokens`): each covers bytes that decode to its
text, and together they must rebuild the text exactly, else a ``ServerError`` names the server and the remedy
(a SentencePiece model decodes a lone token without its leading space, so its echo cannot). A token holding
part of a multi-byte character decodes on its own to U+FFFD (OpenAI's API writes ``bytes:\\x..``); a boundary
inside a character splits it, and :meth:`CompletionTokenizer.detokenize` marks that side of a cut with U+FFFD,
as a tokenizer's own decoding does, so the callers' checks (:mod:`calib.data.prompts`, the extraction windows)
refuse to cut there. Where the replacement characters fit more than one layout, a boundary the layouts place
differently is refused too.

A text longer than the model's context is asked in overlapping pieces that must tokenize alike where they
overlap (:meth:`CompletionTokenizer._pieces`). Each text is asked once (a study tokenizes its texts twice);
:meth:`CompletionTokenizer.detokenize` answers from those tokenizations, with no request: it decodes runs of
ids cut from a text this tokenizer has tokenized.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.servers.base import RequestFailed, ServerError

__all__ = ["CompletionTokenizer", "align_tokens"]

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_PARTIAL = "\ufffd"
_MARGIN = 64  # characters of right context a piece's kept tokens have, and of overlap checked (see _pieces)
_REMEDY = ("use [prompt] tokenizer = \"file\" or \"hub\" (the model's tokenizer.json), \"server\" where the host has "
           "/tokenize, or \"chars\"")


@dataclass(frozen=True)
class _Cut:
    """One text's tokens: ``ids``, each boundary's character offset, and where a boundary splits a character."""

    text: str
    ids: tuple[int, ...]
    offsets: tuple[int, ...]  # len(ids) + 1: boundary k's offset (a split one: where the split character starts)
    resume: tuple[int | None, ...]  # None: a clean boundary; else the offset after the split character(s)
    key: str  # the ids as characters, to find a run of ids with str.find


def align_tokens(text: str, pieces: Sequence[str | bytes]) -> tuple[list[int], list[int | None]] | None:
    """Each token boundary's character offset in ``text`` and, where it splits a character, the offset after it.

    ``pieces`` are the tokens as decoded one by one (U+FFFD for bytes of an unfinished character, as UTF-8
    decoding with replacement writes them) or their bytes. The tokens' bytes are laid over ``text``'s UTF-8
    bytes: a piece covers the bytes that decode to it. Where more than one layout fits, a boundary the layouts
    disagree on counts as split. None when no layout rebuilds ``text``.
    """
    data = text.encode("utf-8", "surrogatepass")
    reach: list[set[int]] = [{0}]
    for piece in pieces:
        reach.append({b for a in reach[-1] for b in _ends(data, a, piece)})
        if not reach[-1]:
            return None
    if len(data) not in reach[-1]:
        return None
    fits: list[set[int]] = [{len(data)}]  # byte offsets of each boundary that a whole layout passes through
    for k in range(len(pieces) - 1, -1, -1):  # built from the end, then turned round
        fits.append({a for a in reach[k] if fits[-1] & set(_ends(data, a, pieces[k]))})
    fits.reverse()
    starts = [0]  # the byte offset of each character, and of the end
    for char in text:
        starts.append(starts[-1] + len(char.encode("utf-8", "surrogatepass")))
    offsets: list[int] = []
    resume: list[int | None] = []
    for where in fits:
        low, high = min(where), max(where)
        first = bisect.bisect_right(starts, low) - 1  # the character the lowest offset falls in (or starts)
        last = bisect.bisect_left(starts, high)  # the first character starting at or after the highest
        clean = low == high and starts[first] == low
        offsets.append(first)
        resume.append(None if clean else last)
    return offsets, resume


def _ends(data: bytes, start: int, piece: str | bytes) -> list[int]:
    """Where a token starting at byte ``start`` of ``data`` ends, if it decodes to ``piece``."""
    if isinstance(piece, bytes):
        return [start + len(piece)] if data.startswith(piece, start) else []
    exact = piece.encode("utf-8", "surrogatepass")
    if _PARTIAL not in piece:
        return [start + len(exact)] if data.startswith(exact, start) else []
    partial = piece.count(_PARTIAL)  # each stands for 1 to 3 bytes (or is a literal U+FFFD: 3 bytes)
    low, high = len(exact) - 2 * partial, len(exact)
    return [start + n for n in range(max(1, low), min(high, len(data) - start) + 1)
            if data[start:start + n].decode("utf-8", "replace") == piece]


class CompletionTokenizer:
    """The target server's completions route as a :class:`calib.servers.base.Tokenizing` (see the module)."""

    def __init__(self, server: Any, name: str) -> None:
        self.server = server
        self.name = name
        self.via: str | None = None
        self._cuts: dict[str, _Cut] = {}
        self._asked: dict[str, asyncio.Task[_Cut]] = {}
        self._order: list[_Cut] = []
        self._size: int | None = None  # characters asked at once (about twice the model's context)

    async def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens), asked once per text."""
        return list((await self._cut(text)).ids)

    async def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(token_id, start, end)`` of each token of ``text`` (a token inside a split character: empty)."""
        cut = await self._cut(text)
        return [(i, cut.offsets[k], max(cut.offsets[k], cut.offsets[k + 1])) for k, i in enumerate(cut.ids)]

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """The text of a run of ids cut from a tokenized text; U+FFFD marks a side that splits a character."""
        ids = [int(i) for i in token_ids]
        if not ids:
            return ""
        needle = _as_key(ids)
        for cut in reversed(self._order):
            found = cut.key.find(needle) if needle is not None else -1
            if found >= 0:
                a, b = found, found + len(ids)
                start = cut.offsets[a] if cut.resume[a] is None else cut.resume[a]
                head = "" if cut.resume[a] is None else _PARTIAL
                tail = "" if cut.resume[b] is None else _PARTIAL
                return head + cut.text[start:max(start, cut.offsets[b])] + tail
        raise InvalidParameterError(f"server {self.name!r}: the completions tokenizer decodes only ids cut from a text "
                                    f"it tokenized, and {ids[:8]}{'...' if len(ids) > 8 else ''} is in none")

    def describe(self) -> dict[str, Any]:
        """What the manifest states: the source, the server, its model and how the ids came."""
        return {"source": "completions", "server": self.name, "model": getattr(self.server, "model", None),
                "via": self.via}

    async def _cut(self, text: str) -> _Cut:
        if text in self._cuts:
            return self._cuts[text]
        if not text:
            return _Cut("", (), (0,), (None,), "")
        task = self._asked.get(text)
        if task is None:
            task = self._asked[text] = asyncio.ensure_future(self._ask(text))
        try:
            cut = await task
        finally:
            self._asked.pop(text, None)
        if text not in self._cuts:
            self._cuts[text] = cut
            self._order.append(cut)
        return cut

    async def _ask(self, text: str) -> _Cut:
        """``text``'s tokens, asked in pieces where it is longer than the model's context (see :meth:`_pieces`)."""
        if self._size is None:
            caps = await self.server.capabilities()
            self._size = max(_MARGIN * 4, 2 * caps.max_context) if caps.max_context else 4096
        ids: list[int] = []
        offsets: list[int] = []
        resume: list[int | None] = []
        async for start, part, keep in self._pieces(text):
            ids.extend(part[0][:keep])
            offsets.extend(start + o for o in part[1][:keep + 1])
            resume.extend(None if r is None else start + r for r in part[2][:keep + 1])
            if keep < len(part[0]):  # the next piece starts at this boundary: it states it again
                offsets.pop()
                resume.pop()
        return _Cut(text, tuple(ids), tuple(offsets), tuple(resume), _as_key(ids) or "")

    async def _pieces(self, text: str) -> Any:
        """``(start, tokens of text[start:...], how many of them to keep)`` covering ``text``, in order.

        A text longer than about twice the model's context in characters is asked in overlapping pieces (a
        piece the server refuses as too long is asked again at half the size). A piece's tokens are kept up to a
        clean boundary (a line start where one serves) at least ``2 x _MARGIN`` characters before its end; the
        next piece starts there, and its first tokens must equal the kept piece's tokens that follow, up to
        ``_MARGIN`` characters before that piece's end: the same cut with and without the text before it.
        """
        start, part = 0, await self._ask_piece(text, 0)
        while start + part[3] < len(text):
            end = part[3] - _MARGIN
            cands = [k for k in range(len(part[0]) - 1, 0, -1) if part[2][k] is None and part[1][k] <= end - _MARGIN]
            cands.sort(key=lambda k: text[start + part[1][k] - 1] != "\n")  # line starts first (a stable sort)
            for k in cands[:3]:
                nxt = await self._ask_piece(text, start + part[1][k])
                shared = [j for j in range(k, len(part[0])) if part[1][j + 1] <= end]
                if shared and all(j - k < len(nxt[0]) and nxt[0][j - k] == part[0][j]
                                  and nxt[1][j - k + 1] == part[1][j + 1] - part[1][k] for j in shared):
                    break
            else:
                raise ServerError(f"server {self.name!r}: a text of {len(text)} characters is longer than the model's "
                                  "context, and its pieces do not tokenize alike where they overlap; " + _REMEDY)
            yield start, part, k
            start, part = start + part[1][k], nxt
        yield start, part, len(part[0])

    async def _ask_piece(self, text: str, start: int) -> tuple[list[int], list[int], list[int | None], int]:
        """The tokens of ``text[start:start + size]``: ids, boundary offsets, where they resume, the length."""
        while True:
            piece = text[start:start + self._size]
            try:
                return (*await self._tokens(piece), len(piece))  # type: ignore[return-value]
            except RequestFailed as exc:
                if exc.status != 400 or len(piece) <= _MARGIN * 4:
                    raise
                self._size = len(piece) // 2  # too long for the model's context: ask half as much

    async def _tokens(self, text: str) -> tuple[list[int], list[int], list[int | None]]:
        """One request: ``text``'s ids, each boundary's offset and where a split boundary resumes."""
        choices = await self.server.prompt_tokens(text)
        first = choices[0]
        logprobs = first.get("logprobs") if isinstance(first.get("logprobs"), dict) else {}
        tokens = [str(t) for t in logprobs.get("tokens") or []]
        ids = first.get("prompt_token_ids")
        if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
            via, n = "return_token_ids", len(ids)
        else:
            generated = (first.get("usage") or {}).get("completion_tokens")
            n = len(tokens) - (generated if isinstance(generated, int) else 0)
            names = [str(t) for t in ((choices[-1].get("logprobs") or {}).get("tokens") or [])][:n]
            found = [_TOKEN_ID.match(t) for t in names]
            if len(choices) < 2 or len(names) != n or not all(found):
                raise ServerError(f"server {self.name!r}: its completions route names no token ids (neither vLLM's "
                                 f"return_token_ids nor return_tokens_as_token_ids); {_REMEDY}")
            via, ids = "echo", [int(m.group(1)) for m in found if m]
        pieces: list[str | bytes] = [_bytes(t) if t.startswith("bytes:") else t for t in tokens[:n]]
        if len(pieces) != n:
            raise ServerError(f"server {self.name!r}: the completions route echoed {len(pieces)} token texts for "
                             f"{n} token ids; {_REMEDY}")
        aligned = align_tokens(text, pieces)
        if aligned is None and n > 1 and align_tokens(text, pieces[1:]) is not None:  # a BOS the server added
            ids, pieces, aligned = ids[1:], pieces[1:], align_tokens(text, pieces[1:])
        if aligned is None:
            raise ServerError(f"server {self.name!r}: the completions route's echoed tokens do not rebuild the text "
                             f"(tokens {''.join(p if isinstance(p, str) else _PARTIAL for p in pieces)[:60]!r}... for "
                              f"{text[:60]!r}...), so they cannot cut it; "
                             f"{_REMEDY}")
        self.via = via
        return [int(i) for i in ids], aligned[0], aligned[1]




def _bytes(token: str) -> bytes:
    """The bytes of a token OpenAI's API names ``bytes:\\xe2\\x80`` (part of a character)."""
    return bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-fA-F]{2})", token))


def _as_key(ids: Sequence[int]) -> str | None:
    """The ids as one character each (str.find searches them); None for an id past the code-point range."""
    try:
        return "".join(map(chr, ids))
    except (ValueError, OverflowError):
        return None
