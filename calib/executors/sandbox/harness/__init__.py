"""The harness: what runs inside the sandbox (stdlib only). See :mod:`.runner` and :mod:`.zygote`."""

import os
import resource

#: The user and group every sandboxed process runs as (``nobody``): inside a user namespace of the
#: host user's when calib is not root, and the host's own uid and gid 65534 when it is.
NOBODY = 65534
# the inheritable set may keep CAP_SETUID and CAP_SETGID: with NoNewPrivs no exec can turn it into more
_ZERO_CAPS = ("CapPrm", "CapEff", "CapAmb")


def drop_privileges(own: tuple[str, ...] = ("/tmp", "/work")) -> None:
    """Become ``nobody`` with no capabilities, or exit before anything else runs.

    The first thing every sandboxed process does. When calib runs as root, bubblewrap runs without a
    user namespace (one would map the sandbox's user to host root: ``/proc/sys`` and
    ``/proc/sysrq-trigger`` would be writable) and keeps only ``CAP_CHOWN``, ``CAP_SETUID`` and
    ``CAP_SETGID``; this gives the sandbox's own directories ``own`` to nobody (as they are in a user
    namespace) and switches to host uid and gid 65534, which clears every capability. Either way it
    then checks ``/proc/self/status`` (no uid or gid 0 in any role or group, no permitted, effective or
    ambient capability left, ``NoNewPrivs`` set) and refuses to go on otherwise."""
    if os.getuid() == 0 or os.geteuid() == 0:
        for path in own:
            os.chown(path, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    with open("/proc/self/status", "rb") as status:  # bytes: no codec is loaded this early
        text = status.read().decode()
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    ids = fields.get("Uid", "0").split() + fields.get("Gid", "0").split()
    caps = [int(fields.get(name, "1"), 16) for name in _ZERO_CAPS]
    if "0" in ids or any(caps) or fields.get("NoNewPrivs", "0").strip() != "1" or 0 in os.getgroups():
        raise SystemExit(f"calib sandbox: refusing to run: could not drop privileges (uid/gid {' '.join(ids)}, "
                         f"capabilities {' '.join(f'{c:x}' for c in caps)}, groups {os.getgroups()})")


def set_limits(limits: tuple[tuple[int, int, int], ...]) -> None:
    """Set each ``(resource, soft, hard)`` rlimit of a batch, keeping a hard limit the process already
    holds lower (lowered, never raised). A batch's first lines call it, as does a fork server's child."""
    for kind, soft, hard in limits:
        held = resource.getrlimit(kind)[1]
        if held != resource.RLIM_INFINITY:
            hard = min(hard, held)
        resource.setrlimit(kind, (min(soft, hard), hard))
