"""A mocked module's pure names stay real, and a text added to a stand-in is a text, through the real
sandbox (docs/executors.md, "Stand-ins").

``socket`` is always mocked (code talking to a server runs, its calls recorded), but its constants, its
address conversions and its ``error`` class do no input or output: they are the real ones, so
``socket.inet_aton(text)`` refuses what Python refuses and ``af == socket.AF_INET6`` holds for 10 only.
The comparison recorder reads such an enum member as the int it compares as, so the search finds 10.
The expected outputs are Python's own (``socket.inet_aton``, ``socket.AF_INET6``), computed here.
"""

from __future__ import annotations

import asyncio
import enum
import re
import shutil
import socket

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, mocks
from calib.executors.sandbox.harness.standins import is_standin, standin_for
from tests.executors.python.test_result_shapes import _compare, _outputs

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONTEXT = "import socket\nfrom socket import AF_INET, inet_pton, create_connection\n\n"
IS_IPV4 = (
    "def is_ipv4(text):\n"
    "    try:\n"
    "        socket.inet_aton(text)\n"
    "        return True\n"
    "    except socket.error:\n"
    "        return False\n"
)
FAMILY = (
    "def family(af, host):\n"
    "    if af == AF_INET:\n"
    "        return 'v4'\n"
    "    if af == socket.AF_INET6:\n"
    "        return 'v6'\n"
    "    conn = create_connection((host, 80))\n"
    "    return conn.recv(1)\n"
)


def _accepts(text: str) -> bool:
    try:
        socket.inet_aton(text)
    except OSError:
        return False
    return True


@needs_bwrap
def test_socket_address_conversions_are_real_in_the_mocked_module() -> None:
    texts = ["1.2.3.4", "abc", "10", "300.1.1.1"]
    given = [{"args": {"text": repr(t)}} for t in texts]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(IS_IPV4, [], context=CONTEXT, inputs=given))
    # what Python's own inet_aton says ("10" is a valid dotted-quad shorthand, "300.1.1.1" is not)
    assert [out["return"] for _, out in _outputs(result)] == [_accepts(t) for t in texts]
    assert all(out["calls"] == [] for _, out in _outputs(result))  # nothing went to a stand-in


@needs_bwrap
def test_socket_constants_are_real_and_the_search_finds_the_family_it_is_compared_with() -> None:
    result = _compare(FAMILY, [], context=CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    by_af = {}
    for state, out in _outputs(result):
        by_af.setdefault(state["args"]["af"], out)
    # Python: AF_INET == 2, AF_INET6 == 10 on Linux; any other family opens a connection: a stand-in call
    assert by_af[repr(int(socket.AF_INET))]["return"] == "v4"
    assert by_af[repr(int(socket.AF_INET6))]["return"] == "v6"
    others = [out for af, out in by_af.items() if af not in (repr(int(socket.AF_INET)), repr(int(socket.AF_INET6)))]
    assert others
    assert all(out["calls"][0][:2] == ["call", "socket.create_connection"] for out in others)


def test_only_the_pure_names_of_a_mocked_module_are_real() -> None:
    bound = mocks.partly_real("socket", "socket")
    assert bound.AF_INET6 is socket.AF_INET6 and bound.SOCK_STREAM is socket.SOCK_STREAM
    assert bound.inet_aton is socket.inet_aton and bound.error is OSError
    # anything that talks to the network or the host stays a stand-in
    for name in ("socket", "create_connection", "getaddrinfo", "gethostbyname", "gethostname", "gaierror"):
        assert is_standin(getattr(bound, name)) or getattr(bound, name).__name__.startswith("CalibStandIn"), name
    assert mocks.real("socket", "AF_INET") == (True, socket.AF_INET)
    assert mocks.real("socket", "create_connection") == (False, None)
    assert mocks.real("requests", "get") == (False, None)  # other mocked modules: all stand-ins
    assert is_standin(mocks.partly_real("requests", "requests").get)


def test_the_recorder_reads_int_and_text_enum_members_as_their_values() -> None:
    class Color(enum.IntEnum):
        RED = 3

    class Mode(str, enum.Enum):
        FAST = "fast"

    cmplog.PAIRS.clear()
    assert cmplog.compare(5, Color.RED, "Eq") is False
    assert cmplog.compare("slow", Mode.FAST, "Eq") is False
    assert cmplog.compare(True, 1, "Eq") is True  # a bool stays a bool (not recorded as 1 == 1)
    assert [(kind, a, b, type(b)) for kind, a, b in cmplog.PAIRS] == [("eq", 5, 3, int), ("eq", "slow", "fast", str)]
    cmplog.PAIRS.clear()


WITHHELD_CONTEXT = (
    "import re\n"
    "from withheld.common import OPENTAG\n"
    "\n"
    "PATTERN = re.compile('^(?:' + OPENTAG + '|[a-z]+)')\n"
    "\n"
)
STARTS_WITH_WORD = (
    "def starts_with_word(text):\n"
    "    m = PATTERN.match(text)\n"
    "    return m.group() if m else None\n"
)


def test_a_text_added_to_a_stand_in_is_a_text() -> None:
    tag = standin_for("withheld.common.OPENTAG")
    assert "^(?:" + tag == "^(?:<withheld.common.OPENTAG>" and tag + "|x" == "<withheld.common.OPENTAG>|x"
    assert is_standin(tag + 1) and is_standin(b"x" + tag)  # only texts: other operands keep a stand-in


@needs_bwrap
def test_a_module_pattern_built_from_a_withheld_constant_compiles() -> None:
    # before, ``'^(?:' + OPENTAG`` raised TypeError, PATTERN became a stand-in and x matched nothing real
    texts = ["abc1", "1abc", "<withheld.common.OPENTAG>x"]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(STARTS_WITH_WORD, [], context=WITHHELD_CONTEXT,
                                          inputs=[{"args": {"text": repr(t)}} for t in texts]))
    assert not any("PATTERN" in w for w in result.warnings), result.warnings
    pattern = re.compile("^(?:<withheld.common.OPENTAG>|[a-z]+)")  # what the module now builds
    expected = [m.group() if (m := pattern.match(t)) else None for t in texts]
    assert [out.get("return") for _, out in _outputs(result)] == expected == ["abc", None, "<withheld.common.OPENTAG>"]
