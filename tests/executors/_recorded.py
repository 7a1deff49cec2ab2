"""Recorded Anthropic Messages-API answers (tests/executors/recorded/) served through ``httpx2.MockTransport``.

:class:`Recorded` answers requests in order from the recorded bodies (the last one repeats) and keeps
every request, so a test can check what an executor sent as well as what it made of the answers.
Nothing reaches the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from calib.servers import create_server

RECORDED = Path(__file__).parent / "recorded"


class Recorded:
    """A mock transport answering with ``recorded/{prefix}_{name}.json`` bodies, in order."""

    prefix = ""

    def __init__(self, *names: str) -> None:
        self.answers = [json.loads((RECORDED / f"{self.prefix}_{n}.json").read_text()) for n in names]
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return httpx2.Response(answer["status"], headers=answer["headers"], json=answer["body"])

    def body(self, i: int) -> dict[str, Any]:
        return json.loads(self.requests[i].content)

    def server(self) -> Any:
        """An ``anthropic`` server whose requests go to this transport."""
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return create_server("coder", {"kind": "anthropic", "model": "claude-sonnet-5", "http_client": client,
                                       "max_retries": 0})
