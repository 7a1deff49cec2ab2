"""Extraction prompts: the code preceding a function, cut by the target's own tokenizer, plus its signature.

The prompt follows the functional-memorization paper (§3, "prompting the target model with only the
preceding code and signature"): at most ``P`` tokens of the code before the function (P = 250 by
default), counted with the *target server's* tokenizer, then the signature without its docstring. The
ground truth the completion is compared with is the docstring and body, the ``body`` column of the
functions table (:data:`calib.data.schema.FUNCTIONS_SCHEMA`).

The prompt ends at the end of the signature line, never with a newline: byte-level BPE merges a newline
with the next line's indentation, so a prompt ending in ``"\\n"`` leaves the model mid-token and was
measured to yield empty completions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import polars as pl

from calib._exceptions import InvalidParameterError
from calib.servers.base import Tokenizing

__all__ = ["PROMPTS_SCHEMA", "Prompt", "build_prompt", "build_prompts"]

#: Columns :func:`build_prompts` adds to the functions table.
PROMPTS_SCHEMA: dict[str, pl.DataType] = {
    "prompt": pl.String(),  # context tail + signature, no trailing newline
    "prompt_context_tokens": pl.Int64(),  # tokens of the kept context, by the server's tokenizer
    "prompt_truncated": pl.Boolean(),  # the context was longer than max_context_tokens and was cut
}


@dataclass(frozen=True)
class Prompt:
    """One extraction prompt.

    Attributes
    ----------
    text
        The kept context followed by the signature; it ends with the signature's last character.
    context_tokens
        Tokens of the kept context, counted by the server's tokenizer (``<= max_context_tokens``).
    truncated
        The context was cut.
    """

    text: str
    context_tokens: int
    truncated: bool


async def build_prompt(server: Tokenizing, *, context: str, signature: str, max_context_tokens: int = 250) -> Prompt:
    """The prompt for one function: the last ``max_context_tokens`` tokens of ``context``, then ``signature``.

    The cut is made on a line boundary at or after the token cut: the kept context is the longest run of
    whole trailing lines whose tokenization has at most ``max_context_tokens`` tokens. Cutting exactly at
    a token would start the prompt mid-identifier, or mid-character where a token ends inside a UTF-8
    sequence, text the model never saw in training; whole lines keep the prompt a faithful suffix of the
    document. A context whose last ``max_context_tokens`` tokens hold no line start (one huge line) is cut
    at the token instead. The kept context is re-tokenized and trimmed further until the count holds,
    since a suffix's tokenization can differ from the tail of the whole text's tokenization at its start.

    Parameters
    ----------
    server
        The target server; its own tokenizer counts the tokens.
    context
        The document's code before the function (the functions table's ``context``).
    signature
        The signature line(s) without docstring; trailing whitespace and newlines are removed.
    max_context_tokens
        P, the most context tokens kept (>= 0).
    """
    if isinstance(max_context_tokens, bool) or not isinstance(max_context_tokens, int) or max_context_tokens < 0:
        raise InvalidParameterError(f"max_context_tokens must be an integer >= 0, got {max_context_tokens!r}")
    signature = signature.rstrip()
    if not signature:
        raise InvalidParameterError("signature must not be empty: a prompt ends with the function's signature")
    kept, n_tokens, truncated = await _cut_context(server, context, max_context_tokens)
    return Prompt(text=kept + signature, context_tokens=n_tokens, truncated=truncated)


async def _cut_context(server: Tokenizing, context: str, limit: int) -> tuple[str, int, bool]:
    if not context:
        return "", 0, False
    ids = await server.tokenize(context)
    if len(ids) <= limit:
        return context, len(ids), False
    if limit == 0:
        return "", 0, True
    offset = await _char_offset(server, context, ids, limit)
    kept = context[_line_start_at_or_after(context, offset):]
    for _ in range(len(context) + 1):
        n = len(await server.tokenize(kept)) if kept else 0
        if n <= limit:
            return kept, n, True
        kept = _drop_first_line(kept)
    raise AssertionError("unreachable: trimming a non-empty string always shortens it")


async def _char_offset(server: Tokenizing, context: str, ids: list[int], limit: int) -> int:
    """Character offset in ``context`` where its last ``limit`` tokens begin (approximate when the
    boundary falls inside a character: the partial character is left out)."""
    head = await server.detokenize(ids[:-limit])
    if context.startswith(head):
        return len(head)
    tail = (await server.detokenize(ids[-limit:])).lstrip("\ufffd")
    return len(context) - len(tail) if context.endswith(tail) else max(0, len(context) - len(tail))


def _line_start_at_or_after(text: str, offset: int) -> int:
    if offset == 0 or text[offset - 1] == "\n":
        return offset
    newline = text.find("\n", offset)
    # No line starts in the tail: cut at the token rather than drop the whole context.
    return offset if newline == -1 or newline + 1 == len(text) else newline + 1


def _drop_first_line(text: str) -> str:
    newline = text.find("\n")
    if 0 <= newline < len(text) - 1:
        return text[newline + 1:]
    return text[max(1, len(text) // 8):]  # one line too long: shorten it from the left


async def build_prompts(server: Tokenizing, functions: pl.DataFrame, *, max_context_tokens: int = 250,
                        concurrency: int = 16) -> pl.DataFrame:
    """``functions`` with the columns of :data:`PROMPTS_SCHEMA` added (one prompt per row, in row order).

    ``functions`` needs the ``context`` and ``signature`` columns of the functions table; at most
    ``concurrency`` tokenizer requests are in flight at once.
    """
    missing = [c for c in ("context", "signature") if c not in functions.columns]
    if missing:
        raise InvalidParameterError(f"functions lacks column(s) {missing}: build prompts from a functions table "
                                    f"(calib.data.schema.FUNCTIONS_SCHEMA)")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidParameterError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    gate = asyncio.Semaphore(concurrency)

    async def one(context: str | None, signature: str | None) -> Prompt:
        async with gate:
            return await build_prompt(server, context=context or "", signature=signature or "",
                                      max_context_tokens=max_context_tokens)

    prompts = await asyncio.gather(*(one(c, s) for c, s in zip(functions["context"], functions["signature"])))
    added = pl.DataFrame({"prompt": [p.text for p in prompts],
                          "prompt_context_tokens": [p.context_tokens for p in prompts],
                          "prompt_truncated": [p.truncated for p in prompts]}, schema=PROMPTS_SCHEMA)
    return functions.drop([c for c in PROMPTS_SCHEMA if c in functions.columns]).hstack(added)
