"""Shared pieces of the server kinds: spec-table checks, secrets from the environment, boundary errors."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.servers.base import ServerError, normal_dtype
from calib.servers.cache import RequestCache

__all__ = ["api_key_from_env", "boundary_error", "check_config", "checked_dtype", "first_mismatch", "limit_from",
           "positive", "stated_dtype"]

_LIMIT = re.compile(r"(?:max(?:imum)?(?: allowed)?|at most|<=|less than or equal to)\D{0,12}?(\d+)", re.I)


def check_config(name: str, kind: str, config: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Refuse unknown keys and inline secrets in a server's spec table (names the key and the fix)."""
    if "api_key" in config:
        raise InvalidParameterError(
            f"server {name!r}: do not write the API key into the spec; put it in an environment variable "
            f"and name that variable in api_key_env")
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise InvalidParameterError(
            f"server {name!r} ({kind}): unknown key(s) {', '.join(map(repr, unknown))}; allowed: "
            f"{', '.join(sorted(allowed))}")
    cache = config.get("cache")
    if cache is not None and not isinstance(cache, RequestCache):
        raise InvalidParameterError(f"server {name!r}: cache must be a RequestCache, got {type(cache).__name__}")


def api_key_from_env(name: str, env_var: str | None) -> str | None:
    """The secret in the environment variable ``env_var`` (None when no variable is named).

    The value never appears in a message, a repr or a cache key.
    """
    if env_var is None:
        return None
    if not isinstance(env_var, str) or not env_var:
        raise InvalidParameterError(f"server {name!r}: api_key_env must name an environment variable, "
                                    f"got {env_var!r}")
    value = os.environ.get(env_var)
    if not value:
        raise InvalidParameterError(f"server {name!r}: the environment variable {env_var} (api_key_env) is not "
                                    f"set; export it before running")
    return value


def positive(name: str, key: str, value: Any, kind: type = int) -> Any:
    """``value`` as a positive number, or a ValueError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or (
            kind is int and int(value) != value):
        raise InvalidParameterError(f"server {name!r}: {key} must be a positive {kind.__name__}, got {value!r}")
    return kind(value)


def first_mismatch(expected: Sequence[int], got: Sequence[int]) -> int | None:
    """The first position where two id sequences differ (a length difference counts), else None."""
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return None if len(expected) == len(got) else min(len(expected), len(got))


def boundary_error(server: str, where: str, pos: int, n_prompt: int, expected: Sequence[int],
                   got: Sequence[int]) -> ServerError:
    """The error for a scored continuation whose tokens do not line up with the server's."""
    side = (f"continuation token {pos - n_prompt}" if pos >= n_prompt else f"prompt token {pos}")
    exp = expected[pos] if pos < len(expected) else "end of sequence"
    have = got[pos] if pos < len(got) else "end of sequence"
    return ServerError(
        f"server {server!r}: {where}: token {pos} ({side}) is id {have} on the server but {exp} when the prompt "
        f"and continuation are tokenized separately: the server re-tokenizes across the prompt/continuation "
        f"boundary, and calib does not align by string matching; end the prompt at a token boundary, or use a "
        f"server that accepts token-id prompts (vLLM, calib's embedded server)")


def limit_from(error: str, asked: int) -> int | None:
    """The limit a refusal names (e.g. "... max allowed: 20" when ``asked`` was larger), else None."""
    for match in _LIMIT.finditer(error):
        value = int(match.group(1))
        if 0 <= value < asked:
            return value
    return None


def stated_dtype(name: str, config: Mapping[str, Any]) -> str | None:
    """The ``dtype`` a spec states for a server's weights (``bfloat16``, ``torch.float16``), as a plain name."""
    value = config.get("dtype")
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"(torch\.)?[a-z][a-z0-9_]*", value.strip()):
        raise InvalidParameterError(f"server {name!r}: dtype must name the weights' dtype as the server was started "
                                    f"with it, e.g. dtype = \"bfloat16\" (vLLM's --dtype); got {value!r}")
    return normal_dtype(value)


def checked_dtype(name: str, stated: str | None, reported: Any, source: str) -> tuple[str | None, str]:
    """``(dtype, note)`` for a server's provenance: the server's own dtype where it reports one (it must
    equal a stated one), else the spec's, else None with the reason."""
    dtype = normal_dtype(reported)
    if dtype is not None:
        if stated is not None and stated != dtype:
            raise InvalidParameterError(f"server {name!r}: the spec states dtype = {stated!r} but the server reports "
                                        f"{dtype!r} ({source}); correct dtype in the server's spec table")
        return dtype, source
    if stated is not None:
        return stated, "spec dtype (stated, not reported by the server)"
    return None, f"the server does not report it ({source} absent) and the spec states no dtype"
