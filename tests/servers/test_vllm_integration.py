"""vLLM (CPU build) against calib's embedded server on the same tiny model.

Runs when the venv that ``servers/vllm/build-venv.sh`` builds is present (or ``CALIB_VLLM_VENV``
names one); otherwise it is skipped with the reason. vLLM takes about a minute to start on 2 cores.
The checks are the conformance suite's: vLLM through the ``openai`` kind must give the same greedy
text, the same token ids and the same teacher-forced log-probs (float32, within 1e-4) as the
embedded model in-process.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from calib.servers.base import SamplingParams, require
from calib.servers.registry import create_server
from calib.servers.scoring import extraction_scores

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("CALIB_VLLM_VENV", ROOT / "servers" / "vllm" / ".venv"))

pytestmark = pytest.mark.skipif(
    not (VENV / "bin" / "python").exists(),
    reason=f"no vLLM venv at {VENV}: build it with servers/vllm/build-venv.sh (about 3.5 GB) to run this test",
)

PROMPTS = ["def add(a, b):\n    return", "import json\n\ndef load(path):", "class Point:\n    def __init__(self"]
SCORED = [("def add(a, b):\n", "    return a + b\n"), ("import os\n", "def main():\n    print(os.getcwd())\n")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_url(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    env = {**os.environ, "VLLM_VENV": str(VENV)}
    with log.open("w") as out:
        script = ROOT / "servers" / "vllm" / "serve-cpu.sh"
        proc = subprocess.Popen(["bash", str(script), str(tiny_model_dir), str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited {proc.returncode} before answering:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM did not answer /health within 300 s:\n{log.read_text()[-3000:]}")
            time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)


def test_vllm_agrees_with_the_embedded_model(vllm_url: str, tiny_model_dir: Path) -> None:
    async def run() -> None:
        vllm = create_server("vllm", {"kind": "openai", "base_url": vllm_url, "model": str(tiny_model_dir)})
        embedded = create_server("embedded", {"kind": "embedded", "model_dir": str(tiny_model_dir)})
        try:
            caps = await vllm.capabilities()
            assert caps.server_version and caps.batch_prompts and caps.tokenize
            require(caps, ["scoring", "tokenize"], top_logprobs=5)
            params = SamplingParams(max_tokens=24)
            got, want = await vllm.complete(PROMPTS, params), await embedded.complete(PROMPTS, params)
            # vLLM's detokenizer holds back a trailing incomplete UTF-8 sequence, which the embedded
            # server renders as U+FFFD; the random-weight tiny model emits such byte tokens often.
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
