"""Encoder-side perturbations of a task prompt: synonym fuzzing and dead-code insertion.

Both leave the task and its I/O unchanged and alter only the prompt's surface (paper §5.2, §7.2):

- :func:`synonym_fuzz` replaces each eligible word of the natural-language portion of the prompt by a
  WordNet synonym with probability p (the Syn-20 and Syn-40 conditions use p = 0.2 and 0.4);
- :func:`dead_code` builds a block of semantically irrelevant Python of a given token count, and
  :func:`insert_dead_code` / :func:`dead_code_prompt` put it into the prompt, matching the token-count
  increase of the Iso contract so that prompt length alone can be ruled out as the cause of a drop.

What counts as natural language, and which of its words are eligible, is documented in
``docs/probes-perturbations.md`` and in :func:`synonym_fuzz`.
"""

from __future__ import annotations

import keyword
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from calib._exceptions import InvalidParameterError
from calib.probes.wordnet import synonyms

__all__ = [
    "DEAD_CODE_INTRO",
    "NUMBER_WORDS",
    "STOPWORDS",
    "Perturbed",
    "dead_code",
    "dead_code_prompt",
    "insert_dead_code",
    "synonym_fuzz",
]

#: Connectors and function words never replaced: articles, determiners and quantifiers, prepositions,
#: conjunctions, pronouns, auxiliary and modal verbs, negation and a few grammatical adverbs.
STOPWORDS = frozenset("""
a an the
this that these those each every all any some no none both either neither other another such same own
few many much more most less least several enough only just very too also even again ever still
about above across after against along among amongst around as at before behind below beneath beside
besides between beyond by despite down during except for from in inside into like near of off on onto
out outside over past per since through throughout till to toward towards under underneath until unto up
upon via with within without
and but or nor so yet because although though while whereas if unless whether than then once when
whenever where wherever however hence thus therefore otherwise else instead
i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it its
itself we us our ours ourselves they them their theirs themselves one ones who whom whose which what
whatever whichever whoever whomever
am is are was were be been being have has had having do does did doing done will would shall should can
cannot could may might must ought
not here there how why now
""".split())

#: Number words, treated like digits (never replaced): a task's quantities are part of its I/O.
NUMBER_WORDS = frozenset("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
billion trillion first second third fourth fifth sixth seventh eighth ninth tenth hundredth thousandth
half halves quarter twice thrice double triple single pair dozen
""".split())

#: The sentence :func:`insert_dead_code` puts before the block.
DEAD_CODE_INTRO = "For context, the surrounding module also contains the following code:"

_KEYWORDS = frozenset(word.lower() for word in keyword.kwlist)
# A whole line is code when it sits in a fenced block, starts a statement no English sentence starts
# with (assert, def name(, class Name, import, from x import, @decorator, a doctest prompt), assigns to a
# name at its start, or holds an operator prose does not use.
_STATEMENT = re.compile(
    r"^(assert\b|def\s+\w+\s*\(|class\s+\w+\s*[:(]|import\s+\w|from\s+[\w.]+\s+import\b|@[A-Za-z_]|>>>|"
    r"[A-Za-z_][\w.]*(\[[^\]]*\])?\s*=[^=])"
)
_OPERATOR = re.compile(r"==|!=|<=|>=|->|\+=|-=|\*=|/=|:=")
# Spans inside a prose line that are code: backtick spans, quoted literals, URLs, and a name followed by
# "(" (a call, through its balanced closing parenthesis, found by _call_end).
_SPAN = re.compile(r"(`+).+?\1|\"[^\"\n]*\"|(?<!\w)'[^'\n]*'(?!\w)|\b[A-Za-z][\w+.-]*://\S+|[A-Za-z_][\w.]*\(")
_CHUNK = re.compile(r"\w+(?:['’.]\w+)*")
_WORD = re.compile(r"[A-Za-z]+")
_ASSIGNED = re.compile(r" *=(?!=)")
_HYPHEN = re.compile(r"\w-")
_HYPHEN_AFTER = re.compile(r"-\w")
_USABLE = re.compile(r"[A-Za-z]+(?:[ '-][A-Za-z]+)*")


@dataclass(frozen=True)
class Perturbed:
    """A synonym-fuzzed prompt and what changed.

    Attributes
    ----------
    text
        The prompt with the replacements made.
    replaced
        Words replaced.
    eligible
        Words eligible for replacement (natural-language, content words), with or without a synonym.
    with_synonyms
        Eligible words for which WordNet offers a usable synonym; E[replaced] = p · with_synonyms.
    replacements
        ``(original, replacement)`` pairs in prompt order.
    """

    text: str
    replaced: int
    eligible: int
    with_synonyms: int
    replacements: tuple[tuple[str, str], ...]


def synonym_fuzz(text: str, probability: float, *, seed: int, protect: Iterable[str] = ()) -> Perturbed:
    """Replace each eligible word of the prompt's natural language by a WordNet synonym with probability p.

    The protocol of the paper's Syn-20 / Syn-40 conditions (§5.2, after Djiré et al. 2025): "replace
    each non-connector, non-code-token word in the natural-language portion of the prompt with a
    WordNet synonym at the specified probability".

    Code is never touched: lines inside fenced blocks (```` ``` ```` or ``~~~``) and the fences; lines
    that start like a statement (``assert``, ``def name(``, ``class Name``, ``import``, ``from x
    import``, ``@decorator``, ``>>>`` and the doctest output after it up to a blank line) or with an
    assignment (``name = ...``); lines holding ``==``, ``!=``, ``<=``, ``>=``, ``->`` or an augmented
    assignment; and, inside prose lines, backtick spans, quoted literals, URLs and calls
    (``name(...)`` through the matching parenthesis). A word (a run of letters between non-word
    characters) of the remaining prose is **eligible** unless it is an identifier (digits, underscores,
    an inner dot, mixed case such as camelCase, a leading ``.``, or directly followed by ``(``, ``[`` or
    ``=``), part of a hyphenated compound ("non-negative") or of a contraction or possessive ("Euclid's"),
    a single letter, a number word (:data:`NUMBER_WORDS`), a Python keyword, a stopword
    (:data:`STOPWORDS`), or in ``protect`` (case-insensitively).

    One ``random.Random(seed).random()`` draw is made per eligible word, in prompt order; a word whose
    draw is below p is replaced by a synonym chosen with the same generator among its WordNet synonyms
    (:func:`calib.probes.wordnet.synonyms`, all parts of speech: no tagger is used), preferring
    single-word ones, keeping only letters, spaces, hyphens and apostrophes, and, for a lower-case word,
    only lower-case synonyms (no proper nouns). The replacement takes the word's capitalisation
    (Title → Title, UPPER → UPPER). A word with no usable synonym stays as it is but still counts as
    eligible, so ``replaced / eligible`` estimates p times the share of eligible words WordNet knows,
    and ``replaced / with_synonyms`` estimates p.

    Parameters
    ----------
    text
        The prompt.
    probability
        The replacement probability p in [0, 1] (0.2 for Syn-20, 0.4 for Syn-40).
    seed
        Seed of the generator; the result is a function of text, p, seed, protect and the WordNet data.
    protect
        Names never replaced (the entry point and its parameters); a single string counts as one name.

    Returns
    -------
    Perturbed

    Raises
    ------
    InvalidParameterError
        For a probability outside [0, 1], a non-integer seed or a text that is not a string.
    calib.probes.wordnet.WordNetUnavailable
        When the WordNet data are not installed.

    References
    ----------
    A. E. Djiré, A. K. Kaboré, E. T. Barr, J. Klein, T. F. Bissyandé (2025). Memorization or
    interpolation? Detecting LLM memorization through input perturbation analysis. arXiv:2505.03019.
    "Memorization Diagnostics for Code LLMs Should be Scale-Aware" (arXiv:2608.12771), §5.2.
    """
    if isinstance(probability, bool) or not isinstance(probability, int | float) or not 0 <= probability <= 1:
        raise InvalidParameterError(f"probability={probability!r} must be a number in [0, 1] (0.2 for Syn-20, "
                                    "0.4 for Syn-40)")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidParameterError(f"seed={seed!r} must be an integer")
    if not isinstance(text, str):
        raise InvalidParameterError(f"text must be the prompt as a string, got {type(text).__name__}")
    protected = {str(name).lower() for name in ([protect] if isinstance(protect, str) else protect)}
    rng = random.Random(seed)
    out: list[str] = []
    eligible = with_synonyms = 0
    replacements: list[tuple[str, str]] = []
    for line, spans in _split_lines(text):
        if spans is None:  # a code line
            out.append(line)
            continue
        cursor = 0
        for start, end in _eligible_words(line, spans, protected):
            word = line[start:end]
            eligible += 1
            options = _usable(word)
            with_synonyms += bool(options)
            if rng.random() < probability and options:
                single = [s for s in options if " " not in s]
                new = _cased(rng.choice(single or options), word)
                out += [line[cursor:start], new]
                cursor = end
                replacements.append((word, new))
        out.append(line[cursor:])
    return Perturbed(text="".join(out), replaced=len(replacements), eligible=eligible,
                     with_synonyms=with_synonyms, replacements=tuple(replacements))


def _split_lines(text: str) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """Each line (with its newline) and the code spans inside it, or None for a line that is all code."""
    lines: list[tuple[str, list[tuple[int, int]] | None]] = []
    fenced = doctest = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            lines.append((line, None))
            continue
        if not stripped or '"""' in stripped or "'''" in stripped:
            doctest = False
        if stripped.startswith(">>>"):
            doctest = True
        if fenced or (doctest and stripped) or _STATEMENT.match(stripped) or _OPERATOR.search(stripped):
            lines.append((line, None))
        else:
            lines.append((line, _code_spans(line)))
    return lines


def _code_spans(line: str) -> list[tuple[int, int]]:
    spans, position = [], 0
    while (match := _SPAN.search(line, position)) is not None:
        end = _call_end(line, match.end()) if match.group().endswith("(") and not match.group(1) else match.end()
        spans.append((match.start(), end))
        position = max(end, match.start() + 1)
    return spans


def _call_end(line: str, after_paren: int) -> int:
    depth = 1
    for index in range(after_paren, len(line)):
        depth += {"(": 1, ")": -1}.get(line[index], 0)
        if depth == 0:
            return index + 1
    return len(line)


def _eligible_words(line: str, spans: list[tuple[int, int]], protected: set[str]) -> list[tuple[int, int]]:
    found = []
    for match in _CHUNK.finditer(line):
        start, end = match.span()
        word = match.group()
        if any(a < end and start < b for a, b in spans) or not _WORD.fullmatch(word) or len(word) < 2:
            continue
        if not (word.islower() or word.isupper() or word[1:].islower()):
            continue  # camelCase, PascalCase and the like are identifiers
        before, after = line[max(0, start - 2):start], line[end:end + 2]
        if before[-1:] in (".", "'", "’") or after[:1] in ("(", "[", "'", "’") or _ASSIGNED.match(line, end):
            continue  # an attribute, a call, a subscript, a keyword argument or an assignment target
        if _HYPHEN.fullmatch(before) or _HYPHEN_AFTER.fullmatch(after):
            continue  # part of a hyphenated compound ("non-negative", "n-th")
        folded = word.lower()
        if folded in STOPWORDS or folded in NUMBER_WORDS or folded in _KEYWORDS or folded in protected:
            continue
        found.append((start, end))
    return found


def _usable(word: str) -> list[str]:
    options = [s for s in synonyms(word) if _USABLE.fullmatch(s)]
    if word.islower():
        options = [s for s in options if s.islower()]
    return options


def _cased(synonym: str, word: str) -> str:
    if len(word) > 1 and word.isupper():
        return synonym.upper()
    if word[0].isupper():
        return synonym[0].upper() + synonym[1:]
    return synonym


# ---------------------------------------------------------------------------------------------------------
# Dead code
# ---------------------------------------------------------------------------------------------------------

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

