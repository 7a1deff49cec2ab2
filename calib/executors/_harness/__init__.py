"""The harness: what runs inside the sandbox (stdlib only). See :mod:`.runner` and :mod:`.zygote`."""

import resource


def set_limits(limits: tuple[tuple[int, int, int], ...]) -> None:
    """Set each ``(resource, soft, hard)`` rlimit of a batch, keeping a hard limit the process already
    holds lower (lowered, never raised). A batch's first lines call it, as does a fork server's child."""
    for kind, soft, hard in limits:
        held = resource.getrlimit(kind)[1]
        if held != resource.RLIM_INFINITY:
            hard = min(hard, held)
        resource.setrlimit(kind, (min(soft, hard), hard))
