"""bubblewrap: the process sandbox every untrusted execution runs in (docs/architecture.md, "Execution semantics").

Each batch is a fresh ``bwrap`` process with: no network and no other namespaces shared (PID, IPC, UTS,
cgroup, network; and user, unless calib is root: then no user namespace, and the first lines switch to
host uid 65534, :func:`calib.executors.sandbox.harness.drop_privileges`), no capabilities, calib's own
non-dumpable interpreter as pid 1 (``--as-pid-1``; it forks the batch, :func:`zygote.oneshot`), a
read-only view of the system (``/usr``, the Python installation, the harness, and any import paths the
user names) and nothing else of the host — no home directories, no run directory, no project; a private
``/tmp`` and working directory ``/work`` (tmpfs of bounded size and inode count, new for every batch:
:meth:`calib.executors.sandbox.harness.zygote.Kernel.fresh`); a cleared environment with
``PYTHONHASHSEED=0``. Limits: CPU time, address space, file size, open files and process count (rlimits,
set by the batch's process before it reads its job), a wall-clock timeout (the whole process group
is killed), and a cap on the bytes read back. The root and ``/dev`` are read-only (both are unbounded
tmpfs otherwise), and bubblewrap itself runs with an empty environment.

A seccomp filter (x86-64 and aarch64) makes new processes impossible: ``fork``, ``vfork`` and a
``clone`` without ``CLONE_THREAD`` fail with ``EPERM`` (threads still work; ``clone3`` says ``ENOSYS``
so that the C library falls back to ``clone``), as do a few kernel interfaces no function needs
(``ptrace``, ``mount``, ``unshare``, ``bpf``, ``io_uring`` ...) or that would hold memory outside the
address-space limit (``memfd_create``, System V shared memory and message queues, inotify, growing a
socket's buffers; the open-files limit bounds how many), or that would leave state for a later batch
(extended attributes) or make the kernel signal another process (``F_SETOWN``, ``O_ASYNC`` ...;
:mod:`calib.executors.sandbox.harness.seccomp`). The filter is what stops a fork bomb: as root no per-batch
``RLIMIT_NPROC`` is set (host uid 65534 is every batch's), and the harness's audit-hook policy (no
process starts, no ctypes library loading) runs in the same interpreter as the code, so it is a
convenience — a clear ``sandbox_denied`` — not a boundary.

Without bubblewrap, :class:`Sandbox` refuses to run unless ``unsafe=True`` (``--unsafe-no-sandbox``):
then code runs as a plain child process with the same rlimits, and a warning says so on every start.

By default :meth:`Sandbox.run` does not start a sandbox per batch: it hands the batch to a fork server
(:mod:`calib.executors.sandbox.forkserver`), a long-lived sandbox as above whose interpreter has the harness
loaded and forks a fresh child per batch; the child sets the rlimits and loads a stricter seccomp
program of its own before the job runs. Without fork servers (``fork_server=False``,
``CALIB_FORK_SERVER=0``, or where one cannot start) each batch is a sandbox of its own.
:meth:`Sandbox.start` always starts one, with the first part of its job, and leaves its stdin open;
:meth:`Batch.finish` sends the rest (the executor starts replays while x is still explored when it
has no fork servers).
"""

from calib.executors.sandbox.bwrap import HARNESS_DIR, seccomp_filter
from calib.executors.sandbox.run import FORK_SERVER_ENV, Batch, Sandbox
from calib.executors.sandbox.types import Limits, SandboxRun, SandboxUnavailable, base_interpreter

__all__ = ["FORK_SERVER_ENV", "HARNESS_DIR", "Batch", "Limits", "Sandbox", "SandboxRun", "SandboxUnavailable",
           "base_interpreter", "seccomp_filter"]
