"""A text taken apart by its first and last characters: ``fmt[0][0] != "("``, ``fmt[0][-1] != ")"``, then
``int(fmt[0][1:-1])`` (issue 24 §2).

dbf's field-spec parsers (``add_character``, ``add_vfp_character`` ...; list 4, seeds 31-35, the thirty-second
round's tuning sample) reached 0.20 of their lines: no input got past the first check. Three things stood in the way
of the rewrites that would pass it:

- the hints read ``fmt[0]`` as a list first (it is indexed), so its items were lists; an item indexed and compared
  with one character is now a text first (``uses.compare_use``);
- the comparison recorder kept slices of a text with their place (``cmplog.cut``) but not a character at an index:
  ``s[-1] != ")"`` rewrote the first ``"c"`` of the input, not the last; now ``s[0]``, ``s[-1]`` are kept with the
  text and their index (``cmplog.at``), and the rewrite puts the character there (``"abc"`` → ``"(bc"`` → ``"(b)"``).
  Where the index from the end would overwrite the start (``"("``), the character is added (``"()"``);
- ``int(s[1:-1])`` of ``"()"``: the empty slice between was not kept (only one past a short text's end); now it is,
  and its number goes between (``"(1)"``, kind ``insert``), the end kept.

dbf's own functions stay short of the criteria: their searches spend the run budget walking long pools before any
replacement runs (docs/executors.md, Measured, thirty-second round). This module's shorter one is reached.
"""

from __future__ import annotations

import ast
import asyncio

from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, hints, redqueen, shapes
from tests.executors.python.test_magic_numbers import _recorded as recorded
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class FieldSpecError(ValueError):\n"
    "    pass\n"
    "\n"
    "FLAGS = {'binary': 1, 'nocptrans': 2, 'null': 4}\n"
    "\n"
)
X = (
    "def add_character(format, flags):\n"
    "    if format[0][0] != '(' or format[0][-1] != ')' or any([f not in flags for f in format[1:]]):\n"
    "        raise FieldSpecError(\"Format for Character field creation is 'C(n)%s', not 'C%s'\" % (format, flags))\n"
    "    length = int(format[0][1:-1])\n"
    "    if not 0 < length < 256:\n"
    "        raise FieldSpecError('Character fields must be between 1 and 255, not %d' % length)\n"
    "    return length, [FLAGS[f] for f in format[1:]]\n"
)


def _recorded(source: str) -> dict:
    namespace = recorded(source)  # x instrumented as the search runs it (test_magic_numbers)
    namespace.update(FieldSpecError=ValueError, FLAGS={})
    return namespace


def _step(add: object, value: list[str]) -> tuple[list, list[dict]]:
    try:
        add(value, [])  # type: ignore[operator]
    except ValueError:
        pass
    pairs = cmplog.take_pairs()
    return pairs, redqueen.replacements({"format": value}, [p for p in pairs if p[0] in ("at", "insert")])


def test_a_character_at_an_index_is_recorded_with_its_place_and_written_there() -> None:
    add = _recorded(X)["add_character"]
    pairs, out = _step(add, ["abc"])
    assert ("at", "abc", (0, "(")) in pairs and out == [{"format": ["(bc"]}]
    pairs, out = _step(add, ["(bc"])
    assert ("at", "(bc", (-1, ")")) in pairs and out == [{"format": ["(b)"]}]  # the last character, not the first
    pairs, out = _step(add, ["("])
    assert out == [{"format": ["()"]}]  # added: the one character is also the first, which held
    pairs, out = _step(add, ["()"])
    assert ("insert", "()", (1, "1")) in pairs and out == [{"format": ["(1)"]}]
    assert add(["(1)"], []) == (1, [])
    assert shapes.put("abc", -1, ")") == "ab)" and shapes.put("(", -1, ")") == "()"
    assert shapes.put("ab", 3, "c") == "ab c"  # a place past the end: padded, as before


def test_an_item_indexed_and_compared_with_a_character_is_a_text_first() -> None:
    info = hints.analyse(ast.parse(X).body[0], skip_first=False)
    fmt = info.params[0]
    assert fmt.types[0] == "list" and fmt.item is not None and fmt.item.types[0] == "str"  # before: ["list", "str"]
    plain = hints.analyse(ast.parse("def f(s):\n    return s[-1] == ')' and s[:2]\n").body[0], skip_first=False)
    assert plain.params[0].types[0] == "str"


@needs_bwrap
def test_a_bracketed_size_is_reached(executor: SandboxExecutor) -> None:
    result = asyncio.run(executor.compare(X, [X.replace("< 256", "<= 256")], context=CONTEXT))
    # before: coverage 0.20, every input raised at the first check
    assert result.conclusive and result.coverage >= 0.8, result.reason
    returns = [i.output for i in result.inputs if i.valid and '"return"' in (i.output or "")]
    assert returns  # a size read from between the brackets
