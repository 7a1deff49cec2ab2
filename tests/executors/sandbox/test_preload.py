"""The fork server imports the standard-library modules file contexts use most (``zygote.PRELOAD``) once,
for every child to inherit. A child must see them exactly as a fresh import in it would make them:
the same outputs with and without fork servers, and no import among them that starts a thread, loads
a native library through ctypes or reads the clock."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.bwrap import load_harness
from calib.executors.sandbox.harness import zygote
from tests.executors.sandbox.test_forkserver import needs_bwrap


def test_the_preloaded_modules_start_no_thread_and_load_no_ctypes() -> None:
    code = ("import sys, importlib\nbefore = set(sys.modules)\n"
            f"for name in {zygote.PRELOAD!r}:\n    importlib.import_module(name)\n"
            "import json, threading\nprint(json.dumps([sorted(set(sys.modules) - before), sorted(sys.modules), "
            "threading.active_count()]))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    new, everything, threads = json.loads(done.stdout)
    loaded = set(new)
    assert set(zygote.PRELOAD) <= set(everything)  # each one exists in this Python and imported
    assert threads == 1  # no thread but the main one
    assert not {name for name in loaded if name == "ctypes" or name.startswith(("ctypes.", "_ctypes"))}


def _preloaded(preload: tuple[str, ...] | None) -> dict:
    """What :func:`zygote._preload` leaves in ``sys.modules`` of a fresh interpreter that loaded the harness
    as a fork server does (``preload``: instead of ``zygote.PRELOAD``)."""
    code = (f"import sys\n{load_harness()}\nfrom _harness import zygote, runner, cmplog, reuse, synth, testcases\n"
            f"zygote.PRELOAD = {preload!r} or zygote.PRELOAD\nzygote._preload()\nimport json\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-s", "-S", "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_the_preload_leaves_threading_to_the_child_and_forgets_a_module_that_imports_it() -> None:
    # threading binds the clock when imported (``from time import monotonic as _time``): imported in the
    # server, a child's waits would read the real clock, not the frozen one (env.freeze)
    modules = _preloaded(None)
    assert set(zygote.PRELOAD) <= modules and "threading" not in modules
    # queue imports threading (on any Python): it is forgotten with everything its import brought, the
    # modules before and after it stay
    modules = _preloaded(("string", "queue", "ssl"))
    assert {"string", "ssl"} <= modules
    assert not {"queue", "threading", "_queue"} & modules


CONTEXT = "import urllib.parse, ipaddress, decimal, pathlib, email.utils, calendar, string, hashlib, locale\n"
SOURCE = '''def f(n: int, text: str):
    url = urllib.parse.urlsplit("https://example.com:8080/a/%s?q=%d" % (urllib.parse.quote(text), n))
    net = ipaddress.ip_network("10.0.%d.0/24" % (n % 256))
    money = decimal.Decimal(n) / decimal.Decimal(7)
    day = calendar.monthrange(2024, n % 12 + 1)
    return (url.path, str(net[1]), str(money), pathlib.PurePosixPath("/x", text).name,
            email.utils.formatdate(0, usegmt=True), day, string.capwords(text),
            hashlib.sha256(text.encode()).hexdigest()[:12], locale.getlocale()[1] is None or True,
            decimal.getcontext().prec)
'''


def _forked_and_own(source: str, context: str, seed: int):
    """The comparison of ``source`` with a copy of itself with fork servers and with a sandbox per batch,
    checked to agree: conclusive, the same output states, SIM_func 1 both ways."""
    def compare(forks: bool):
        executor = SandboxExecutor(ExecutorConfig(seed=seed))
        executor.sandbox.forks = forks and executor.sandbox.forks
        try:
            return asyncio.run(executor.compare(source, [source + "# copy\n"], context=context))
        finally:
            executor.close()

    forked, own = compare(True), compare(False)
    assert forked.conclusive, forked.reason
    assert [r.output for r in forked.inputs] == [r.output for r in own.inputs]
    assert forked.candidates[0].sim_func == 1.0 and own.candidates[0].sim_func == 1.0
    assert "nondeterministic" not in {r.reason for r in forked.inputs}
    return forked


@needs_bwrap
@pytest.mark.parametrize("seed", [0, 5])
def test_a_context_of_preloaded_modules_gives_the_same_outputs_with_and_without_fork_servers(seed: int) -> None:
    _forked_and_own(SOURCE, CONTEXT, seed)


NEWER = "import ssl, tempfile, configparser, uuid, pkgutil, contextvars, importlib.util, os\n"
NEWER_SOURCE = '''def g(n: int, text: str):
    parser = configparser.ConfigParser()
    parser.read_string("[a]\\nkey = %s\\nn = %d\\n" % (text.replace("\\n", " ").replace("%", ""), n))
    handle, path = tempfile.mkstemp(suffix=".txt")
    os.close(handle)
    var = contextvars.ContextVar("v", default=n)
    return (dict(parser["a"]), os.path.basename(path), str(uuid.uuid5(uuid.NAMESPACE_DNS, text)), var.get(),
            ssl.PROTOCOL_TLS_CLIENT.name, importlib.util.find_spec("json") is not None,
            [m.name for m in pkgutil.iter_modules(["/nowhere"])], n % 3)
'''


@needs_bwrap
def test_a_context_of_the_later_preloads_gives_the_same_outputs_with_and_without_fork_servers() -> None:
    forked = _forked_and_own(NEWER_SOURCE, NEWER, 3)
    assert any("tmp" in (r.output or "") for r in forked.inputs)  # the temporary file's seeded name
