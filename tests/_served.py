"""The tiny model (built once per session) and ``calib serve`` running it: session fixtures for every folder.

tests/conftest.py registers :func:`tiny_model_dir` and :func:`served_model`, so the server, metric and
CLI tests share one build and one server. Nothing here reaches the internet: the model is built
locally and served on 127.0.0.1. The vLLM helpers at the end start ``servers/vllm/`` scripts for the
tests that compare real vLLM servers with calib's own.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._tiny import build_tiny_model

SERVED_NAME = "tiny"

def calib_command(*args: str) -> list[str]:
    """The argv running ``calib ARGS...`` in a fresh interpreter of this environment."""
    return [sys.executable, "-m", "calib", *args]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight GPT-2-style model with a chat template, built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny")


@pytest.fixture(scope="session")
def served_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``calib serve`` running the tiny model on 127.0.0.1 (a free port); yields its base URL.

    Port 0 lets the system choose the port, and the line ``calib serve`` prints once listening says
    which, so there is no race for a port. On teardown the server gets SIGTERM and must exit 0.
    """
    log = tmp_path_factory.mktemp("serve") / "stderr.txt"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CALIB_DEBUG", None)
    argv = calib_command("serve", str(tiny_model_dir), "--port", "0", "--name", SERVED_NAME, "--threads", "1")
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        url = _wait_until_listening(proc, log, timeout=90.0)
        yield url
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"calib serve ignored SIGTERM; its stderr:\n{log.read_text()}") from None
    assert code == 0, f"calib serve exited {code} on SIGTERM; its stderr:\n{log.read_text()}"


@contextlib.contextmanager
def serving(model_dir: Path, name: str, log: Path) -> Iterator[str]:
    """``calib serve MODEL_DIR`` on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    argv = calib_command("serve", str(model_dir), "--port", "0", "--name", name, "--threads", "1")
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        yield _wait_until_listening(proc, log, timeout=90.0)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="session")
def served_organism_target(organism_tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``calib serve`` of the tiny organism's target, named ``organism-target``: its base URL. One server for the
    session: every module that asks it over HTTP puts its own proxy (tests/_hosted.py) or client in front, and
    each request carries its own settings (greedy or seeded), so what one module asked does not change another's
    answers."""
    log = tmp_path_factory.mktemp("serve-organism-target") / "stderr.txt"
    with serving(organism_tiny.target, "organism-target", log) as url:
        yield url


@pytest.fixture(scope="session")
def served_organism_chat_target(organism_tiny_chat: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``calib serve`` of the organism's chat variant's target, named ``organism-chat-target``: as
    :func:`served_organism_target`, one server for the session."""
    log = tmp_path_factory.mktemp("serve-organism-chat-target") / "stderr.txt"
    with serving(organism_tiny_chat.chat_target, "organism-chat-target", log) as url:
        yield url


def _wait_until_listening(proc: subprocess.Popen, log: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    pattern = re.compile(r"^calib serve: (\S+) at (http://127\.0\.0\.1:\d+) \(OpenAI /v1 and TGI routes\)$", re.M)
    url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"calib serve exited {proc.returncode} before listening:\n{log.read_text()}")
        match = url or pattern.search(log.read_text())
        if match:
            url = match if isinstance(match, str) else match.group(2)
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as resp:
                    if resp.status == 200:
                        return url
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"calib serve did not answer /health within {timeout:.0f} s:\n{log.read_text()}")


# --- vLLM's CPU build (servers/vllm/): the venv, and waiting for its servers --------------------------
ROOT = Path(__file__).resolve().parents[1]


def vllm_venv() -> Path:
    """The venv of ``servers/vllm/build-venv.sh``: ``$CALIB_VLLM_VENV`` (older name ``$VLLM_VENV``), else
    ``servers/vllm/.venv``."""
    named = os.environ.get("CALIB_VLLM_VENV") or os.environ.get("VLLM_VENV")
    return Path(named) if named else ROOT / "servers" / "vllm" / ".venv"


def vllm_missing() -> str | None:
    """Why the vLLM tests cannot run here (no venv built), or None."""
    venv = vllm_venv()
    if (venv / "bin" / "python").exists():
        return None
    return (f"no vLLM venv at {venv}: build it with servers/vllm/build-venv.sh (about 3.5 GB; CALIB_VLLM_VENV "
            "chooses where) to run this test")


def needs_vllm() -> pytest.MarkDecorator:
    """Skip, with the reason, where no vLLM venv has been built."""
    return pytest.mark.skipif(vllm_missing() is not None, reason=vllm_missing() or "")


def free_port() -> int:
    """A port free on 127.0.0.1 now (vLLM takes a port number, not 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_vllm(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A ``servers/vllm/`` script in its own process group (so that :func:`stop_vllm` ends every process)."""
    with log.open("w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {}), "CALIB_VLLM_VENV": str(vllm_venv())})


def wait_for_vllm(proc: subprocess.Popen, urls: list[str], log: Path, timeout: float = 900.0) -> None:
    """Until every URL answers ``/health`` 200; fails with the log's tail if the script exits first.

    The limit only guards against a hang: vLLM takes one to a few minutes to start on 2 busy cores.
    """
    deadline = time.monotonic() + timeout
    waiting = list(urls)
    while waiting:
        if proc.poll() is not None:
            pytest.fail(f"vLLM exited {proc.returncode} before answering:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(waiting[0] + "/health", timeout=5) as resp:
                if resp.status == 200:
                    waiting.pop(0)
                    continue
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"vLLM did not answer /health within {timeout:.0f} s:\n{log.read_text()[-4000:]}")
        time.sleep(2)


class VllmPair:
    """``serve-pair-cpu.sh`` serving the tiny organism's target and reference; :meth:`urls` waits until both answer."""

    def __init__(self, organism: Any, proc: subprocess.Popen, urls: dict[str, str], log: Path) -> None:
        self.organism, self.proc, self._urls, self.log = organism, proc, urls, log

    def urls(self) -> dict[str, str]:
        wait_for_vllm(self.proc, list(self._urls.values()), self.log)
        return self._urls


@pytest.fixture(scope="session")
def vllm_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmPair]:
    """The tiny organism's target and reference on vLLM, started at once and not waited for here (so that vLLM's
    slow start-up overlaps other work: :meth:`VllmPair.urls` waits), shared by the modules that need real vLLM
    (tests/conftest.py runs them last, one after the other, so the pair lives only while they run)."""
    if why := vllm_missing():
        pytest.skip(why)
    organism_tiny = request.getfixturevalue("organism_tiny")  # built only where vLLM can run
    ports = {"target": free_port(), "reference": free_port()}
    log = tmp_path_factory.mktemp("vllm-pair") / "serve-pair-cpu.log"
    env = {"TARGET": str(organism_tiny.target), "REFERENCE": str(organism_tiny.reference),
           "TARGET_PORT": str(ports["target"]), "REFERENCE_PORT": str(ports["reference"])}
    proc = start_vllm(["bash", str(ROOT / "servers" / "vllm" / "serve-pair-cpu.sh")], log, env)
    try:
        yield VllmPair(organism_tiny, proc, {role: f"http://127.0.0.1:{port}" for role, port in ports.items()}, log)
    finally:
        stop_vllm(proc)


def stop_vllm(proc: subprocess.Popen) -> None:
    """SIGTERM to the script's process group (API servers and engine processes), SIGKILL to what outlives 60 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            proc.poll()
            os.killpg(proc.pid, 0)  # raises ProcessLookupError once the whole group is gone
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
