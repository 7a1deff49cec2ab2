"""Input shapes and stand-in failures the search lacked (issue 24 §2, the seventeenth round).

- A parameter whose items the body subscripts by key (``for chunk in chunks: chunk["fourcc"] == b"XMP "``, also
  through ``enumerate``) is a list of records (dicts with those keys): piexif's ``insert_exif_into_chunks`` had
  coverage 0.63 with lists of numbers only. Items the body uses as texts (``for line in message.headers:
  line.split(":", 1)``) are texts, and a text the body splits on a separator holds it (``params.split(";")``).
- Keys a loop checks (``all(k in jwk for k in ["x", "y", "crv"])``) are keys of the mapping, and a key looked up
  in a literal mapping (``{"P-256": ...}[jwk["crv"]]``) is rewritten to one it has (python-jose's ``_process_jwk``).
- A text ``pattern.finditer``/``findall`` found nothing in is rewritten to one the pattern matches, as a failed
  ``match`` was.
- A module-level function decorated with ``@classmethod`` (made a class's method later, agate's ``from_json``)
  is called as a function, its ``cls`` an argument.
- ``isinstance(value, six.string_types)`` (and the other Python 2 compatibility names) asks for a text, the
  compatibility module withheld: apscheduler's ``convert_to_datetime`` never got one (coverage 0.54).
- A ``str`` subclass built by ``__new__(cls, text)`` is built from a text by that ``__new__``.
- A stand-in call that fails raises an instance of the file's exception classes x's handlers catch too:
  ``except ValidationError`` (a class of x's file) is reached (dynaconf's ``OrValidator.validate``, 0.75).
"""

from __future__ import annotations

import ast
import asyncio

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints
from tests.executors.sandbox.test_forkserver import needs_bwrap

RECORDS = '''def tags(chunks):
    out = []
    for chunk in chunks:
        if chunk["fourcc"] == b"XMP ":
            out.append("xmp")
        elif chunk["fourcc"] == b"ANIM":
            out.append("anim")
        else:
            out.append("other")
    return out
'''

ENUMERATED = '''def drop_exif(chunks):
    for index, chunk in enumerate(chunks):
        if chunk["fourcc"] == b"EXIF":
            chunks.pop(index)
            return index
    return -1
'''

HEADERS = '''def from_lines(message):
    headers = []
    for line in message.headers:
        if line.startswith((" ", "\\t")):
            key, value = headers[-1]
            headers[-1] = (key, value + " " + line.strip())
            continue
        key, value = line.split(":", 1)
        headers.append((key, value.strip()))
    return headers
'''

PARAMS = '''def parse_params(params):
    bits = [b.strip() for b in params.split(";")]
    found = {}
    for bit in bits[1:]:
        if bit.startswith("no_context_takeover"):
            found["takeover"] = False
        elif bit.startswith("max_window_bits"):
            if "=" in bit:
                found["bits"] = int(bit.split("=", 1)[1])
            else:
                found["bits"] = 15
    return bits[0], found
'''

REQUIRED = '''def curve_of(jwk):
    if not all(k in jwk for k in ["x", "y", "crv"]):
        raise KeyError("missing")
    curve = {"P-256": 1, "P-384": 2}[jwk["crv"]]
    if "d" in jwk:
        return curve, jwk["x"], jwk["d"]
    return curve, jwk["x"], jwk["y"]
'''

KEYWORDS_CONTEXT = ("import re\n\nKEYWORDS = ['and', 'in', 'is', 'not', 'or']\n"
                    "KEYWORD_REGEX = re.compile(r'(\\s*)\\b(?:%s)\\b(\\s*)' % r'|'.join(KEYWORDS))\n\n")
KEYWORDS = '''def whitespace_around_keywords(logical_line):
    for match in KEYWORD_REGEX.finditer(logical_line):
        before, after = match.groups()
        if "\\t" in before:
            yield match.start(1), "E274 tab before keyword"
        elif len(before) > 1:
            yield match.start(1), "E272 multiple spaces before keyword"
        if "\\t" in after:
            yield match.start(2), "E273 tab after keyword"
        elif len(after) > 1:
            yield match.start(2), "E271 multiple spaces after keyword"
'''

LATE_METHOD = '''@classmethod
def from_rows(cls, rows, key=None):
    if key is None:
        return [cls(row) for row in rows]
    return {row[key]: cls(row) for row in rows}
'''

COMPAT_CONTEXT = "import re\nfrom datetime import date, datetime\n\nfrom six import string_types\n\n"
COMPAT = '''def to_datetime(value):
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, string_types):
        found = re.match(r"(\\d{4})-(\\d{2})-(\\d{2})$", value)
        if not found:
            raise ValueError("not a date: " + value)
        return datetime(*(int(part) for part in found.groups()))
    raise TypeError(type(value).__name__)
'''

NEW_CONTEXT = '''import posixpath


class PartName(str):
    def __new__(cls, text):
        if not text[:1] == "/":
            raise ValueError("a part name begins with a slash: %r" % text)
        return str.__new__(cls, text)

'''
NEW = '''    def parts(self):
        if self == "/":
            return []
        return posixpath.normpath(self[1:]).split("/")
'''

HANDLER_CONTEXT = "from .validators import Validator\n\n\nclass ValidationError(Exception):\n    pass\n\n\n"
HANDLER = '''def validate_any(validators, settings):
    errors = []
    for validator in validators:
        try:
            validator.validate(settings)
        except ValidationError as error:
            errors.append(error)
            continue
        else:
            return True
    raise ValidationError(len(errors))
'''


def _compare(x: str, context: str = "") -> object:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        return asyncio.run(ex.compare(x, [], context=context))
    finally:
        ex.close()


@needs_bwrap
def test_items_subscripted_by_key_are_records() -> None:
    for x in (RECORDS, ENUMERATED):
        result = _compare(x)
        # before: lists of numbers only, every ``chunk["fourcc"]`` a TypeError (coverage 0.50 and 0.60)
        assert result.conclusive and result.coverage == 1.0, (x, result.reason)
        records = [i.state["args"]["chunks"] for i in result.inputs if i.valid]
        assert any("{'fourcc': b'XMP '}" in r or "{'fourcc': b'EXIF'}" in r for r in records), records


@needs_bwrap
def test_texts_split_on_a_separator_hold_it() -> None:
    result = _compare(PARAMS)
    # before: ';' alone, and texts without one (coverage 0.50: no second part)
    assert result.conclusive and result.coverage >= 0.9, result.reason
    assert any(";" in i.state["args"]["params"].strip("';") for i in result.inputs if i.valid)


@needs_bwrap
def test_items_of_an_attribute_are_texts_the_body_splits() -> None:
    result = _compare(HEADERS)
    # before: ``message.headers`` held numbers (``[1]``) or nothing: coverage 0.56
    assert result.conclusive and result.coverage == 1.0, result.reason


@needs_bwrap
def test_keys_checked_in_a_loop_and_a_literal_mappings_keys() -> None:
    result = _compare(REQUIRED)
    # before: mappings without "x", "y", "crv" (``k in jwk for k in [...]`` named none), and no "crv" the literal
    # mapping has: coverage 0.50
    assert result.conclusive and result.coverage >= 0.8, result.reason
    assert any("'crv': 'P-384'" in i.state["args"]["jwk"] for i in result.inputs if i.valid)


@needs_bwrap
def test_a_text_finditer_found_nothing_in_is_rewritten_to_match() -> None:
    result = _compare(KEYWORDS, KEYWORDS_CONTEXT)
    # before: no text with a keyword in it (the pattern is built at run time, so no sample of it is mined;
    # pycodestyle's ``whitespace_around_keywords``: coverage 0.10)
    assert result.conclusive and result.coverage >= 0.8, result.reason


@needs_bwrap
def test_a_module_level_classmethod_is_called_with_its_cls() -> None:
    result = _compare(LATE_METHOD)
    # before: the classmethod object itself was called (``TypeError``): no valid input (agate's ``from_json``)
    assert result.valid_inputs >= 8 and result.coverage == 1.0, result.reason


def test_python2_compatibility_names_are_types() -> None:
    node = ast.parse(COMPAT).body[0]
    assert hints.analyse(node, skip_first=False).params[0].types == ["none", "datetime", "date", "object", "str"]
    other = ast.parse("def f(a, b, c, d, e):\n    return isinstance(a, compat.text_type), "
                      "isinstance(b, six.binary_type), isinstance(c, six.integer_types), "
                      "isinstance(d, (int, long)), isinstance(e, basestring)\n").body[0]
    assert [p.types for p in hints.analyse(other, skip_first=False).params] == [["str"], ["bytes"], ["int"], ["int"],
                                                                               ["str"]]
    # a name imported from six is the module's alias (globalrefs.type_aliases), resolved for x's own parameters only
    bare = ast.parse("def f(a):\n    return isinstance(a, integer_types)\n").body[0]
    assert hints.analyse(bare, skip_first=False).params[0].types == []


@needs_bwrap
def test_six_string_types_asks_for_a_text() -> None:
    result = _compare(COMPAT, COMPAT_CONTEXT)
    # before: dates, objects and lists first, no text in ten inputs (the regex branch never reached)
    assert result.conclusive, result.reason
    texts = [i for i in result.inputs if i.valid and i.state["args"]["value"].startswith("'")]
    assert texts, [i.state for i in result.inputs]
    assert result.coverage >= 0.9


@needs_bwrap
def test_a_str_subclass_is_built_by_its_new() -> None:
    result = _compare(NEW, NEW_CONTEXT)
    assert result.conclusive, result.reason
    selves = [i.state.get("self", "") for i in result.inputs if i.valid]
    assert any(s.startswith("New('PartName', '/") for s in selves), selves


@needs_bwrap
def test_failing_stand_ins_reach_handlers_of_the_files_exception_class() -> None:
    result = _compare(HANDLER, HANDLER_CONTEXT)
    # before: coverage 0.75, ``errors.append(error)`` never reached (the stand-in's failure is no ValidationError)
    assert result.conclusive and result.coverage == 1.0, result.reason
    assert any(i.state.get("standins") in ("raise", "raise_in_try") for i in result.inputs if i.valid)
