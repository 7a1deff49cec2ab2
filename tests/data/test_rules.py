"""Prompt-selection rules (calib/data/rules): the shipped rules, their messages, reading replies back into a
continuation that parse_back turns into the function, and one-line errors for a bad user rule."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from calib._exceptions import InputError
from calib.data.parseback import parse_back
from calib.data.rules import RULES, load_rule

PROMPT = "import math\n\n\ndef area(r):"
BODY = "\n    return math.pi * r * r\n"
FUNCTION = "def area(r):\n    return math.pi * r * r"


def test_every_shipped_rule_loads_with_its_file_hash():
    folder = Path(__file__).resolve().parents[2] / "calib" / "data" / "rules"
    for name in RULES:
        rule = load_rule(name)
        path = folder / f"{name}.v{rule.version}.toml"
        assert rule.name == name and rule.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert rule.fingerprint() == {"name": name, "version": rule.version, "sha256": rule.sha256}


def test_natural_sends_the_prompt_as_it_is_and_takes_the_reply_as_the_continuation():
    rule = load_rule("natural")
    assert rule.messages(PROMPT, language="python") == [{"role": "user", "content": PROMPT}]
    assert parse_back("python", "def area(r):", rule.continuation(BODY, PROMPT)).function == FUNCTION


def test_continue_asks_for_the_code_and_reads_the_block_back_after_the_repeated_signature():
    rule = load_rule("continue")
    messages = rule.messages(PROMPT, language="python")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert f"```python\n{PROMPT}\n```" in messages[1]["content"] and BODY not in messages[1]["content"]
    replies = [
        f"Sure! Here it is:\n```python\ndef area(r):{BODY}```\nHope this helps.",  # repeats the signature
        f"```python{BODY}```",  # only the body
        f"```\nimport math\n\n\ndef area(r):{BODY}```",  # the whole prompt again, no language tag
        f"```python\ndef area(r):{BODY}",  # the block never closed (the reply hit max_tokens)
    ]
    for reply in replies:
        continuation = rule.continuation(reply, PROMPT)
        assert parse_back("python", "def area(r):", continuation).function == FUNCTION, reply


def test_parrot_shows_the_expected_continuation():
    rule = load_rule("parrot")
    assert rule.shows_suffix
    content = rule.messages(PROMPT, language="python", suffix=BODY)[-1]["content"]
    assert PROMPT + BODY in content
    with pytest.raises(ValueError, match="give suffix"):
        rule.messages(PROMPT, language="python")
    reply = f"```python\n{PROMPT}{BODY}```"
    assert parse_back("python", "def area(r):", rule.continuation(reply, PROMPT)).function == FUNCTION


def test_first_function_finds_the_signature_outside_any_block(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\nversion = 2\nreply = "first_function"\nuser = "Write {language}: {prompt}"\n')
    rule = load_rule(path)
    assert (rule.name, rule.version) == ("mine", 2)
    reply = f"The function is:\n\ndef area(r):{BODY}\nThat is all."
    assert parse_back("python", "def area(r):", rule.continuation(reply, PROMPT)).function == FUNCTION


@pytest.mark.parametrize("text,needle", [
    ('name = "x"\nversion = 1\nreply = "raw"\nuser = "{prompt}"\ncolour = 1\n', "unknown key 'colour'"),
    ('name = "x"\nversion = 1\nreply = "raw"\n', "missing key 'user'"),
    ('name = "x"\nversion = 1\nreply = "json"\nuser = "{prompt}"\n', "reply = 'json': use one of raw"),
    ('name = "x"\nversion = 0\nreply = "raw"\nuser = "{prompt}"\n', "version = 0"),
    ('name = "x"\nversion = 1\nreply = "raw"\nuser = "{prompt} {answer}"\n', "unknown template field {answer}"),
    ('name = "x"\nversion = 1\nreply = "raw"\nuser = "{prompt}{suffix}"\n', "only a rule with shows_suffix"),
    ('name = "x"\nversion = 1\nreply = "raw"\nuser = "{prompt\n', "cannot read the prompt rule"),
])
def test_a_bad_user_rule_is_one_line_naming_the_file_and_the_key(tmp_path, text, needle):
    path = tmp_path / "rule.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_rule(path)
    message = str(info.value)
    assert needle in message and str(path) in message and "\n" not in message


def test_an_unknown_rule_name_lists_the_built_in_ones():
    with pytest.raises(InputError, match="'verbatim' is not built in \\(natural, continue, parrot\\)"):
        load_rule("verbatim")


def test_a_prompt_cut_inside_a_line_is_continued_from_the_cut():
    # An extraction window's prefix ends at a token, often inside a line: the reply's code is read back
    # from the point where the unfinished line stops, not from the start of the next line.
    prompt = "def area(r):\n    return math.pi * r"
    continue_rule, parrot = load_rule("continue"), load_rule("parrot")
    assert continue_rule.continuation("```python\n    return math.pi * r * r\n```", prompt) == " * r\n"
    # a reply that repeats the whole prompt is read after the prompt, not at an earlier line that begins alike
    prompt = "def f(x):\n    y = 1\n    y = 2\n    y"
    reply = "```python\ndef f(x):\n    y = 1\n    y = 2\n    y += x\n    return y\n```"
    assert parrot.continuation(reply, prompt) == " += x\n    return y\n"
    # nothing in the reply continues the cut line: the code as it is (the procedure then finds no match)
    assert continue_rule.continuation("```python\nprint(1)\n```", prompt) == "\nprint(1)\n"
