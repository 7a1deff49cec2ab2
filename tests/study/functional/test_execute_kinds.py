"""``[execute] executor = "llm" | "agent"`` in a functional study, and the spec checks around them.

The llm run uses the tiny organism (real generations) and an ``anthropic`` server table pointed at a
loopback HTTP server of the test's own that answers every request with the recorded garbage answer of
tests/executors/recorded/ (no JSON): every sample is then inconclusive with an ``llm_inputs`` reason,
recorded as the ``llm`` executor's, and the run never fails.
"""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.study import RunOptions, run_study
from calib.study.spec import load_spec

RECORDED = Path(__file__).parents[2] / "executors" / "recorded"


class _Garbage(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.requests.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        recorded = json.loads((RECORDED / "llm_garbage.json").read_text())
        data = json.dumps(recorded["body"]).encode()
        self.send_response(recorded["status"])
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def _spec(cache_dir: Path, url: str, executor: str = "llm") -> str:
    return f"""[study]
name = "llm-exec"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[servers.coder]
kind = "anthropic"
model = "claude-sonnet-5"
base_url = "{url}"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 3

[generation]
max_tokens = 64

[execute]
executor = "{executor}"
server = "coder"
level = "preamble"
"""


def _run(organism, tmp_path: Path, executor: str) -> Path:
    _Garbage.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = tmp_path / "s.toml"
        spec.write_text(_spec(organism.root.parent.parent, f"http://127.0.0.1:{server.server_address[1]}", executor))
        run_study(spec, run_dir=tmp_path / "run", options=RunOptions(until="execute", progress=False))
    finally:
        server.shutdown()
        server.server_close()
    return tmp_path / "run"


def _system(request: dict) -> str:
    return request["system"] if isinstance(request["system"], str) else request["system"][0]["text"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_functional_study_runs_the_llm_executor_through_its_chat_server(organism_tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")  # the loopback server ignores it
    run = _run(organism_tiny, tmp_path, "llm")
    executions = pl.read_parquet(run / "tables" / "executions.parquet")
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    assert executions.height == 2 * samples.height == 6
    assert set(executions["executor"]) == {"llm"}
    assert not executions["conclusive"].any()
    assert all(reason.startswith("llm_inputs:") for reason in executions["reason"])
    assert all(any(w.startswith("llm answer input_generation") for w in ws) for ws in executions["warnings"])
    # one input-generation request per sample, with the paper's one-shot prompt and the sample's function
    assert len(_Garbage.requests) == samples.height
    assert all(_system(r).startswith("You are an expert Python test input generator") for r in _Garbage.requests)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_functional_study_runs_the_agent_and_keeps_each_transcript(organism_tiny, tmp_path, monkeypatch):
    # the recorded answer is text without a tool call: the agent is nudged once, then gives up
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    run = _run(organism_tiny, tmp_path, "agent")
    executions = pl.read_parquet(run / "tables" / "executions.parquet")
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    assert set(executions["executor"]) == {"agent"} and not executions["conclusive"].any()
    assert all(reason.startswith("agent_no_tool_call") for reason in executions["reason"])
    assert len(_Garbage.requests) == 2 * samples.height  # the first answer and the one after the nudge
    assert all(r.get("tools") for r in _Garbage.requests)  # the model was offered the tools
    for sample_id, function in samples.select("sample_id", "function").iter_rows():
        transcript = json.loads((run / "transcripts" / f"{sample_id}.json").read_text())
        roles = [m["role"] for m in transcript]
        assert roles[:2] == ["system", "user"] and roles.count("assistant") == 2
        assert function.splitlines()[0] in transcript[1]["content"]  # x was shown; candidates never are


@pytest.mark.parametrize("text,needle", [
    ('[execute]\nexecutor = "llm"\n', "execute: executor = 'llm' needs server"),
    ('[execute]\nexecutor = "agent"\nserver = "nobody"\n', "execute.server = 'nobody' names no [servers.nobody]"),
    ('[execute]\nexecutor = "llm"\nserver = "coder"\nlevel = "agentic"\n', "execute.level"),
])
def test_bad_execute_tables_give_one_line_naming_the_key(tmp_path, text, needle):
    base = _spec(tmp_path, "http://127.0.0.1:9").split("[execute]")[0]
    path = tmp_path / "s.toml"
    path.write_text(base + text)
    with pytest.raises(InputError) as info:
        load_spec(path)
    assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_calib_check_asks_the_agent_server_for_chat_and_tools(tmp_path):
    from calib.study.check import needs

    path = tmp_path / "s.toml"
    path.write_text(_spec(tmp_path, "http://127.0.0.1:9", executor="agent"))
    assert needs(load_spec(path))["coder"] == ["chat", "tools"]
