"""Connecting to a Ray cluster: the one place calib imports ``ray`` and calls ``ray.init``."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from calib._exceptions import InputError

__all__ = ["RAY_EXTRA", "connect", "disconnect", "import_ray"]

#: How to install what the Ray runner needs (the ``ray`` extra: Ray with Ray Data).
RAY_EXTRA = "pip install 'calib[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"the Ray runner needs ray, which is not installed here ({exc}): {RAY_EXTRA}") from None
    return ray


def connect(address: str) -> bool:
    """Connect this process to the Ray cluster at ``address`` (``HOST:PORT`` of its head, or ``"auto"``).

    Returns whether this call connected (False: this process was connected already, and stays so). The
    workers' log lines stay on the workers (``log_to_driver=False``): a study's progress and its events
    are calib's own. A cluster that cannot be reached is a one-line error naming the address.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    _reachable(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    token = _token_auth()
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, namespace="calib",
                 configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = " ".join(str(exc).split())[:300]
        hint = ("" if token else "; if the cluster uses token authentication, give this machine its token "
                "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")
        raise InputError(f"runner.address = {address!r}: cannot connect to a Ray cluster there ({first}); start "
                         f"one with `ray start --head` and give its HOST:PORT{hint} (docs/scale.md)") from None
    return True


def _token_auth() -> bool:
    """Turn Ray's token authentication on for this process when ``RAY_AUTH_MODE`` is not set and this machine
    has a token, as ``ray start --head`` does; whether it is on.

    ``ray start --head`` enables token authentication whenever a token exists (``~/.ray/auth_token``, which any
    local ``ray.init()`` writes, ``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``), but ``ray.init(address=...)``
    never does, so such a head refused calib ("Authentication token is missing or incorrect"). A client in token
    mode also connects to a head without authentication. Ray's own function does it (its module is private:
    a Ray without it, before 2.5x, has no token authentication)."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return False
    quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its warning that token authentication is on: for `ray start`'s user
    try:
        return bool(maybe_enable_token_auth_if_token_available(warn_if_disabled=False))
    finally:
        quiet.setLevel(level)


def _reachable(address: str) -> None:
    """A one-line error when nothing accepts a connection at ``HOST:PORT`` (Ray's own connect retries such an
    address for about 14 minutes). Other forms (``auto``, ``ray://...``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=10):
            pass
    except OSError as exc:
        raise InputError(f"runner.address = {address!r}: cannot connect to a Ray cluster there (nothing accepts a "
                         f"connection: {exc.strerror or exc}); start one with `ray start --head` and give its "
                         "HOST:PORT (docs/scale.md)") from None


def disconnect(connected: bool) -> None:
    """Leave the cluster when :func:`connect` connected this process (``connected`` is what it returned)."""
    if connected:
        import_ray().shutdown()
