"""The sandbox holds against code that attacks the host, the sandbox itself, or later batches.

docs/executors.md, "Threat model". Each class of attack runs through the real sandbox, in a fork
server's child and in a sandbox of its own, and, for the kernel-level ones, from a compiled C program
in the native executors' run profile:

- host-global kernel settings: no file under ``/proc/sys`` (nor ``/proc/sysrq-trigger``) takes a write
  (of the value it holds), the code runs as ``nobody`` with no capabilities (as root: host uid 65534);
- the sandbox's pid 1 and the kernel's signal routes: ``F_SETOWN``/``F_SETSIG``/``O_ASYNC``/``FIOSETOWN``
  and the like are refused, the server survives and serves the next batch;
- state that would survive from one batch to the next: extended attributes cannot be set or removed,
  and every batch has fresh tmpfs of its own (inode numbers start afresh);
- resources outside the limits: inotify instances and socket buffer growth are refused, inodes capped;
- ``--import-path`` inside ``/tmp`` is visible in the sandbox (and survives the wipe, read-only).

The last test runs this file, tests/executors/sandbox/test_hostile.py and test_forkserver.py, and the native
executors' isolation and forgery tests again as a normal user (``calib-ci``, prepared by .ci/unprivileged.sh)
when the tests run as root, so both ways calib runs are covered.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from calib.executors.native.sandbox import Profile
from calib.executors.sandbox import Limits, Sandbox, SandboxUnavailable
from calib.executors.sandbox.harness import seccomp
from tests.executors.native.test_native import compare, needs
from tests.executors.sandbox.test_forkserver import ALLOW, ERRNO, NR, _in_one_server, _job, _output, _value, evaluate

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
REPO = Path(__file__).resolve().parents[3]
CI_USER = "calib-ci"
CI_VENV = Path("/opt/calib-ci/venv")


def _both_ways(job: bytes, *more: bytes) -> list:
    """The outputs of the jobs in one fork server, then of the first one in a sandbox of its own."""
    runs = _in_one_server(*[(j, 60) for j in (job, *more)])
    sandbox = Sandbox(fork_server=False)
    alone = asyncio.run(sandbox.run(job, wall_seconds=60))
    for run in (*runs, alone):
        assert run.died is None, run.stderr.decode(errors="replace")
    return [_value(_output(run)["return"]) for run in (*runs, alone)]


# --- host-global kernel settings ------------------------------------------------------------------------

# settings of the sandbox's own namespaces: IPC (man 7 ipc_namespaces, mq_overview) and, since Linux 6.14,
# pid_max of its PID namespace
NAMESPACED = ("/proc/sys/fs/mqueue/", "/proc/sys/kernel/msg", "/proc/sys/kernel/sem", "/proc/sys/kernel/shm",
              "/proc/sys/kernel/auto_msgmni", "/proc/sys/kernel/pid_max")
SYSCTL = """\
import os
written, refused, who = [], 0, {}
targets = [os.path.join(top, name) for top, _dirs, names in os.walk("/proc/sys") for name in names]
for path in targets + ["/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern"]:
    try:  # the value it holds, written back: should a write get through, nothing changes
        value = open(path, "rb").read().split(b"\\n")[0]
    except OSError:
        value = b""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value or b"\\n")
        finally:
            os.close(fd)
    except OSError:
        refused += 1
        continue
    written.append(path)
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("Uid", "Gid", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs"):
        who[key] = value.split()
return {"written": written, "refused": refused, "who": who, "groups": os.getgroups()}
"""


@needs_bwrap
def test_no_kernel_setting_is_writable_and_the_code_is_nobody_without_capabilities():
    for seen in _both_ways(_job(SYSCTL)):
        # without root, the sandbox's user owns its namespaces, whose own settings it may change;
        # nothing else, and nothing at all as root
        local = [p for p in seen["written"] if p.startswith(NAMESPACED)]
        assert seen["written"] == (local if os.geteuid() != 0 else [])
        assert seen["refused"] > 100  # it did walk /proc/sys (this kernel has about a thousand)
        who = seen["who"]
        assert who["Uid"] == ["65534"] * 4 and who["Gid"] == ["65534"] * 4
        assert who["CapPrm"] == who["CapEff"] == who["CapAmb"] == ["0000000000000000"]
        assert who["NoNewPrivs"] == ["1"] and 0 not in seen["groups"]


@needs("c")
def test_a_c_program_cannot_write_kernel_settings_set_xattrs_or_take_signals_routes():
    probe = """#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/xattr.h>
#include <sys/ioctl.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
int probe(int k) {
  int fd = -1, r = -1;
  if (k == 0) { fd = open("/proc/sys/kernel/printk_ratelimit", O_WRONLY); r = fd < 0 ? errno : 0; }
  if (k == 1) { fd = open("/proc/sysrq-trigger", O_WRONLY); r = fd < 0 ? errno : 0; }
  if (k == 2) { r = inotify_init1(0) < 0 ? errno : 0; }
  if (k == 3) { r = setxattr("/work", "user.left", "1", 1, 0) < 0 ? errno : 0; }
  if (k == 4) { r = fcntl(1, F_SETOWN, 1) < 0 ? errno : 0; }
  if (k == 5) { int on = 1; r = ioctl(1, FIOASYNC, &on) < 0 ? errno : 0; }
  if (k == 6) { r = getuid(); }
  if (k == 7) {  /* empty files until the inode cap: how many */
    char name[32];
    for (r = 0; r < 100000; r++) {
      snprintf(name, sizeof name, "/tmp/f%d", r);
      if ((fd = open(name, O_CREAT | O_WRONLY, 0600)) < 0) break;
      close(fd);
    }
  }
  return r;
}"""
    result = compare("c", probe, [], inputs=[{"k": k} for k in range(8)], min_valid=1)
    got = [json.loads(r.output)["return"] for r in result.inputs]
    # errno values of asm-generic/errno-base.h and errno.h: EACCES 13, ENOENT 2, EPERM 1, EOPNOTSUPP 95
    assert got[0] == errno.EACCES and got[1] in (errno.EACCES, errno.ENOENT)
    assert got[2:6] == [errno.EPERM, errno.EOPNOTSUPP, errno.EPERM, errno.EPERM] and got[6] == 65534
    # the run profile's /tmp is a fresh tmpfs with an inode cap (Profile.tmpfs_inodes)
    cap = Profile(memory_bytes=1, cpu_seconds=1).tmpfs_inodes
    assert cap - 8 <= got[7] < cap


# --- the sandbox's pid 1 and the kernel's signal routes ----------------------------------------------------

SIGNAL_ROUTES = """\
import fcntl, os, socket, struct, termios
r, w = os.pipe()
s, t = socket.socketpair()
out = {}
calls = {
    "F_SETOWN": lambda: fcntl.fcntl(r, fcntl.F_SETOWN, 1),
    "F_SETOWN_EX": lambda: fcntl.fcntl(r, 15, struct.pack("ii", 1, 1)),
    "F_SETSIG": lambda: fcntl.fcntl(r, fcntl.F_SETSIG, 9),
    "O_ASYNC": lambda: fcntl.fcntl(s.fileno(), fcntl.F_SETFL, os.O_ASYNC),
    "F_SETLEASE": lambda: fcntl.fcntl(r, fcntl.F_SETLEASE, fcntl.F_RDLCK),
    "F_NOTIFY": lambda: fcntl.fcntl(os.open("/work", os.O_RDONLY), fcntl.F_NOTIFY, fcntl.DN_CREATE),
    "FIOSETOWN": lambda: fcntl.ioctl(s.fileno(), 0x8901, struct.pack("i", 1)),
    "SIOCSPGRP": lambda: fcntl.ioctl(s.fileno(), 0x8902, struct.pack("i", 1)),
    "FIOASYNC": lambda: fcntl.ioctl(s.fileno(), termios.FIOASYNC, struct.pack("i", 1)),
    "SO_SNDBUF": lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24),
    "SO_RCVBUF": lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24),
    "stderr": lambda: os.readlink("/proc/1/fd/2"),
}
for name, call in calls.items():
    try:
        call()
        out[name] = "done"
    except OSError as exc:
        out[name] = exc.errno
# what stays allowed: non-blocking mode, reading the owner, a socket pair's traffic at the default size
fcntl.fcntl(s.fileno(), fcntl.F_SETFL, os.O_NONBLOCK)
out["owner"] = fcntl.fcntl(r, fcntl.F_GETOWN)
s.sendall(b"x" * 1000)
out["pair"] = len(t.recv(4096))
return out
"""


@needs_bwrap
def test_no_call_makes_the_kernel_signal_another_process_and_the_server_serves_on():
    routes, after, alone = _both_ways(_job(SIGNAL_ROUTES), _job("return n + 1\n"))
    for seen in (routes, alone):
        refused = {k: v for k, v in seen.items() if k not in ("stderr", "owner", "pair")}
        assert refused == dict.fromkeys(refused, errno.EPERM)
        assert seen["stderr"] == errno.EACCES  # pid 1's descriptors are not this process's to read
        assert seen["owner"] == 0 and seen["pair"] == 1000
    assert after == 2


def test_the_programs_refuse_the_signal_routes_by_argument():
    # evaluated as the kernel evaluates the classic BPF (tests/executors/sandbox/test_forkserver.py: evaluate)
    batch, child, server = seccomp.program("x86_64"), seccomp.program("x86_64", pid=7), \
        seccomp.program("x86_64", forks=True)
    for program in (batch, child):
        assert evaluate(program, NR["fcntl"], 3, 8, 1) == ERRNO | errno.EPERM  # F_SETOWN
        assert evaluate(program, NR["fcntl"], 3, 4, os.O_ASYNC | os.O_NONBLOCK) == ERRNO | errno.EPERM
        assert evaluate(program, NR["fcntl"], 3, 4, os.O_NONBLOCK) == ALLOW  # F_SETFL without O_ASYNC
        assert evaluate(program, NR["fcntl"], 3, 1) == ALLOW  # F_GETFD
        assert evaluate(program, NR["ioctl"], 3, 0x5452) == ERRNO | errno.EPERM  # FIOASYNC
        assert evaluate(program, NR["ioctl"], 3, 0x5421) == ALLOW  # FIONBIO
        assert evaluate(program, NR["setsockopt"], 3, 1, 7) == ERRNO | errno.EPERM  # SOL_SOCKET, SO_SNDBUF
        assert evaluate(program, NR["setsockopt"], 3, 6, 7) == ALLOW  # IPPROTO_TCP, option 7
        assert evaluate(program, NR["setsockopt"], 3, 1, 2) == ALLOW  # SO_REUSEADDR
    for program in (batch, child, server):
        assert evaluate(program, NR["inotify_init1"], 0) == ERRNO | errno.EPERM
        for name in seccomp.UNSUPPORTED:
            assert evaluate(program, NR[name]) == ERRNO | errno.EOPNOTSUPP, name
    assert evaluate(server, NR["fcntl"], 3, 8, 1) == ALLOW  # the server's own program leaves them


def test_only_a_python_sandboxs_own_program_lets_its_first_lines_make_namespaces():
    """unshare and mount: allowed in the program bubblewrap loads for a Python sandbox (its trusted first
    lines make each batch's fresh tmpfs), refused in every program code under test runs with."""
    python_server = seccomp.program("x86_64", forks=True, mounts=True)
    for name in seccomp.MOUNTS:
        assert evaluate(python_server, NR[name]) == ALLOW, name
        for program in (seccomp.program("x86_64"), seccomp.program("x86_64", pid=7),
                        seccomp.program("x86_64", forks=True)):
            assert evaluate(program, NR[name]) == ERRNO | errno.EPERM, name
    for name in ("setns", "ptrace", "bpf", "pivot_root", "umount2"):  # the rest of DENIED stays refused
        assert evaluate(python_server, NR[name]) == ERRNO | errno.EPERM, name


# --- state that would survive the wipe between batches ------------------------------------------------

XATTRS = """\
import os, shutil
found = {top: os.listxattr(top) for top in ("/work", "/tmp")}
open("/work/a", "w").write("x")
for path in ("/work", "/tmp", "/work/a"):
    for call in (lambda: os.setxattr(path, "user.left", b"1"), lambda: os.removexattr(path, "user.left")):
        try:
            call()
            found[path + " changed"] = True
        except OSError as exc:
            found.setdefault(path + " refused", []).append(exc.errno)
shutil.copy2("/work/a", "/work/b")  # copying metadata still works (it tolerates the refusal)
found["copied"] = open("/work/b").read()
return found
"""


@needs_bwrap
def test_extended_attributes_cannot_be_left_for_a_later_batch():
    first, second, alone = _both_ways(_job(XATTRS), _job(XATTRS))
    for seen in (first, second, alone):
        assert seen["/work"] == [] and seen["/tmp"] == []
        assert not any(key.endswith(" changed") for key in seen)
        for path in ("/work", "/tmp", "/work/a"):
            assert seen[f"{path} refused"] == [errno.EOPNOTSUPP] * 2
        assert seen["copied"] == "x"


INODES = """\
import errno, os
seen = {}
for top in ("/tmp", "/work"):
    seen[top] = sorted(n for n in os.listdir(top) if not n.startswith(".calib"))  # but the harness's own
    names = [f"{top}/f{i}" for i in range(3)]
    for name in names:
        open(name, "w").close()
    seen[top + " inodes"] = [os.stat(name).st_ino for name in names]
made = 0
try:  # empty files: no bytes, but an inode (kernel memory) each
    while True:
        open(f"/tmp/bomb{made}", "w").close()
        made += 1
except OSError as exc:
    seen["bomb"] = [made, errno.errorcode[exc.errno]]
return seen
"""


@needs_bwrap
def test_inode_numbers_start_afresh_and_the_inode_count_is_bounded():
    """Each batch has tmpfs of its own: the inode numbers of its files do not tell how many files earlier
    batches of its server made (three batches in a row, the same numbers as in a sandbox of its own), and
    empty files stop at the inode cap (kernel memory the size limit does not count)."""
    cap = Limits().tmpfs_inodes
    seen = _both_ways(_job(INODES), _job(INODES), _job(INODES))
    assert seen[0] == seen[1] == seen[2] == seen[3]
    first = seen[0]
    assert first["/tmp"] == first["/work"] == []
    for top in ("/tmp", "/work"):
        assert len(set(first[top + " inodes"])) == 3
    made, why = first["bomb"]
    assert why == "ENOSPC"
    assert cap - 8 <= made + 3 < cap  # the root directory and a few the kernel keeps count too


# --- --import-path inside the sandbox's own /tmp ------------------------------------------------------------


@needs_bwrap
def test_an_import_path_under_tmp_is_visible_and_survives_the_wipe(tmp_path: Path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_mod.py").write_text("def triple(n):\n    return 3 * n\n")
    for path in (lib, lib / "helper_mod.py"):  # readable by nobody (host uid 65534 when calib is root)
        path.chmod(0o755)
    assert str(lib).startswith("/tmp/")
    # next to the mount point: a directory bubblewrap made (root's when calib is root: not writable)
    use = _job(f"import helper_mod, os\nfound = sorted(os.listdir({str(lib.parent)!r}))\ntry:\n"
               f"    open({str(lib.parent / 'left')!r}, 'w').close()\nexcept OSError:\n    pass\n"
               "return helper_mod.triple(n), found\n", import_paths=[str(lib)])
    sandbox = Sandbox(fork_server=True, read_only=(str(lib),))

    async def twice() -> list:
        return [await sandbox.run(use, wall_seconds=60) for _ in range(2)]

    try:
        runs = asyncio.run(twice())
        assert len(sandbox.server_pids) == 1  # one server ran both: the wipe kept the mount point
    finally:
        sandbox.close()
    for run in runs:
        assert run.died is None, run.stderr.decode(errors="replace")
    first, second = (_value(_output(run)["return"]) for run in runs)
    assert first[0] == second[0] == 3
    assert first[1] == second[1] == ["lib"]  # what the first batch left next to the import path was wiped
    assert not (lib.parent / "left").exists()  # and none of it reached the host


def test_an_import_path_nobody_can_read_is_refused_as_root(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("only calib as root runs the sandbox as host uid 65534")
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    try:
        Sandbox(read_only=(str(hidden),))
    except SandboxUnavailable:
        pytest.skip("bubblewrap does not work here")
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        message = str(exc)
    else:
        pytest.fail("an import path the sandbox's user cannot read was accepted")
    assert str(hidden) in message and "chmod" in message and "\n" not in message


# --- the hostile battery, again as a normal user ----------------------------------------------------------


def test_the_hostile_battery_passes_as_a_normal_user():
    """When the tests run as root (CI), the hostile battery and this file also run as ``calib-ci`` (with the
    fork servers' tests and x's replay forked by its explore batch: not as root, the server is the sandbox's pid 1)."""
    if os.geteuid() != 0:
        pytest.skip("already running as a normal user: the battery runs as this user")
    if os.environ.get("CALIB_UNPRIVILEGED_RUN"):
        pytest.skip("this is the run as the normal user")
    try:
        pwd.getpwnam(CI_USER)
    except KeyError:
        pytest.skip(f"no user {CI_USER}: run .ci/unprivileged.sh as root first")
    python = CI_VENV / "bin" / "python"
    tree = CI_VENV.parent / "tree"
    if not python.exists() or not tree.is_dir():
        pytest.skip(f"{python} or {tree} is missing: run .ci/unprivileged.sh as root first")
    subprocess.run(["bash", str(REPO / ".ci" / "unprivileged.sh"), "--sync-only"], check=True,  # noqa: S603
                   capture_output=True, timeout=300)
    done = subprocess.run(  # noqa: S603
        ["runuser", "-u", CI_USER, "--", "env", "CALIB_UNPRIVILEGED_RUN=1", f"HOME={CI_VENV.parent / 'home'}",
         str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/executors/sandbox/test_hostile.py",
         "tests/executors/sandbox/test_sandbox_threats.py", "tests/executors/sandbox/test_forkserver.py",
         "tests/executors/native/test_native_isolation.py", "tests/executors/native/test_native_forgery.py",
         "tests/executors/python/test_then_replay.py"],
        cwd=tree, capture_output=True, text=True, timeout=1800, check=False)
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail and "error" not in tail.lower().split("passed")[-1], tail

