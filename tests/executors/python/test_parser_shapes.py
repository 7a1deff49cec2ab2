"""Texts in the shape of what x hands them to (issue 24 §2): a parameter passed to a parser of the standard
library (``socket.inet_aton(s)``, ``json.loads(text)``, ``ipaddress.ip_network(net)``) draws texts that
parser accepts (:data:`.shapes.PARSERS`), as a parameter named ``url`` or ``ip`` draws such texts by its name."""

from __future__ import annotations

import ast
import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, shapes
from calib.executors.sandbox.harness.values import decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONTEXT = "import json\n\n"
SETTINGS = (
    "def settings(text):\n"
    "    try:\n"
    "        data = json.loads(text)\n"
    "    except ValueError:\n"
    "        return None\n"
    "    if isinstance(data, dict):\n"
    "        name = data.get('name')\n"
    "        values = data.get('values', [])\n"
    "        total = sum(values) if isinstance(values, list) else 0\n"
    "        return (name, total)\n"
    "    return data\n"
)


def test_a_parameter_handed_to_a_parser_draws_texts_it_parses() -> None:
    source = ("def f(s, text, net, n):\n"
              "    socket.inet_pton(socket.AF_INET6, s)\n"
              "    json.loads(text)\n"
              "    ipaddress.ip_network(net, strict=False)\n"
              "    return int(n)\n")
    node = ast.parse(source).body[0]
    info = hints.analyse(node, skip_first=False)
    texts = shapes.parsed(info)
    assert texts[:2] == ["192.168.1.10", "::1"]
    assert '{"name": "example", "values": [1, 2]}' in texts and "10.0.0.0/8" in texts
    for text in ("192.168.1.10", "::1", "10.0.0.0/8", "fe80::/64"):  # what the parsers accept, checked by them
        import ipaddress

        ipaddress.ip_network(text, strict=False)
    json.loads(texts[2])
    hints.mine_module(ast.parse(source), info)
    assert "192.168.1.10" in info.strings[:8]


@needs_bwrap
def test_a_function_parsing_json_text_reaches_its_object_branch() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(SETTINGS, [], context=CONTEXT))
    assert result.conclusive, result.reason  # (0.56 before: no text was a JSON object)
    assert result.coverage == 1.0
    namespace: dict[str, object] = {}
    exec(CONTEXT + SETTINGS, namespace)  # noqa: S102 - the test's own function, the independent reference
    objects = 0
    for item in result.inputs:
        value = decode(item.state["args"]["text"])
        if item.valid and isinstance(value, str) and value.startswith("{"):
            expected = namespace["settings"](value)  # type: ignore[operator]
            assert json.loads(item.output)["return"] == {"tuple": list(expected)}
            objects += 1
    assert objects >= 1
