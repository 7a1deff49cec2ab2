"""Textual metrics: exact, bleu, edit, lcs against closed forms and independent references."""

from __future__ import annotations

import difflib
import math

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from calib._exceptions import InvalidParameterError
from calib.metrics import LANGUAGES, MetricUnavailable, Pair, create_metric, score_pairs
from calib.metrics._lcs import longest_common_substring
from calib.metrics.textual import code_tokens, normalize_text

PY = "def total(items, rate):\n    s = 0\n    for it in items:\n        s += it * rate\n    return round(s, 2)\n"
PY_RENAMED = ("def total(values, factor):\n    acc = 0\n    for v in values:\n        acc += v * factor\n"
              "    return round(acc, 2)\n")
UNRELATED = "class Node:\n    def __init__(self, left=None):\n        self.left = left\n        self.seen = {}\n"

SAMPLES = {
    "python": PY,
    "c": "int add(int a, int b) {\n    return a + b;\n}\n",
    "cpp": "template <typename T> T twice(T x) {\n    return x * 2;\n}\n",
    "java": "public int size() {\n    return this.items.length;\n}\n",
    "rust": "fn square(x: i64) -> i64 {\n    x * x\n}\n",
    "go": "func Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n",
}


def _m(name):
    return create_metric(name)


def test_code_tokens_split_words_and_single_symbols():
    assert code_tokens("x+=1") == ["x", "+", "=", "1"]
    assert code_tokens("if (a->b != c_d2) { s = 'hé llo'; }") == [
        "if", "(", "a", "-", ">", "b", "!", "=", "c_d2", ")", "{", "s", "=", "'", "hé", "llo", "'", ";", "}"]
    assert code_tokens("  \n\t ") == []


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", ["exact", "bleu", "edit", "lcs"])
def test_identical_code_scores_one_in_every_language(name, language):
    assert _m(name).score(SAMPLES[language], SAMPLES[language], language) == 1.0


def test_bleu_closed_form_with_exp_smoothing():
    # Papineni et al. (2002) BLEU with sacrebleu's sentence defaults: tokens x = 1 vs x = 2 give
    # p1 = 2/3, p2 = 1/2; the candidate has 3 tokens so effective order is 3, and the zero 3-gram count
    # is smoothed "exp" (Chen & Cherry 2014, NIST geometric sequence) to 1/2 / 1; BP = 1.
    assert _m("bleu").score("x=1", "x=2", "python") == pytest.approx((2 / 3 * 1 / 2 * 1 / 2) ** (1 / 3), rel=1e-12)


def test_bleu_brevity_penalty_closed_form():
    # Every n-gram of a 4-token prefix matches; BP = exp(1 - r/c) = exp(1 - 8/4).
    assert _m("bleu").score("a b c d e f g h", "a b c d", "go") == pytest.approx(math.exp(-1.0), rel=1e-12)


@pytest.mark.parametrize("candidate", [PY_RENAMED, UNRELATED, PY.replace("round", "int"), "", "x"])
def test_bleu_equals_sacrebleu_on_the_same_tokens(candidate):
    # The reference implementation called directly on space-joined code tokens (sacrebleu's default
    # sentence_bleu: exp smoothing, effective order), scaled to [0, 1].
    expected = sacrebleu.sentence_bleu(" ".join(code_tokens(candidate)), [" ".join(code_tokens(PY))],
                                       tokenize="none").score / 100
    assert _m("bleu").score(PY, candidate, "python") == pytest.approx(expected, abs=1e-12)


def test_renamed_variables_lower_bleu_than_identical_but_above_unrelated():
    bleu = _m("bleu")
    renamed, unrelated = bleu.score(PY, PY_RENAMED, "python"), bleu.score(PY, UNRELATED, "python")
    assert unrelated < renamed < 0.6
    assert unrelated < 0.1


def test_edit_similarity_closed_form_and_floor():
    # Levenshtein(kitten, sitting) = 3 (two substitutions, one insertion): 1 - 3/6.
    assert _m("edit").score("kitten", "sitting", "c") == pytest.approx(0.5)
    # A candidate far longer than the reference would go negative: floored at 0.
    assert _m("edit").score("ab", "xxxxxxxxxx", "c") == 0.0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab c\n", max_size=40), st.text(alphabet="abd c\n", max_size=40))
def test_longest_common_substring_equals_difflib(a, b):
    # difflib's find_longest_match without the junk heuristic is the textbook longest common substring.
    expected = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size
    assert longest_common_substring(a, b) == expected


def test_lcs_is_share_of_reference():
    assert _m("lcs").score("abcdefgh", "xxcdefyy", "rust") == pytest.approx(4 / 8)
    assert _m("lcs").score("héllo wörld", "wörld", "rust") == pytest.approx(5 / 11)


def test_exact_ignores_trailing_whitespace_and_line_endings_only():
    exact = _m("exact")
    assert exact.score(PY, "\n" + PY.replace("\n", "  \r\n") + "\n\n", "python") == 1.0
    assert exact.score(PY, PY.replace("    ", "  "), "python") == 0.0
    assert normalize_text("a \r\nb\t\n\n") == "a\nb"


def test_empty_reference_is_null_with_reason_not_zero():
    pairs = [Pair("", "def f(): pass", "python")]
    for name in ("bleu", "edit", "lcs"):
        (score,) = score_pairs(_m(name), pairs)
        assert score.value is None and "empty" in score.reason
    (score,) = score_pairs(_m("exact"), pairs)
    assert score.value == 0.0


def test_unknown_language_is_refused_with_the_known_ones():
    with pytest.raises(InvalidParameterError, match="cobol.*python, c, cpp, java, rust, go"):
        _m("bleu").score("a", "a", "cobol")
    assert _m("bleu").score("a", "a", "C++") == 1.0


def test_metric_unavailable_carries_reason_and_raw():
    exc = MetricUnavailable("judge reply unparsable: no number", raw="I think so")
    assert exc.reason == "judge reply unparsable: no number" and exc.raw == "I think so"
