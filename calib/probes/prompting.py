"""Prompts of a probes study, per condition, and the program taken back from a completion.

Two prompt styles (``[probes] style``):

- ``mbpp`` (instruction-following and chat models): the MBPP prompt of Austin et al. (2021, §2.1),
  "You are an expert Python programmer, and here is your task: {statement} Your code should pass these
  tests:\\n\\n{tests}\\n", with the encoding contract after the statement. The program is the first
  fenced code block that defines the entry point (else the whole text up to ``[DONE]``, else the text
  from the first ``def``).
- ``completion`` (base and code models, the model organism): the statement, contract and tests as a
  comment block, then the imports, then the reference's signature; the model completes the function
  and :func:`calib.data.parseback.parse_back` cuts it out.

Conditions (paper §5.2, §7): ``original``; ``syn20``/``syn40`` fuzz the statement (never the tests or
code) with WordNet synonyms; ``dead_code`` inserts an irrelevant code block as long (in code tokens) as
the Iso contract adds; ``iso``/``iso_enc``/``iso_dec`` append the contract and show the tests rewritten
through the bijection.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from calib.metrics.textual import code_tokens
from calib.probes.deadcode import dead_code, insert_dead_code
from calib.probes.isomorphism import contract_text, rewrite_tests
from calib.probes.perturb import synonym_fuzz
from calib.probes.tasks import Task
from calib.probes.transforms import Bijection

__all__ = ["MBPP_INSTRUCTION", "TESTS_MARKER", "BuiltPrompt", "build_prompt", "compact_contract", "count_tokens",
           "extract_program", "prompt_signature", "signature_of"]

MBPP_INSTRUCTION = "You are an expert Python programmer, and here is your task: "
TESTS_MARKER = "Your code should pass these tests:"
SYN_PROBABILITY = {"syn20": 0.2, "syn40": 0.4}
_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def count_tokens(text: str) -> int:
    """Code tokens (words and single punctuation characters; :func:`calib.metrics.textual.code_tokens`)."""
    return len(code_tokens(text))


@dataclass(frozen=True)
class BuiltPrompt:
    """One task under one condition: the prompt, the tests checked, and what the condition did."""

    prompt: str
    tests: tuple[str, ...]
    applicable: bool = True
    reason: str | None = None
    replaced: int | None = None
    eligible: int | None = None
    values_mapped: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def signature_of(code: str, entry_point: str) -> str:
    """The ``def`` line(s) of ``entry_point`` in ``code`` (through the colon, no trailing newline)."""
    tree = ast.parse(code)
    lines = code.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
            first = node.body[0]
            if first.lineno == node.lineno:  # ``def f(x): return x``
                head = lines[node.lineno - 1][: first.col_offset].rstrip()
                return head
            return "\n".join(lines[node.lineno - 1: first.lineno - 1]).rstrip()
    raise ValueError(f"code defines no top-level function {entry_point!r}")


def _imports(setup: str, code: str) -> str:
    """The import statements of the task's setup and of the reference's module level."""
    found = []
    for text in (setup, code):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        found += [ast.get_source_segment(text, n) or "" for n in tree.body
                  if isinstance(n, ast.Import | ast.ImportFrom)]
    return "\n".join(dict.fromkeys(s for s in found if s))


_ENCODES = {"iso": (True, True), "iso_enc": (True, False), "iso_dec": (False, True)}


def compact_contract(condition: str, bijection: Bijection) -> str:
    """The encoding contract in four lines, for the completion style (base models follow no long
    instructions, and a small model's context would not hold :func:`contract_text`)."""
    inputs, outputs = _ENCODES[condition]
    lines = [f"Encoded integers: {bijection.formula()}; {bijection.inverse_formula()}."]
    lines.append("The arguments are encoded: every int v in them is given as T(v); decode with T⁻¹." if inputs
                 else "The arguments are plain (not encoded).")
    lines.append("The return value is encoded: return T(w) for every int w in the answer." if outputs
                 else "The return value is plain (not encoded).")
    lines.append("bool, float, str and None are never encoded; the tests below are written encoded.")
    return "\n".join(lines)


def _docstring(parts: list[str], indent: str) -> str:
    """``parts`` as the function's docstring (lines wrapped at 96 characters, blank lines between parts)."""
    lines: list[str] = []
    for part in parts:
        if lines:
            lines.append("")
        for line in part.splitlines():
            lines += textwrap.wrap(line, 96) or [""]
    body = "\n".join(indent + line if line else "" for line in lines).replace('"""', '\\"\\"\\"')
    prefix = "r" if "\\" in body else ""
    return f'{indent}{prefix}"""{body.lstrip()}\n{indent}"""'


def _render(style: str, task: Task, statement: str, tests: tuple[str, ...], contract: str, block: str) -> str:
    if style == "mbpp":
        text = MBPP_INSTRUCTION + statement
        if contract:
            text += "\n\n" + contract + "\n\n"
        else:
            text += " "
        text += (TESTS_MARKER + "\n\n" + "\n".join(tests) + "\n") if tests else "\n"
        return insert_dead_code(text, block, marker=TESTS_MARKER) if block else text
    # completion: imports, the dead-code block, then the signature and a docstring holding the task
    # (the layout of HumanEval, Chen et al. 2021); the model writes the body
    head = ""
    imports = _imports(task.setup, task.code)
    if imports:
        head += imports + "\n\n\n"
    if block:
        head += block.rstrip("\n") + "\n\n\n"
    signature = signature_of(task.code, task.entry_point)
    indent = re.match(r"\s*", signature.splitlines()[-1]).group(0) + "    "  # type: ignore[union-attr]
    parts = [statement, *([contract] if contract else []), *(["\n".join([TESTS_MARKER, *tests])] if tests else [])]
    return head + signature + "\n" + _docstring(parts, indent) + "\n"


def build_prompt(task: Task, condition: str, *, style: str, bijection: Bijection | None, contract_bijection: Bijection,
                 seed: int, shown_tests: int = 3) -> BuiltPrompt:
    """The prompt of ``task`` under ``condition`` (see the module docstring).

    ``bijection`` is the family of an isomorphism condition; ``contract_bijection`` is the one whose
    contract length the dead-code block matches (the study's first family). The prompt shows the first
    ``shown_tests`` tests (MBPP shows its three); every test is checked.
    """
    shown = slice(0, shown_tests)
    if condition in ("original", "syn20", "syn40", "dead_code"):
        statement, replaced, eligible, block = task.prompt, None, None, ""
        if condition in SYN_PROBABILITY:
            fuzzed = synonym_fuzz(task.prompt, SYN_PROBABILITY[condition], seed=seed,
                                  protect=(task.entry_point, *_parameters(task)))
            statement, replaced, eligible = fuzzed.text, fuzzed.replaced, fuzzed.eligible
        elif condition == "dead_code":
            contract = _contract(style, "iso", contract_bijection, task.entry_point)
            plain = _render(style, task, task.prompt, task.tests[shown], "", "")
            target = count_tokens(_render(style, task, task.prompt, task.tests[shown], contract, "")) - \
                count_tokens(plain)
            block = dead_code(target, count_tokens, seed=seed, avoid=(task.entry_point, *_parameters(task)))
        text = _render(style, task, statement, task.tests[shown], "", block)
        return BuiltPrompt(text, task.tests, replaced=replaced, eligible=eligible)
    if bijection is None:
        raise ValueError(f"condition {condition!r} needs a bijection")
    rewritten = rewrite_tests(task.tests, task.entry_point, condition, bijection)
    if not rewritten.applicable:
        return BuiltPrompt("", (), applicable=False, reason=rewritten.reason)
    contract = _contract(style, condition, bijection, task.entry_point)
    text = _render(style, task, task.prompt, rewritten.tests[shown], contract, "")
    return BuiltPrompt(text, rewritten.tests, values_mapped=rewritten.values_mapped)


def _contract(style: str, condition: str, bijection: Bijection, entry_point: str) -> str:
    if style == "completion":
        return compact_contract(condition, bijection)
    return contract_text(condition, bijection, entry_point)


def _parameters(task: Task) -> tuple[str, ...]:
    try:
        tree = ast.parse(task.code)
    except SyntaxError:
        return ()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == task.entry_point:
            args = node.args
            return tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
    return ()


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def prompt_signature(prompt: str, entry_point: str) -> str:
    """What a completion-style prompt's completion continues: the prompt from the entry point's ``def``
    (its signature and docstring) on."""
    match = re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}\b", prompt, re.MULTILINE)
    return prompt[match.start():].rstrip("\n") if match else prompt


def extract_program(text: str, *, style: str, signature: str, entry_point: str) -> tuple[str | None, str | None]:
    """The program in a completion, and why there is none (``(None, reason)``).

    ``signature`` is what a completion-style completion continues (:func:`prompt_signature`)."""
    if not text or not text.strip():
        return None, "empty completion"
    if style == "completion":
        from calib.data.parseback import parse_back

        parsed = parse_back("python", signature, text)
        if parsed.function is None:
            return None, f"no function: {parsed.outcome}"
        return parsed.function, None
    defines = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    blocks = [b for b in _FENCE.findall(text) if defines.search(b)]
    for block in blocks:
        if _parses(block):
            return block.strip("\n") + "\n", None
    head = text.split("[DONE]")[0]
    if defines.search(head) and _parses(head):
        return head.strip("\n") + "\n", None
    match = defines.search(text)
    if match is None:
        return None, f"no definition of {entry_point}"
    lines = text[match.start():].splitlines()
    for stop in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:stop])
        if _parses(candidate):
            return candidate + "\n", None
    return None, "unparsable code"
