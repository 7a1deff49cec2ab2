"""Classic-BPF seccomp programs for the sandbox (stdlib only: the fork server builds them inside it).

Four programs, one builder:

- a *batch's* (``forks=False``, no ``pid``): what bubblewrap loads for a one-process batch. New
  processes are impossible: ``fork``, ``vfork`` and a ``clone`` without ``CLONE_THREAD`` fail with
  ``EPERM`` (threads still work; ``clone3`` says ``ENOSYS`` so that the C library falls back to
  ``clone``), as do kernel interfaces no function needs (:data:`DENIED`);
- the *fork server's* (``forks=True``): what bubblewrap loads for a fork server, which must fork its
  children: only :data:`DENIED` (but for ``unshare`` and ``mount`` with ``mounts=True``: the Python
  sandbox's first lines give each batch fresh tmpfs in namespaces of its own; no code under test
  runs before the child's program refuses them again);
- a fork server *child's* (``pid``): what each batch process loads for itself, stacked on the ones
  loaded, before any code under test runs: the batch's program, and the child may signal (``kill``, ``tgkill``,
  ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo``), set the limits (``prlimit64``) and change the scheduling
  (``sched_set*``, ``setpriority``, ``ioprio_set``) of no process but itself (``ESRCH``, as if no other
  process existed); ``tkill`` and the pidfd calls fail, and the System V
  semaphores and POSIX message queues (which would outlive the child in the sandbox's IPC namespace and
  reach the next child) are refused;
- a fork server *child's first* (``staged``): what a child loads as it sets itself up, before its job
  is read, stacked on the server's: the child's program less two things, which the child's own
  program adds (stacked) before any code under test runs, in every process of the batch. It may fork
  (an exploring batch forks once, after analysing the code and before running any of it: the process
  that replays x's chosen inputs, ``then_replay`` in :mod:`.runner`), and it names no pid (the rules
  on signals and limits name the pid of the process that loads the child's program).

Every program refuses extended attributes (``setxattr`` and ``removexattr`` in all their forms fail
with ``EOPNOTSUPP``, as on a file system without them: they would survive the wipe between batches on
``/work`` and ``/tmp`` themselves) and inotify (:data:`DENIED`: its instances come from the host user's
shared quota). A batch's and a child's program also refuse (``EPERM``) the calls that make the kernel
signal a process the code names: ``fcntl`` ``F_SETOWN``, ``F_SETOWN_EX``, ``F_SETSIG``, ``F_SETLEASE``,
``F_NOTIFY`` and ``F_SETFL`` with ``O_ASYNC``, ``ioctl`` ``FIOSETOWN``, ``SIOCSPGRP`` and ``FIOASYNC``; and
``setsockopt`` of ``SO_SNDBUF``, ``SO_RCVBUF`` (and their ``FORCE`` forms), so that a socket's buffers
stay at the system's default size.
"""

from __future__ import annotations

import platform
import struct

CLONE_THREAD = 0x00010000
_EPERM, _ESRCH, _ENOSYS, _EOPNOTSUPP = 1, 3, 38, 95
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ARG0_LOW = 16  # offsetof(struct seccomp_data, args[0]), its low half on a little-endian machine
_ARG1_LOW = 24  # args[1]
_ARG2_LOW = 32  # args[2]
# fcntl commands (asm-generic/fcntl.h, linux/fcntl.h), O_ASYNC, ioctl requests (asm-generic/ioctls.h,
# linux/sockios.h), setsockopt (asm-generic/socket.h); the same numbers on x86-64 and aarch64
_SIGNALLING_FCNTL = (8, 10, 15, 1024, 1026)  # F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY
_F_SETFL, _O_ASYNC = 4, 0o20000
_SIGNALLING_IOCTL = (0x8901, 0x8902, 0x5452)  # FIOSETOWN, SIOCSPGRP, FIOASYNC
_SOL_SOCKET, _BUFFER_OPTIONS = 1, (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1

#: Refused with EPERM in every program.
DENIED = ("ptrace", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key",
          "request_key", "bpf", "userfaultfd", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
          "finit_module", "delete_module", "process_vm_readv", "process_vm_writev", "io_uring_setup",
          "io_uring_enter", "io_uring_register", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
          "fspick", "memfd_create", "memfd_secret", "shmget", "msgget", "inotify_init", "inotify_init1")
#: Allowed in a Python sandbox's own program (``mounts``): its trusted first lines make each batch's tmpfs.
MOUNTS = ("unshare", "mount")
#: Refused with EOPNOTSUPP in every program: extended attributes cannot be set or removed.
UNSUPPORTED = ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat",
               "removexattrat")
#: Refused with EPERM in a fork server child's program (besides fork and vfork).
CHILD_DENIED = ("tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "semget", "mq_open")
#: Allowed in a child only when the first argument is the child's own pid (else ESRCH).
SELF_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
#: Allowed in a child only for its own pid or 0 (itself) as the first argument (else ESRCH); so are
#: ``setpriority`` and ``ioprio_set`` for one process (``PRIO_PROCESS``, ``IOPRIO_WHO_PROCESS``) that is
#: itself or 0: nothing it does can slow the server down or change the limits of anything but itself.
SELF_OR_0 = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")

# machine -> (AUDIT_ARCH_*, x32 ABI to refuse, syscall numbers)
SYSCALLS: dict[str, tuple[int, bool, dict[str, int]]] = {
    "x86_64": (0xC000003E, True, {
        "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "ptrace": 101, "mount": 165, "umount2": 166,
        "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "process_vm_readv": 310, "process_vm_writev": 311, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "prlimit64": 302, "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "semget": 64,
        "mq_open": 240, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
        "sched_setattr": 314, "setpriority": 141, "ioprio_set": 251, "inotify_init": 253, "inotify_init1": 294,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
        "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466, "fcntl": 72, "ioctl": 16, "setsockopt": 54}),
    "aarch64": (0xC00000B7, False, {
        "clone": 220, "clone3": 435, "ptrace": 117, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
        "userfaultfd": 282, "perf_event_open": 241, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "process_vm_readv": 270, "process_vm_writev": 271,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "memfd_create": 279,
        "memfd_secret": 447, "shmget": 194, "msgget": 186,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "prlimit64": 261, "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "semget": 190,
        "mq_open": 180, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
        "sched_setattr": 274, "setpriority": 140, "ioprio_set": 30, "inotify_init1": 26, "setxattr": 5,
        "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "setxattrat": 463,
        "removexattrat": 466, "fcntl": 25, "ioctl": 29, "setsockopt": 208}),
}


def program(machine: str | None = None, *, forks: bool = False, pid: int | None = None,
            mounts: bool = False, staged: bool = False) -> bytes | None:
    """The BPF program (``struct sock_filter`` array), or None on an architecture not listed.

    ``forks``: the fork server's own program; ``pid``: the program of the fork server child with that
    pid (in the sandbox's PID namespace); ``mounts`` (with ``forks``): ``unshare`` and ``mount`` stay
    allowed, for a Python sandbox whose children make fresh tmpfs of their own before they load the
    child's program, which refuses both (:meth:`calib.executors.sandbox.harness.zygote.Kernel.fresh`);
    ``staged`` (without ``forks`` and ``pid``): a child's first program, which lets it fork."""
    spec = SYSCALLS.get(machine or platform.machine())
    if spec is None:
        return None
    arch, x32, nr = spec
    # (code, jump-if-true, jump-if-false, k); a jump names a label (forward) or is 0 (the next one);
    # a string alone marks where a label is
    prog: list[tuple[int, int | str, int | str, int] | str] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 0, "nosys", arch),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if x32:
        prog.append((_JGE, "nosys", 0, 0x40000000))
    if staged and (forks or pid is not None):
        raise ValueError("a staged program is a child's first one: no forks, no pid")
    denied = (DENIED if forks else (*DENIED, *CHILD_DENIED) if staged
              else ("fork", "vfork", *DENIED, *(CHILD_DENIED if pid is not None else ())))
    if forks and mounts:
        denied = tuple(name for name in denied if name not in MOUNTS)
    for name in denied:
        if name in nr:
            prog.append((_JEQ, "eperm", 0, nr[name]))
    prog += [(_JEQ, "eopnotsupp", 0, nr[name]) for name in UNSUPPORTED]
    tail: list[tuple[int, int | str, int | str, int] | str] = []
    if not forks:  # a batch or a child: nothing that makes the kernel signal another process, no big buffers
        prog += [(_JEQ, "fcntl", 0, nr["fcntl"]), (_JEQ, "ioctl", 0, nr["ioctl"]),
                 (_JEQ, "setsockopt", 0, nr["setsockopt"])]
        tail += ["fcntl", (_LD_W_ABS, 0, 0, _ARG1_LOW), *[(_JEQ, "eperm", 0, k) for k in _SIGNALLING_FCNTL],
                 (_JEQ, 0, "allow", _F_SETFL), (_LD_W_ABS, 0, 0, _ARG2_LOW), (_JSET, "eperm", "allow", _O_ASYNC),
                 "ioctl", (_LD_W_ABS, 0, 0, _ARG1_LOW), *[(_JEQ, "eperm", 0, k) for k in _SIGNALLING_IOCTL[:-1]],
                 (_JEQ, "eperm", "allow", _SIGNALLING_IOCTL[-1]),
                 "setsockopt", (_LD_W_ABS, 0, 0, _ARG1_LOW), (_JEQ, 0, "allow", _SOL_SOCKET),
                 (_LD_W_ABS, 0, 0, _ARG2_LOW), *[(_JEQ, "eperm", 0, k) for k in _BUFFER_OPTIONS[:-1]],
                 (_JEQ, "eperm", "allow", _BUFFER_OPTIONS[-1])]
    if pid is not None:
        prog += [(_JEQ, "self", 0, nr[name]) for name in SELF_ONLY]
        prog += [(_JEQ, "self_or_0", 0, nr[name]) for name in SELF_OR_0]
        prog += [(_JEQ, "prio", 0, nr["setpriority"]), (_JEQ, "ioprio", 0, nr["ioprio_set"])]
        tail += ["self_or_0", (_LD_W_ABS, 0, 0, _ARG0_LOW), (_JEQ, "allow", 0, 0),
                "self", (_LD_W_ABS, 0, 0, _ARG0_LOW), (_JEQ, "allow", "esrch", pid),
                "prio", (_LD_W_ABS, 0, 0, _ARG0_LOW), (_JEQ, "who", "esrch", _PRIO_PROCESS),
                "ioprio", (_LD_W_ABS, 0, 0, _ARG0_LOW), (_JEQ, "who", "esrch", _IOPRIO_WHO_PROCESS),
                "who", (_LD_W_ABS, 0, 0, _ARG1_LOW), (_JEQ, "allow", 0, 0), (_JEQ, "allow", "esrch", pid)]
    if forks or staged:
        prog.append((_RET, 0, 0, _RET_ALLOW))
    else:
        prog += [(_JEQ, "nosys", 0, nr["clone3"]),
                 (_JEQ, 0, "allow", nr["clone"]),
                 (_LD_W_ABS, 0, 0, 16),  # the low half of args[0], clone's flags (little-endian)
                 (_JSET, "allow", "eperm", CLONE_THREAD)]
    prog += [*tail, "allow", (_RET, 0, 0, _RET_ALLOW), "eperm", (_RET, 0, 0, _RET_ERRNO | _EPERM),
             "nosys", (_RET, 0, 0, _RET_ERRNO | _ENOSYS), "esrch", (_RET, 0, 0, _RET_ERRNO | _ESRCH),
             "eopnotsupp", (_RET, 0, 0, _RET_ERRNO | _EOPNOTSUPP)]
    labels: dict[str, int] = {}
    code: list[tuple[int, int | str, int | str, int]] = []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def offset(at: int, target: int | str) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else target

    return b"".join(struct.pack("=HBBI", op, offset(i, jt), offset(i, jf), k)
                    for i, (op, jt, jf, k) in enumerate(code))
