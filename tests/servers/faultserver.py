"""A loopback fault-injection server: an OpenAI-ish POST /v1/completions with a fixed service time
and a fixed number of slots, and faults chosen per request in its JSON body.

Used by the server tests and by ``benchmarks/servers.py``. It runs in its own process (so client and
server share neither an event loop nor a CPU) and listens on 127.0.0.1 only::

    python tests/servers/faultserver.py --port 0 [--port 0 ...] --service-time 0.05 --slots 32 [--cpu 0]

prints ``READY <port> [<port> ...]`` once it listens, then serves until SIGTERM. From Python,
:class:`FaultServer` starts it, waits for that line, and reads its counters.

Capacity is ``slots / service_time`` (32 / 0.05 s = 640 requests/s): each request holds one slot
(``asyncio.Semaphore``) for the service time.

A request picks its fault with a ``fault`` object in its body (absent: a normal answer)::

    {"prompt": "...", "request_id": "r7",
     "fault": {"mode": "status", "status": 503, "times": 2, "retry_after": "1"}}

``times`` makes the first ``times`` attempts of that ``request_id`` fail and later ones succeed
("fail the first n attempts, then succeed"); without it every attempt fails. ``service_time``
overrides the server's service time for that request. Modes:

``delay``      sleep ``seconds`` (outside the slots, so it costs no capacity), then answer normally;
``status``     answer ``status`` (e.g. 429, 500, 502, 503, 400, 404) with ``retry_after`` as the
               Retry-After header when given;
``garbage``    200 with a body that is not JSON;
``truncated``  200 with the first half of a JSON answer (its Content-Length says so: the body is complete);
``reset``      send the headers and half the body, then reset the connection (TCP RST);
``badhttp``    answer with a line that is not HTTP, then close.

``GET /stats`` returns the attempts per request id, the total, the requests per listening port, how
many carried an Authorization header, and the most requests handled at once (``max_concurrent``);
``POST /reset`` zeroes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["FaultServer", "answer_text"]


def answer_text(prompt: str) -> str:
    """The completion text the server answers for ``prompt`` (so a client can check the answer)."""
    return "echo:" + prompt


class _State:
    def __init__(self, service_time: float, slots: int) -> None:
        self.service_time = service_time
        self.slots = asyncio.Semaphore(slots)
        self.reset()

    def reset(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.by_port: Counter[int] = Counter()
        self.total = 0
        self.with_authorization = 0
        self.in_flight = 0
        self.max_concurrent = 0


def _completion(body: dict[str, Any], rid: str | None, attempt: int) -> bytes:
    prompts = body.get("prompt", "")
    if isinstance(prompts, str):
        prompts = [prompts]
    choices = [{"index": i, "text": answer_text(str(p)), "finish_reason": "stop", "logprobs": None}
               for i, p in enumerate(prompts)]
    return json.dumps({
        "id": f"cmpl-{rid}", "object": "text_completion", "model": body.get("model", "fault"),
        "request_id": rid, "attempt": attempt, "choices": choices,
        "usage": {"prompt_tokens": len(prompts), "completion_tokens": len(prompts), "total_tokens": 2 * len(prompts)},
    }).encode()


def build_app(state: _State):
    """The aiohttp application (imported lazily: the parent process of the tests needs no server code)."""
    from aiohttp import web

    async def inject(request: web.Request, fault: dict[str, Any], payload: bytes) -> web.StreamResponse:
        mode = fault["mode"]
        if mode == "status":
            headers = {}
            if fault.get("retry_after") is not None:
                headers["Retry-After"] = str(fault["retry_after"])
            status = int(fault.get("status", 500))
            return web.Response(status=status, text=f"injected {status}", headers=headers)
        if mode == "garbage":
            return web.Response(status=200, body=b"<html>502 Bad Gateway (not JSON)</html>",
                                content_type="application/json")
        if mode == "truncated":
            return web.Response(status=200, body=payload[: len(payload) // 2], content_type="application/json")
        transport = request.transport
        assert transport is not None
        sock = transport.get_extra_info("socket")
        if mode == "reset":
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            resp.content_length = len(payload)
            await resp.prepare(request)
            await resp.write(payload[: len(payload) // 2])
            # SO_LINGER 0: close() sends a TCP RST instead of a FIN (a "connection reset by peer").
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            raise asyncio.CancelledError  # the connection is gone; nothing more to send
        if mode == "badhttp":
            transport.write(b"THIS IS NOT HTTP\r\n\r\n")
            transport.close()
            raise asyncio.CancelledError
        return web.Response(status=400, text=f"unknown fault mode {mode!r}")

    async def completions(request: web.Request) -> web.StreamResponse:
        state.total += 1
        state.with_authorization += "Authorization" in request.headers
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if sockname:
            state.by_port[sockname[1]] += 1
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.Response(status=400, text="body is not JSON")
        rid = body.get("request_id")
        attempt = 0
        if rid is not None:
            state.attempts[str(rid)] += 1
            attempt = state.attempts[str(rid)]
        fault = body.get("fault") or {}
        times = fault.get("times")
        active = fault.get("mode", "ok") != "ok" and (times is None or attempt <= times)
        state.in_flight += 1
        state.max_concurrent = max(state.max_concurrent, state.in_flight)
        try:
            if active and fault["mode"] == "delay":
                await asyncio.sleep(float(fault["seconds"]))
                active = False
            async with state.slots:
                await asyncio.sleep(float(fault.get("service_time", state.service_time)))
            payload = _completion(body, rid, attempt)
            if active:
                return await inject(request, fault, payload)
            return web.Response(body=payload, content_type="application/json")
        finally:
            state.in_flight -= 1

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fault", "object": "model"}]})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"attempts": dict(state.attempts), "total": state.total,
                                  "with_authorization": state.with_authorization,
                                  "by_port": {str(k): v for k, v in state.by_port.items()},
                                  "max_concurrent": state.max_concurrent, "in_flight": state.in_flight})

    async def reset(request: web.Request) -> web.Response:
        state.reset()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    return app


async def _serve(ports: Sequence[int], service_time: float, slots: int) -> None:
    from aiohttp import web

    state = _State(service_time, slots)
    # A short shutdown: a "delay" request still sleeping when the tests are done is not worth waiting for.
    runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    bound = []
    for port in ports:
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024, reuse_address=True, shutdown_timeout=0.5)
        await site.start()
        bound.append(site._server.sockets[0].getsockname()[1])  # port 0: the one the OS chose
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("READY " + " ".join(map(str, bound)), flush=True)
    await stop.wait()
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: serve until SIGTERM."""
    parser = argparse.ArgumentParser(description="loopback fault-injection server")
    parser.add_argument("--port", type=int, action="append", help="port to listen on (0: any free); repeatable")
    parser.add_argument("--service-time", type=float, default=0.05, help="seconds each request holds a slot")
    parser.add_argument("--slots", type=int, default=32, help="requests served at once")
    parser.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    asyncio.run(_serve(args.port or [0], args.service_time, args.slots))


class FaultServer:
    """Run the fault server in a subprocess; a context manager.

    Parameters
    ----------
    ports
        How many ports to listen on (all served by the same slots and counters).
    service_time, slots
        The capacity: ``slots / service_time`` requests per second.
    cpu
        Pin the server process to this CPU (the benchmark does).
    """

    def __init__(self, *, ports: int = 1, service_time: float = 0.05, slots: int = 32, cpu: int | None = None,
                 start_timeout: float = 30.0) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--service-time", str(service_time), "--slots", str(slots)]
        cmd += ["--port", "0"] * ports
        if cpu is not None:
            cmd += ["--cpu", str(cpu)]
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL)
        try:
            self.ports = self._wait_ready(start_timeout)
        except BaseException:
            self.close()
            raise
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        self.url = self.urls[0]

    def _wait_ready(self, timeout: float) -> list[int]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    line = self.process.stdout.readline().decode()
                    if line.startswith("READY "):
                        return [int(p) for p in line.split()[1:]]
                    if not line:
                        break  # the process exited
        err = self.log()[-2000:]
        raise RuntimeError(f"fault server did not start within {timeout} s (exit code {self.process.poll()}): {err}")

    def _call(self, method: str, route: str) -> Any:
        req = urllib.request.Request(self.url + route, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        """The server's counters (``attempts`` per request id, ``total``, ``by_port``, ``max_concurrent``)."""
        return self._call("GET", "/stats")

    def reset(self) -> None:
        """Zero the counters."""
        self._call("POST", "/reset")

    def log(self) -> str:
        """What the server wrote on stderr so far (tracebacks of its own errors)."""
        fd = self._stderr.fileno()
        # pread leaves the file offset alone: the server shares it and may be writing.
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    main()
