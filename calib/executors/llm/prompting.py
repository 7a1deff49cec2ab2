"""Prompts and answer parsing of the ``llm`` executor (functional-memorization paper [FM], Appendix C).

The prompts live verbatim in ``calib/executors/llm/prompts/python/<version>/`` (package data): one JSON
file per prompt (``name``, ``source``, ``placeholders``, ``system``, ``user``) and ``common_imports.py``,
the fixed preamble of level 2. Placeholders (``{function_code}``, ...) are filled by plain replacement,
so the JSON braces the prompts show the model stay as written. A new wording is a new version folder;
results record the version they used (:data:`PROMPTS_VERSION`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from calib._exceptions import InvalidParameterError

__all__ = ["PROMPTS_DIR", "PROMPTS_VERSION", "AnswerError", "Prompt", "common_imports", "input_states",
           "load_prompt", "parse_json_answer", "preamble_from_answer"]

#: Where the prompt folders are: ``prompts/`` beside this module, installed with the package.
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
#: The prompts this module uses: ``<language>/<version>`` under :data:`PROMPTS_DIR`.
PROMPTS_VERSION = "python/v1"

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_FUTURE = re.compile(r"^\s*from\s+__future__\s+import\b.*$", re.MULTILINE)


class AnswerError(ValueError):
    """The model's answer is not the JSON object the prompt asked for (the message is one line)."""


@dataclass(frozen=True)
class Prompt:
    """One prompt: a system message and a user template with ``{placeholder}`` fields."""

    name: str
    system: str
    user: str
    placeholders: tuple[str, ...]

    def render(self, **values: str) -> str:
        """The user message with every placeholder replaced (all of them must be given)."""
        missing = set(self.placeholders) - set(values)
        if missing:
            raise InvalidParameterError(f"prompt {self.name!r}: missing placeholder(s) {sorted(missing)}")
        text = self.user
        for key in self.placeholders:
            text = text.replace("{" + key + "}", values[key])
        return text


@cache
def load_prompt(name: str, version: str = PROMPTS_VERSION) -> Prompt:
    """The prompt ``name`` (``input_generation``, ``preamble``, ``preamble_retry``) of ``version``."""
    path = PROMPTS_DIR / version / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidParameterError(f"prompt {name!r} of version {version!r}: cannot read {path}: {exc}") from None
    return Prompt(name=name, system=data["system"], user=data["user"], placeholders=tuple(data["placeholders"]))


@cache
def common_imports(version: str = PROMPTS_VERSION) -> str:
    """The fixed common-imports preamble (level 2), each import guarded by ``try/except ImportError``."""
    path = PROMPTS_DIR / version / "common_imports.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError(f"common imports of version {version!r}: cannot read {path}: {exc}") from None


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_json_answer(text: str, key: str) -> Any:
    """The value under ``key`` of the JSON object the model answered, bare or in a fenced ```json block.

    Raises
    ------
    AnswerError
        The answer (nor any fenced block in it) is not a JSON object holding ``key``.
    """
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and key in data:
            return data[key]
    if not text.strip():
        raise AnswerError("the answer is empty")
    raise AnswerError(f'no JSON object with "{key}" in the answer: {_one_line(text, 80)!r}')


def _literal(value: Any) -> str:
    """A JSON value as a Python literal (``repr``), with non-finite floats as ``float('...')``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def input_states(test_inputs: Any, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Input states (``{"args": {name: expression}, "files": {}}``) from the model's ``test_inputs``.

    Each JSON object becomes one state, its values written as Python literals (``repr``); entries that
    are not objects, or whose values the harness would refuse, are dropped, as is a ``self`` key (the
    prompt asks for none). At most ``limit`` states are kept. Returns the states and how many entries
    were dropped.

    Raises
    ------
    AnswerError
        ``test_inputs`` is not a list.
    """
    from calib.executors.sandbox.harness.values import decode

    if not isinstance(test_inputs, list):
        raise AnswerError(f'"test_inputs" is a {type(test_inputs).__name__}, not a list')
    states: list[dict[str, Any]] = []
    dropped = 0
    for entry in test_inputs:
        if len(states) >= limit:
            break
        if not isinstance(entry, dict) or not all(isinstance(k, str) and k.isidentifier() for k in entry):
            dropped += 1
            continue
        args = {name: _literal(value) for name, value in entry.items() if name != "self"}
        try:
            for source in args.values():
                decode(source)
        except (ValueError, RecursionError):
            dropped += 1
            continue
        states.append({"args": args, "files": {}})
    return states, dropped


def preamble_from_answer(text: str) -> str:
    """The preamble code of a ``{"preamble": "..."}`` answer, without ``from __future__`` imports.

    Raises
    ------
    AnswerError
        No such object, the value is not text, or the code does not compile (the line is named).
    """
    value = parse_json_answer(text, "preamble")
    if not isinstance(value, str):
        raise AnswerError(f'"preamble" is a {type(value).__name__}, not a string of code')
    code = _FUTURE.sub("", value)
    try:
        compile(code, "<preamble>", "exec")
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise AnswerError(f"the preamble does not compile: {getattr(exc, 'msg', exc)}{where}") from None
    return code
