"""Synonym fuzzing (paper §5.2), dead-code insertion (§7.2) and the offline WordNet behind them."""

from __future__ import annotations

import ast
import builtins
import gzip
import json
import math
import re
from pathlib import Path

import pytest

from calib._exceptions import CalibError, InvalidParameterError
from calib.probes import wordnet
from calib.probes.perturb import (
    DEAD_CODE_INTRO,
    Perturbed,
    dead_code,
    dead_code_prompt,
    insert_dead_code,
    synonym_fuzz,
)
from calib.probes.wordnet import WordNetUnavailable, lexnames_text, synonyms, wordnet_reader

FIXTURES = Path(__file__).parent / "fixtures"
TASKS = [json.loads(line) for line in (FIXTURES / "tasks.jsonl").read_text().splitlines() if line.strip()]
MBPP = ("Write a function to find the shared elements from the given two lists.\n"
        "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)")
# Hand-listed eligible words of MBPP's first line: "a", "to", "the", "from" are stopwords, "two" a number
# word, and the second line is an assert statement.
MBPP_ELIGIBLE = ["Write", "function", "find", "shared", "elements", "given", "lists"]


@pytest.fixture(scope="module")
def wn():
    """nltk's reader over the installed WordNet 3.0, or a skip when the data are not installed."""
    try:
        return wordnet_reader()
    except WordNetUnavailable as exc:
        pytest.skip(f"WordNet data missing (CI installs Debian's wordnet-base): {exc}")


def lemma_set(wn, word: str) -> set[str]:
    """Every lemma of every synset of ``word``, lower-cased, underscores as spaces (read from nltk directly)."""
    return {name.replace("_", " ").lower() for synset in wn.synsets(word) for name in synset.lemma_names()}


# ---------------------------------------------------------------------------------------------------------
# WordNet
# ---------------------------------------------------------------------------------------------------------

def test_reader_is_wordnet_30_and_dog_has_its_documented_synonyms(wn):
    assert wn.get_version() == "3.0"
    # The synsets of "dog" in WordNet 3.0, in the order of the NLTK WordNet HOWTO (nltk.org/howto/wordnet):
    # dog.n.01, frump.n.01, dog.n.03, cad.n.01, frank.n.02, pawl.n.01, andiron.n.01, chase.v.01; their
    # lemmas in synset order, without "dog" itself and without repeats.
    assert [s.name() for s in wn.synsets("dog")] == ["dog.n.01", "frump.n.01", "dog.n.03", "cad.n.01",
                                                     "frank.n.02", "pawl.n.01", "andiron.n.01", "chase.v.01"]
    assert synonyms("dog") == [
        "domestic dog", "Canis familiaris", "frump", "cad", "bounder", "blackguard", "hound", "heel", "frank",
        "frankfurter", "hotdog", "hot dog", "wiener", "wienerwurst", "weenie", "pawl", "detent", "click",
        "andiron", "firedog", "dog-iron", "chase", "chase after", "trail", "tail", "tag", "give chase",
        "go after", "track",
    ]
    # chase.v.01 alone (the only verb synset).
    assert synonyms("dog", "v") == ["chase", "chase after", "trail", "tail", "tag", "give chase", "go after", "track"]
    assert synonyms("DOG") == synonyms("dog")
    assert synonyms("xyzzyplugh") == []


def test_synonyms_leave_out_the_word_and_its_base_form(wn):
    found = synonyms("lists")
    assert found and "list" not in [s.lower() for s in found] and "lists" not in [s.lower() for s in found]
    assert set(s.lower() for s in found) <= lemma_set(wn, "lists")
    assert len(found) == len({s.lower() for s in found})


def test_bad_pos_is_rejected():
    with pytest.raises(InvalidParameterError, match="pos='x'"):
        synonyms("dog", pos="x")


def test_missing_data_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("CALIB_WORDNET", str(tmp_path))
    with pytest.raises(WordNetUnavailable) as caught:
        synonyms("dog")
    message = str(caught.value)
    assert isinstance(caught.value, CalibError) and "\n" not in message
    assert f"WordNet data not found at {tmp_path}" in message
    assert "apt-get install wordnet-base" in message and "CALIB_WORDNET" in message


def test_lexnames_match_the_wordnet_manual_page():
    lines = [line.split("\t") for line in lexnames_text().splitlines()]
    # nltk's reader parses "index, lexname, _ = line.split()" and asserts int(index) == line number.
    assert [int(number) for number, _, _ in lines] == list(range(45))
    assert all(category == {"noun": "1", "verb": "2", "adj": "3", "adv": "4"}[name.split(".")[0]]
               for _, name, category in lines)
    page = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not page.is_file():
        pytest.skip("the lexnames(5WN) manual page is not installed (wordnet-base without man pages)")
    table = [line.split("\t") for line in gzip.open(page, "rt").read().splitlines() if re.match(r"\d\d\t", line)]
    assert [(number, name.strip()) for number, name, _ in table] == [(n, name) for n, name, _ in lines]


def test_private_root_holds_plain_copies(monkeypatch, tmp_path):
    source = tmp_path / "dict"
    source.mkdir()
    for name in ("index.adj", "index.adv", "index.noun", "index.verb",
                 "data.adj", "data.adv", "data.noun", "data.verb", "noun.exc"):
        (source / name).write_text(f"contents of {name}\n")
    monkeypatch.setenv("CALIB_CACHE_DIR", str(tmp_path / "cache"))
    root = wordnet._private_root(source)
    assert root.parent == tmp_path / "cache" / "wordnet"
    for name in ("index.noun", "data.verb", "noun.exc"):
        assert not (root / name).is_symlink() and (root / name).stat().st_nlink == 1  # nltk refuses links
        assert (root / name).read_text() == f"contents of {name}\n"
    assert (root / "lexnames").read_text() == lexnames_text()
    assert wordnet._private_root(source) == root
    assert [p.name for p in root.parent.iterdir()] == [root.name]  # no staging directory left behind


# ---------------------------------------------------------------------------------------------------------
# Synonym fuzzing
# ---------------------------------------------------------------------------------------------------------

def test_same_seed_same_result_and_seeds_differ(wn):
    runs = [synonym_fuzz(MBPP, 0.5, seed=seed) for seed in range(10)]
    assert runs[3] == synonym_fuzz(MBPP, 0.5, seed=3)
    assert isinstance(runs[0], Perturbed)
    assert len({run.text for run in runs}) > 1


def test_probability_zero_changes_nothing(wn):
    result = synonym_fuzz(MBPP, 0.0, seed=1)
    assert (result.text, result.replaced, result.eligible, result.replacements) == (MBPP, 0, 7, ())


@pytest.mark.parametrize("seed", range(5))
def test_mbpp_prompt_at_probability_one(wn, seed):
    result = synonym_fuzz(MBPP, 1.0, seed=seed, protect=["similar_elements"])
    assert [original for original, _ in result.replacements] == MBPP_ELIGIBLE
    assert result.replaced == result.eligible == result.with_synonyms == 7
    new = [replacement for _, replacement in result.replacements]
    expected = (f"{new[0]} a {new[1]} to {new[2]} the {new[3]} {new[4]} from the {new[5]} two {new[6]}.\n"
                "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)")
    assert result.text == expected
    assert new[0][0].isupper()  # "Write" is title case


def test_every_replacement_is_a_wordnet_synonym(wn):
    prompts = [MBPP] + [task.get("prompt") or task["text"] for task in TASKS]
    checked = 0
    for seed in range(20):
        for prompt in prompts:
            for original, replacement in synonym_fuzz(prompt, 1.0, seed=seed).replacements:
                assert replacement.lower() in lemma_set(wn, original), (original, replacement)
                assert replacement.lower() != original.lower()
                if original[0].isupper():
                    assert replacement[0].isupper()
                checked += 1
    assert checked > 500


def test_code_identifiers_numbers_stopwords_and_protected_names_never_change(wn):
    prompt = (
        "Write a function count_vowels that takes a string text and returns the number of vowels.\n"
        "Use `str.lower` and the helper myHelper, call sorted(items, key=len) and see https://example.com/spec.\n"
        "Return \"Yes\" when the sum exceeds 10 or nums[0] is larger than 3.5 and x is positive.\n"
        "Input: nums = [2, 7], target = 9\n"
        "```python\ndef example(values):\n    return values\n```\n"
        "Check non-negative values first.\n"
        ">>> count_vowels('banana')\n3\n"
        "assert count_vowels(\"apple\") == 2"
    )
    result = synonym_fuzz(prompt, 1.0, seed=7, protect=["count_vowels", "text"])
    original_lines, new_lines = prompt.splitlines(), result.text.splitlines()
    assert len(new_lines) == len(original_lines)
    for index in (4, 5, 6, 7, 9, 10, 11):  # the fenced block, the doctest and its output, the assert
        assert new_lines[index] == original_lines[index]
    for kept in ("count_vowels", " text ", "`str.lower`", "myHelper", "sorted(items, key=len)",
                 "https://example.com/spec.", "\"Yes\"", " 10 ", "nums[0]", "3.5", " x ", "nums = [2, 7]",
                 "target = 9", "non-negative", " a ", " the ", " and ", " of ", " or ", " is ", " than "):
        assert kept in result.text, kept
    changed = {original for original, _ in result.replacements}
    assert {"Write", "string", "vowels", "Use", "helper", "call", "see", "sum", "positive", "Check"} <= changed
    assert not changed & {"count_vowels", "text", "str", "lower", "myHelper", "sorted", "items", "key", "len",
                          "example", "nums", "target", "Yes", "banana", "apple", "non", "negative"}


def test_docstring_prompt_keeps_signature_and_doctests(wn):
    prompt = ('from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n'
              '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
              '    given threshold.\n'
              '    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n'
              '    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\n    True\n    """\n')
    result = synonym_fuzz(prompt, 1.0, seed=0, protect=["has_close_elements", "numbers", "threshold"])
    before, after = prompt.splitlines(), result.text.splitlines()
    assert [after[i] for i in (0, 3, 6, 7, 8, 9, 10)] == [before[i] for i in (0, 3, 6, 7, 8, 9, 10)]
    assert [original for original, _ in result.replacements] == ["Check", "given", "list", "closer", "given"]
    assert after[4].count("numbers") == 2 and after[5].endswith(" threshold.")


def test_replacement_rate_matches_probability(wn):
    prompt = " ".join(task.get("prompt") or task["text"] for task in TASKS)
    p, seeds = 0.4, 150
    runs = [synonym_fuzz(prompt, p, seed=seed) for seed in range(seeds)]
    trials = sum(run.with_synonyms for run in runs)
    replaced = sum(run.replaced for run in runs)
    # Each eligible word with a synonym is replaced with probability p independently (one uniform draw per
    # word), so replaced ~ Binomial(trials, p): mean p·trials, sd sqrt(trials·p·(1 − p)). Allow 4 sd.
    tolerance = 4 * math.sqrt(trials * p * (1 - p))
    assert trials > 3000
    assert abs(replaced - p * trials) <= tolerance, (replaced, trials)
    # replaced / eligible estimates p times the share of eligible words WordNet knows.
    share = runs[0].with_synonyms / runs[0].eligible
    assert 0 < share <= 1
    eligible = sum(run.eligible for run in runs)
    assert abs(replaced / eligible - p * share) <= tolerance / eligible


@pytest.mark.parametrize("probability", [-0.1, 1.5, float("nan"), True, "0.2"])
def test_probability_outside_unit_interval_is_rejected(probability):
    with pytest.raises(InvalidParameterError, match="probability"):
        synonym_fuzz(MBPP, probability, seed=0)


def test_seed_must_be_an_integer():
    with pytest.raises(InvalidParameterError, match="seed"):
        synonym_fuzz(MBPP, 0.2, seed=1.5)


def test_a_single_protected_string_is_one_name(wn):
    result = synonym_fuzz(MBPP, 1.0, seed=0, protect="elements")
    assert "elements" not in [original for original, _ in result.replacements]
    assert result.eligible == 6


# ---------------------------------------------------------------------------------------------------------
# Dead code
# ---------------------------------------------------------------------------------------------------------

def whitespace_tokens(text: str) -> int:
    return len(text.split())


def code_tokens(text: str) -> int:
    """A subword-like count: identifiers, numbers and single punctuation characters."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def check_irrelevant(block: str) -> None:
    """The block compiles, defines only new underscore names, and calls nothing it defines or at module level."""
    tree = ast.parse(block)
    compile(block, "<dead code>", "exec")
    defined = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign | ast.FunctionDef | ast.ClassDef), ast.dump(node)
        names = [t.id for t in node.targets] if isinstance(node, ast.Assign) else [node.name]
        defined.update(names)
        if isinstance(node, ast.Assign):
            assert not any(isinstance(n, ast.Call) for n in ast.walk(node.value))
    assert all(name.startswith("_") and not hasattr(builtins, name) for name in defined)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & defined
    namespace: dict = {}
    exec(block, namespace)  # noqa: S102 - the block is calib's own constant code
    assert set(namespace) - {"__builtins__"} == defined


@pytest.mark.parametrize("n_tokens", [3, 5, 17, 50, 123, 400])
def test_whitespace_count_matches_exactly(n_tokens):
    block = dead_code(n_tokens, whitespace_tokens, seed=n_tokens)
    assert whitespace_tokens(block) == n_tokens
    check_irrelevant(block)


@pytest.mark.parametrize("n_tokens", [24, 25, 26, 100, 257, 1000, 2001])
def test_character_count_matches_exactly(n_tokens):
    block = dead_code(n_tokens, len, seed=3)
    assert len(block) == n_tokens
    check_irrelevant(block)


@pytest.mark.parametrize("n_tokens", [1, 2, 3, 4, 6, 8, 20, 73, 77, 300])
def test_word_and_punctuation_count_matches_above_the_smallest_filler(n_tokens):
    # The smallest filler "_UNUSED_VALUES_0 = (9,)" is 6 tokens of code_tokens: from 6 on the match is
    # exact; below, the closer of "" (error n) and that statement (error 6 - n) is returned.
    block = dead_code(n_tokens, code_tokens, seed=1)
    assert code_tokens(block) == (n_tokens if n_tokens >= 6 else (0 if n_tokens <= 3 else 6))
    if block:
        check_irrelevant(block)


@pytest.fixture(scope="module")
def bpe_count():
    """Token count of a byte-level BPE (vocabulary 1000) trained here on calib's own statistics sources."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is in the 'embedded' extra")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=1000, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    sources = Path(__file__).resolve().parents[2] / "calib" / "stats"
    tokenizer.train(sorted(str(path) for path in sources.glob("*.py")), trainer)
    return lambda text: len(tokenizer.encode(text).ids)


def test_subword_count_is_within_one_tuple_element(bpe_count):
    # The documented bound: at most the cost of one tuple element of the filler.
    element = max(bpe_count(f"(0, 1{tail})") - bpe_count("(0, 1)") for tail in (", 7", ", 0", ", 9"))
    for n_tokens in (30, 101, 257, 600):
        block = dead_code(n_tokens, bpe_count, seed=n_tokens)
        assert abs(bpe_count(block) - n_tokens) <= element
        check_irrelevant(block)
    prompt = "Write a function to add two numbers.\nYour code should pass these tests:\nassert add(1, 2) == 3\n"
    new = dead_code_prompt(prompt, 200, bpe_count, seed=0, marker="Your code")
    assert abs(bpe_count(new) - bpe_count(prompt) - 200) <= element


def test_nothing_for_nonpositive_targets_and_determinism():
    assert dead_code(0, len, seed=0) == dead_code(-5, len, seed=0) == ""
    assert dead_code(300, whitespace_tokens, seed=4) == dead_code(300, whitespace_tokens, seed=4)
    assert dead_code(300, whitespace_tokens, seed=4) != dead_code(300, whitespace_tokens, seed=5)


def test_avoided_names_are_not_defined():
    plain = dead_code(200, whitespace_tokens, seed=1)
    names = set(re.findall(r"\b_(?:unused_helper|UNUSED_[A-Z]+|UnusedRecord)_?\d+\b", plain))
    block = dead_code(200, whitespace_tokens, seed=1, avoid=names)
    assert names and not names & set(re.findall(r"\b_\w+\d\b", block))
    check_irrelevant(block)


def test_a_count_that_does_not_grow_is_rejected():
    with pytest.raises(InvalidParameterError, match="count_tokens"):
        dead_code(50, lambda text: 1, seed=0)


@pytest.mark.parametrize("task", TASKS, ids=[str(task["task_id"]) for task in TASKS])
def test_task_tests_still_pass_after_the_block(task):
    namespace: dict = {}
    exec(dead_code(150, whitespace_tokens, seed=task["task_id"]), namespace)  # noqa: S102
    exec("\n".join(task.get("test_imports", [])) + "\n" + task["code"], namespace)  # noqa: S102
    for test in task.get("test_list") or task["tests"]:
        exec(test, namespace)  # noqa: S102 - the fixture's own asserts


def test_insert_before_the_marker_or_at_the_end():
    block = dead_code(40, whitespace_tokens, seed=0)
    marker = "Your code should pass these tests:"
    prompt = f"Write a function to add two numbers.\n{marker}\nassert add(1, 2) == 3\n"
    inserted = insert_dead_code(prompt, block, marker=marker)
    section = f"{DEAD_CODE_INTRO}\n```python\n{block}\n```\n"
    assert inserted == f"Write a function to add two numbers.\n\n{section}\n{marker}\nassert add(1, 2) == 3\n"
    assert insert_dead_code(prompt, block, marker="not there") == prompt + "\n" + section
    assert insert_dead_code("Task text", block) == "Task text\n\n" + section
    assert insert_dead_code(prompt, "", marker=marker) == prompt
    assert insert_dead_code(prompt, block, marker=marker).replace(section + "\n", "").replace("\n\n", "\n") == prompt


@pytest.mark.parametrize("count", [whitespace_tokens, len], ids=["whitespace", "characters"])
def test_dead_code_prompt_matches_the_token_increase(count):
    prompt = "Write a function to add two numbers.\nYour code should pass these tests:\nassert add(1, 2) == 3\n"
    for increase in (150, 400):  # above the ~100 characters of the introducing sentence and fences
        new = dead_code_prompt(prompt, increase, count, seed=2, marker="Your code should pass")
        assert count(new) - count(prompt) == increase
        assert new.endswith("Your code should pass these tests:\nassert add(1, 2) == 3\n")
        check_irrelevant(re.search(r"```python\n(.*)\n```", new, flags=re.S).group(1))
