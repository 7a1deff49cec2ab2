"""Parsing completions back into one function (calib.data.parseback)."""

from __future__ import annotations

import pytest

from calib.data.parseback import parse_back


def test_python_ok_cut_at_dedent():
    result = parse_back("python", "def f(x):", "\n    y = x + 1\n    return y\n\ndef g():\n    pass\n")
    assert result.outcome == "ok"
    assert result.function == "def f(x):\n    y = x + 1\n    return y"


def test_python_method_with_docstring_and_dedented_string():
    signature = "    @property\n    def name(self):"
    completion = '\n        """Doc.\n\nmore."""\n        return 1\n    def other(self):\n        pass'
    result = parse_back("python", signature, completion)
    assert result.outcome == "ok"
    assert result.function.endswith("return 1")


def test_python_one_liner():
    assert parse_back("python", "def f(x):", " return x").outcome == "ok"


@pytest.mark.parametrize("completion", ["", "   \n\n  "])
def test_empty(completion):
    for language in ("python", "c", "cpp", "java", "rust", "go"):
        assert parse_back(language, "f()", completion).function is None
        assert parse_back(language, "def f():", completion).outcome == "empty"


def test_python_truncated_recovers_a_prefix():
    result = parse_back("python", "def f(x):", "\n    y = x + 1\n    return foo(y,")
    assert result.outcome == "truncated"
    assert result.function == "def f(x):\n    y = x + 1"


def test_python_truncated_without_a_body():
    assert parse_back("python", "def f(x):", '\n    """Unterminated doc').outcome == "truncated"


def test_python_trailing_garbage_is_trimmed():
    result = parse_back("python", "def f(x):", "\n    return x\n    ``` this is prose")
    assert result.outcome == "ok" and result.function == "def f(x):\n    return x"


@pytest.mark.parametrize("completion", [" lorem ipsum dolor", "\nlorem ipsum", "\x00\x00"])
def test_python_garbage(completion):
    assert parse_back("python", "def f(x):", completion).outcome == "unparsable"


def test_python_signature_without_def():
    assert parse_back("python", "x = (", "1)").outcome == "unparsable"


BRACES = {
    "c": ("int f(int x)", ' {\n  char *s = "}{"; /* } */\n  return x + \'}\';\n}\nint g(void) { return 0; }'),
    "cpp": ("int A::f(int x) const", " {\n  auto s = R\"(})\"; // }\n  return x;\n}\n\nint g();"),
    "java": ("    public int f(int x)", " {\n        String s = \"}\"; // }\n        return x;\n    }\n}\n"),
    "rust": ("fn f(x: i32) -> i32", " {\n    let c = '}'; /* } */\n    x\n}\nfn g() {}"),
    "go": ("func f(x int) int", " {\n\ts := \"}\" // }\n\t_ = '}'\n\treturn x\n}\nfunc g() {}"),
}


@pytest.mark.parametrize("language", sorted(BRACES))
def test_braces_ok_ignores_strings_and_comments(language):
    signature, completion = BRACES[language]
    result = parse_back(language, signature, completion)
    assert result.outcome == "ok", result
    assert result.function.startswith(signature) and result.function.endswith("}")
    assert "g(" not in result.function


@pytest.mark.parametrize("language", sorted(BRACES))
def test_braces_truncated(language):
    signature, completion = BRACES[language]
    cut = completion[: completion.index("return") if "return" in completion else completion.index("x\n}")]
    assert parse_back(language, signature, cut).outcome == "truncated"


@pytest.mark.parametrize("language", sorted(BRACES))
@pytest.mark.parametrize("completion", [" lorem ipsum dolor sit amet", " { @@@ ??? ### !!! }"])
def test_braces_garbage(language, completion):
    signature, _ = BRACES[language]
    assert parse_back(language, signature, completion).outcome == "unparsable"


def test_signature_given_with_its_brace():
    assert parse_back("c", "int f(void) {", "\n  return 1;\n}").function == "int f(void) {\n  return 1;\n}"


def test_unknown_language_raises():
    with pytest.raises(ValueError, match="language='cobol'"):
        parse_back("cobol", "f", "x")
