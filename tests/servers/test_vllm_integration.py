"""vLLM (CPU build) against calib's embedded server on the same tiny model: the tiny organism's target.

Runs when the venv that ``servers/vllm/build-venv.sh`` builds is present (``CALIB_VLLM_VENV`` names it,
default ``servers/vllm/.venv``; ``.ci/run`` builds it); otherwise it is skipped with the reason. vLLM
takes one to two minutes to start on 2 cores, so this module asks the session's vLLM pair
(tests/_served.py :func:`vllm_pair`: ``servers/vllm/serve-pair-cpu.sh``, which runs ``serve-cpu.sh`` once
per model), already up for tests/study/test_vllm_studies.py, rather than start a server of its own. The
checks are the conformance suite's: vLLM through the ``openai`` kind must give the same greedy text, the
same token ids and the same teacher-forced log-probs (float32, within 1e-4) as the embedded model
in-process on the same weights.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calib.servers.base import SamplingParams, require
from calib.servers.registry import create_server
from calib.servers.scoring import extraction_scores
from tests._served import VllmPair, needs_vllm

pytestmark = needs_vllm()

PROMPTS = ["def add(a, b):\n    return", "import json\n\ndef load(path):", "class Point:\n    def __init__(self"]
SCORED = [("def add(a, b):\n", "    return a + b\n"), ("import os\n", "def main():\n    print(os.getcwd())\n")]


@pytest.fixture(scope="module")
def vllm_url(vllm_pair: VllmPair) -> str:
    """The pair's target server (the organism's target; vLLM names the model by its folder)."""
    return vllm_pair.urls()["target"]


@pytest.fixture(scope="module")
def model_dir(vllm_pair: VllmPair) -> Path:
    return vllm_pair.organism.target


def test_vllm_agrees_with_the_embedded_model(vllm_url: str, model_dir: Path) -> None:
    async def run() -> None:
        vllm = create_server("vllm", {"kind": "openai", "base_url": vllm_url, "model": str(model_dir)})
        embedded = create_server("embedded", {"kind": "embedded", "model_dir": str(model_dir)})
        try:
            caps = await vllm.capabilities()
            assert caps.server_version and caps.batch_prompts and caps.tokenize
            require(caps, ["scoring", "tokenize"], top_logprobs=5)
            params = SamplingParams(max_tokens=24)
            got, want = await vllm.complete(PROMPTS, params), await embedded.complete(PROMPTS, params)
            # vLLM's detokenizer holds back a trailing incomplete UTF-8 sequence, which the embedded
            # server renders as U+FFFD (a byte-level tokenizer's partial character at the length limit).
            assert [c[0].text.rstrip("\ufffd") for c in got] == [c[0].text.rstrip("\ufffd") for c in want]
            for text in PROMPTS:
                assert await vllm.tokenize(text) == await embedded.tokenize(text)
            for prompt, continuation in SCORED:
                a = await vllm.score(prompt, continuation, top_logprobs=5)
                b = await embedded.score(prompt, continuation, top_logprobs=5)
                assert a.continuation_token_ids == b.continuation_token_ids
                for x, y in zip(a.tokens, b.tokens, strict=True):
                    assert x.logprob == pytest.approx(y.logprob, abs=1e-4)
                sa, sb = extraction_scores(a, top_k=5), extraction_scores(b, top_k=5)
                assert sa.greedy_match == sb.greedy_match
                assert sa.log10_top_k == pytest.approx(sb.log10_top_k, abs=1e-4)
                assert sa.log10_base[1.0] == pytest.approx(sb.log10_base[1.0], abs=1e-4)
        finally:
            await vllm.aclose()
            await embedded.aclose()

    asyncio.run(run())
