"""``calib executors ablate`` end to end: a real ``anthropic`` server table pointed at a local HTTP server
(127.0.0.1) that answers with the recorded Messages-API bodies of tests/executors/recorded/, chosen by
the prompt and the function in each request (so concurrent requests get the right answer), and the
real sandbox. The per-level counts are worked out by hand below; the intervals are checked against
``scipy.stats.beta``.
"""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from scipy.stats import beta

RECORDED = Path(__file__).parents[1] / "executors" / "recorded"
NO_BWRAP = "bubblewrap (bwrap) is not installed; CI installs it (apt-get install bubblewrap)"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason=NO_BWRAP)

FUNCTIONS = {
    # self-contained: conclusive at every level
    "score.py": "def score(values, limit):\n    total = 0\n    for v in values:\n        if v > limit:\n"
                "            total += limit\n        else:\n            total += v\n    return total\n",
    # needs FACTOR and DIGITS from its file: the first preamble crashes, the retry fixes it
    "scaled.py": "def scaled(n):\n    return round(n * FACTOR, DIGITS)\n",
    # the model answers garbage to everything
    "mystery.py": "def mystery(a, b):\n    return a * 2 + b\n",
    # the model gives only three usable inputs
    "tally.py": "def tally(values, limit):\n    return sum(v for v in values if v <= limit)\n",
}
ANSWERS = {  # (prompt, function) -> recorded answer
    ("input_generation", "score"): "score_inputs", ("preamble", "score"): "empty_preamble",
    ("input_generation", "scaled"): "scaled_inputs", ("preamble", "scaled"): "preamble_crashing",
    ("preamble_retry", "scaled"): "preamble_fixed",
    ("input_generation", "tally"): "too_few_inputs", ("preamble", "tally"): "empty_preamble",
    ("preamble_retry", "tally"): "empty_preamble",
}
SYSTEMS = {"You are an expert Python test input generator": "input_generation",
           "You are an expert Python code analyst. Given a function": "preamble",
           "You are an expert Python code analyst. A preamble you wrote": "preamble_retry"}


class _Handler(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
        prompt = next(v for k, v in SYSTEMS.items() if system.startswith(k))
        user = body["messages"][0]["content"]
        user = user if isinstance(user, str) else user[0]["text"]
        name = next((n for n in ("score", "scaled", "mystery", "tally") if f"def {n}(" in user), "?")
        self.seen.append((prompt, name))
        recorded = json.loads((RECORDED / f"llm_{ANSWERS.get((prompt, name), 'garbage')}.json").read_text())
        data = json.dumps(recorded["body"]).encode()
        self.send_response(recorded["status"])
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def model_url():
    _Handler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def files(tmp_path: Path, model_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-ablate-never-anywhere")
    paths = []
    for name, text in FUNCTIONS.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    contexts = []
    for name in FUNCTIONS:
        ctx = tmp_path / f"ctx_{name}"
        ctx.write_text("FACTOR = 1.5\nDIGITS = 2\n" if name == "scaled.py" else "")
        contexts.append(ctx)
    spec = tmp_path / "servers.toml"
    spec.write_text(f'[servers.coder]\nkind = "anthropic"\nmodel = "claude-sonnet-5"\nbase_url = "{model_url}"\n'
                    'max_retries = 0\n')
    return paths, contexts, spec


def _cp(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson from the Beta quantiles (Clopper & Pearson 1934), independently of calib."""
    a = 1 - confidence
    low = 0.0 if k == 0 else beta.ppf(a / 2, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(1 - a / 2, k + 1, n - k)
    return low, high


@needs_bwrap
def test_ablate_reports_each_level_like_table_3(calib, files):
    paths, contexts, spec = files
    args = ["executors", "ablate", *paths, "--server-spec", spec, "--json"]
    for ctx in contexts:
        args += ["--context", ctx]
    data = calib(*args).json()
    assert data["n"] == 4 and data["server"] == "coder" and data["prompts"] == "python/v1"
    levels = data["levels"]
    # by hand: score is conclusive everywhere; scaled only after the retry; mystery and tally never
    expected = {"bare": 1, "common_imports": 1, "preamble": 1, "preamble_retry": 2}
    for level, k in expected.items():
        row = levels[level]
        assert (row["conclusive"], row["n"]) == (k, 4), (level, row)
        assert row["rate"] == k / 4
        low, high = _cp(k, 4)
        assert row["low"] == pytest.approx(low, rel=1e-9) and row["high"] == pytest.approx(high, rel=1e-9)
    assert levels["bare"]["reasons"] == {"valid_inputs (missing_name)": 1, "llm_inputs": 1,
                                         "valid_inputs (none found)": 1}
    assert levels["common_imports"]["reasons"] == {"valid_inputs (standin)": 1, "llm_inputs": 1,
                                                   "valid_inputs (none found)": 1}
    assert levels["preamble"]["reasons"] == {"preamble_failed": 1, "llm_inputs": 1, "valid_inputs (none found)": 1}
    assert levels["preamble_retry"]["reasons"] == {"llm_inputs": 1, "valid_inputs (none found)": 1}
    by_id = {Path(f["id"]).name: f["levels"] for f in data["functions"]}
    assert by_id["scaled.py"]["preamble_retry"]["conclusive"] and not by_id["scaled.py"]["preamble"]["conclusive"]
    # one input request and one preamble request per function with inputs; a retry only where level 3 failed
    seen = sorted(_Handler.seen)
    assert seen.count(("input_generation", "score")) == 1 and ("preamble_retry", "score") not in seen
    assert seen.count(("preamble_retry", "scaled")) == 1 and ("preamble", "mystery") not in seen


@needs_bwrap
def test_ablate_reads_a_functions_table_and_prints_a_summary(calib, files, tmp_path):
    paths, _, spec = files
    table = tmp_path / "functions.parquet"
    rows = [{"function_id": "f1", "language": "python", "signature": "def score(values, limit):",
             "body": FUNCTIONS["score.py"].split("\n", 1)[1], "context": ""},
            {"function_id": "f2", "language": "java", "signature": "int f()", "body": "{ return 1; }", "context": ""}]
    pl.DataFrame(rows).write_parquet(table)
    out = calib("executors", "ablate", table, "--server-spec", spec, "--levels", "bare,preamble")
    assert out.code == 0, out.err
    lines = out.out.strip().splitlines()
    assert lines[0].startswith("1 functions, server 'coder'")  # the Java row is not run
    assert lines[1].split()[:2] == ["bare", "1/1"] and lines[2].split()[:2] == ["preamble", "1/1"]


def test_ablate_refuses_unknown_levels_and_mismatched_contexts(calib, files):
    paths, contexts, spec = files
    err = calib("executors", "ablate", *paths, "--server-spec", spec, "--levels", "bare,agent").one_line_error()
    assert "agent" in err and "preamble_retry" in err
    err = calib("executors", "ablate", *paths, "--server-spec", spec, "--context", contexts[0]).one_line_error()
    assert "--context" in err and "4" in err
