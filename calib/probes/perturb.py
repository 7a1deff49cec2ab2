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
from collections.abc import Iterable
from dataclasses import dataclass

from calib._exceptions import InvalidParameterError
from calib.probes.deadcode import DEAD_CODE_INTRO, dead_code, dead_code_prompt, insert_dead_code
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
