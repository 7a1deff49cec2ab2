"""LLM-judge prompt files and the reading of judge replies.

:func:`load_metric_prompt` reads a prompt file (placeholders ``__LANGUAGE__``, ``{reference_function}``,
``{generated_function}``); :func:`parse_bracket_score` and :func:`parse_json_score` turn a reply into a
:class:`Verdict` or say why they cannot. :mod:`calib.metrics.judges` (whose module docstring states the
rules) builds the judge metrics on them and re-exports every public name here.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.data.judge import read_prompt_header
from calib.metrics.base import LANGUAGE_NAMES, MetricUnavailable, normalize_language
from calib.servers.base import ChatMessage

__all__ = ["MetricPrompt", "Verdict", "language_name", "load_metric_prompt", "parse_bracket_score", "parse_json_score"]


_PLACEHOLDERS = re.compile(r"__LANGUAGE__|\{reference_function\}|\{generated_function\}")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_BRACKETS = re.compile(r"\[\[\s*(" + _NUMBER + r")\s*\]\]")
# Python-dict style answers are tried on at most this many candidate ends per opening brace.
_MAX_LITERAL_ENDS = 64


# ----------------------------------------------------------------------------------------- prompt files
@dataclass(frozen=True)
class MetricPrompt:
    """A versioned judge prompt: header fields and the system and user templates.

    Attributes
    ----------
    name, version, source
        From the file's header.
    system, user
        The templates of the system and the user message.
    sha256
        Hash of the file's template part (keys cached values together with name and version).
    """

    name: str
    version: str
    source: str
    system: str
    user: str
    sha256: str

    @property
    def label(self) -> str:
        """``name.vVERSION``, as recorded with results."""
        return f"{self.name}.v{self.version}"

    def render(self, *, language: str, reference: str, candidate: str) -> list[ChatMessage]:
        """The system and user messages for one pair (one pass of plain replacement, see the module doc)."""
        values = {"__LANGUAGE__": language, "{reference_function}": reference.strip("\n"),
                  "{generated_function}": candidate.strip("\n")}

        def fill(template: str) -> str:
            return _PLACEHOLDERS.sub(lambda m: values[m.group(0)], template)

        return [ChatMessage(role="system", content=fill(self.system)),
                ChatMessage(role="user", content=fill(self.user))]


def load_metric_prompt(path: str | Path) -> MetricPrompt:
    """Read a judge prompt file (module docstring: header, ``System:`` and ``User:`` lines, placeholders).

    ``path`` is a file, or the bare name of one shipped with calib (``judge_functional.v1.txt``).

    Raises
    ------
    InvalidParameterError
        When the file lacks a header field, the ``System:``/``User:`` lines or a code placeholder.
    """
    shipped = resources.files("calib.metrics").joinpath("prompts").joinpath(str(path))
    if not Path(path).exists() and shipped.is_file():
        text, where = shipped.read_text(encoding="utf-8"), f"calib.metrics/prompts/{path}"
    else:
        try:
            text, where = Path(path).read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise InvalidParameterError(f"judge prompt {path}: cannot read it ({exc.strerror})") from exc
    lines = text.splitlines()
    header, start = read_prompt_header(lines)
    body = lines[start:]
    missing = [k for k in ("name", "version", "source") if not header.get(k)]
    if missing:
        raise InvalidParameterError(f"judge prompt {where}: header lacks {', '.join(missing)} "
                                    f"('# name:', '# version:' and '# source:' lines)")
    if "System:" not in body or "User:" not in body or body.index("System:") > body.index("User:"):
        raise InvalidParameterError(f"judge prompt {where}: needs a line 'System:' and, after it, a line 'User:' "
                                    f"starting the two messages")
    s, u = body.index("System:"), body.index("User:")
    system, user = "\n".join(body[s + 1:u]).strip("\n"), "\n".join(body[u + 1:]).strip("\n")
    absent = [p for p in ("{reference_function}", "{generated_function}") if p not in user]
    if absent:
        raise InvalidParameterError(f"judge prompt {where}: the user message lacks {' and '.join(absent)}")
    digest = hashlib.sha256("\n".join(body).encode("utf-8")).hexdigest()
    return MetricPrompt(name=header["name"], version=header["version"], source=header["source"], system=system,
                        user=user, sha256=digest)


def language_name(language: str) -> str:
    """How a prompt names ``language``: ``C++`` for ``cpp``; a language calib does not list is named as given.

    Raises
    ------
    MetricUnavailable
        When no language is given.
    """
    if not str(language or "").strip():
        raise MetricUnavailable("no language given for the pair")
    try:
        return LANGUAGE_NAMES[normalize_language(language)]
    except InvalidParameterError:
        return str(language).strip()


# ----------------------------------------------------------------------------------------- reading replies
@dataclass(frozen=True)
class Verdict:
    """A judge's score read from its reply and what else the reply says (``category``, ``reasoning``)."""

    value: float
    detail: dict[str, Any]


def _unparsable(why: str, reply: str) -> MetricUnavailable:
    return MetricUnavailable(f"judge reply unparsable: {why}", raw=reply)


def _as_score(value: Any, what: str, reply: str) -> float:
    """``value`` as a float in [0, 1] (a number or a numeric string), else :class:`MetricUnavailable`."""
    if isinstance(value, bool):
        raise _unparsable(f"{what} is a bool ({value})", reply)
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(_NUMBER + r"|nan|inf|-inf", text, flags=re.IGNORECASE):
            raise _unparsable(f"{what} is not a number: {value[:40]!r}", reply)
        value = float(text)
    if not isinstance(value, int | float):
        raise _unparsable(f"{what} is not a number: {str(value)[:40]!r}", reply)
    value = float(value)
    if not math.isfinite(value):
        raise _unparsable(f"{what} is {value}", reply)
    if not 0.0 <= value <= 1.0:
        raise _unparsable(f"{what} {value:g} outside [0, 1]", reply)
    return value


def parse_bracket_score(reply: str) -> Verdict:
    """Read a ``[[0.777]]`` score (``judge_structure``).

    Spaces inside the brackets (``[[ 0.8 ]]``), integers (``[[1]]``) and a leading point (``[[.5]]``) are
    read. When the reply holds several, the **last** one wins: models that explain themselves put the
    answer last, and one that repeats the prompt's example ``[[0.777]]`` does so before answering. The
    last score outside [0, 1] makes the reply unparsable (it is not skipped for an earlier one).

    Raises
    ------
    MetricUnavailable
        ``judge reply unparsable: <why>``, with the reply as ``raw``.
    """
    if not reply.strip():
        raise _unparsable("empty reply", reply)
    found = _BRACKETS.findall(reply)
    if not found:
        raise _unparsable("no [[score]] in the reply", reply)
    return Verdict(_as_score(found[-1], "[[score]]", reply), {})


def _literal_dict(text: str, start: int) -> dict | None:
    """A Python-style dict literal (single quotes, True/None) starting at ``text[start]``, if one does."""
    end = text.find("}", start)
    for _ in range(_MAX_LITERAL_ENDS):
        if end == -1:
            return None
        try:
            obj = ast.literal_eval(text[start:end + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return obj
        end = text.find("}", end + 1)
    return None


def _objects(text: str) -> Iterator[dict]:
    """Every JSON (or Python-dict style) object in ``text``, in the order of its opening brace."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            obj = _literal_dict(text, start)
        if isinstance(obj, dict):
            yield obj
        start = text.find("{", start + 1)


def parse_json_score(reply: str, key: str, keep: Sequence[str] = ()) -> Verdict:
    """Read the score ``key`` from a JSON object in ``reply`` (``judge_semantic``, ``judge_functional``).

    The object may sit in a code fence or in prose, be written Python-style (single quotes, read with
    :func:`ast.literal_eval`) and give its numbers as strings (``"0.8"``). The **first** object holding
    ``key`` wins, nested objects included; its value must be a finite number in [0, 1] (not a bool).
    The fields named in ``keep`` are copied into the verdict's detail (``None`` where absent).

    Raises
    ------
    MetricUnavailable
        ``judge reply unparsable: <why>``, with the reply as ``raw``.
    """
    if not reply.strip():
        raise _unparsable("empty reply", reply)
    obj = next((o for o in _objects(reply) if key in o), None)
    if obj is None:
        raise _unparsable(f"no JSON object with {key!r}", reply)
    detail = {k: obj.get(k) if isinstance(obj.get(k), str | int | float | type(None)) else str(obj.get(k))
              for k in keep}
    return Verdict(_as_score(obj[key], key, reply), detail)
