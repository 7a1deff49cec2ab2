"""Dead-code insertion: a block of semantically irrelevant Python as long as a given number of tokens.

The dead-code condition of a probes study (paper §7.2, Table 6) inserts such a block into the prompt,
matched to the token-count increase of the Iso contract, leaving the task and its I/O unchanged: it
bounds how much of an Iso drop prompt length alone explains. :func:`dead_code` builds the block,
:func:`insert_dead_code` / :func:`dead_code_prompt` put it into a prompt (docs/probes-perturbations.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from calib._exceptions import InvalidParameterError

__all__ = ["DEAD_CODE_INTRO", "dead_code", "dead_code_prompt", "insert_dead_code"]

DEAD_CODE_INTRO = "For context, the surrounding module also contains the following code:"


# Each template is a module-level statement defining one name (``{name}``) that nothing calls; bodies use
# only their own parameters and locals, never a builtin name as a variable.
_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("_UNUSED_LIMIT_{i}", "{name} = {a}"),
    ("_UNUSED_TABLE_{i}", '{name} = {{"alpha": {a}, "beta": {b}, "gamma": {c}}}'),
    ("_unused_helper_{i}", "def {name}(values):\n    total = 0\n    for value in values:\n"
                           "        total += value * {a}\n    return total"),
    ("_unused_helper_{i}", "def {name}(text):\n    parts = text.split()\n    return \" \".join(reversed(parts))"),
    ("_unused_helper_{i}", "def {name}(items, step):\n    counts = {{}}\n    for item in items:\n"
                           "        counts[item] = counts.get(item, 0) + step\n    return counts"),
    ("_unused_helper_{i}", "def {name}(number):\n    if number < {a}:\n        return number\n"
                           "    return number - {b}"),
    ("_UnusedRecord{i}", "class {name}:\n    def __init__(self, first, second):\n        self.first = first\n"
                         "        self.second = second\n\n    def swapped(self):\n"
                         "        return (self.second, self.first)"),
)
_SEPARATOR = "\n\n\n"
_LAST_ELEMENTS = tuple(f"{sign}{'9' * digits}{fraction}" for sign in ("", "-") for digits in range(1, 5)
                       for fraction in ("", ".5"))


def dead_code(n_tokens: int, count_tokens: Callable[[str], int], *, seed: int, avoid: Iterable[str] = ()) -> str:
    """A block of valid, semantically irrelevant Python whose token count is as close as possible to n_tokens.

    The block is built as the paper's dead-code ablation needs it (§7.2): statements that define unused
    constants, helper functions and a small class (``_UNUSED_LIMIT_3``, ``_unused_helper_4``,
    ``_UnusedRecord5``: underscore-prefixed, so they shadow no builtin and no task name), none of which is
    ever called, so running the block before a task's code changes nothing the task can observe.

    Statements chosen with ``random.Random(seed)`` are added while ``count_tokens`` of the whole block
    stays <= n_tokens; the remaining gap is filled by one tuple constant ``_UNUSED_VALUES_i = (0, 1, ...)``
    whose length, and the sign, digits and fraction of its last element, are searched for the count closest to
    n_tokens (up to three of the last statements are dropped when that gets closer). Counting is always
    of the whole block, so tokenizers that merge across statement boundaries are handled.

    Tolerance: the match is exact once n_tokens is at least the filler's smallest size (3 whitespace
    tokens, 23 characters, about 6–12 subword tokens) for a whitespace tokenizer and a character count
    (tested), and in tests with a byte-level BPE nearly always; the error is at most the cost of one
    tuple element (", 7": one to three tokens) in any case. Below the filler's smallest size the result
    is whichever of "" and the smallest filler is closer.

    Parameters
    ----------
    n_tokens
        The target token count; "" for n_tokens <= 0.
    count_tokens
        The tokenizer's count of a text (e.g. the served model's ``len(tokenize(text))``); assumed not
        to decrease when text is appended.
    seed
        Seed of the statement choice and the constants.
    avoid
        Names the block must not define (the task's names); an avoided name skips to the next index.

    Returns
    -------
    str
        Source text that compiles with ``compile(block, "<dead code>", "exec")``, without a trailing
        newline.

    Raises
    ------
    InvalidParameterError
        For a non-integer n_tokens or seed.
    """
    for name, value in (("n_tokens", n_tokens), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParameterError(f"{name}={value!r} must be an integer")
    if n_tokens <= 0:
        return ""
    avoided = set(avoid)
    rng = random.Random(seed)
    index = 0

    def fresh(pattern: str) -> str:
        nonlocal index
        while pattern.format(i=index) in avoided:
            index += 1
        index += 1
        return pattern.format(i=index - 1)

    pieces: list[str] = []
    filler_name = fresh("_UNUSED_VALUES_{i}")
    size = 0
    while True:
        pattern, template = _TEMPLATES[rng.randrange(len(_TEMPLATES))]
        piece = template.format(name=fresh(pattern), a=rng.randint(2, 9), b=rng.randint(10, 99),
                                c=rng.randint(100, 999))
        grown = count_tokens(_SEPARATOR.join([*pieces, piece]))
        if grown > n_tokens:
            break
        if grown <= size:
            raise InvalidParameterError(f"count_tokens gave {grown} tokens for a block longer than one of {size} "
                                        "tokens; pass a function that counts the tokens of the text it is given")
        pieces.append(piece)
        size = grown
    best = _fill(pieces, filler_name, n_tokens, count_tokens)
    for drop in range(1, min(3, len(pieces)) + 1):  # a gap below the filler's size: make room for it
        if count_tokens(best) == n_tokens:
            break
        shorter = _fill(pieces[:-drop], filler_name, n_tokens, count_tokens)
        if abs(count_tokens(shorter) - n_tokens) < abs(count_tokens(best) - n_tokens):
            best = shorter
    return best


def _filler(name: str, length: int, last: str) -> str:
    values = [str(j % 10) for j in range(length - 1)] + [last]
    return f"{name} = ({', '.join(values)}{',' if length == 1 else ''})"


def _fill(pieces: list[str], name: str, n_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The pieces plus the filler (or none) whose whole count is closest to n_tokens."""

    def block(length: int, last: str = "9") -> str:
        return _SEPARATOR.join([*pieces, _filler(name, length, last)])

    candidates = [_SEPARATOR.join(pieces)]
    if count_tokens(block(1)) <= n_tokens:
        low, high = 1, 2  # largest length whose count stays <= n_tokens, by doubling then bisection
        while count_tokens(block(high)) <= n_tokens:
            if high > 8 * n_tokens + 8:  # every element adds at least a character
                raise InvalidParameterError("count_tokens does not grow with the text; pass a function that "
                                            "counts the tokens of the text it is given")
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if count_tokens(block(middle)) <= n_tokens else (low, middle)
        # The last element's sign, width and fraction fine-tune the count below one element's cost.
        candidates += [block(low, last) for last in _LAST_ELEMENTS] + [block(low + 1)]
    else:
        candidates.append(block(1))
    return min(candidates, key=lambda text: (abs(count_tokens(text) - n_tokens), len(text)))


def insert_dead_code(prompt: str, block: str, *, marker: str | None = None) -> str:
    """Put a dead-code block into the prompt as a fenced Python block introduced by :data:`DEAD_CODE_INTRO`.

    Parameters
    ----------
    prompt
        The task prompt.
    block
        Python source from :func:`dead_code`; an empty or blank block returns the prompt unchanged.
    marker
        Text that opens the prompt's tests section (e.g. "Your code should pass these tests:"); the block
        goes at the start of the line holding its first occurrence, followed by a blank line. When
        ``marker`` is None or not in the prompt the block is appended at the end. Nothing of the prompt
        is removed: the block is preceded by newlines until a blank line separates it from the text before.

    Returns
    -------
    str
    """
    if not block.strip():
        return prompt
    section = f"{DEAD_CODE_INTRO}\n```python\n{block.strip(chr(10))}\n```\n"
    at = prompt.find(marker) if marker else -1
    if at >= 0:
        at = prompt.rfind("\n", 0, at) + 1
        return _blank_line_before(prompt[:at]) + section + "\n" + prompt[at:]
    return _blank_line_before(prompt) + section


def _blank_line_before(head: str) -> str:
    if not head or head.endswith("\n\n"):
        return head
    return head + ("\n" if head.endswith("\n") else "\n\n")


def dead_code_prompt(prompt: str, n_tokens: int, count_tokens: Callable[[str], int], *, seed: int,
                     marker: str | None = None, avoid: Iterable[str] = ()) -> str:
    """The prompt with a dead-code block whose insertion adds as close as possible to n_tokens tokens.

    The paper's length control (§7.2): n_tokens is the token-count increase of the Iso contract for the
    same task, and the whole inserted text (the introducing sentence, the fences and the block) is
    matched to it by counting the whole prompt, so the block itself is a little shorter than n_tokens.

    Parameters
    ----------
    prompt, marker
        As for :func:`insert_dead_code`.
    n_tokens, count_tokens, seed, avoid
        As for :func:`dead_code`; when n_tokens is below the cost of the smallest insertion the prompt
        comes back unchanged.

    Returns
    -------
    str
    """
    base = count_tokens(prompt)
    block = dead_code(n_tokens, lambda code: count_tokens(insert_dead_code(prompt, code, marker=marker)) - base,
                      seed=seed, avoid=avoid)
    return insert_dead_code(prompt, block, marker=marker)

