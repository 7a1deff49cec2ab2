"""Hostile code through the real sandbox: every attack is contained and reported as that sample's outcome.

docs/architecture.md, "Execution semantics": generated code is untrusted; nothing it does may reach the network,
the run directory or the user's files, and one bad sample is recorded, never fatal. Each attack below
runs as a *candidate* next to a benign truth ``f(n)`` and a benign copy of it, and each test checks:

- the comparison completes, the truth stays conclusive with every input valid, and the benign copy
  still matches everywhere (the other samples are unaffected);
- the attacked inputs of the hostile candidate do not match, and their output states name the failure
  (the exception, ``timeout``, ``signal SIGSEGV`` ...);
- the host is unaffected: a listening server on 127.0.0.1 and an abstract unix socket never see a
  connection, canary files under the home directory, the repository and the host's /tmp keep their
  content and no new file appears there or under /usr and /etc, a host process the code tries to kill
  survives, no sandbox process outlives the comparison, and no secret (file contents, an environment
  variable) appears in any output.

Attacks that would hold a batch until the wall clock (a loop that defeats the per-input timer) attack
one input only (``n == 1``) and answer like the truth on the others, which must still match: one
hostile input costs one input, not the sample. Hostile code is also run as the *truth* (the sample is
inconclusive with a reason naming the failure), and next to benign samples that run concurrently.

The harness's audit hook (no process starts, no ctypes) runs in the same interpreter as the code, so
some attacks disarm it first: what stops them is the kernel (the sandbox's seccomp filter, rlimits,
namespaces). Events forged on the harness's JSON channel can only lie about their own sample; the
malformed ones must cost only that sample.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import select
import shutil
import socket
import string
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import calib
import calib.executors.python as python_executor
from calib.executors.base import Comparison, ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import Sandbox, SandboxUnavailable, seccomp_filter

NO_BWRAP = "bubblewrap (bwrap) is not installed; CI installs it (apt-get install bubblewrap)"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason=NO_BWRAP)

REPO = Path(calib.__file__).resolve().parents[1]

TRUTH = '''\
def f(n):
    if n < 0:
        return "neg"
    if n == 0:
        return "zero"
    if n % 2:
        return "odd"
    return "even"
'''
TRUTH_BODY = TRUTH.split("\n", 1)[1]
VALUES = (-2, 0, 1, 2, 7)
EXPECTED = ("neg", "zero", "odd", "even", "odd")
INPUTS = [{"args": {"n": str(v)}} for v in VALUES]
ATTACKED = VALUES.index(1)  # the one input attacked by the ``only_one`` attacks


def config(**overrides) -> ExecutorConfig:
    settings = {"n_inputs": len(VALUES), "min_valid": len(VALUES) - 1, "input_timeout": 0.5, "budget_seconds": 1.0,
                "budget_runs": 60, "memory_mb": 512, "workers": 2}
    return ExecutorConfig(**{**settings, **overrides})


@pytest.fixture(autouse=True)
def _short_startup_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch's wall clock is startup slack + the per-input timeouts; starting bwrap and Python takes
    # ~0.2 s here, so 1.5 s keeps a batch held by a timer-defeating loop from costing ~15 s.
    monkeypatch.setattr(python_executor, "_STARTUP_SLACK", 1.5)


# --- the host: listeners, canaries, a victim process, secrets ---------------------------------------


class Host:
    """What hostile code must never reach, and the checks that it did not."""

    def __init__(self, root: Path) -> None:
        token = secrets.token_hex(8)
        self.secrets = {name: f"{name}{secrets.token_hex(12)}" for name in ("homesecret", "reposecret", "runsecret",
                                                                             "envsecret")}
        # files with secret content the code tries to read (and to overwrite)
        self.home_file = Path.home() / f".calib-hostile-canary-{token}"
        self.repo_file = REPO / f".calib-hostile-canary-{token}"
        self.run_dir = root / "run"
        self.run_dir.mkdir()
        self.run_file = self.run_dir / "canary.txt"
        self.canaries = {self.home_file: self.secrets["homesecret"], self.repo_file: self.secrets["reposecret"],
                         self.run_file: self.secrets["runsecret"]}
        for path, content in self.canaries.items():
            path.write_text(content)
        self.stamps = {path: path.stat().st_mtime_ns for path in self.canaries}
        # files the code tries to create
        name = f"calib-hostile-new-{token}"
        self.new_files = [Path("/usr") / name, Path("/etc") / name, REPO / name, Path.home() / name,
                          Path("/tmp") / name, self.run_dir / name, Path(sys.base_prefix) / name]
        # a real TCP server and an abstract unix socket on the host
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.abstract = f"calib-hostile-{token}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen(64)
        # processes other fixtures keep running for the session (calib serve): not the sandboxes' doing
        self.preexisting = _descendants()
        # a host process the code tries to kill
        self.victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])

    def substitutions(self) -> dict[str, str]:
        return {"port": str(self.port), "abstract": self.abstract, "home_file": str(self.home_file),
                "repo_file": str(self.repo_file), "run_file": str(self.run_file), "run_dir": str(self.run_dir),
                "repo": str(REPO), "victim": str(self.victim.pid), "new_name": self.new_files[0].name,
                "prefix": sys.base_prefix}

    def check(self, *texts: str) -> None:
        """The host is as it was, and no secret appears in ``texts`` (everything a comparison reported)."""
        for sock in (self.server, self.unix):
            readable, _, _ = select.select([sock], [], [], 0)
            assert not readable, f"the host listener {sock.getsockname()!r} received a connection"
        for path, content in self.canaries.items():
            assert path.read_text() == content, f"{path} was changed"
            assert path.stat().st_mtime_ns == self.stamps[path], f"{path} was written"
        for path in self.new_files:
            assert not path.exists(), f"{path} was created on the host"
        assert self.victim.poll() is None, "a host process was killed"
        assert os.environ.get("CALIB_HOSTILE_SECRET") == self.secrets["envsecret"]
        for text in texts:
            for name, value in self.secrets.items():
                assert value not in text, f"the {name} reached the output"
        deadline = time.monotonic() + 5.0
        while (left := _descendants() - {self.victim.pid} - self.preexisting) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"sandbox processes outlived the comparison: {sorted(left)}"

    def close(self) -> None:
        self.victim.kill()
        self.victim.wait()
        self.server.close()
        self.unix.close()
        for path in [*self.canaries, *self.new_files]:
            try:
                path.unlink()
            except (FileNotFoundError, PermissionError, IsADirectoryError):
                pass


def _descendants() -> set[int]:
    """Processes below this test process (the sandboxes it started and anything they left behind)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields and fields[0] != "Z":  # a zombie holds nothing; its parent reaps it
            parents[int(entry)] = int(fields[1])
    me, found = os.getpid(), set()
    for pid in parents:
        parent, hops = parents[pid], 0
        while parent > 1 and hops < 64:
            if parent == me:
                found.add(pid)
                break
            parent, hops = parents.get(parent, 0), hops + 1
    return found


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        made = Host(tmp_path_factory.mktemp("hostile"))
        mp.setenv("CALIB_HOSTILE_SECRET", made.secrets["envsecret"])
        try:
            yield made
        finally:
            made.close()


def everything(comparison: Comparison) -> str:
    return json.dumps(comparison.to_dict(outputs=True))


async def _compare(executor: SandboxExecutor, truth: str, candidates: list[str], *,
                   inputs: list[dict] | None = INPUTS) -> Comparison:
    # compare() must return (never raise, never hang) whatever the code does
    try:
        return await asyncio.wait_for(executor.compare(truth, candidates, inputs=inputs), 180)
    except BaseException:  # let the batches still running end inside this event loop, then raise
        batches = {t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") != "_compare"}
        batches.discard(asyncio.current_task())
        if batches:
            await asyncio.wait(batches, timeout=60)
        raise


def run_compare(truth: str, candidates: list[str], *, inputs: list[dict] | None = INPUTS, **settings) -> Comparison:
    executor = SandboxExecutor(config(**settings))
    assert executor.sandbox.isolated
    return asyncio.run(_compare(executor, truth, candidates, inputs=inputs))


# --- the attacks -----------------------------------------------------------------------------------

DISARM = '''\
import gc
gc.unfreeze()  # the harness freezes its own objects out of the collector (and out of gc.get_objects())
for hook in [o for o in gc.get_objects() if getattr(o, "__qualname__", "").endswith("<locals>._audit")]:
    for cell in hook.__closure__ or ():
        cell.cell_contents = frozenset()
'''


@dataclass(frozen=True)
class Attack:
    """Hostile code as the body of ``f(n)``; ``$name`` placeholders are filled from :class:`Host`."""

    id: str
    body: str
    expect: tuple[str, ...]  # one of these appears in the output state of every attacked input
    only_one: bool = False  # attack only n == 1 (the attack holds its batch until the wall clock)

    @property
    def input_timeout(self) -> float:
        # Attacks that end on the per-input timer get a short one. The others get a long one: they end
        # by themselves, and a timer that fires while the harness is still handling their exception
        # (freeing 500 MB after a MemoryError, on a loaded machine) kills the batch ("exit 1") instead
        # of reporting the exception -- a race in runner.py, not a containment failure.
        return 0.3 if self.only_one or "timeout" in self.expect else 2.0

    def source(self, host: Host) -> str:
        body = string.Template(textwrap.dedent(self.body)).substitute(host.substitutions())
        if not self.only_one:
            return "def f(n):\n" + textwrap.indent(body, "    ")
        return "def f(n):\n    if n == 1:\n" + textwrap.indent(body, "        ") + TRUTH_BODY


ATTACKS = [
    # sockets and HTTP: no network namespace is shared, so the host's loopback is not reachable
    Attack("tcp-connect-host-listener", """\
        import socket
        s = socket.create_connection(("127.0.0.1", $port), timeout=0.3)
        s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        return s.recv(100)
        """, ("ConnectionRefusedError",)),
    Attack("http-urllib-host-listener", """\
        import urllib.request
        return urllib.request.urlopen("http://127.0.0.1:$port/", timeout=0.3).read()
        """, ("URLError",)),
    Attack("http-urllib-external", """\
        import urllib.request
        return urllib.request.urlopen("http://example.com/", timeout=0.3).read()
        """, ("URLError",)),
    Attack("tcp-connect-external-ip", """\
        import socket
        return socket.create_connection(("93.184.215.14", 80), timeout=0.3).recv(10)
        """, ("OSError",)),
    Attack("udp-dns-query", """\
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"\\x00" * 12, ("8.8.8.8", 53))
        return s.recv(512)
        """, ("OSError",)),
    Attack("abstract-unix-socket-of-the-host", """\
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0$abstract")
        return "connected"
        """, ("ConnectionRefusedError",)),
    # writes outside the working directory
    Attack("write-usr", """\
        open("/usr/$new_name", "w").write("pwned")
        return "wrote"
        """, ("OSError", "PermissionError")),
    Attack("write-python-prefix", """\
        open("$prefix/$new_name", "w").write("pwned")
        return "wrote"
        """, ("OSError", "PermissionError")),
    Attack("write-etc", """\
        import os
        os.makedirs("/etc", exist_ok=True)
        open("/etc/$new_name", "w").write("pwned")
        return "wrote"
        """, ("OSError",)),
    Attack("write-repo", """\
        done = []
        for path in ("$repo/$new_name", "$repo_file"):
            try:
                open(path, "a").write("pwned")
                done.append(path)
            except OSError as exc:
                done.append(type(exc).__name__)
        return done
        """, ("FileNotFoundError",)),
    Attack("write-host-tmp-and-run-dir", """\
        import os
        os.makedirs("$run_dir", exist_ok=True)
        open("$run_dir/$new_name", "w").write("pwned")
        open("$run_file", "w").write("pwned")
        open("/tmp/$new_name", "w").write("pwned")
        return sorted(os.listdir("/tmp"))
        """, ('"return"',)),
    Attack("write-home", """\
        import os
        open(os.path.expanduser("~/$new_name"), "w").write("pwned")
        open("/root/$new_name", "w").write("pwned")
        return "wrote"
        """, ("OSError", "FileNotFoundError")),  # /root is read-only, or (no Python under it) not there
    Attack("fill-the-working-directory", """\
        i = 0
        while True:
            with open(f"/work/fill{i}", "wb") as fh:
                fh.write(b"x" * (8 << 20))
            i += 1
        """, ("OSError",)),
    Attack("fill-tmp-and-the-root", """\
        import os
        for d in ("/", "/dev", "/dev/shm", "/tmp"):
            try:
                for i in range(16):
                    with open(os.path.join(d, f"fill{i}"), "wb") as fh:
                        fh.write(b"x" * (8 << 20))
            except OSError:
                pass
        raise OSError("full")
        """, ("OSError",)),
    # empty files cost no bytes but kernel memory: each tmpfs has an inode cap (Limits.tmpfs_inodes;
    # test_sandbox_threats.py counts it), reached well within the input's timer on an idle machine
    Attack("create-files-until-the-inode-cap", """\
        i = 0
        while True:
            open(f"/work/f{i}", "w").close()
            i += 1
        """, ("OSError", "timeout"), only_one=True),
    # reading the home directory, the repository, the run directory, the host's environment
    Attack("read-home", """\
        return open("$home_file").read()
        """, ("FileNotFoundError",)),
    Attack("read-repo", """\
        return open("$repo_file").read()
        """, ("FileNotFoundError",)),
    Attack("read-run-dir", """\
        return open("$run_file").read()
        """, ("FileNotFoundError",)),
    Attack("read-environment", """\
        import os
        found = []
        for p in ("/proc/1/environ", "/proc/self/environ", "/proc/1/cmdline"):
            try:  # pid 1 is calib's own non-dumpable interpreter: refused
                found.append(open(p, "rb").read().decode("latin-1"))
            except OSError as exc:
                found.append(type(exc).__name__)
        return found + sorted(os.environ.items())
        """, ('"return"',)),
    Attack("search-every-readable-file", """\
        import os
        hits = []
        tops = ("/root", "/home", "/tmp", "/work", "/mnt", "/srv", "/opt", "/var", "/etc", "/run", "/calib_harness")
        for top in tops:
            for base, dirs, files in os.walk(top):
                if base.startswith("$prefix"):
                    dirs[:] = []
                    continue
                for name in files:
                    try:
                        with open(os.path.join(base, name), "rb") as fh:
                            data = fh.read(1 << 20)
                    except OSError:
                        continue
                    if any(w in data for w in (b"homesecret", b"reposecret", b"runsecret", b"envsecret")):
                        hits.append(os.path.join(base, name) + ": " + data[:300].decode("latin-1"))
        return hits
        """, ('"return":{"list":[]}',)),
    # processes: the audit hook says sandbox_denied; with the hook disarmed, seccomp says EPERM
    Attack("fork-bomb", """\
        import os
        while True:
            os.fork()
        """, ("SandboxDenied",)),
    Attack("fork-bomb-ctypes-libc", """\
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        while True:
            libc.fork()
        """, ("SandboxDenied",)),
    Attack("fork-bomb-audit-hook-disarmed", DISARM + """\
        import os
        while True:
            os.fork()
        """, ("PermissionError",)),
    Attack("posix-spawn-audit-hook-disarmed", DISARM + """\
        import os
        os.posix_spawn("/bin/sh", ["sh", "-c", "echo pwned > /tmp/x"], {})
        return "spawned"
        """, ("PermissionError",)),
    Attack("posixsubprocess-reloaded-under-another-name", """\
        import glob, importlib.machinery, importlib.util, sys
        so = [p for d in sys.path for p in glob.glob(d + "/_posixsubprocess*.so")][0]
        loader = importlib.machinery.ExtensionFileLoader("x._posixsubprocess", so)
        module = loader.create_module(importlib.util.spec_from_file_location("x._posixsubprocess", so, loader=loader))
        return str(module.fork_exec)
        """, ("SandboxDenied", "IndexError")),  # IndexError: a Python with it built in has no file to load
    Attack("subprocess-run", """\
        import subprocess
        return subprocess.run(["sh", "-c", "echo pwned"], capture_output=True).stdout
        """, ("SandboxDenied",)),
    Attack("os-system", """\
        import os
        return os.system("echo pwned")
        """, ("SandboxDenied",)),
    Attack("os-popen", """\
        import os
        return os.popen("echo pwned").read()
        """, ("SandboxDenied",)),
    Attack("os-execv", """\
        import os
        os.execv("/bin/sh", ["sh", "-c", "echo pwned"])
        """, ("SandboxDenied",)),
    Attack("os-execv-audit-hook-disarmed", DISARM + """\
        import os
        os.execv("/bin/sh", ["sh", "-c", "echo pwned"])
        """, ("crashed", "exit")),
    Attack("pty-spawn", """\
        import pty
        pty.spawn(["/bin/sh", "-c", "true"])
        return "spawned"
        """, ("SandboxDenied",)),
    Attack("multiprocessing", """\
        import multiprocessing
        p = multiprocessing.Process(target=print)
        p.start()
        p.join()
        return "spawned"
        """, ("SandboxDenied",)),
    Attack("setuid-root", """\
        import os
        os.setuid(0)
        return "root"
        """, ("OSError", "PermissionError")),
    Attack("chroot-escape", """\
        import os
        os.chroot("/tmp")
        return "escaped"
        """, ("PermissionError",)),
    # memory
    Attack("memory-bomb-one-allocation", """\
        return len(bytearray(10 ** 11))
        """, ("MemoryError",)),
    Attack("memory-bomb-growing", """\
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
        """, ("MemoryError",)),
    Attack("memory-bomb-raise-the-limit-first", """\
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        return len(bytearray(10 ** 11))
        """, ("MemoryError",)),
    Attack("memory-outside-the-address-space-memfd", """\
        import os
        fds = []
        while True:
            fd = os.memfd_create("x")
            os.write(fd, b"x" * (16 << 20))
            fds.append(fd)
        """, ("PermissionError",)),
    Attack("memory-outside-the-address-space-pipes", """\
        import fcntl, os
        pipes = []
        while True:
            r, w = os.pipe()
            try:
                fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
            except PermissionError:  # over the user's pipe-buffer allowance: the default size
                pass
            os.set_blocking(w, False)
            try:
                os.write(w, b"x" * (1 << 20))
            except BlockingIOError:
                pass
            pipes.append((r, w))
        """, ("OSError",)),
    Attack("thread-bomb", """\
        import threading
        while True:
            t = threading.Thread(target=threading.Event().wait, daemon=True)
            t.start()
        """, ("RuntimeError",)),
    # time: the per-input timer, and the wall clock when the timer is defeated
    Attack("busy-loop", """\
        while True:
            pass
        """, ("timeout",)),
    Attack("loop-catching-baseexception", """\
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
        """, ("timeout",), only_one=True),
    Attack("sigalrm-ignored", """\
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            pass
        """, ("timeout",), only_one=True),
    Attack("timer-cancelled-and-sigterm-handled", """\
        import signal
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, lambda *a: None)
        signal.signal(signal.SIGINT, lambda *a: None)
        while True:
            pass
        """, ("timeout",), only_one=True),
    Attack("sigalrm-blocked-then-block-forever", """\
        import select, signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        select.select([], [], [])
        """, ("timeout",), only_one=True),
    # recursion
    Attack("deep-recursion", """\
        return f(n)
        """, ("RecursionError",)),
    Attack("c-stack-overflow", """\
        import sys
        sys.setrecursionlimit(10 ** 7)
        class R:
            def __repr__(self):
                return repr(self)
        return repr(R())
        """, ("signal SIGSEGV",)),
    Attack("ctypes-string-at-null", """\
        import ctypes
        return ctypes.string_at(0)
        """, ("SandboxDenied",)),
    Attack("segfault-faulthandler", """\
        import faulthandler
        faulthandler._sigsegv()
        """, ("signal SIGSEGV",)),
    # output
    Attack("print-forever", """\
        while True:
            print("x" * 1000)
        """, ("timeout",), only_one=True),
    Attack("os-write-stdout-forever", """\
        import os
        while True:
            os.write(1, b"x" * (1 << 20))
        """, ("OSError",)),
    Attack("huge-return-value", """\
        return "x" * (48 << 20)
        """, ('"truncated"',)),
    Attack("huge-nested-return-value", """\
        s = "x" * 20000
        return [[s] * 500] * 500
        """, ("exit", "timeout", "output_limit", "memory", "size_limit"), only_one=True),
    Attack("exception-whose-str-never-returns", """\
        class Stuck(Exception):
            def __str__(self):
                while True:
                    pass
        raise Stuck()
        """, ("timeout", "exit"), only_one=True),
    Attack("flood-the-harness-channel", """\
        import os
        for fd in range(3, 256):  # the harness keeps its descriptors at 200 and up
            try:
                while True:
                    os.write(fd, b"x" * (1 << 20))
            except OSError:
                pass
        """, ("output_limit",)),
    # forging the harness's JSON channel
    Attack("forge-json-on-stdout-and-stderr", """\
        import os
        line = '{"event":"result","index":0,"status":"ok","reason":"","output":"{}"}\\n'
        print(line)
        os.write(1, line.encode())
        os.write(2, line.encode())
        return n
        """, ("fd_output",)),
    Attack("forge-results-on-the-channel", """\
        import json, os
        lines = [json.dumps({"event": "result", "index": i, "status": "ok", "reason": "",
                             "output": '{"return":"forged"}'}) for i in range(8)] + ['{"event":"done"}']
        for fd in range(3, 256):  # wherever the harness keeps its channel
            try:
                os.write(fd, ("\\n".join(lines) + "\\n").encode())
            except OSError:
                pass
        os._exit(0)
        """, ("crashed",)),  # lines without the batch's nonce are not the harness's: the input never finished
    # killing the parent, the sandbox, the host
    Attack("kill-the-parent", """\
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(1, signal.SIGKILL)
        return "alive"
        """, ('"return":"alive"', "ProcessLookupError")),  # alone in its sandbox, or a fork server's child
    Attack("kill-everything", """\
        import os, signal
        os.kill(-1, signal.SIGKILL)
        return "alive"
        """, ("ProcessLookupError",)),
    Attack("kill-the-process-group", """\
        import os, signal
        os.killpg(0, signal.SIGKILL)
        return "alive"
        """, ("ProcessLookupError", "signal SIGKILL")),
    Attack("kill-a-host-process", """\
        import os, signal
        os.kill($victim, signal.SIGKILL)
        return "killed"
        """, ("ProcessLookupError",)),
    Attack("kill-itself", """\
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
        """, ("signal SIGKILL",)),
    # leaving early, breaking the harness
    Attack("sys-exit", """\
        import sys
        sys.exit(0)
        """, ("SystemExit",)),
    Attack("os-exit", """\
        import os
        os._exit(0)
        """, ("crashed",)),
    Attack("monkeypatch-builtins-and-json", """\
        import builtins, json
        builtins.isinstance = lambda *a: True
        json.loads = json.dumps = repr
        return n
        """, ("TypeError", "exit")),  # not json.dumps: the broken isinstance breaks its own outputs, then its batch
    Attack("close-every-descriptor", """\
        import os
        os.closerange(0, 256)
        return n
        """, ("crashed", "exit")),
]
assert len({a.id for a in ATTACKS}) == len(ATTACKS)


@needs_bwrap
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
def test_a_hostile_candidate_is_contained_and_reported(attack: Attack, host: Host):
    hostile = attack.source(host)
    result = run_compare(TRUTH, [TRUTH, hostile], input_timeout=attack.input_timeout)
    host.check(everything(result), hostile)
    assert result.config["sandbox"] == "bubblewrap"
    # the truth and the benign candidate are unaffected
    assert result.conclusive, result.reason
    assert [i.valid for i in result.inputs] == [True] * len(VALUES)
    assert [json.loads(i.output).get("return") for i in result.inputs] == list(EXPECTED)
    benign, bad = result.candidates
    assert benign.matches == (True,) * len(VALUES) and benign.sim_func == 1.0
    # the hostile candidate: its attacked inputs fail, and say how
    attacked = [ATTACKED] if attack.only_one else list(range(len(VALUES)))
    assert bad.outcome == "ran", bad.message
    for i in range(len(VALUES)):
        if i in attacked:
            assert bad.matches[i] is False, (i, bad.outputs[i])
            assert any(mark in (bad.outputs[i] or "") for mark in attack.expect), (i, bad.outputs[i])
        else:  # one hostile input costs one input
            assert bad.matches[i] is True, (i, bad.outputs[i])
    assert bad.sim_func == (len(VALUES) - len(attacked)) / len(VALUES)


# --- hostile code as the truth -------------------------------------------------------------------------

# attack id -> how the sample fails on the given inputs: every input invalid for a reason (a batch that
# died on an input restarts after it, and that input is "crashed"), or every input valid but all alike
AS_TRUTH = {
    "fork-bomb": ("invalid", "sandbox_denied"),
    "subprocess-run": ("invalid", "sandbox_denied"),
    "memory-bomb-growing": ("invalid", "memory"),
    "deep-recursion": ("invalid", "recursion"),
    "busy-loop": ("invalid", "timeout"),
    "c-stack-overflow": ("invalid", "crashed"),
    "kill-itself": ("invalid", "crashed"),
    "os-exit": ("invalid", "crashed"),
    "flood-the-harness-channel": ("invalid", "crashed"),
    "fork-bomb-audit-hook-disarmed": ("alike", "PermissionError"),  # the kernel's EPERM, every time
    "tcp-connect-host-listener": ("alike", "ConnectionRefusedError"),
    "read-home": ("alike", "FileNotFoundError"),
}


def run_hostile_truth(attack_id: str, host: Host, *, only_one: bool = False, **settings) -> Comparison:
    attack = next(a for a in ATTACKS if a.id == attack_id)
    attack = Attack(attack.id, attack.body, attack.expect, only_one)
    hostile = attack.source(host)
    result = run_compare(hostile, [TRUTH], **{"input_timeout": attack.input_timeout, **settings})
    host.check(everything(result), hostile)
    assert not result.conclusive
    (benign,) = result.candidates
    assert benign.sim_func is None  # an inconclusive sample is never a non-match
    return result


@needs_bwrap
@pytest.mark.parametrize("attack_id", sorted(AS_TRUTH))
def test_hostile_code_as_the_truth_is_inconclusive_and_says_why(attack_id: str, host: Host):
    kind, expected = AS_TRUTH[attack_id]
    result = run_hostile_truth(attack_id, host)
    if kind == "invalid":
        assert result.valid_inputs == 0, result.reason
        # a crash names its cause: "crashed (signal SIGSEGV)", "crashed (exit 3)" ...
        assert [(i.valid, i.reason.split(" (")[0]) for i in result.inputs] == [(False, expected)] * len(VALUES)
        assert result.reason.startswith(f"valid_inputs 0 < {len(VALUES) - 1} (mostly {expected}"), result.reason
    else:
        assert result.valid_inputs == len(VALUES) and "distinct_outputs 1 < 2" in result.reason, result.reason
        assert all(f'"exception":"{expected}"' in i.output for i in result.inputs)


@needs_bwrap
def test_a_truth_that_defeats_the_timer_costs_its_inputs_not_the_run(host: Host):
    # each input holds its batch until the wall clock; the batch restarts after it, and it is "crashed"
    result = run_hostile_truth("loop-catching-baseexception", host, inputs=INPUTS[:2], n_inputs=2, min_valid=2,
                               input_timeout=0.25)
    assert [(i.valid, i.reason) for i in result.inputs] == [(False, "crashed (timeout)")] * 2


@needs_bwrap
@pytest.mark.parametrize(("attack_id", "expected"), [
    ("fork-bomb", "(mostly sandbox_denied)"),
    ("c-stack-overflow", "crashed: signal SIGSEGV"),
    ("kill-itself", "crashed: signal SIGKILL"),
    ("os-exit", "crashed: "),
    ("flood-the-harness-channel", "crashed: output_limit"),
])
def test_a_hostile_truth_defeats_the_input_search_and_says_why(attack_id: str, expected: str, host: Host):
    # the input search (explore) meets the attack on every input it tries, restarts a few times, gives up
    result = run_hostile_truth(attack_id, host, inputs=None)
    assert expected in result.reason, result.reason
    assert not any(i.valid for i in result.inputs)


@needs_bwrap
def test_the_search_steps_over_an_input_that_takes_its_batch_down(host: Host):
    # explore restarts after the input that held its batch until the wall clock, and never tries it again
    hostile = next(a for a in ATTACKS if a.id == "sigalrm-ignored").source(host)  # only n == 1 attacks
    result = run_compare(hostile, [TRUTH], inputs=None, budget_seconds=0.5, input_timeout=0.25)
    host.check(everything(result), hostile)
    assert result.runs > 0
    assert all(i.state["args"]["n"] != "1" for i in result.inputs if i.valid)
    (benign,) = result.candidates
    assert all(m is None or m for m in benign.matches)  # TRUTH answers like x wherever x is valid


# --- concurrency: hostile samples next to benign ones --------------------------------------------------

BENIGN = [
    TRUTH,
    'def f(n):\n    if n > 5:\n        return n * n\n    return [n] * 2\n',
    'def f(n):\n    try:\n        return 10 // n\n    except ZeroDivisionError:\n        return None\n',
    'def f(n):\n    print("n is", n)\n    if n % 2:\n        raise ValueError(n)\n    return str(n)\n',
]
CONCURRENT_ATTACKS = ("loop-catching-baseexception", "fork-bomb-audit-hook-disarmed", "memory-bomb-growing",
                      "c-stack-overflow", "flood-the-harness-channel", "os-write-stdout-forever")


@needs_bwrap
def test_benign_samples_are_unaffected_by_hostile_samples_running_concurrently(host: Host):
    attacks = {a.id: a for a in ATTACKS}
    hostile = [attacks[name].source(host) for name in CONCURRENT_ATTACKS]

    async def solo() -> list[Comparison]:
        executor = SandboxExecutor(config())
        return [await _compare(executor, truth, [truth]) for truth in BENIGN]

    async def together() -> list[Comparison]:
        executor = SandboxExecutor(config())  # one executor: the hostile batches share its worker slots
        jobs = [_compare(executor, truth, [truth]) for truth in BENIGN]
        jobs += [_compare(executor, TRUTH, [code]) for code in hostile]  # hostile candidates
        jobs += [_compare(executor, code, [TRUTH]) for code in hostile[1:3]]  # hostile truths
        return await asyncio.gather(*jobs)

    alone = asyncio.run(solo())
    mixed = asyncio.run(together())
    host.check(*(everything(r) for r in mixed))
    for before, after in zip(alone, mixed[: len(BENIGN)]):
        assert before.conclusive, before.reason
        assert after.to_dict(outputs=True) == before.to_dict(outputs=True)
        assert after.candidates[0].sim_func == 1.0
    for result in mixed[len(BENIGN): len(BENIGN) + len(hostile)]:
        assert result.conclusive and result.valid_inputs == len(VALUES), result.reason
        assert result.candidates[0].sim_func < 1.0
    for result in mixed[len(BENIGN) + len(hostile):]:
        assert not result.conclusive


@needs_bwrap
def test_the_cli_reports_hostile_candidates_and_exits_normally(host: Host, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]):
    from calib.cli import main

    attacks = {a.id: a for a in ATTACKS}
    truth = tmp_path / "truth.py"
    truth.write_text(TRUTH)
    names = ("fork-bomb", "read-home", "c-stack-overflow", "kill-the-parent", "print-forever")
    files = []
    for name in names:
        path = tmp_path / f"{name}.py"
        path.write_text(attacks[name].source(host))
        files.append(path)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(INPUTS))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["compare", str(truth), *map(str, files), "--inputs", str(inputs), "--n-inputs", str(len(VALUES)),
              "--min-valid", str(len(VALUES) - 1), "--timeout", "0.5", "--show-outputs", "--json"])
    captured = capsys.readouterr()
    assert exited.value.code in (None, 0), captured.err
    host.check(captured.out, captured.err)
    record = json.loads(captured.out)
    assert record["conclusive"], record["reason"]
    by_path = {c["path"]: c for c in record["candidates"]}
    for name, path in zip(names, files):
        cand = by_path[str(path)]
        expected = [attacks[name].only_one and i != ATTACKED for i in range(len(VALUES))]
        assert cand["matches"] == expected, (name, cand["outputs"])


# --- forging the channel with malformed events ----------------------------------------------------------

# event name -> (line written on the harness's channel, the roles for which compare() raises today)
MALFORMED = {
    "index-not-a-number": ('{"event":"result","index":"x","status":"ok","reason":"","output":"{}"}', {"candidate"}),
    "result-without-output": ('{"event":"result","index":0}', {"candidate"}),
    "start-index-null": ('{"event":"start","index":null}', {"candidate"}),
    "negative-index": ('{"event":"result","index":-1,"status":"ok","reason":"","output":"{}"}', set()),
    "explore-without-chosen": ('{"event":"explore"}', {"truth"}),
    "explore-wrong-shapes": ('{"event":"explore","chosen":[{"state":1}],"executable":7}', {"truth"}),
    "explore-chosen-not-a-list": ('{"event":"explore","chosen":5,"executable":[]}', {"truth"}),
    "try-without-key": ('{"event":"try"}', {"truth"}),
    "not-an-object": ("[1, 2, 3]", set()),
    "deeply-nested": ("[" * 200_000, {"candidate", "truth"}),
}
def _forging_cases() -> list:
    cases = []
    for name in MALFORMED:
        for role in ("candidate", "truth"):
            cases.append(pytest.param(name, role, id=f"{name}-as-{role}"))
    return cases


@needs_bwrap
@pytest.mark.parametrize(("event", "role"), _forging_cases())
def test_a_malformed_event_forged_on_the_channel_costs_only_that_sample(event: str, role: str, host: Host):
    line = MALFORMED[event][0]
    forge = f"def f(n):\n    import os\n    os.write(3, b'\\n' + {line!r}.encode() + b'\\n')\n    os._exit(0)\n"
    if role == "candidate":
        result = run_compare(TRUTH, [TRUTH, forge])
        host.check(everything(result))
        assert result.conclusive, result.reason
        assert result.candidates[0].sim_func == 1.0
        assert not any(result.candidates[1].matches)
    else:
        result = run_compare(forge, [TRUTH])
        host.check(everything(result))
        assert not result.conclusive
        assert result.candidates[0].sim_func is None


# --- no sandbox: refuse, unless told to run unsafely ----------------------------------------------------


def test_the_sandbox_refuses_to_run_without_bubblewrap():
    with pytest.raises(SandboxUnavailable, match="--unsafe-no-sandbox"):
        Sandbox(bwrap="/nonexistent/bwrap")


def test_unsafe_runs_without_bubblewrap_and_warns_every_time():
    sandbox = Sandbox(bwrap="/nonexistent/bwrap", unsafe=True)
    assert sandbox.unsafe and not sandbox.isolated
    job = {"mode": "replay", "context": "", "function": "def f(n):\n    return n + 1\n", "seed": 0,
           "input_timeout": 2.0, "inputs": [{"args": {"n": "1"}, "files": {}}]}
    with pytest.warns(RuntimeWarning, match="WITHOUT a sandbox"):
        run = asyncio.run(sandbox.run(json.dumps(job).encode(), wall_seconds=30))
    assert run.died is None, run.stderr.decode(errors="replace")
    events = [json.loads(line) for line in run.stdout.decode().splitlines()]
    (result,) = [e for e in events if e.get("event") == "result"]
    assert json.loads(result["output"])["return"] == 2


def test_the_seccomp_filter_is_built_for_the_architectures_it_knows():
    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter(machine)
        assert program and len(program) % 8 == 0 and len(program) // 8 < 256
    assert seccomp_filter("sparc64") is None


# --- environment, stdin and file inputs ---------------------------------------------------------------

AMBIENT_TRUTH = '''\
def f(path):
    import os, sys
    mode = os.environ.get("APP_MODE")
    data = sys.stdin.read()
    with open(path, "w") as fh:  # wherever the path and the variables point
        fh.write(data or "pwned")
    return mode, dict(os.environ), sorted(os.listdir("."))
'''
#: the sandbox's own environment (calib/executors/sandbox/run.py, bwrap's --setenv; PWD is bwrap's)
SANDBOX_ENV = {"HOME", "LANG", "PATH", "PWD", "PYTHONHASHSEED", "PYTHONIOENCODING", "TMPDIR"}


@needs_bwrap
def test_env_stdin_and_file_inputs_stay_in_the_sandbox(host: Host):
    # input states aimed at the host: a path into the host's home (with HOME set to it), files named
    # outside the working directory and a path climbing out of it, a variable named like the host's
    # secret one; x reads its whole environment and writes its stdin where the input says
    name = host.new_files[0].name
    given = [
        {"args": {"path": repr(str(Path.home() / name))}, "env": {"HOME": str(Path.home()), "APP_MODE": "prod"},
         "stdin": "pwned"},
        {"args": {"path": repr(f"../../tmp/{name}")}, "files": {f"../{name}": "pwned", f"/etc/{name}": "pwned"},
         "stdin": "tmp"},
        {"args": {"path": repr(str(host.run_dir / name))}, "env": {"CALIB_HOSTILE_SECRET": "mine"}},
    ]
    result = run_compare(AMBIENT_TRUTH, [AMBIENT_TRUTH], inputs=given, n_inputs=3, min_valid=3)
    host.check(everything(result), AMBIENT_TRUTH)
    outs = [json.loads(i.output) for i in result.inputs]
    refused = ("OSError", "PermissionError", "FileNotFoundError")  # read-only, or absent, in the sandbox
    assert outs[0].get("exception") in refused and outs[2].get("exception") in refused, outs
    assert "exception" not in outs[1], outs[1]  # /tmp/<name> in the sandbox's own /tmp
    mode, environ, listing = outs[1]["return"]["tuple"]
    assert mode is None and listing == {"list": []}  # the files named outside /work were never written
    assert {key for key, _ in environ["dict"]} <= SANDBOX_ENV  # nothing of the host's environment
    assert result.candidates[0].matches == (True, True, True)
    # the search's own states (env, stdin, files) are contained alike
    searched = run_compare(AMBIENT_TRUTH, [AMBIENT_TRUTH], inputs=None)
    host.check(everything(searched), AMBIENT_TRUTH)
    assert any("env" in i.state and "stdin" in i.state for i in searched.inputs)
