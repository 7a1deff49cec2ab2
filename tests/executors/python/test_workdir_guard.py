"""The harness empties its working directory before every input, so it refuses one that is not the sandbox's.

Run by hand outside a sandbox (no ``CALIB_WORKDIR``), the harness would otherwise take the machine's own
``/work`` for the sandbox's and empty it. :func:`workdir.own_workdir` accepts a folder the host named
(``CALIB_WORKDIR``, as ``--unsafe-no-sandbox`` does) or a tmpfs mount point (bubblewrap's and the fork
server children's ``/work``), read from ``/proc/self/mountinfo`` (proc(5): field 5 is the mount point,
the first field after `` - `` the file-system type).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import workdir

MOUNTINFO = (
    "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
    "40 22 0:40 / /work rw,relatime - ext4 /dev/sda1 rw\n"
    "41 22 0:41 / /scratch rw,nosuid - tmpfs tmpfs rw,size=65536k\n"
    "42 41 0:42 / /scratch rw - ext4 /dev/sdb1 rw\n"
    "43 22 0:43 / /fresh rw - ext4 /dev/sdc1 rw\n"
    "44 43 0:44 / /fresh rw - tmpfs tmpfs rw\n"
)


@pytest.fixture
def mountinfo(tmp_path: Path) -> str:
    path = tmp_path / "mountinfo"
    path.write_text(MOUNTINFO)
    return str(path)


def test_a_folder_on_a_disk_is_refused(mountinfo: str) -> None:
    assert workdir.own_workdir("/work", {}, mountinfo) is False
    assert workdir.own_workdir("/elsewhere", {}, mountinfo) is False  # not a mount point at all


def test_the_top_mount_decides(mountinfo: str) -> None:
    assert workdir.own_workdir("/scratch", {}, mountinfo) is False  # a disk mounted over a tmpfs
    assert workdir.own_workdir("/fresh", {}, mountinfo) is True  # a tmpfs mounted over a disk


def test_a_folder_the_host_named_is_accepted(mountinfo: str) -> None:
    assert workdir.own_workdir("/work", {"CALIB_WORKDIR": "/tmp/calib-x/work"}, mountinfo) is True


def test_no_mountinfo_means_refused(tmp_path: Path) -> None:
    assert workdir.own_workdir("/work", {}, str(tmp_path / "absent")) is False


def test_this_machines_own_mounts_agree_with_proc() -> None:
    """Against the kernel's own table: every tmpfs mount point is accepted, the root is not (unless tmpfs)."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    tops: dict[str, str] = {}
    for line in lines:
        left, _, right = line.partition(" - ")
        tops[left.split()[4]] = right.split()[0]
    for point, kind in tops.items():
        if " " not in point:
            assert workdir.own_workdir(point, {}) is (kind == "tmpfs"), point


def test_the_sandbox_still_runs_its_batches() -> None:
    """Inside bubblewrap (and the fork server's children) ``/work`` is a fresh tmpfs: the guard lets it run."""
    ex = SandboxExecutor(ExecutorConfig(seed=0, workers=1))
    try:
        cmp = asyncio.run(ex.compare("def f(n):\n    return n * 2 if n > 3 else -n\n", [],
                                     inputs=[{"args": {"n": str(i)}} for i in range(10)]))
    finally:
        ex.close()
    assert cmp.valid_inputs == 10 and cmp.distinct_outputs >= 2
