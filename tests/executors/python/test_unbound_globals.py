"""Names x reads that the module would leave unbound, and parameters named like ``text1`` (issue 24 §2, twentieth
round, on the fourth fresh list's tuning sample).

- A global that only functions bind (``global _cur_menu`` in the function that starts the program, as
  kconfiglib's ``menuconfig`` does) does not exist when x is called: it is a stand-in, as a name the module never
  binds is. Before, every input was ``missing_name`` (a ``NameError``).
- A ``try`` importing a dependency whose handler ran and left the imported name unbound (``except ImportError:
  warnings.warn(...)``, a bare ``except: pass``) binds that name to a stand-in after the handler, as a failed
  import at the top of the file does; what the handler bound stays.
- A parameter's name ending in digits (``text1``, ``s2``, ``path_2``) suggests the type its name without them does,
  and a local bound to a parameter (``result = data``, ``(longtext, shorttext) = (text1, text2)``) describes it:
  diff-match-patch's ``diff_compute`` drew its texts as lists, whose ``find`` fails.
"""

from __future__ import annotations

import ast
import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, names, pools

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

MENU_CONTEXT = (
    "_tree = None\n"
    "\n"
    "def menuconfig(kconf):\n"
    "    global _kconf, _cur_menu, _tree\n"
    "    _kconf = kconf\n"
    "    _cur_menu = kconf.top_node\n"
    "    _tree = kconf.tree\n"
    "\n"
    "def _parent_menu(node):\n"
    "    return node.parent\n"
)
LEAVE = (
    "def _leave_menu(depth):\n"
    "    global _cur_menu\n"
    "    if _cur_menu is not _kconf.top_node:\n"
    "        old_menu = _cur_menu\n"
    "        _cur_menu = _parent_menu(_cur_menu)\n"
    "        _kconf.select(depth)\n"
    "        return old_menu, depth\n"
    "    return None\n"
)
OPTIONAL_CONTEXT = (
    "import warnings\n"
    "try:\n"
    "    import some_missing_tables as tablib\n"
    "    FORMATS = ['ods', 'xlsx']\n"
    "except ImportError:\n"
    "    FORMATS = []\n"
    "    warnings.warn('tablib not found')\n"
    "try:\n"
    "    import some_missing_fast_json as fast_json\n"
    "except ImportError:\n"
    "    import json as fast_json\n"
)
TABULATE = (
    "def tabulate(rows, title):\n"
    "    book = tablib.Dataset()\n"
    "    book.title = title\n"
    "    for row in rows:\n"
    "        book.append(row)\n"
    "    return fast_json.dumps({'title': title, 'formats': FORMATS}), book\n"
)
OVERLAP = (
    "def overlap(text1, text2):\n"
    "    if not text1 or not text2:\n"
    "        return 0\n"
    "    if len(text1) > len(text2):\n"
    "        (longtext, shorttext) = (text1, text2)\n"
    "    else:\n"
    "        (shorttext, longtext) = (text1, text2)\n"
    "    i = longtext.find(shorttext)\n"
    "    if i != -1:\n"
    "        return len(shorttext)\n"
    "    return -1\n"
)


def _compare(function: str, context: str) -> object:
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        return asyncio.run(executor.compare(function, [], context=context))
    finally:
        executor.close()


def test_a_global_only_functions_bind_is_unresolved() -> None:
    tree = ast.parse(MENU_CONTEXT + "\n" + LEAVE)
    # _tree is bound by the module itself; _kconf and _cur_menu only by menuconfig's ``global`` statement
    module_bound = names._scopes(tree)[0][0][2]  # the module's own scope: what its statements bind
    assert module_bound >= {"_tree", "menuconfig", "_parent_menu", "_leave_menu"}
    assert not module_bound & {"_kconf", "_cur_menu", "old_menu", "node"}
    assert names.unresolved_names(tree) == {"_kconf", "_cur_menu"}
    # the module binding it anywhere at its own level (in a block too) keeps it real
    assert names.unresolved_names(ast.parse("if True:\n    _kconf = 1\n" + MENU_CONTEXT + LEAVE)) == {"_cur_menu"}


def test_numbered_names_suggest_their_word_s_type() -> None:
    assert [pools.name_type(n) for n in ("text1", "s2", "path_2", "n1", "text")] == ["str", "str", "path", "int", "str"]
    assert pools.name_type("h2") is None  # no rule for ``h``: nothing made up
    # only digits are read through: ``__dict__`` is not ``*_dict`` (_collections_abc's ``_check_methods``, whose
    # ``C.__dict__`` was drawn as a mapping: coverage 0.89 -> 0.67)
    assert pools.name_type("__dict__") is None and pools.name_type("__dict2") == "dict"


def test_a_local_bound_to_a_parameter_describes_it() -> None:
    node = ast.parse(OVERLAP).body[0]
    info = hints.analyse(node, skip_first=False)
    text1 = next(p for p in info.params if p.name == "text1")
    # ``longtext.find(shorttext)`` through ``(longtext, shorttext) = (text1, text2)``: before, nothing read of text1
    assert "find" in text1.attrs, text1.attrs
    info = hints.analyse(ast.parse("def f(data):\n    result = data\n    return result.splitlines()\n").body[0],
                         skip_first=False)
    assert info.params[0].types == ["str"]  # before: [] (what result does said nothing of data)


@needs_bwrap
def test_x_reading_globals_only_functions_bind_is_conclusive() -> None:
    result = _compare(LEAVE, MENU_CONTEXT)
    # before: 0 valid inputs, all missing_name (NameError: _cur_menu)
    assert result.valid_inputs >= 8, [item.status for item in result.inputs]
    # every line but the last: two stand-ins are never the same object
    assert result.uncovered_lines == (8,), result.uncovered_lines
    assert result.conclusive, result.reason
    calls = {call[1] for item in result.inputs for call in json.loads(item.output)["calls"]}
    assert "_kconf.select" in calls, calls  # the stand-in _kconf, called


@needs_bwrap
def test_an_import_its_handler_left_unbound_is_a_stand_in() -> None:
    result = _compare(TABULATE, OPTIONAL_CONTEXT)
    assert result.conclusive, result.reason  # before: every input a NameError (tablib)
    outputs = [json.loads(item.output) for item in result.inputs if item.valid]
    returned = [o["return"] for o in outputs if "return" in o]
    assert returned, outputs[:2]
    # what the handlers bound stays: FORMATS is the handler's [], fast_json the real json module
    summary = json.loads(returned[0]["tuple"][0])
    assert summary["formats"] == []
    assert any(call[1].startswith("some_missing_tables.Dataset") for o in outputs for call in o["calls"])


@needs_bwrap
def test_numbered_texts_are_drawn_as_texts() -> None:
    result = _compare(OVERLAP, "")
    assert result.conclusive, result.reason  # before: coverage 0.67, the texts drawn as lists (no ``find``)
    found = [json.loads(item.output).get("return") for item in result.inputs if item.valid]
    assert -1 in found, found  # ``find`` ran on texts


ENV_CONTEXT = (
    "class Parser(object):\n"
    "    envtypes = {'+*': ['unnumbered', 0], '+#': ['numbered', 0], '+;': ['defn', 0], '+:': ['defn', 1]}\n"
)
LEVEL = (
    "    def level(self, mark):\n"
    "        kind, depth = self.envtypes[mark[:2]]\n"
    "        if kind == 'numbered':\n"
    "            return len(mark)\n"
    "        if kind == 'defn':\n"
    "            return -depth\n"
    "        return 0\n"
)


def test_an_attribute_s_mapping_is_recorded_like_a_module_table() -> None:
    # wikitrans's ``self.envtypes[tok.content[0]]``: a key the class's mapping lacks is paired with its keys
    node = ast.parse("def f(self, tok):\n    return self.envtypes[tok], TABLE[tok], self.items[0:2], os.environ[tok]\n"
                     ).body[0]
    from calib.executors.sandbox.harness import cmplog  # noqa: PLC0415

    cmplog.instrument(node, ast.parse(""))
    text = ast.unparse(node)
    assert "item(self.envtypes, tok)" in text and "item(TABLE, tok)" in text, text
    assert "self.items[0:2]" in text  # a slice is not a lookup
    # nor a module's mapping: ``os.environ["COMP_WORDS"]`` stays as written, where the search finds x's environment
    # variables (click's ``FishComplete.get_completion_args``: coverage 0.88 -> 0.12 when it was rewritten)
    assert "os.environ[tok]" in text


@needs_bwrap
def test_a_key_an_attribute_s_mapping_lacks_is_written_into_the_input() -> None:
    result = _compare(LEVEL, ENV_CONTEXT)
    assert result.coverage == 1.0, result.uncovered_lines  # before: 0.17, every mark a KeyError
    assert result.conclusive, result.reason


# ------------------------------------------------------------------ globals by scope (twenty-ninth round)
# avro's compatibility.py: ``check_fixed_size`` calls ``incompatible``, defined later in the file than x (so not in
# its context), while a class of the context has an attribute of that name; a name bound in any scope counted as
# bound, so ``incompatible`` was no stand-in and every input reaching the call raised NameError (missing_name)
SCHEMA_CONTEXT = '''from enum import Enum


class CompatibilityType(Enum):
    compatible = "compatible"
    incompatible = "incompatible"


def check_names(reader, writer, location):
    result = "compatible"
    if reader.name != writer.name:
        result = incompatible("name_mismatch", f"expected: {writer.name}", location + ["name"])
    return result


'''
CHECK_SIZE = '''def check_fixed_size(reader, writer, location):
    result = CompatibilityType.compatible
    actual = reader.size
    expected = writer.size
    if actual != expected:
        message = f"expected: {expected}, found: {actual}"
        result = incompatible("fixed_size_mismatch", message, location + ["size"])
    return result
'''
# every way a name is bound in a scope of its own, and read from another
SCOPED = '''import os.path as osp
from json import loads
LIMIT = 3
class Box:
    size = LIMIT
    label = size + 1            # the class's own attribute
    def grow(self, by=size):    # a default: read in the class body
        return self.size + by + width   # ``width``: a global no statement binds (the parameter below is not it)
    def scaled(self):
        return [size * k for k in range(LIMIT)]  # ``size``: not the class's, a global (unbound)
def outer(width, *args, **kw):
    total = 0
    def inner():
        nonlocal total
        total += width + helper(args, kw)   # width, args, kw: outer's; helper: a global
        return total
    def later():
        global counter
        counter = lambda step=LIMIT: step + missing
        return counter() + len([w for w in (width,) if w > cutoff])
    try:
        fallback = xrange
    except NameError as err:
        fallback = range
    match kw:
        case {"size": found, **rest}:
            return found, rest, err, osp, loads
    return inner, later, fallback, Box, total, hidden
'''


def _symtable_globals(source: str) -> set[str]:
    """The reference: Python's own symbol tables (``symtable``), the names read as globals in any scope (the
    module's reads included) that the module's own scope never binds, less builtins and dunders."""
    import builtins  # noqa: PLC0415
    import symtable  # noqa: PLC0415

    top = symtable.symtable(source, "<module>", "exec")
    read, stack = set(), [top]
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        read |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and (table is top or s.is_global())}
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    return {n for n in read - bound if not hasattr(builtins, n) and not (n.startswith("__") and n.endswith("__"))}


@pytest.mark.parametrize("source", [SCHEMA_CONTEXT + CHECK_SIZE, SCOPED, MENU_CONTEXT + "\n" + LEAVE],
                         ids=["avro", "scopes", "kconfiglib"])
def test_unresolved_names_are_the_globals_pythons_symbol_tables_find_unbound(source: str) -> None:
    # ``xrange`` of SCOPED is probed for a NameError: read, bound nowhere, and no stand-in (the only difference)
    assert names.unresolved_names(ast.parse(source)) == _symtable_globals(source) - {"xrange"}


def test_a_name_bound_only_in_another_scope_is_still_an_unbound_global() -> None:
    assert names.unresolved_names(ast.parse(SCHEMA_CONTEXT + CHECK_SIZE)) == {"incompatible"}
    assert names.unresolved_names(ast.parse(SCOPED)) == {"width", "size", "helper", "counter", "missing", "cutoff",
                                                          "hidden"}


@needs_bwrap
def test_x_calling_a_helper_defined_after_it_reaches_the_call() -> None:
    result = _compare(CHECK_SIZE, SCHEMA_CONTEXT)
    # before: the inputs reaching the call were missing_name, so lines 6-7 were never covered by a valid one
    assert "missing_name" not in {item.reason for item in result.inputs}, [i.reason for i in result.inputs]
    assert result.coverage == 1.0 and result.conclusive, result.reason
    calls = {call[1] for item in result.inputs for call in json.loads(item.output)["calls"]}
    assert "incompatible" in calls, calls
