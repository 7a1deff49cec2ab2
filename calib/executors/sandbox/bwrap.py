"""bubblewrap's command line for a batch: the binds, namespaces, boot lines and seccomp program.

See :mod:`calib.executors.sandbox` for what the sandbox guarantees; :class:`~calib.executors.sandbox.run.Sandbox`
and the native executors' sandbox (:mod:`calib.executors.native.sandbox`) build their commands from these.
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
from pathlib import Path

from calib._exceptions import CalibError
from calib.executors.sandbox.harness import seccomp as _seccomp
from calib.executors.sandbox.types import base_interpreter

__all__ = ["BATCH_BOOT", "BOOT", "HARNESS_DIR", "INSIDE_HARNESS", "PYTHON_FLAGS", "SERVER_BOOT", "TOPS",
           "check_readable", "load_harness", "namespace_args", "parents", "probe", "seccomp_filter", "system_binds",
           "under_tops"]

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
INSIDE_HARNESS = "/calib_harness"
# Not -I: isolated mode implies -E, which would ignore PYTHONHASHSEED=0 and give every batch its own
# string-hash order (set iteration would then differ between x's two runs). The environment is
# cleared anyway; -P keeps the working directory off sys.path, -s/-S keep site-packages out.
PYTHON_FLAGS = ("-P", "-s", "-S", "-B")
# The first lines of a batch without a sandbox (``unsafe``): the rlimits (set here rather than between
# fork and exec, so that spawning needs no Python in the forked child and can use vfork: forking the
# host, a large process, cost milliseconds per batch), then the harness with the garbage collector off
# while it starts (its imports allocate much and free little; runner.main() turns it on before any code
# under test runs).
BOOT = """import gc
gc.disable()
import sys
{load_harness}
from _harness import set_limits
set_limits({limits})
del gc, set_limits
from _harness.runner import main
main()
"""
# Without a sandbox the harness folder is imported from where it lies, under the name ``_harness`` that
# a sandbox binds it at (``INSIDE_HARNESS/_harness``) and the boot lines import.
LOAD_HARNESS = """import importlib.util
spec = importlib.util.spec_from_file_location("_harness", {init!r}, submodule_search_locations=[{root!r}])
sys.modules["_harness"] = module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
del spec, module"""


def load_harness() -> str:
    """The lines that import the harness as ``_harness`` from :data:`HARNESS_DIR` (no sandbox, no bind)."""
    return LOAD_HARNESS.format(init=str(HARNESS_DIR / "__init__.py"), root=str(HARNESS_DIR))


# A sandboxed batch's first lines: drop to nobody (before anything else), then a one-batch fork server
# that forks the batch. Not as root it is the sandbox's pid 1 (bubblewrap runs with --as-pid-1: its own
# init would be dumpable and run as the code's user); as root bubblewrap's init, host root, is.
BATCH_BOOT = """import sys
sys.path.insert(0, {root!r})
from _harness import drop_privileges
drop_privileges()
import gc
gc.disable()
del gc, drop_privileges
from _harness.zygote import oneshot
oneshot({limits}, {keep!r}, {tmpfs!r})
"""
# A fork server's first lines: nobody, no rlimits of its own beyond no core files (each child sets the
# batch's), the collector off while the harness loads (the server freezes what it loaded), the server.
SERVER_BOOT = """import sys
sys.path.insert(0, {root!r})
from _harness import drop_privileges
drop_privileges()
import gc
gc.disable()
import resource
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
del gc, resource, drop_privileges
from _harness.zygote import serve
serve({control_fd}, {limits}, {keep!r}, {tmpfs!r})
"""
TOPS = ("/tmp", "/work")  # the sandbox's own writable directories (bounded tmpfs)



@functools.lru_cache(maxsize=4)
def probe(bwrap: str, disable_userns: bool) -> tuple[bool, str]:
    argv = [bwrap, *namespace_args(disable_userns), *system_binds(), "--ro-bind", sys.base_prefix,
            sys.base_prefix, base_interpreter(), "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.decode("utf-8", "replace").strip()


def namespace_args(disable_userns: bool, *, pid1: bool = False) -> list[str]:
    """bubblewrap's namespace and privilege options; ``pid1``: the command is the sandbox's pid 1 when
    calib is not root (bubblewrap's init would run as the code's user, dumpable).

    Not root: a user namespace where the sandbox's user, ``nobody``, is the host user. Root: no user
    namespace (it would map ``nobody`` to host root, and ``/proc/sys`` would be writable); bubblewrap
    keeps only ``CAP_CHOWN``, ``CAP_SETUID`` and ``CAP_SETGID`` for the sandbox's first lines, which give
    ``/tmp`` and ``/work`` to nobody and switch to host uid 65534, which clears them
    (:func:`calib.executors.sandbox.harness.drop_privileges`)."""
    if os.geteuid() == 0:
        args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--cap-add", "CAP_CHOWN",
                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", "65534", "--gid", "65534"] + (["--disable-userns"] if disable_userns else [])
    # as root bubblewrap's own init stays host root: out of the code's reach, and it dies with bubblewrap
    # (the kernel clears a parent-death signal when the uid changes, as it does for the command as root)
    return args + (["--as-pid-1"] if pid1 and os.geteuid() != 0 else [])


def parents(*paths: str) -> list[str]:
    """``--dir`` (mode 0755) for every directory above the mount points ``paths`` that bubblewrap would
    otherwise create with its source's mode (``/root`` 0700 above a Python under ``/root/.pyenv``: not
    searchable by nobody), skipping those inside ``/usr`` and the like."""
    args: list[str] = []
    system = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
    seen = {"/"}
    for path in paths:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if parent in seen or any(parent == top or parent.startswith(top + "/") for top in system):
                continue
            seen.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def check_readable(path: str) -> None:
    """Refuse an import path that nobody (host uid 65534, the sandbox's user when calib is root) cannot
    list: its modules would be silently missing in the sandbox."""
    st = os.stat(path)
    if st.st_uid != 65534 and st.st_mode & 0o005 != 0o005:
        raise CalibError(f"import path {path!r} is not readable in the sandbox: calib runs as root, so sandboxed "
                         f"code runs as uid 65534, and the directory is mode {stat.S_IMODE(st.st_mode):o} (owner "
                         f"uid {st.st_uid}); make it world-readable (chmod -R o+rX {path}) or run calib as a "
                         "normal user")


def under_tops(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in TOPS)


def system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + ["--proc", "/proc", "--dev", "/dev"]


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The classic-BPF program bubblewrap loads (``--seccomp``) for a batch, or None on an architecture
    not listed (:func:`calib.executors.sandbox.harness.seccomp.program`)."""
    return _seccomp.program(machine)
