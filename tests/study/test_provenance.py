"""The run's provenance record (``manifest.json`` key ``provenance``) against independently obtained values.

A real ``calib study`` of the tiny organism (its models in the embedded server) is checked against
``importlib.metadata``, ``git rev-parse HEAD``, ``bwrap --version``, ``gcc --version``, ``sha256`` of the
weights read here; the stage runner with loopback servers shaped like TGI 3 and vLLM (this file's own)
checks that what those servers report reaches the manifest, and what they cannot report is null with
a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from calib.study import load_spec
from calib.study.provenance import _toolchain, spec_seeds
from calib.study.resources import Resources
from calib.study.runner import RunOptions, Stage, run_stages

REPO = Path(__file__).resolve().parents[2]
# text-generation 0.7 (the tgi kind's client) calls pydantic's deprecated .dict() on every request.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")


def _first_line(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return (done.stdout or done.stderr).strip().splitlines()[0].strip()


# --------------------------------------------------------------------------- a study of the organism
_ORGANISM_SPEC = """[study]
name = "tiny"
seed = 7

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 12
"""


@pytest.fixture(scope="module")
def organism_run(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("provenance")
    (root / "tiny.toml").write_text(_ORGANISM_SPEC.format(cache_dir=organism_tiny.root.parent.parent))
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "tiny.toml", "--run-dir", "a", "--quiet",
                           "--stage", "generate", "--limit", "2"], capture_output=True, text=True, cwd=root,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr
    return root / "a"


@pytest.fixture(scope="module")
def record(organism_run: Path) -> dict:
    return json.loads((organism_run / "manifest.json").read_text())["provenance"]


def test_calib_version_commit_and_packages_match_git_and_the_installed_metadata(record):
    calib = record["calib"]
    assert calib["version"] == importlib.metadata.version("calib")
    if (REPO / ".git").exists() and shutil.which("git"):
        assert calib["commit"] == _first_line("git", "-C", str(REPO), "rev-parse", "HEAD")
        assert isinstance(calib["dirty"], bool)
    else:  # an installed package: the version is all there is, and the record says why
        assert calib["commit"] is None and "git checkout" in calib["missing"]["commit"]
    versions = record["packages"]["versions"]
    # Each declared dependency, as the module itself reports its version.
    import numpy
    import polars
    import torch
    assert (versions["numpy"], versions["polars"]) == (numpy.__version__, polars.__version__)
    assert versions["torch"] == torch.__version__
    assert "pytest" not in versions  # the dev extra is not a dependency of a run
    for name, value in versions.items():
        if value is None:  # an optional extra not installed here: the record says so
            with pytest.raises(importlib.metadata.PackageNotFoundError):
                importlib.metadata.version(name)
            assert record["packages"]["missing"][name] == "not installed (an optional extra)"
        else:
            assert value == importlib.metadata.version(name), name
    assert record["python"]["version"] == platform.python_version()


def test_each_server_records_its_model_dtype_version_and_weights(record, organism_tiny):
    for role in ("target", "reference"):
        server = record["servers"][role]
        model_dir = Path(getattr(organism_tiny, role))
        weights = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in model_dir.glob("*.safetensors")}
        assert weights and server["weights_sha256"] == weights
        # The embedded server loads the weights as float32 (docs/servers.md).
        assert (server["kind"], server["model"], server["dtype"]) == ("embedded", str(model_dir), "float32")
        assert server["server_version"] == importlib.metadata.version("calib")
        assert server["revision"] is None and server["missing"]["revision"]


def test_the_executor_and_the_seeds_match_the_sandbox_that_ran(record):
    executor = record["executor"]
    assert executor["bwrap"] == _first_line("bwrap", "--version")
    assert executor["python"] == platform.python_version()  # the sandbox starts this installation's interpreter
    assert executor["pythonhashseed"] == "0" and executor["languages"] == ["python"]
    assert executor["toolchains"] == {}  # no native language in the samples: no compiler is asked
    assert record["seeds"] == {"study.seed": 7, "organism.seed": 0, "sandbox.PYTHONHASHSEED": "0"}


def test_a_native_toolchain_is_its_first_version_line_and_a_missing_one_says_what_to_install(monkeypatch, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    _toolchain.cache_clear()
    found = _toolchain("c")
    assert found["cc"] == _first_line(os.path.realpath(shutil.which("gcc")), "--version")
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler on the PATH
    _toolchain.cache_clear()
    try:
        assert _toolchain("c") == {"missing": "gcc is not installed (install gcc)"}
    finally:
        _toolchain.cache_clear()


def test_spec_seeds_are_found_at_any_depth():
    assert spec_seeds({"study": {"seed": 3}, "probes": {"sampling_seed": 5, "grid": [{"seed": 1}]}, "x": 2}) == {
        "study.seed": 3, "probes.sampling_seed": 5, "probes.grid.0.seed": 1}


# --------------------------------------------------------------------------- loopback servers, the runner
class _Tgi3:
    """GET /info as TGI 3 answers it; /tokenize and / enough for the capability probe."""

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_id": "bigcode/starcoder2-3b",
                                  "model_sha": "733247c55e3f73af49ce8e9c7949bf14af205928",
                                  "model_dtype": "torch.float16", "model_device_type": "cuda",
                                  "max_input_tokens": 4095, "max_total_tokens": 4096, "version": "3.3.4",
                                  "sha": "9a4c3b2d", "router": "text-generation-router"})

    async def tokenize(self, request: web.Request) -> web.Response:
        inputs = (await request.json())["inputs"]
        return web.json_response([{"id": ord(c), "text": c, "start": i, "stop": i + 1} for i, c in enumerate(inputs)])

    async def generate(self, request: web.Request) -> web.Response:
        token = {"id": 33, "text": "!", "logprob": -0.25, "special": False}
        return web.json_response([{"generated_text": "!", "details": {
            "finish_reason": "length", "generated_tokens": 1, "seed": None, "prefill": [], "tokens": [token]}}])

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/info", self.info)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/", self.generate)
        return app


class _Vllm:
    """/v1/models and /version as vLLM answers them (no /info: vLLM reports no dtype or revision)."""

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{
            "id": "starcoder2", "object": "model", "created": 1, "owned_by": "vllm",
            "root": "/models/starcoder2-3b", "parent": None, "max_model_len": 2048, "permission": []}]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.10.1"})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/version", self.version)
        return app


@contextlib.contextmanager
def _serving(app: web.Application) -> Iterator[str]:
    """``app`` on 127.0.0.1 in a thread of its own (the runner drives its own event loop)."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


async def _probe_both(ctx) -> pl.DataFrame:
    for name in ("target", "reference"):
        await ctx.resources.probe(name)
    return pl.DataFrame({"n": [2]})


def test_the_runner_records_what_tgi_and_vllm_report_and_why_the_rest_is_null(tmp_path):
    (tmp_path / "functions.parquet").write_bytes(b"")
    with _serving(_Tgi3().app()) as tgi, _serving(_Vllm().app()) as vllm:
        text = f"""[study]
name = "loopback"
kind = "extraction"
seed = 11

[servers.target]
kind = "tgi"
base_url = "{tgi}"
max_retries = 0

[servers.reference]
kind = "openai"
base_url = "{vllm}"
revision = "9b1bf9f0"
dtype = "bfloat16"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "functions"
paths = ["functions.parquet"]
"""
        (tmp_path / "loopback.toml").write_text(text)
        spec = load_spec(tmp_path / "loopback.toml")
        resources = Resources(spec)
        stage = Stage("probe", (), "probed", "1", lambda spec, options: {}, _probe_both)
        run_stages([stage], spec, text, tmp_path / "run", options=RunOptions(progress=False), resources=resources,
                   manifest_extra=lambda: {})
    record = json.loads((tmp_path / "run" / "manifest.json").read_text())["provenance"]
    target, reference = record["servers"]["target"], record["servers"]["reference"]
    assert {k: target[k] for k in ("kind", "model", "revision", "dtype", "device", "server_version")} == {
        "kind": "tgi", "model": "bigcode/starcoder2-3b", "revision": "733247c55e3f73af49ce8e9c7949bf14af205928",
        "dtype": "float16", "device": "cuda", "server_version": "3.3.4"}
    assert target["sources"]["revision"] == "GET /info model_sha" and target["missing"] == {}
    assert {k: reference[k] for k in ("kind", "model", "root", "revision", "dtype", "server_version")} == {
        "kind": "openai", "model": "starcoder2", "root": "/models/starcoder2-3b", "revision": "9b1bf9f0",
        "dtype": "bfloat16", "server_version": "0.10.1"}
    # vLLM reports neither: both come from the spec, and the record says so.
    assert "stated" in reference["sources"]["revision"] and "stated" in reference["sources"]["dtype"]
    assert record["executor"] is None and record["executor_missing"] == "the extraction study runs no code"
    assert record["seeds"] == {"study.seed": 11}

    # A resumed run that starts no server keeps the servers' records.
    run_stages([stage], spec, text, tmp_path / "run", options=RunOptions(progress=False), resources=Resources(spec),
               manifest_extra=lambda: {})
    again = json.loads((tmp_path / "run" / "manifest.json").read_text())["provenance"]
    assert again["servers"] == record["servers"]


# --------------------------------------------------------------------------- the report's Methods section
def test_the_methods_section_states_the_run_record(tmp_path):
    from calib.report import write_report
    from calib.servers.base import server_record
    from calib.study.provenance import collect
    from tests.report._fake_run import make_run

    (tmp_path / "tiny.toml").write_text(_ORGANISM_SPEC.format(cache_dir=tmp_path / "cache"))
    spec = load_spec(tmp_path / "tiny.toml")
    record = collect(spec, Resources(spec))  # no server started: the environment, the sandbox, the seeds
    record["servers"] = {"target": server_record("tgi", {
        "model": ("bigcode/starcoder2-3b", "GET /info model_id"), "revision": ("733247c5", "GET /info model_sha"),
        "dtype": ("float16", "GET /info model_dtype"), "server_version": ("3.3.4", "GET /info version")}),
        "reference": server_record("openai", {
            "model": ("starcoder2", "GET /v1/models"), "revision": (None, "vLLM does not report it"),
            "dtype": (None, "vLLM does not report it"), "server_version": ("0.10.1", "GET /version")})}
    run = make_run(tmp_path / "run", examples=0)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "provenance": record}))
    paths = write_report(run)
    md = paths["markdown"].read_text()
    methods = json.loads(paths["summary"].read_text())["methods"]["run_record"]

    assert methods["calib_commit"] == record["calib"]["commit"]
    assert methods["seeds"] == [{"key": "organism.seed", "value": 0}, {"key": "sandbox.PYTHONHASHSEED", "value": "0"},
                                {"key": "study.seed", "value": 7}]
    assert "| target | tgi | `bigcode/starcoder2-3b` | `733247c5` | float16 | 3.3.4 | – |" in md
    assert ("| reference | openai | `starcoder2` | – | – | 0.10.1 | dtype: vLLM does not report it; revision: vLLM "
            "does not report it |") in md
    assert "Seeds: organism.seed = 0, sandbox.PYTHONHASHSEED = 0, study.seed = 7." in md
    if shutil.which("bwrap"):
        assert f"Sandbox: Python {platform.python_version()}, {_first_line('bwrap', '--version')}, " \
               "PYTHONHASHSEED = 0." in md
    assert f"numpy {importlib.metadata.version('numpy')}" in md
    assert "base_url" not in md and "127.0.0.1" not in md

    (run / "manifest.json").write_text(json.dumps(manifest))  # a run of an older calib: no record
    paths = write_report(run)
    assert json.loads(paths["summary"].read_text())["methods"]["run_record"] is None
    assert "The manifest holds no provenance record" in paths["markdown"].read_text()
