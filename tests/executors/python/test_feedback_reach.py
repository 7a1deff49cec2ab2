"""Search guided by what is not covered yet (issue 24 §2): comparisons in the module's functions x
calls, the number of parts a text splits into, ``s.encode("ascii")``, a number compared with texts,
and texts in the shape a parameter's name says.

Each end-to-end function is one the search could not make conclusive before these changes (the
coverage the previous harness reached is in each test's comment), built after a library function of
the tuning samples; the references are what Python itself does with the values (``re.fullmatch``,
``str.split``, ``str.encode``, ``ipaddress``), not the harness's own code.
"""

from __future__ import annotations

import ast
import asyncio
import ipaddress
import re
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, hints, regexes, synth

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, context: str):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=4.0))
    return asyncio.run(executor.compare(truth, [truth], context=context))


def _texts(result, name: str) -> list[str]:
    out = []
    for i in result.inputs:
        if i.valid:
            try:
                value = ast.literal_eval(i.state["args"][name])
            except (ValueError, SyntaxError, KeyError):
                continue
            if isinstance(value, str):
                out.append(value)
    return out


# --- the recorder and the rewrites ------------------------------------------------------------------------

MODULE = (
    "import re\n"
    "class Version:\n"
    "    def __init__(self, major, minor):\n"
    "        self.major, self.minor = major, minor\n"
    "    @classmethod\n"
    "    def parse(cls, text):\n"
    "        found = re.fullmatch(r'(\\d+)\\.(\\d+)', text)\n"
    "        if found is None:\n"
    "            raise ValueError('not a version: %r' % text)\n"
    "        return cls(int(found.group(1)), int(found.group(2)))\n"
    "def _channel(text):\n"
    "    return text.split('-')[0] == 'release'\n"
    "def _reads_environment(name):\n"
    "    import os\n"
    "    return os.environ.get(name) == 'on'\n"
)
X = (
    "def compatible(text, major):\n"
    "    if _channel(text) or _reads_environment(text):\n"
    "        return 'release'\n"
    "    version = Version.parse(text)\n"
    "    return version.major == major\n"
)


def test_helpers_are_the_module_functions_x_calls_and_keep_their_results() -> None:
    tree = ast.parse(MODULE + X)
    x = tree.body[-1]
    found = [(node.name, owner.name if owner else None) for node, owner in cmplog.helpers(x, tree)]
    # Version.parse by the class's name, then its __init__ through cls(...); the helper reading the
    # environment is left as written (inputs.scan reads it for the variables x needs)
    assert sorted(found) == [("__init__", "Version"), ("_channel", None), ("parse", "Version")]
    plain: dict = {}
    exec(compile(tree, "<t>", "exec"), plain)  # noqa: S102 - the test's own code
    cmplog.instrument(x, tree)
    recorded: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), recorded)  # noqa: S102
    for text, major in (("2.1", 2), ("2.1", 3), ("release-9", 0)):
        assert recorded["compatible"](text, major) == plain["compatible"](text, major)
    with pytest.raises(ValueError, match="not a version"):
        recorded["compatible"]("x.txt", 1)
    cmplog.take_pairs()
    with pytest.raises(ValueError):
        recorded["compatible"]("x.txt", 1)
    pairs = cmplog.take_pairs()
    # the checks inside the helpers, on the text x was given (or the part of it the helper took)
    assert ("eq", "x.txt", "release") in pairs and ("regex", "x.txt", (r"(\d+)\.(\d+)", 0)) in pairs


def test_the_number_of_parts_a_text_splits_into_and_an_ascii_encoding_are_recorded() -> None:
    source = (
        "def f(spec):\n"
        "    tokens = spec.split('.')\n"
        "    fields = spec.split()\n"
        "    try:\n"
        "        spec.encode('ascii')\n"
        "    except UnicodeEncodeError:\n"
        "        return None\n"
        "    return len(tokens) == 4, len(fields) < 3\n"
    )
    tree = ast.parse(source)
    cmplog.instrument(tree.body[0], tree)
    recorded: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), recorded)  # noqa: S102
    cmplog.take_pairs()
    assert recorded["f"]("a.b c") == (False, True)
    pairs = cmplog.take_pairs()
    assert ("parts", "a.b c", (".", 4)) in pairs and ("parts_order", "a.b c", (None, 3)) in pairs
    assert ("charclass", "a.b c", "!isascii") in pairs
    assert recorded["f"]("é") is None and ("charclass", "é", "isascii") in cmplog.take_pairs()
    # the rewrites: texts that split into four parts at "." (str.split is the reference)
    made = synth.replacements({"spec": "a.b c", "n": 1}, [("parts", "a.b c", (".", 4))])
    assert made and all(len(r["spec"].split(".")) == 4 and r["n"] == 1 for r in made)
    assert "1.2.3.4" in [r["spec"] for r in made]
    # ``len(host.split(":")) == 2`` on the part of the input it was taken from
    inside = synth.replacements({"url": "http://example/x"}, [("parts", "example", (":", 2))])
    assert [r["url"] for r in inside] == ["http://example:example/x", "http://1:2/x"]
    # fewer than three words: two, three and four words are tried
    assert sorted(len(p.split()) for p in regexes.parts("a b c d e", None, 3) + regexes.parts("a", None, 2)) == [
        2, 2, 3, 3]
    # an ASCII text that passed encode("ascii") turns non-ASCII (the except branch), and back
    out = synth.replacements({"spec": "a.b c"}, [("charclass", "a.b c", "!isascii")])
    assert out and not out[0]["spec"].isascii()


def test_a_needle_looked_for_in_part_of_an_input_is_put_in_that_part() -> None:
    # feedparser's replace_doctype: ``b"netscape" in doctype.lower()`` on the DOCTYPE the pattern found
    out = synth.replacements({"data": b"<!DOCTYPE RSS>x"}, [("contains", b"netscape", b" rss")])
    assert out and all(b"netscape" in r["data"].lower().split(b">")[0] for r in out)


def test_a_number_compared_with_texts_becomes_one_of_them() -> None:
    # ``tag in self.empty_tags`` on an input the pools made a number: the members are texts
    out = synth.replacements({"tag": 0, "attrs": {}}, [("eq", 0, "br"), ("eq", 0, 1)])
    assert out == [{"tag": "br", "attrs": {}}, {"tag": 1, "attrs": {}}]


def test_parameter_names_give_texts_of_their_shape() -> None:
    node = ast.parse("def f(ip_string, encoding, count: int, url_list: list):\n    return ip_string\n").body[0]
    shaped = hints.shaped(hints.analyse(node, skip_first=False))
    assert ipaddress.ip_address(shaped[0]) and "utf-8" in shaped
    assert "".encode(shaped[shaped.index("utf-8")]) == b""  # a codec Python knows
    assert not any("://" in s for s in shaped)  # url_list is a list, not a URL


def test_keys_read_in_a_loop_over_literal_names_make_a_mapping() -> None:
    # rfc3986's ParseResultMixin._generate_authority: ``attributes[p] for p in ("userinfo", "host", "port")``
    node = ast.parse(
        "def f(self, attributes):\n"
        "    userinfo, host, port = (attributes[p] for p in ('userinfo', 'host', 'port'))\n"
        "    return userinfo\n").body[0]
    (attributes,) = hints.analyse(node, skip_first=True).params
    assert "dict" in attributes.types and attributes.keys == ["userinfo", "host", "port"]


# --- end to end -------------------------------------------------------------------------------------------


@needs_bwrap
def test_a_check_inside_a_class_method_x_calls_guides_the_search() -> None:
    # semver's VersionInfo.parse, reduced: x's branches need a text the helper's pattern matches, which
    # neither x nor the module's constants name (before: every input raised in parse, coverage 0.38)
    truth = (
        "def compatible(text: str, major: int):\n"
        "    try:\n"
        "        version = Version.parse(text)\n"
        "    except ValueError:\n"
        "        return False\n"
        "    if version.major != major:\n"
        "        return 'other major'\n"
        "    if version.minor == 0:\n"
        "        return 'first'\n"
        "    return 'later'\n"
    )
    result = _compare(truth, MODULE)
    assert result.conclusive, result.reason
    assert any(re.fullmatch(r"(\d+)\.(\d+)", t) for t in _texts(result, "text")), _texts(result, "text")


@needs_bwrap
def test_a_text_is_given_the_number_of_parts_x_checks() -> None:
    # netaddr's _inet_pton_af_inet, reduced (a parameter name with no shape: only the recorded
    # len(tokens) != 4 says what the text must look like; before: coverage 0.33)
    truth = (
        "def octets(spec):\n"
        "    tokens = spec.split('.')\n"
        "    if len(tokens) != 4:\n"
        "        raise ValueError('not four parts')\n"
        "    total = 0\n"
        "    for token in tokens:\n"
        "        if not token.isdigit():\n"
        "            return None\n"
        "        total = total * 256 + int(token)\n"
        "    return total\n"
    )
    result = _compare(truth, "")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert any(len(t.split(".")) == 4 for t in _texts(result, "spec"))


@needs_bwrap
def test_a_non_ascii_part_reaches_the_except_branch_of_an_ascii_encoding() -> None:
    # feedparser's convert_to_idn, reduced: the part after "@" must be non-ASCII (before: coverage 0.70)
    truth = (
        "def mailbox(value):\n"
        "    parts = value.split('@')\n"
        "    if len(parts) != 2:\n"
        "        return None\n"
        "    user, domain = parts\n"
        "    try:\n"
        "        domain.encode('ascii')\n"
        "    except UnicodeEncodeError:\n"
        "        labels = [label.encode('idna').decode('ascii') for label in domain.split('.')]\n"
        "        domain = '.'.join(labels)\n"
        "        return user, domain, 'converted'\n"
        "    return user, domain.lower()\n"
    )
    result = _compare(truth, "")
    assert result.conclusive, result.reason
    assert any(len(t.split("@")) == 2 and not t.split("@")[1].isascii() for t in _texts(result, "value"))


@needs_bwrap
def test_a_helper_x_returns_is_the_same_value_in_the_search_and_the_replay() -> None:
    # a dispatch function returning one of the module's functions: the search runs the helper rewritten,
    # the replay as written; the output holds the function's code digest, which must agree (without the
    # helper's digest pinned, the input returning it was invalid: "nondeterministic")
    context = "def _double(v):\n    if v > 1:\n        return v * 2\n    return v\n"
    truth = (
        "def pick(name):\n"
        "    if name == 'double':\n"
        "        return _double\n"
        "    return _double(len(name))\n"
    )
    result = _compare(truth, context)
    assert result.conclusive, result.reason
    returned = [i for i in result.inputs if i.state["args"]["name"] == "'double'"]
    assert returned and all(i.valid for i in returned), [(i.status, i.output) for i in returned]
