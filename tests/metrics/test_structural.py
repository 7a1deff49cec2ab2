"""CodeBLEU (against ``calc_codebleu`` itself), TSED and its Zhang-Shasha kernel (against APTED)."""

from __future__ import annotations

import logging

import pytest
from apted import APTED, Config
from codebleu import calc_codebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from calib._exceptions import InvalidParameterError
from calib.data.treesitter import parser
from calib.metrics import _ted
from calib.metrics.base import LANGUAGES, Metric, MetricUnavailable, Pair, create_metric, score_pairs
from calib.metrics.structural import TSED, _cached_parts, codebleu_parts, syntax_tree

NAMES = ("codebleu", "codebleu_syntax", "codebleu_dataflow", "tsed")

# Per language: a reference, a different implementation of it, the reference with every identifier
# renamed, and unrelated code. All parse without errors.
SNIPPETS = {
    "python": {
        "ref": "def total(values, limit):\n    result = 0\n    for value in values:\n        if value > limit:\n"
               "            result += value\n    return result\n",
        "cand": "def total(values, limit):\n    result = 0\n    i = 0\n    while i < len(values):\n"
                "        if values[i] > limit:\n            result = result + values[i]\n        i += 1\n"
                "    return result\n",
        "renamed": "def acc(xs, bound):\n    out = 0\n    for x in xs:\n        if x > bound:\n            out += x\n"
                   "    return out\n",
        "unrelated": "class Point:\n    \"\"\"A point.\"\"\"\n\n    x: float = 0.0\n    y: float = 0.0\n\n"
                     "    def __repr__(self):\n        return f\"Point({self.x!r}, {self.y!r})\"\n",
    },
    "java": {
        "ref": "public static int total(int[] values, int limit) {\n    int result = 0;\n"
               "    for (int value : values) {\n        if (value > limit) {\n            result += value;\n"
               "        }\n    }\n    return result;\n}",
        "cand": "public static int total(int[] values, int limit) {\n    int result = 0;\n"
                "    for (int i = 0; i < values.length; i++) {\n"
                "        if (values[i] > limit) result = result + values[i];\n    }\n    return result;\n}",
        "renamed": "public static int acc(int[] xs, int bound) {\n    int out = 0;\n    for (int x : xs) {\n"
                   "        if (x > bound) {\n            out += x;\n        }\n    }\n    return out;\n}",
        "unrelated": "@Override\npublic String toString() {\n"
                     "    return String.format(\"Point(%s, %s)\", name, List.of(\"a\", \"b\"));\n}",
    },
    "c": {
        "ref": "int total(const int *values, size_t n, int limit) {\n    int result = 0;\n"
               "    for (size_t i = 0; i < n; i++) {\n        if (values[i] > limit) {\n"
               "            result += values[i];\n        }\n    }\n    return result;\n}",
        "cand": "int total(const int *values, size_t n, int limit) {\n    int result = 0;\n    size_t i = 0;\n"
                "    while (i < n) {\n        if (values[i] > limit)\n            result = result + values[i];\n"
                "        i++;\n    }\n    return result;\n}",
        "renamed": "int acc(const int *xs, size_t len, int bound) {\n    int out = 0;\n"
                   "    for (size_t k = 0; k < len; k++) {\n        if (xs[k] > bound) {\n            out += xs[k];\n"
                   "        }\n    }\n    return out;\n}",
        "unrelated": "static void report(FILE *stream) {\n    fprintf(stream, \"%s: %d\\n\", \"errors\", 3);\n"
                     "    fflush(stream);\n}",
    },
    "cpp": {
        "ref": "int total(const std::vector<int>& values, int limit) {\n    int result = 0;\n"
               "    for (int value : values) {\n        if (value > limit) {\n            result += value;\n"
               "        }\n    }\n    return result;\n}",
        "cand": "int total(const std::vector<int>& values, int limit) {\n    int result = 0;\n"
                "    for (std::size_t i = 0; i < values.size(); ++i) {\n"
                "        if (values[i] > limit) result = result + values[i];\n    }\n    return result;\n}",
        "renamed": "int acc(const std::vector<int>& xs, int bound) {\n    int out = 0;\n    for (int x : xs) {\n"
                   "        if (x > bound) {\n            out += x;\n        }\n    }\n    return out;\n}",
        "unrelated": "template <typename T>\nstd::string show(const T& item) {\n    std::ostringstream stream;\n"
                     "    stream << \"<\" << item << \">\";\n    return stream.str();\n}",
    },
    "rust": {
        "ref": "fn total(values: &[i32], limit: i32) -> i32 {\n    let mut result = 0;\n    for &value in values {\n"
               "        if value > limit {\n            result += value;\n        }\n    }\n    result\n}",
        "cand": "fn total(values: &[i32], limit: i32) -> i32 {\n    let mut result = 0;\n    let mut i = 0;\n"
                "    while i < values.len() {\n        if values[i] > limit {\n"
                "            result = result + values[i];\n        }\n        i += 1;\n    }\n    result\n}",
        "renamed": "fn acc(xs: &[i32], bound: i32) -> i32 {\n    let mut out = 0;\n    for &x in xs {\n"
                   "        if x > bound {\n            out += x;\n        }\n    }\n    out\n}",
        "unrelated": "impl fmt::Display for Point {\n"
                     "    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n"
                     "        write!(f, \"({}, {})\", self.x, self.y)\n    }\n}",
    },
    "go": {
        "ref": "func total(values []int, limit int) int {\n\tresult := 0\n\tfor _, value := range values {\n"
               "\t\tif value > limit {\n\t\t\tresult += value\n\t\t}\n\t}\n\treturn result\n}",
        "cand": "func total(values []int, limit int) int {\n\tresult := 0\n\tfor i := 0; i < len(values); i++ {\n"
                "\t\tif values[i] > limit {\n\t\t\tresult = result + values[i]\n\t\t}\n\t}\n\treturn result\n}",
        "renamed": "func acc(xs []int, bound int) int {\n\tout := 0\n\tfor _, x := range xs {\n"
                   "\t\tif x > bound {\n\t\t\tout += x\n\t\t}\n\t}\n\treturn out\n}",
        "unrelated": "type Point struct {\n\tX, Y float64\n}\n\nvar origin = Point{X: 0, Y: 0}\n",
    },
}

COSTS = [(1.0, 1.0, 1.0), (1.0, 0.8, 1.0), (0.5, 2.0, 1.0), (1.0, 1.0, 2.5), (2.0, 0.5, 0.3)]


# --- tree edit distance against APTED -------------------------------------------------------------


class _AptedCosts(Config):
    """APTED over nested ``(label, children)`` tuples with constant costs (rename 0 on equal labels)."""

    valuecls = float

    def __init__(self, delete: float, insert: float, rename: float) -> None:
        self.costs = (delete, insert, rename)

    def delete(self, node):
        return self.costs[0]

    def insert(self, node):
        return self.costs[1]

    def rename(self, node1, node2):
        return 0.0 if node1[0] == node2[0] else self.costs[2]

    def children(self, node):
        return list(node[1])


def _apted(tree1, tree2, costs) -> float:
    return APTED(tree1, tree2, _AptedCosts(*costs)).compute_edit_distance()


def _nested(arrays) -> tuple:
    """Preorder ``(labels, sizes, depths)`` back to nested tuples (small trees only: recursive)."""
    labels, sizes, _ = arrays

    def build(i: int) -> tuple:
        children, j = [], i + 1
        while j < i + sizes[i]:
            children.append(build(j))
            j += sizes[j]
        return int(labels[i]), tuple(children)

    return build(0)


def _both_orientations(arrays1, arrays2, costs) -> list[float]:
    """The kernel on the trees as given and on both mirrored (each must be the distance)."""
    out = []
    for mirrored in (False, True):
        post1, post2 = _ted._postorder(*arrays1, mirrored), _ted._postorder(*arrays2, mirrored)
        out.append(_ted._zhang_shasha(post1[0], post1[1], post2[0], post2[1], *costs))
    return out


def _t(label, *children):
    return label, tuple(children)


def test_zhang_shasha_paper_example():
    # f(d(a c(b)) e) vs f(c(d(a b)) e): delete c, insert c above d (Zhang and Shasha, 1989, Fig. 1).
    f, d, a, c, b, e = range(6)
    tree1 = _t(f, _t(d, _t(a), _t(c, _t(b))), _t(e))
    tree2 = _t(f, _t(c, _t(d, _t(a), _t(b))), _t(e))
    arrays1, arrays2 = _ted.preorder_arrays(tree1), _ted.preorder_arrays(tree2)
    assert _ted.tree_edit_distance(arrays1, arrays2) == 2.0
    assert _both_orientations(arrays1, arrays2, (1.0, 1.0, 1.0)) == [2.0, 2.0]
    assert _apted(tree1, tree2, (1.0, 1.0, 1.0)) == 2.0


_LABELS = st.integers(min_value=0, max_value=3)
_TREES = st.recursive(
    st.tuples(_LABELS, st.just(())),
    lambda children: st.tuples(_LABELS, st.lists(children, min_size=1, max_size=4).map(tuple)),
    max_leaves=14,
)


@settings(max_examples=150, deadline=None)
@given(tree1=_TREES, tree2=_TREES, costs=st.sampled_from(COSTS))
def test_ted_equals_apted_on_random_trees(tree1, tree2, costs):
    arrays1, arrays2 = _ted.preorder_arrays(tree1), _ted.preorder_arrays(tree2)
    expected = _apted(tree1, tree2, costs)
    got = _ted.tree_edit_distance(arrays1, arrays2, delete=costs[0], insert=costs[1], rename=costs[2])
    assert got == pytest.approx(expected, abs=1e-9)
    assert _both_orientations(arrays1, arrays2, costs) == pytest.approx([expected, expected], abs=1e-9)


@pytest.mark.parametrize("language", LANGUAGES)
def test_ted_equals_apted_on_tree_sitter_trees(language):
    snippets = SNIPPETS[language]
    reference = syntax_tree(snippets["ref"], language)
    for other in ("cand", "unrelated"):
        candidate = syntax_tree(snippets[other], language)
        for costs in (COSTS[0], COSTS[1], COSTS[2]):
            expected = _apted(_nested(reference), _nested(candidate), costs)
            got = _ted.tree_edit_distance(reference, candidate, delete=costs[0], insert=costs[1], rename=costs[2])
            assert expected > 0
            assert got == pytest.approx(expected, abs=1e-9)


def test_ted_refuses_too_much_work():
    tree = _ted.preorder_arrays(_t(0, _t(1), _t(2)))
    with pytest.raises(_ted.TooCostly, match="max_work"):
        _ted.tree_edit_distance(tree, tree, max_work=1)


# --- the tree-sitter trees ------------------------------------------------------------------------


def test_syntax_tree_counts_every_node_and_needs_no_recursion():
    # module > expression_statement > assignment > (identifier "=" p...p(integer)), each parenthesized
    # expression being "(" expr ")": 5 + 3 * depth + 1 nodes.
    depth = 3000
    labels, sizes, depths = syntax_tree("x = " + "(" * depth + "1" + ")" * depth + "\n", "python")
    assert len(labels) == 5 + 3 * depth + 1
    assert sizes[0] == len(labels) and depths.max() == depth + 3
    assert sizes.min() == 1 and (sizes == 1).sum() == 2 * depth + 3  # leaves: parentheses, x, =, 1


def test_tsed_deep_two_sided_nesting_is_null_not_slow():
    code = "x = " + "(" * 200 + "1" + ")" * 200 + "\n"
    [result] = score_pairs(create_metric("tsed"), [Pair(code, code, "python")])
    assert result.value is None and result.reason.startswith("trees too costly for TSED")


# --- TSED -----------------------------------------------------------------------------------------


def test_tsed_hand_computed():
    # "x = 1": module > expression_statement > assignment > (identifier, "=", integer): 6 nodes.
    one, other = "x = 1\n", "x = y\n"  # integer -> identifier: one rename
    two = "x = 1\ny = 2\n"  # 1 + 2 * 5 = 11 nodes: five more
    assert create_metric("tsed").score(one, other, "python") == pytest.approx(1 - 1 / 6)
    assert create_metric("tsed").score(one, two, "python") == pytest.approx(1 - 5 / 11)
    assert create_metric("tsed", insert=0.8).score(one, two, "python") == pytest.approx(1 - 4 / 11)
    assert create_metric("tsed", delete=0.5).score(two, one, "python") == pytest.approx(1 - 2.5 / 11)
    assert create_metric("tsed", rename=3.0).score(one, other, "python") == pytest.approx(1 - 2 / 6)
    assert TSED().distance(one, two, "py") == (5.0, 6, 11)


def test_tsed_floors_at_zero():
    assert create_metric("tsed", insert=5.0).score("x = 1\n", "x = 1\ny = 2\nz = 3\n", "python") == 0.0


def test_tsed_options_and_fingerprint():
    metric = create_metric("tsed", insert=0.8)
    assert isinstance(metric, Metric) and metric.kind == "structural"
    fingerprint = metric.fingerprint()
    assert (fingerprint["delete"], fingerprint["insert"], fingerprint["rename"]) == (1.0, 0.8, 1.0)
    assert fingerprint != create_metric("tsed").fingerprint()
    assert fingerprint["packages"]["tree-sitter-rust"]
    for bad in ({"insert": -1.0}, {"rename": float("nan")}, {"delete": "1"}, {"weight": 1.0}):
        with pytest.raises(InvalidParameterError):
            create_metric("tsed", **bad)
    with pytest.raises(InvalidParameterError):
        create_metric("codebleu", weights=(1, 0, 0, 0))


# --- CodeBLEU against calc_codebleu ---------------------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
def test_codebleu_equals_calc_codebleu(language):
    reference, candidate = SNIPPETS[language]["ref"], SNIPPETS[language]["cand"]
    expected = calc_codebleu([reference], [candidate], lang=language)
    parts = codebleu_parts(reference, candidate, language)
    assert 0 < expected["dataflow_match_score"] < 1 or language == "rust"  # rust's candidate matches all
    assert parts.ngram == pytest.approx(expected["ngram_match_score"], abs=1e-12)
    assert parts.weighted_ngram == pytest.approx(expected["weighted_ngram_match_score"], abs=1e-12)
    assert parts.dataflow == pytest.approx(expected["dataflow_match_score"], abs=1e-12)
    values = {name: create_metric(name).score(reference, candidate, language) for name in NAMES[:3]}
    assert values["codebleu"] == pytest.approx(expected["codebleu"], abs=1e-12)
    assert values["codebleu_syntax"] == pytest.approx(expected["syntax_match_score"], abs=1e-12)
    assert values["codebleu_dataflow"] == pytest.approx(expected["dataflow_match_score"], abs=1e-12)
    assert 0 < values["codebleu"] < 1


def test_one_calc_codebleu_call_serves_three_metrics():
    reference, candidate = SNIPPETS["go"]["ref"], SNIPPETS["go"]["cand"] + "\n// once\n"
    before = _cached_parts.cache_info()
    for name in NAMES[:3]:
        create_metric(name).score(reference, candidate, "golang")
    after = _cached_parts.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


@pytest.mark.parametrize("language", LANGUAGES)
def test_identical_code_scores_one(language):
    code = SNIPPETS[language]["ref"]
    for name in NAMES:
        assert create_metric(name).score(code, code, language) == pytest.approx(1.0, abs=1e-12), name


@pytest.mark.parametrize("language", LANGUAGES)
def test_renamed_identifiers_keep_structure(language):
    reference, renamed = SNIPPETS[language]["ref"], SNIPPETS[language]["renamed"]
    tsed = create_metric("tsed").score(reference, renamed, language)
    assert tsed == 1.0  # labels are node types: identifiers' names do not count
    assert tsed > 0.9
    assert create_metric("codebleu_syntax").score(reference, renamed, language) == 1.0
    parts = codebleu_parts(reference, renamed, language)
    assert create_metric("codebleu").score(reference, renamed, language) > parts.ngram + 0.2


@pytest.mark.parametrize("language", LANGUAGES)
def test_unrelated_code_scores_low(language):
    reference, unrelated = SNIPPETS[language]["ref"], SNIPPETS[language]["unrelated"]
    assert create_metric("tsed").score(reference, unrelated, language) < 0.5
    assert create_metric("codebleu").score(reference, unrelated, language) < 0.5
    assert create_metric("codebleu_syntax").score(reference, unrelated, language) < 0.5


def test_no_dataflow_in_reference_is_null(caplog):
    _cached_parts.cache_clear()
    reference, candidate = "def f():\n    return 1\n", "def f():\n    return 2 + 3\n"
    with caplog.at_level(logging.WARNING):
        [result] = score_pairs(create_metric("codebleu_dataflow"), [Pair(reference, candidate, "python")])
    assert result.value is None
    assert result.reason.startswith("no data flow in the reference")
    assert caplog.records == []  # codebleu's warning is silenced
    expected = calc_codebleu([reference], [candidate], lang="python")
    assert expected["dataflow_match_score"] == 0
    mean = (expected["ngram_match_score"] + expected["weighted_ngram_match_score"]
            + expected["syntax_match_score"]) / 3
    value = create_metric("codebleu").score(reference, candidate, "python")
    assert value == pytest.approx(mean, abs=1e-12)
    assert value != pytest.approx(expected["codebleu"])  # the package counts the missing part as 1


def test_unmatched_dataflow_is_zero_not_one():
    reference, candidate = SNIPPETS["java"]["ref"], SNIPPETS["java"]["unrelated"]
    expected = calc_codebleu([reference], [candidate], lang="java")
    assert expected["dataflow_match_score"] == 0.0
    assert create_metric("codebleu_dataflow").score(reference, candidate, "java") == 0.0
    four = (expected["ngram_match_score"] + expected["weighted_ngram_match_score"]
            + expected["syntax_match_score"]) / 4
    value = create_metric("codebleu").score(reference, candidate, "java")
    assert value == pytest.approx(four, abs=1e-12)
    assert expected["codebleu"] == pytest.approx(four + 0.25)  # the package's "dataflow or 1"


# --- what has no value ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_empty_code_and_unknown_language_are_null(name):
    code = SNIPPETS["python"]["ref"]
    pairs = [Pair("", code, "python"), Pair(code, " \n\t", "python"), Pair(code, code, "cobol")]
    results = score_pairs(create_metric(name), pairs)
    assert [r.value for r in results] == [None, None, None]
    assert [r.reason for r in results[:2]] == ["empty reference", "empty candidate"]
    assert "cobol" in results[2].reason


@pytest.mark.parametrize("name", NAMES)
def test_code_with_parse_errors_is_still_scored(name):
    reference = SNIPPETS["java"]["ref"]
    truncated = reference[: len(reference) // 2]
    assert parser("java").parse(truncated.encode()).root_node.has_error
    value = create_metric(name).score(reference, truncated, "java")
    assert 0 < value < 1


def test_fingerprints_name_the_packages():
    for name in NAMES[:3]:
        fingerprint = create_metric(name).fingerprint()
        assert fingerprint["name"] == name and fingerprint["packages"]["codebleu"] == "0.7.0"
        # Version 2 pins codebleu's data-flow order (values cached under version 1 are not reused).
        assert fingerprint["version"] == "2" and fingerprint["dataflow_order"] == "code order"
    with pytest.raises(MetricUnavailable):
        codebleu_parts("", "x", "python")
