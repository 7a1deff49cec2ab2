"""Fork servers (calib/executors/sandbox/forkserver.py, _harness/zygote.py): one sandbox per worker that forks a
fresh process for every batch.

What must hold is what held with a sandbox per batch, plus what sharing one sandbox could break:

- the seccomp programs say what they should (checked by evaluating them as the kernel does, on the
  ``struct seccomp_data`` layout of linux/seccomp.h, and by the kernel itself in real batches);
- a batch never sees what an earlier batch of the same server left (files in /work and /tmp, even
  after ``chmod 000``), cannot signal the server or pid 1 (the server itself, or as root bubblewrap's
  init, host root) or read their memory or descriptors through /proc, and
  the server's memory never holds a job (read from the host through /proc/PID/mem);
- the wall clock and the output cap kill the child, not the server, which serves the next batch; a
  cancelled batch takes its server down with it; ``close()`` leaves no process behind;
- a server that cannot start makes the sandbox run each batch in a sandbox of its own, with a warning;
- a comparison gives the same output states either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import struct
import textwrap
import uuid

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import FORK_SERVER_ENV, Limits, Sandbox, forkserver
from calib.executors.sandbox.harness import seccomp, zygote
from tests.executors.python.test_throughput_pipeline import _descendants, _settled

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# --- the programs, evaluated as the kernel evaluates classic BPF ---------------------------------------

# linux/filter.h: BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_JMP|BPF_JGE|BPF_K, BPF_JMP|BPF_JSET|BPF_K,
# BPF_RET|BPF_K; linux/seccomp.h: SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno
LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
EPERM, ESRCH, ENOSYS = 1, 3, 38
X86_64 = 0xC000003E  # AUDIT_ARCH_X86_64
NR = seccomp.SYSCALLS["x86_64"][2]


def evaluate(program: bytes, nr: int, *args: int, arch: int = X86_64) -> int:
    """What the kernel's seccomp does with ``program`` for one system call: the action word."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))  # struct seccomp_data
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == LD:
            acc, pc = struct.unpack_from("=I", data, k)[0], pc + 1
        elif op in (JEQ, JGE, JSET):
            hit = acc == k if op == JEQ else acc >= k if op == JGE else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif op == RET:
            return k
        else:
            raise AssertionError(f"unexpected BPF instruction {op:#x}")


def test_a_childs_program_lets_it_signal_and_limit_only_itself():
    child = seccomp.program("x86_64", pid=5)
    assert child is not None and len(child) // 8 < 256
    for name in seccomp.SELF_ONLY:
        assert evaluate(child, NR[name], 5) == ALLOW, name
        for other in (0, 1, 2, 6, 0xFFFFFFFF):  # 0: its group, 0xFFFFFFFF: -1, every process
            assert evaluate(child, NR[name], other) == ERRNO | ESRCH, (name, other)
    assert evaluate(child, NR["prlimit64"], 0) == ALLOW  # its own limits (resource.setrlimit)
    assert evaluate(child, NR["prlimit64"], 5) == ALLOW
    assert evaluate(child, NR["prlimit64"], 2) == ERRNO | ESRCH
    for name in seccomp.SELF_OR_0:  # limits, affinity, scheduler: its own (0 or its pid) only
        assert evaluate(child, NR[name], 0) == ALLOW and evaluate(child, NR[name], 5) == ALLOW, name
        assert evaluate(child, NR[name], 2) == ERRNO | ESRCH, name
    # setpriority(which, who, prio): PRIO_PROCESS 0, PRIO_PGRP 1, PRIO_USER 2; ioprio_set: IOPRIO_WHO_PROCESS 1
    for name, process in (("setpriority", 0), ("ioprio_set", 1)):
        assert evaluate(child, NR[name], process, 0) == ALLOW and evaluate(child, NR[name], process, 5) == ALLOW
        assert evaluate(child, NR[name], process, 2) == ERRNO | ESRCH
        for which in {0, 1, 2, 3} - {process}:  # a group or a user: the server is in it
            assert evaluate(child, NR[name], which, 0) == ERRNO | ESRCH, (name, which)
    for name in (*seccomp.CHILD_DENIED, "fork", "vfork", *seccomp.DENIED):
        assert evaluate(child, NR[name], 5) == ERRNO | EPERM, name


def test_the_programs_agree_on_new_processes():
    batch, server, child = (seccomp.program("x86_64"), seccomp.program("x86_64", forks=True),
                            seccomp.program("x86_64", pid=9))
    sigchld, thread = 17, 0x3D0F00  # fork's clone flags; pthread_create's (CLONE_VM | ... | CLONE_THREAD ...)
    for program in (batch, child):
        assert evaluate(program, NR["clone"], sigchld) == ERRNO | EPERM
        assert evaluate(program, NR["clone"], thread) == ALLOW
        assert evaluate(program, NR["clone3"]) == ERRNO | ENOSYS
        assert evaluate(program, NR["fork"]) == ERRNO | EPERM
    assert evaluate(server, NR["clone"], sigchld) == ALLOW  # the server forks its children
    assert evaluate(server, NR["fork"]) == ALLOW
    assert evaluate(server, NR["kill"], 1) == ALLOW
    for program in (batch, server, child):
        assert evaluate(program, NR["ptrace"]) == ERRNO | EPERM
        assert evaluate(program, 0) == ALLOW  # read
        assert evaluate(program, 0, arch=0xC00000B7) == ERRNO | ENOSYS  # another architecture's call
        assert evaluate(program, 0x40000000) == ERRNO | ENOSYS  # the x32 ABI
    assert evaluate(batch, NR["kill"], 1) == ALLOW  # a batch alone in its sandbox: nothing else to signal
    assert evaluate(batch, NR["semget"]) == ALLOW and evaluate(child, NR["semget"]) == ERRNO | EPERM
    assert seccomp.program("aarch64", pid=3) is not None and seccomp.program("sparc64", pid=3) is None


def _stacked(programs: list[bytes], nr: int, *args: int) -> int:
    """What the kernel does with stacked programs: the most restrictive action (an errno before allow)."""
    actions = [evaluate(p, nr, *args) for p in programs]
    return min(actions, key=lambda action: (action == ALLOW, action))


def test_a_childs_first_program_lets_it_fork_once_and_its_own_program_then_refuses():
    # a fork server's child loads the staged program as it sets itself up; runner.main has each process
    # of the batch load its own program (zygote.Lock) before any code under test runs: an exploring batch
    # forks x's replay in between (harness/handover.py)
    staged = seccomp.program("x86_64", staged=True)
    assert staged is not None
    sigchld = 17
    assert evaluate(staged, NR["fork"]) == ALLOW and evaluate(staged, NR["clone"], sigchld) == ALLOW
    for name in seccomp.SELF_ONLY:  # no pid yet: each process names its own when it locks
        assert evaluate(staged, NR[name], 77) == ALLOW, name
    for name in (*seccomp.DENIED, *seccomp.CHILD_DENIED):
        assert evaluate(staged, NR[name]) == ERRNO | EPERM, name
    assert evaluate(staged, NR["fcntl"], 0, 8) == ERRNO | EPERM  # F_SETOWN, as in every batch
    for pid in (5, 6):  # the parent (5) and x's replay (6), each with its own program on the staged one
        locked = [staged, seccomp.program("x86_64", pid=pid)]
        assert _stacked(locked, NR["fork"]) == ERRNO | EPERM
        assert _stacked(locked, NR["clone"], sigchld) == ERRNO | EPERM
        assert _stacked(locked, NR["kill"], pid) == ALLOW
        assert _stacked(locked, NR["kill"], 11 - pid) == ERRNO | ESRCH  # not the other one
    with pytest.raises(ValueError, match="staged"):
        seccomp.program("x86_64", staged=True, pid=3)


# --- real batches ----------------------------------------------------------------------------------------


def _job(body: str, **extra) -> bytes:
    function = "def f(n):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    job = {"mode": "replay", "context": "", "function": function, "seed": 0, "input_timeout": 5.0,
           "inputs": [{"args": {"n": "1"}}], **extra}
    return json.dumps(job).encode()


def _output(run) -> dict:
    outputs = [json.loads(line) for line in run.stdout.decode().splitlines() if line.startswith("{")]
    (result,) = [e for e in outputs if e.get("event") == "result"]
    return json.loads(result["output"])


def _value(canonical):
    """The plain value of a canonical form (dicts and lists of strings, numbers and booleans here)."""
    if isinstance(canonical, dict) and set(canonical) == {"dict"}:
        return {_value(k): _value(v) for k, v in canonical["dict"]}
    if isinstance(canonical, dict) and len(canonical) == 1 and set(canonical) <= {"list", "tuple"}:
        return [_value(v) for v in next(iter(canonical.values()))]
    return canonical


def _server_pid(sandbox: Sandbox) -> int:
    (pid,) = sandbox.server_pids
    return pid


def _in_one_server(*jobs: tuple[bytes, float], limits: Limits | None = None) -> list:
    """Run the jobs (with their wall clocks) one after another in a new sandbox; one fork server must
    have run them all (whatever each did to it)."""
    sandbox = Sandbox(limits=limits, fork_server=True)

    async def each() -> tuple[list, set[int]]:
        runs, pids = [], set()
        for job, wall in jobs:
            runs.append(await sandbox.run(job, wall_seconds=wall))
            pids.add(_server_pid(sandbox))
        return runs, pids

    try:
        runs, pids = asyncio.run(each())
    finally:
        sandbox.close()
    assert len(pids) == 1, pids
    return runs


LITTER = """\
import os
found = {"work": sorted(os.listdir("/work")), "tmp": sorted(os.listdir("/tmp"))}
os.makedirs("/work/deep/er", exist_ok=True)
open("/work/deep/er/left", "w").write("x")
open("/tmp/left", "w").write("x")
os.chmod("/work/deep/er", 0)
os.chmod("/work/deep", 0)
os.chmod("/tmp", 0)
os.chmod("/work", 0o500)
return found
"""


@needs_bwrap
def test_a_batch_finds_nothing_an_earlier_batch_of_its_server_left():
    first, second = _in_one_server((_job(LITTER), 30), (_job(LITTER), 30))
    assert first.died is None and second.died is None, second.stderr.decode(errors="replace")
    # the harness's own capture file is all there is, both times
    assert _value(_output(first)["return"]) == {"work": [], "tmp": [".calib_fd"]}
    assert _value(_output(second)["return"]) == {"work": [], "tmp": [".calib_fd"]}


PROBE = """\
import os, posix
ppid = int(open("/proc/self/stat").read().rpartition(")")[2].split()[1])
# the server is pid 1 (bubblewrap --as-pid-1), or as root the child of bubblewrap's init, host root
seen = {"server_is_pid_1": ppid == 1}
for label, pid in (("server", ppid), ("init", 1), ("group", 0), ("everyone", -1)):
    try:
        posix.kill(pid, 0)  # signal 0: the same checks, nothing sent (the filter does not read the signal)
        seen[label] = "sent"
    except OSError as exc:
        seen[label] = type(exc).__name__
posix.kill(posix.getpid(), 0)
seen["self"] = "sent"
for label, call in (("affinity", lambda: os.sched_setaffinity(ppid, {0})),
                    ("renice", lambda: os.setpriority(os.PRIO_PROCESS, ppid, 19)),
                    ("renice-all", lambda: os.setpriority(os.PRIO_USER, 0, 19))):
    try:
        call()
        seen[label] = "done"
    except OSError as exc:
        seen[label] = type(exc).__name__
os.nice(1)  # its own priority: allowed
for what in ("mem", "environ", "fd", "init-mem", "init-environ", "init-fd"):
    try:
        path = f"/proc/{1 if what.startswith('init') else ppid}/{what.removeprefix('init-')}"
        if what.endswith("fd"):  # the numbers can be listed; what they are cannot be read
            seen[what] = [os.readlink(f"{path}/{fd}") for fd in os.listdir(path)]
        else:
            seen[what] = str(len(open(path, "rb").read(16)))
    except OSError as exc:
        seen[what] = type(exc).__name__
seen["pid"] = (os.getpid(), os.getppid())
return seen
"""


@needs_bwrap
def test_a_child_cannot_signal_its_server_or_read_it_through_proc():
    # the server lives through it and serves the next batch
    run, again = _in_one_server((_job(PROBE), 30), (_job("return n + 1\n"), 30))
    assert run.died is None, run.stderr.decode(errors="replace")
    seen = _value(_output(run)["return"])
    assert seen["server_is_pid_1"] is (os.geteuid() != 0)
    assert {seen[k] for k in ("server", "init", "group", "everyone")} == {"ProcessLookupError"}
    assert {seen[k] for k in ("affinity", "renice", "renice-all")} == {"ProcessLookupError"}
    assert seen["self"] == "sent"
    assert {seen[k] for k in ("mem", "environ", "fd", "init-mem", "init-environ", "init-fd")} == {"PermissionError"}
    assert seen["pid"] == [2, 1]  # what a batch in a sandbox of its own saw, whatever its real pid
    assert _output(again)["return"] == 2


def _zygote(bwrap_pid: int) -> int:
    """The server's interpreter: the descendant of its bwrap whose command line serves."""
    for pid in sorted(_descendants()):
        chain, parent = pid, pid
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"_harness.zygote" not in cmdline or b"bwrap" in cmdline.split(b"\0")[0]:
            continue
        while parent > 1 and parent != bwrap_pid:
            parent = int(open(f"/proc/{parent}/stat").read().rpartition(")")[2].split()[1])
        if parent == bwrap_pid:
            return chain
    raise AssertionError("the fork server's interpreter was not found")


def _memory(pid: int) -> bytes:
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:
                continue
    return b"".join(chunks)


@needs_bwrap
def test_the_server_never_holds_a_job_in_its_memory():
    marker = f"JOB-MARKER-{uuid.uuid4().hex}"
    sandbox = Sandbox(fork_server=True)

    async def run():
        return await sandbox.run(_job(f"return {marker!r} * n\n"), wall_seconds=30)

    try:
        done = asyncio.run(run())
        assert _output(done)["return"] == marker  # the child had it
        try:
            memory = _memory(_zygote(_server_pid(sandbox)))
        except PermissionError:
            pytest.skip("this host may not read another process's memory (/proc/PID/mem)")
    finally:
        sandbox.close()
    assert b"_harness.zygote" in memory  # the reading works: the server's own boot lines are there
    assert marker.encode() not in memory and marker.encode("utf-16-le") not in memory


@needs_bwrap
def test_the_servers_stderr_is_no_host_file_and_a_failed_start_still_says_why(monkeypatch: pytest.MonkeyPatch):
    sandbox = Sandbox(fork_server=True)
    try:
        done = asyncio.run(sandbox.run(_job("return n\n"), wall_seconds=30))
        assert done.died is None
        bwrap = _server_pid(sandbox)
        server = _zygote(bwrap)
        try:
            ends = {pid: os.readlink(f"/proc/{pid}/fd/2") for pid in (bwrap, server)}
        except PermissionError:
            pytest.skip("this host may not read another process's descriptors")
    finally:
        sandbox.close()
    # what a child could have reached through its server: /dev/null; bubblewrap's own (outside): a pipe
    assert ends == {bwrap: ends[bwrap], server: "/dev/null"} and ends[bwrap].startswith("pipe:")
    # a server that cannot start: what bubblewrap said on that pipe is the warning's reason
    broken = Sandbox(fork_server=True)
    command = broken.command
    monkeypatch.setattr(broken, "command", lambda *a, **k: [command(*a, **k)[0], "--no-such-option",
                                                             *command(*a, **k)[1:]])
    with pytest.warns(RuntimeWarning, match="fork servers are unavailable here .*no-such-option"):
        asyncio.run(broken._server())  # noqa: SLF001
    assert not broken.forks


@needs_bwrap
def test_the_wall_clock_and_the_output_cap_kill_the_child_not_the_server():
    spin = _job("while True:\n    pass\n")
    # fds 1 and 2 are the code's capture file: the channel is one of the harness's high descriptors
    flood = _job("import os\nfor fd in range(3, 256):\n    try:\n        while True:\n"
                 "            os.write(fd, b'x' * 65536)\n    except OSError:\n        pass\n")
    slow, big, fine = _in_one_server((spin, 1.0), (flood, 30), (_job("return n * 7\n"), 30),
                                     limits=Limits(output_bytes=1 << 20))
    assert slow.timed_out and slow.died == "timeout"
    assert big.output_exceeded and big.died == "output_limit"
    assert fine.died is None and _output(fine)["return"] == 7


@needs_bwrap
def test_every_event_of_a_batch_arrives_though_the_host_reads_its_pipe_in_paces():
    # the host reads a running batch's output at most every PACE_SECONDS (forkserver._Sink); a batch that
    # writes thousands of events, then one over the pipe's default 64 KiB, still gives every one, in order
    many = [{"args": {"n": str(i)}} for i in range(1500)]
    wide = json.dumps({"mode": "replay", "context": "", "function": "def f(n):\n    return 'y' * n\n", "seed": 0,
                       "input_timeout": 5.0, "inputs": [{"args": {"n": "19000"}}] * 12}).encode()
    (run, big) = _in_one_server((_job("return n * 7\n", inputs=many), 60), (wide, 60))
    events = [json.loads(line) for line in run.stdout.decode().splitlines()]
    results = [e for e in events if e.get("event") == "result"]
    assert [e["index"] for e in results] == list(range(1500))
    assert [json.loads(e["output"])["return"] for e in results] == [7 * i for i in range(1500)]
    assert run.died is None and not run.output_exceeded
    assert len(big.stdout) > 12 * 19000 > 1 << 16
    assert [json.loads(json.loads(line)["output"])["return"] for line in big.stdout.decode().splitlines()
            if '"result"' in line] == ["y" * 19000] * 12


@needs_bwrap
def test_a_cancelled_batch_takes_its_server_down_and_close_leaves_nothing():
    before = _descendants()
    sandbox = Sandbox(fork_server=True)

    async def go():
        await sandbox.run(_job("return n\n"), wall_seconds=30)
        (pid,) = sandbox.server_pids
        task = asyncio.ensure_future(sandbox.run(_job("while True:\n    pass\n"), wall_seconds=60))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pid

    pid = asyncio.run(go())
    assert pid not in sandbox.server_pids  # closed, not handed to the next batch
    asyncio.run(sandbox.run(_job("return n\n"), wall_seconds=30))  # a new server
    assert len(sandbox.server_pids) == 1
    sandbox.close()
    assert sandbox.server_pids == ()
    assert not _settled(before)


@needs_bwrap
def test_without_a_server_each_batch_gets_its_own_sandbox(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(FORK_SERVER_ENV, "0")
    assert not Sandbox().forks
    monkeypatch.delenv(FORK_SERVER_ENV)
    assert Sandbox().forks

    async def refuse(*args, **kwargs):
        raise forkserver.ForkServerError("the fork server did not start: injected")

    monkeypatch.setattr(forkserver.ForkServer, "start", refuse)
    sandbox = Sandbox(fork_server=True)
    with pytest.warns(RuntimeWarning, match="fork servers are unavailable here .*injected"):
        run = asyncio.run(sandbox.run(_job(PROBE), wall_seconds=30))
    assert not sandbox.forks and sandbox.server_pids == ()
    seen = _value(_output(run)["return"])
    # its parent is a one-batch server (zygote.oneshot), as out of reach as a fork server, as is pid 1
    assert seen["server_is_pid_1"] is (os.geteuid() != 0) and seen["pid"] == [2, 1]
    assert {seen[k] for k in ("server", "init", "group", "everyone", "affinity", "renice")} == {"ProcessLookupError"}
    assert {seen[k] for k in ("mem", "environ", "fd", "init-mem", "init-environ", "init-fd")} == {"PermissionError"}


CASES = [
    ("import random, time, os\n",
     "def f(n: int, items: list):\n    random.seed()\n"
     "    return [random.random() for _ in range(n % 4)], time.time(), sorted(items), os.getpid()\n"),
    ("import logging, io\n",
     "def f(n: int):\n    s = io.StringIO()\n    h = logging.StreamHandler(s)\n"
     "    h.setFormatter(logging.Formatter('%(process)d %(message)s'))\n    log = logging.getLogger('x')\n"
     "    log.addHandler(h)\n    log.warning('n=%s', n)\n    log.removeHandler(h)\n    return s.getvalue()\n"),
]


@needs_bwrap
@pytest.mark.parametrize(("context", "source"), CASES, ids=["random-clock-pid", "logging-process-id"])
def test_a_comparison_is_the_same_with_and_without_fork_servers(context: str, source: str):
    def compare(forks: bool):
        executor = SandboxExecutor(ExecutorConfig(seed=3))
        executor.sandbox.forks = forks and executor.sandbox.forks
        try:
            return asyncio.run(executor.compare(source, [source], context=context))
        finally:
            executor.close()

    forked, own = compare(True), compare(False)
    assert forked.conclusive, forked.reason
    assert [r.output for r in forked.inputs] == [r.output for r in own.inputs]
    assert [dict(r.state) for r in forked.inputs] == [dict(r.state) for r in own.inputs]
    assert forked.candidates[0].sim_func == 1.0 and own.candidates[0].sim_func == 1.0
    assert "nondeterministic" not in {r.reason for r in forked.inputs}


@needs_bwrap
def test_a_child_that_cannot_set_itself_up_runs_nothing_and_ends_the_fork_servers():
    # rlimits the kernel refuses: the child fails before its job (the server's own start-up sets none)
    sandbox = Sandbox(limits=Limits(open_files=-5), fork_server=True)
    with pytest.warns(RuntimeWarning, match="could not set itself up in its fork server .*ValueError"):
        run = asyncio.run(sandbox.run(_job("open('/work/ran', 'w').write('x')\nreturn n\n"), wall_seconds=30))
    assert not sandbox.forks and sandbox.server_pids == ()
    # the batch then ran in a sandbox of its own, whose child refuses the same limits: no result
    assert b'"event":"result"' not in run.stdout and run.died == f"exit {zygote.CHILD_FAILED}"
    assert b"ValueError" in run.stderr
