"""Prompt-selection rules: how a chat request is made from a completion prompt, and how its reply is read back.

An extraction procedure fixes a model, a decoding policy, a *prompt-selection rule*, a score and a
verification rule (the extraction paper, §2). Through a completion route the rule is the prompt itself;
a chat-only host needs a rule that says what the user message is and how the reply becomes the
continuation of the prompt. A rule is a versioned TOML file — the built-in ones are package data
beside this module (``natural``, ``continue``, ``parrot``), a spec may name a file of its own — with:

``name``, ``version``, ``description``
    What the rule is; the report states name and version, and the file's SHA-256 keys the cache.
``system`` (optional), ``user``
    The messages; ``user`` (and ``system``) may use ``{language}``, ``{prompt}`` (the completion prompt:
    context, then the signature) and, for a rule with ``shows_suffix = true``, ``{suffix}`` (the text
    the prompt's continuation should be: the parrot experiment).
``reply``
    How the reply is read back: ``raw`` (the reply is the continuation), ``code_block`` (the first
    fenced code block, else the whole reply) or ``first_function`` (from the prompt's last line — the
    signature — found anywhere in the reply, fenced or not). When the code read back repeats the
    prompt's last line, the continuation starts after it; parsing the function out of
    ``signature + continuation`` is :func:`calib.data.parseback.parse_back`'s job.

Any rule is safe to use for an audit when it is applied identically to members and controls: the
matched controls calibrate whatever the rule adds (copying, instruction following; §3, §H.2). The
``parrot`` rule shows the expected text and is there to demonstrate exactly that.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from calib._exceptions import InputError

__all__ = ["REPLY_MODES", "RULES", "PromptRule", "load_rule"]

#: The built-in rules (``<name>.v<version>.toml`` beside this module), newest version of each.
RULES: tuple[str, ...] = ("natural", "continue", "parrot")
REPLY_MODES: tuple[str, ...] = ("raw", "code_block", "first_function")

_FOLDER = Path(__file__).resolve().parent
_KEYS = {"name", "version", "description", "system", "user", "reply", "shows_suffix"}
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_FIELDS = re.compile(r"{(\w*)}")


@dataclass(frozen=True)
class PromptRule:
    """One prompt-selection rule (see the module docstring); build it with :func:`load_rule`."""

    name: str
    version: int
    description: str
    user: str
    reply: Literal["raw", "code_block", "first_function"]
    system: str | None = None
    shows_suffix: bool = False
    sha256: str = ""

    def messages(self, prompt: str, *, language: str, suffix: str | None = None) -> list[dict[str, str]]:
        """The chat messages (``role``, ``content``) for ``prompt``; ``suffix`` is required by a rule that shows it."""
        if self.shows_suffix and suffix is None:
            raise ValueError(f"prompt rule {self.name!r} shows the expected continuation: give suffix")
        values = {"language": language, "prompt": prompt, "suffix": suffix or ""}
        out = [{"role": "system", "content": self.system.format(**values)}] if self.system else []
        return out + [{"role": "user", "content": self.user.format(**values)}]

    def continuation(self, reply: str, prompt: str) -> str:
        """The text that continues ``prompt``, read back from the model's ``reply`` by the rule's ``reply`` mode.

        A prompt that ends inside a line (an extraction window's prefix cut at a token) is continued from
        that point: the code read back is searched for a line that begins with the prompt's unfinished
        line (leading spaces aside), and the continuation is what follows it on that line and after.
        """
        if self.reply == "raw":
            return reply
        block = _FENCE.search(reply) if self.reply == "code_block" else None
        after = _after_fragment(block.group(1) if block else reply, prompt)
        if after is not None:
            return after
        last = prompt.rstrip("\n").rsplit("\n", 1)[-1].strip()
        if self.reply == "code_block":
            block = _FENCE.search(reply)
            code = block.group(1) if block else reply
            return _after_line(code, last)
        # first_function: the signature wherever it is; without it, the first code block, else the reply
        if last and any(line.strip() == last for line in reply.split("\n")):
            return _after_line(reply, last)
        block = _FENCE.search(reply)
        return _after_line(block.group(1) if block else reply, last)

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the rule in a cache key or a report: name, version and the file's SHA-256."""
        return {"name": self.name, "version": self.version, "sha256": self.sha256}

    def record(self) -> dict[str, Any]:
        """What a run's manifest records of the rule (``generation.rule``): the fingerprint and how it works."""
        return {**self.fingerprint(), "description": self.description, "reply": self.reply,
                "shows_suffix": self.shows_suffix}


def _after_line(code: str, last: str) -> str:
    """``code`` after its first line equal (stripped) to ``last``; all of it, as a new line, when there is none."""
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if last and line.strip() == last:
            return "\n" + "\n".join(lines[i + 1:])
    return code if code.startswith("\n") else "\n" + code


def _after_fragment(code: str, prompt: str) -> str | None:
    """``code`` after the prompt's last line where a line of ``code`` begins with it (leading spaces aside), or None.

    The prompt's last line may be unfinished (a window cut inside a line). Of several such lines, the one
    whose preceding lines repeat the prompt's preceding lines the longest is taken (the first on a tie),
    so that a reply that repeats the whole prompt is read back after the prompt, not at an earlier line
    that happens to begin the same way.
    """
    before = prompt.split("\n")
    head = before.pop().lstrip()
    if not head.strip():
        return None
    lines = code.split("\n")
    best: tuple[int, int] | None = None  # (agreement, line index)
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(head):
            continue
        agree = 0
        while agree < min(i, len(before)) and lines[i - 1 - agree].strip() == before[-1 - agree].strip():
            agree += 1
        if best is None or agree > best[0]:
            best = (agree, i)
    if best is None:
        return None
    i = best[1]
    at = sum(len(line) + 1 for line in lines[:i]) + len(lines[i]) - len(lines[i].lstrip()) + len(head)
    return code[at:]


def _builtin(name: str) -> Path | None:
    found = sorted(_FOLDER.glob(f"{name}.v*.toml"), key=lambda p: int(p.name.split(".v")[1].split(".")[0]))
    return found[-1] if found else None


def load_rule(name: str | Path) -> PromptRule:
    """The built-in rule ``name`` (its newest version), or the rule in the TOML file ``name``.

    Raises
    ------
    InputError
        One line naming the file and the key: an unknown rule name (with the built-in ones), an
        unreadable file, a missing or unknown key, a ``reply`` mode that does not exist, a template
        field other than ``{language}``, ``{prompt}`` and ``{suffix}``, or ``{suffix}`` in a rule
        without ``shows_suffix = true``.
    """
    text_name = str(name)
    path = _builtin(text_name) if "/" not in text_name and not text_name.endswith(".toml") else Path(name)
    if path is None:
        raise InputError(f"prompt rule {text_name!r} is not built in ({', '.join(RULES)}); name one of them or a "
                         "rule's TOML file (docs/hosted.md, \"Prompt-selection rules\")")
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read the prompt rule: {exc}", path=str(path)) from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r} in the prompt rule; its keys are {', '.join(sorted(_KEYS))}",
                         path=str(path))
    for key in ("name", "version", "user", "reply"):
        if key not in data:
            raise InputError(f"missing key {key!r} in the prompt rule", path=str(path))
    if data["reply"] not in REPLY_MODES:
        raise InputError(f"reply = {data['reply']!r}: use one of {', '.join(REPLY_MODES)}", path=str(path))
    if not isinstance(data["version"], int) or isinstance(data["version"], bool) or data["version"] < 1:
        raise InputError(f"version = {data['version']!r}: a whole number >= 1", path=str(path))
    shows = bool(data.get("shows_suffix", False))
    allowed = {"language", "prompt", "suffix"} if shows else {"language", "prompt"}
    for key in ("system", "user"):
        fields = set(_FIELDS.findall(str(data.get(key) or "")))
        bad = sorted(fields - allowed)
        if bad:
            why = " (only a rule with shows_suffix = true may show the suffix)" if "suffix" in bad else ""
            raise InputError(f"{key}: unknown template field {{{bad[0]}}}; use {{language}}, {{prompt}}"
                             f"{', {suffix}' if shows else ''}{why}", path=str(path))
    return PromptRule(name=str(data["name"]), version=int(data["version"]),
                      description=str(data.get("description", "")), user=str(data["user"]),
                      reply=data["reply"], system=data.get("system"), shows_suffix=shows,
                      sha256=hashlib.sha256(raw).hexdigest())
