"""Extraction prompts against the embedded server's tokenizer (the tiny model, built locally)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.data.prompts import PROMPTS_SCHEMA, Prompt, build_prompt, build_prompts
from calib.servers.registry import create_server
from tests._tiny import build_tiny_model

pytest.importorskip("transformers")

CONTEXT = "".join(f"import module_{i}\nVALUE_{i} = compute({i}, 'text {i}')\n" for i in range(80))
SIGNATURE = "def target(a, b=3):"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny")


def run_with_server(model_dir: Path, fn):
    async def main():
        server = create_server("t", {"kind": "embedded", "model_dir": str(model_dir)})
        try:
            return await fn(server)
        finally:
            await server.aclose()

    return asyncio.run(main())


def test_long_context_is_cut_to_p_tokens_on_a_line_boundary(tiny_model_dir):
    async def check(server):
        assert len(await server.tokenize(CONTEXT)) > 250
        out = {}
        for p in (250, 100, 60):
            prompt = await build_prompt(server, context=CONTEXT, signature=SIGNATURE, max_context_tokens=p)
            kept = prompt.text[: -len(SIGNATURE)]
            out[p] = (prompt, kept, len(await server.tokenize(kept)))
        return out

    for p, (prompt, kept, n) in run_with_server(tiny_model_dir, check).items():
        assert prompt.truncated
        assert n == prompt.context_tokens <= p
        assert prompt.context_tokens > p // 2  # whole lines, not far below the budget
        assert prompt.text.endswith(SIGNATURE) and not prompt.text.endswith("\n")
        assert CONTEXT.endswith(kept) and (kept == "" or CONTEXT[-len(kept) - 1] == "\n")


def test_short_context_is_untouched_and_signature_newline_is_stripped(tiny_model_dir):
    context = "import os\n\n\n"

    async def check(server):
        return (await build_prompt(server, context=context, signature=SIGNATURE + "\n"),
                len(await server.tokenize(context)))

    prompt, n = run_with_server(tiny_model_dir, check)
    assert prompt == Prompt(text=context + SIGNATURE, context_tokens=n, truncated=False)


def test_empty_context_and_one_huge_line(tiny_model_dir):
    huge = "x = [" + ", ".join(str(i) for i in range(400)) + "]\n"

    async def check(server):
        empty = await build_prompt(server, context="", signature=SIGNATURE)
        cut = await build_prompt(server, context=huge, signature=SIGNATURE, max_context_tokens=20)
        return empty, cut, len(await server.tokenize(cut.text[: -len(SIGNATURE)]))

    empty, cut, n = run_with_server(tiny_model_dir, check)
    assert empty == Prompt(text=SIGNATURE, context_tokens=0, truncated=False)
    assert cut.truncated and 0 < n == cut.context_tokens <= 20
    assert huge.endswith(cut.text[: -len(SIGNATURE)])


def test_build_prompts_adds_the_declared_columns(tiny_model_dir):
    functions = pl.DataFrame({"function_id": ["a", "b", "c"], "context": [CONTEXT, "", "import os\n"],
                              "signature": [SIGNATURE, "def f():", "    async def g(self,\n            x):"]})

    async def check(server):
        return await build_prompts(server, functions, max_context_tokens=30, concurrency=2)

    out = run_with_server(tiny_model_dir, check)
    assert out.schema == {**functions.schema, **PROMPTS_SCHEMA}
    assert out["prompt_truncated"].to_list() == [True, False, False]
    assert out["prompt"][1] == "def f():" and out["prompt"][2] == "import os\n    async def g(self,\n            x):"
    assert all(n <= 30 for n in out["prompt_context_tokens"])


def test_invalid_parameters_are_named(tiny_model_dir):
    async def check(server):
        with pytest.raises(InvalidParameterError, match="max_context_tokens"):
            await build_prompt(server, context="x", signature=SIGNATURE, max_context_tokens=-1)
        with pytest.raises(InvalidParameterError, match="signature"):
            await build_prompt(server, context="x", signature="\n")
        with pytest.raises(InvalidParameterError, match="signature"):
            await build_prompts(server, pl.DataFrame({"context": ["x"]}))

    run_with_server(tiny_model_dir, check)
