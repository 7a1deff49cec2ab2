"""What x's file says about its inputs beyond x's own body (issue 24 §2, ninth round).

- a parameter handed on to a function, method, base initialiser or class of the file takes what that
  callee does with it (``super().__init__(subcon)`` whose ``__init__`` checks ``isinstance(subcon,
  Construct)``: :func:`.callees.add_forwarded`);
- a parameter unpacked into names (``ltext, lnum = lpair``) takes values exactly that wide;
- an attribute asked about with ``hasattr`` is left out of some objects;
- the items of a parameter checked with ``isinstance(v, Continuation)`` in a loop over it are instances;
- a class built on ``dict`` with no ``__init__`` of its own is built from a mapping;
- a loop that catches ``TypeError`` around ``v in seen`` gets unhashable items;
- ``type(p) is DateTuple`` with a named tuple of the file builds it with all its fields;
- a withheld compatibility type as a base class (``class V(compat.unicode_type)``) is the builtin;
- a file named in ``self`` (``New('Config', 'input.txt')``) is written like one named in an argument;
- an import in x of a module of Python 2 only raises ``ImportError``, as Python 3 does;
- (twenty-fourth round) a parameter handed to a function x defines in its own body takes that function's uses.
Each sandboxed case's figure before these changes (5f329d3) is in its comment."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import callees, globalrefs, hints, scaffold, synth
from calib.executors.sandbox.harness.standins import PYTHON2_MODULES, StandInFinder
from calib.executors.sandbox.harness.values import New, Obj, decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _run(function: str, context: str = "", candidates: list[str] | None = None) -> object:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    return asyncio.run(executor.compare(function, candidates or [], context=context))


FORWARD_CONTEXT = (
    "class Construct:\n"
    "    def __init__(self):\n"
    "        self.flagbuildnone = False\n"
    "\n"
    "\n"
    "class Subconstruct(Construct):\n"
    "    def __init__(self, subcon):\n"
    "        if not isinstance(subcon, Construct):\n"
    "            raise TypeError('subcon should be a Construct field')\n"
    "        super().__init__()\n"
    "        self.subcon = subcon\n"
    "        self.flagbuildnone = subcon.flagbuildnone\n"
    "\n"
    "\n"
    "class Compressed(Subconstruct):\n"
)
COMPRESSED = (
    "    def __init__(self, subcon, encoding, level=None):\n"
    "        super().__init__(subcon)\n"
    "        self.encoding = encoding\n"
    "        self.level = level\n"
    "        if self.encoding == 'zlib':\n"
    "            self.lib = 'zlib'\n"
    "        elif self.encoding == 'gzip':\n"
    "            self.lib = 'gzip'\n"
    "        else:\n"
    "            self.lib = 'codecs'\n"
)


def test_a_parameter_handed_to_a_base_initialiser_takes_its_hints() -> None:
    placed = scaffold.place(FORWARD_CONTEXT, COMPRESSED)
    info = hints.analyse(placed.node, skip_first=True)
    assert "Construct" not in info.params[0].classes
    callees.add_forwarded(info, placed)
    assert info.params[0].classes == ["Construct"]  # from Subconstruct.__init__'s isinstance check
    assert info.params[1].classes == []  # encoding is not handed on


@needs_bwrap
def test_a_base_initialisers_check_is_passed() -> None:
    result = _run(COMPRESSED, FORWARD_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.12, every subcon failed the base's check)
    assert any(item.valid and "New('Construct'" in item.state["args"]["subcon"] for item in result.inputs)


MERGE = (
    "def merge(lpair, rpair):\n"
    "    ltext, lnum = lpair\n"
    "    rtext, rnum = rpair\n"
    "    if lnum == 1:\n"
    "        return (rtext, rnum)\n"
    "    elif lnum > rnum:\n"
    "        return ('%s-%s' % (ltext, rtext), lnum + rnum)\n"
    "    return ('%s %s' % (ltext, rtext), lnum * rnum)\n"
)


def test_an_unpacked_parameter_takes_values_exactly_that_wide() -> None:
    info = hints.analyse(ast.parse(MERGE).body[0], skip_first=False)
    assert "tuple" in info.params[0].types and "unpack2" in info.params[0].element
    pools = synth.Pools(info, random.Random(0))
    pairs = [v for v in pools.by_param["lpair"] if isinstance(v, tuple) and len(v) == 2]
    assert len(pairs) >= 6 and any(isinstance(a, str) and isinstance(b, int) for a, b in pairs)


@needs_bwrap
def test_unpacked_pairs_reach_every_branch() -> None:
    result = _run(MERGE)
    assert result.conclusive, result.reason  # (before: 0.29, no value unpacked into two names)
    assert result.coverage == 1.0
    namespace: dict[str, object] = {}
    exec(MERGE, namespace)  # noqa: S102 - the test's own source: checked against Python here
    returned = 0
    for item in (i for i in result.inputs if i.valid):
        output = json.loads(item.output)
        try:
            expected = namespace["merge"](decode(item.state["args"]["lpair"]),  # type: ignore[operator]
                                          decode(item.state["args"]["rpair"]))
        except Exception as exc:  # noqa: BLE001 - what x raised for it
            assert output["exception"] == type(exc).__name__
            continue
        if all(isinstance(v, int | str) and not isinstance(v, bool) for v in expected):
            assert output["return"] == {"tuple": list(expected)}
            returned += 1
    assert returned >= 3


TZID = (
    "def tzid_from_dt(dt):\n"
    "    tzid = None\n"
    "    if hasattr(dt.tzinfo, 'zone'):\n"
    "        tzid = dt.tzinfo.zone\n"
    "    elif hasattr(dt.tzinfo, 'tzname'):\n"
    "        try:\n"
    "            tzid = dt.tzinfo.tzname(dt)\n"
    "        except AttributeError:\n"
    "            pass\n"
    "    return tzid\n"
)


def test_an_attribute_asked_about_is_left_out_of_some_objects() -> None:
    info = hints.analyse(ast.parse(TZID).body[0], skip_first=False)
    tzinfo = info.params[0].children["tzinfo"]
    assert tzinfo.optional == ["zone", "tzname"]
    pools = synth.Pools(info, random.Random(0))
    inner = [v.tzinfo for v in pools.by_param["dt"] if isinstance(v, Obj) and isinstance(v.tzinfo, Obj)]
    assert any(not hasattr(o, "zone") and hasattr(o, "tzname") for o in inner)


@needs_bwrap
def test_a_hasattr_branch_is_reached() -> None:
    result = _run(TZID)
    assert result.conclusive, result.reason  # (before: 0.5, every object had ``zone``)
    assert result.coverage >= 0.8


TUPLE_CONTEXT = (
    "from collections import namedtuple\n"
    "DateTuple = namedtuple('Date', ['YYYY', 'MM', 'DD'])\n"
    "TimeTuple = namedtuple('Time', 'hh mm ss')\n"
    "SpanTuple = namedtuple('Span', 'start, end')\n"
    "\n"
    "\n"
)
BUILD = (
    "def build(parsed):\n"
    "    if type(parsed) is DateTuple:\n"
    "        return ('date', parsed.YYYY, parsed.MM)\n"
    "    if type(parsed) is TimeTuple:\n"
    "        return ('time', parsed.hh)\n"
    "    if type(parsed) is SpanTuple:\n"
    "        return ('span', parsed.end)\n"
    "    raise ValueError('not a parse tuple')\n"
)


def test_a_named_tuple_of_the_file_is_built_with_all_its_fields() -> None:
    tree = ast.parse(TUPLE_CONTEXT + BUILD)
    assert [globalrefs.tuple_width(tree, n) for n in ("DateTuple", "TimeTuple", "SpanTuple", "build")] == [3, 3, 2, 0]
    info = hints.analyse(tree.body[-1], skip_first=False)
    hints.mine_module(tree, info)
    assert info.params[0].classes == ["DateTuple", "TimeTuple", "SpanTuple"]  # ``type(p) is C``: isinstance
    pools = synth.Pools(info, random.Random(0))
    made = [v for v in pools.by_param["parsed"] if isinstance(v, New)]
    assert New("SpanTuple", None, None) in made and New("DateTuple", 1, 2, 3) in made


@needs_bwrap
def test_a_chain_of_type_checks_is_reached() -> None:
    result = _run(BUILD, TUPLE_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.57, no instance of any of the tuples)
    kinds = {json.loads(i.output).get("return", {}).get("tuple", [None])[0] for i in result.inputs if i.valid}
    assert {"date", "time", "span"} <= kinds


COMPAT_CONTEXT = (
    "import re\n"
    "from icalendar import compat\n"  # withheld: compat.unicode_type is a stand-in
    "RULE = re.compile(r'(?P<sign>[+-]?)(?P<day>[A-Z]{2})$')\n"
    "\n"
    "\n"
    "class vWeekday(compat.unicode_type):\n"
)
WEEKDAY = (
    "    def __new__(cls, value):\n"
    "        self = super(vWeekday, cls).__new__(cls, value)\n"
    "        match = RULE.match(self)\n"
    "        if match is None:\n"
    "            raise ValueError('Expected weekday abbrevation, got: %s' % self)\n"
    "        self.sign = match.group('sign') or '+'\n"
    "        return self\n"
)


@needs_bwrap
def test_a_withheld_compatibility_type_as_a_base_is_the_builtin() -> None:
    result = _run(WEEKDAY, COMPAT_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.17, object.__new__ refused the value)
    returned = [json.loads(i.output)["return"] for i in result.inputs if i.valid and "return" in i.output]
    assert any(r.get("type", "").endswith("vWeekday") and isinstance(r.get("value"), str) for r in returned)


FILE_CONTEXT = (
    "class Config:\n"
    "    def __init__(self, path):\n"
    "        self._path = path\n"
    "        self.linesep = None\n"
    "\n"
)
READ = (
    "    def read(self):\n"
    "        with open(self._path, encoding='utf-8', newline='') as f:\n"
    "            content = f.read()\n"
    "        lines = content.count('\\n')\n"
    "        if lines > 0:\n"
    "            windows = content.count('\\r\\n')\n"
    "            self.linesep = '\\r\\n' if windows == lines else '\\n'\n"
    "        return content.splitlines()\n"
)


@needs_bwrap
def test_a_file_named_by_self_is_written_for_the_input() -> None:
    result = _run(READ, FILE_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.71, the file self names was never written)
    named = [i for i in result.inputs if i.valid and "'input.txt'" in i.state["self"]]
    assert named and all("input.txt" in i.state["files"] for i in named)
    lines = [i.state["files"]["input.txt"].splitlines() for i in named]
    assert any(json.loads(i.output).get("return") == {"list": text} for i, text in zip(named, lines))


PICKLED = (
    "def load(data):\n"
    "    try:\n"
    "        import cPickle as pickle\n"
    "    except ImportError:\n"
    "        import pickle\n"
    "    return pickle.loads(data)\n"
)


def test_python2_modules_are_never_stand_ins() -> None:
    assert {"cPickle", "StringIO", "urllib2", "ConfigParser"} <= PYTHON2_MODULES
    StandInFinder.active = True
    try:
        assert StandInFinder.find_spec("cPickle") is None
        assert StandInFinder.find_spec("StringIO.sub") is None
    finally:
        StandInFinder.active = False


@needs_bwrap
def test_a_python2_import_falls_back_as_on_python3() -> None:
    result = _run(PICKLED)
    assert result.conclusive, result.reason  # (before: 0.75: cPickle was a stand-in, the handler never ran)
    assert result.coverage == 1.0
    loaded = [json.loads(i.output) for i in result.inputs if i.valid]
    assert not any(call[1].startswith("cPickle") for out in loaded for call in out["calls"])


ITEMS_CONTEXT = (
    "class Continuation:\n"
    "    def __init__(self, offset=3):\n"
    "        self.offset = offset\n"
    "\n"
    "\n"
)
FIRST_OFFSET = (
    "def first_offset(lines):\n"
    "    offset = None\n"
    "    for v in lines:\n"
    "        if isinstance(v, Continuation):\n"
    "            offset = v.offset\n"
    "            break\n"
    "    if offset is None:\n"
    "        return 'none'\n"
    "    return offset * 2\n"
)


def test_items_checked_against_a_file_class_are_its_instances() -> None:
    tree = ast.parse(ITEMS_CONTEXT + FIRST_OFFSET)
    info = hints.analyse(tree.body[-1], skip_first=False)
    assert info.params[0].element == ["class:Continuation"]
    pools = synth.Pools(info, random.Random(0))
    assert [New("Continuation")] in pools.by_param["lines"]


@needs_bwrap
def test_a_list_of_the_files_objects_reaches_the_branch_on_their_class() -> None:
    result = _run(FIRST_OFFSET, ITEMS_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.62, no list held a Continuation)
    assert result.coverage == 1.0
    assert 6 in {json.loads(i.output).get("return") for i in result.inputs if i.valid}  # Continuation(3).offset * 2


FROZEN_CONTEXT = (
    "class FrozenHashError(TypeError):\n"
    "    pass\n"
    "\n"
    "\n"
    "class FrozenDict(dict):\n"
)
FROZEN_HASH = (
    "    def __hash__(self):\n"
    "        try:\n"
    "            ret = self._hash\n"
    "        except AttributeError:\n"
    "            try:\n"
    "                ret = self._hash = hash(frozenset(self.items()))\n"
    "            except Exception as e:\n"
    "                ret = self._hash = FrozenHashError(e)\n"
    "        if ret.__class__ is FrozenHashError:\n"
    "            raise ret\n"
    "        return ret\n"
)


def test_a_class_built_on_a_builtin_container_is_built_from_its_value() -> None:
    placed = scaffold.place(FROZEN_CONTEXT, FROZEN_HASH)
    init = callees.constructor(placed)
    assert init is not None and [(p.name, p.types) for p in init] == [("items", ["dict"])]
    with_init = scaffold.place(FROZEN_CONTEXT + "    def __init__(self, a):\n        self.a = a\n\n", FROZEN_HASH)
    assert [p.name for p in callees.constructor(with_init)] == ["a"]  # its own __init__ says


@needs_bwrap
def test_a_dict_subclass_method_sees_the_dicts_items() -> None:
    result = _run(FROZEN_HASH, FROZEN_CONTEXT)
    # (before: 0.75, self built without its constructor: no items, one output)
    assert result.conclusive, result.reason
    hashed = [i for i in result.inputs if i.valid and "return" in json.loads(i.output)]
    assert len({i.output for i in hashed}) >= 2
    assert any(json.loads(i.output).get("exception") == "FrozenHashError" for i in result.inputs if i.valid)


ALL_UNIQUE = (
    "def all_unique(iterable, key=None):\n"
    "    seenset = set()\n"
    "    seenlist = []\n"
    "    for element in map(key, iterable) if key else iterable:\n"
    "        try:\n"
    "            if element in seenset:\n"
    "                return False\n"
    "            seenset.add(element)\n"
    "        except TypeError:\n"
    "            if element in seenlist:\n"
    "                return False\n"
    "            seenlist.append(element)\n"
    "    return True\n"
)


@needs_bwrap
def test_unhashable_items_reach_the_type_error_handler() -> None:
    info = hints.analyse(ast.parse(ALL_UNIQUE).body[0], skip_first=False)
    assert "unhashable" in info.params[0].element
    result = _run(ALL_UNIQUE)
    assert result.conclusive, result.reason  # (before: 0.73, every item hashable)
    assert result.coverage == 1.0


# knack's ``CLIHelp._print_header`` (tuning sample of issue 24's twenty-fourth round, coverage 0.57 before):
# what x's own nested function does with the parameter x hands it describes that parameter too
HEADER = (
    "def print_header(cli_name, help_file):\n"
    "    lines = [('Command' if help_file.type == 'command' else 'Group') + ' ' + cli_name]\n"
    "    if help_file.short_summary:\n"
    "        lines.append(help_file.short_summary)\n"
    "\n"
    "    def build_long_summary(item):\n"
    "        out = []\n"
    "        if item.long_summary:\n"
    "            out.append(item.long_summary)\n"
    "        if item.deprecate_info:\n"
    "            out.append(str(item.deprecate_info.message))\n"
    "        return '\\n'.join(out)\n"
    "\n"
    "    lines.append(build_long_summary(help_file))\n"
    "    return '\\n'.join(lines)\n"
)


def test_a_parameter_handed_to_a_nested_function_takes_its_attributes() -> None:
    placed = scaffold.place("", HEADER)
    info = hints.analyse(placed.node, skip_first=False)
    help_file = info.params[1]
    assert "long_summary" not in help_file.children
    callees.add_forwarded(info, placed)
    assert {"type", "short_summary", "long_summary", "deprecate_info"} <= set(help_file.children)
    assert "message" in help_file.children["deprecate_info"].children  # two levels, as in x's own body


@needs_bwrap
def test_a_parameter_handed_to_a_nested_function_reaches_its_lines() -> None:
    result = _run(HEADER)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8


LINETABLE = (
    "def linetable(first, entries: Iterable[Tuple[int, str, Optional[Location]]]) -> list:\n"
    "    rows = []\n"
    "    it = iter(entries)\n"
    "    for offset, name, where in it:\n"
    "        if where is None:\n"
    "            rows.append((offset - first, name.upper()))\n"
    "        else:\n"
    "            rows.append((offset, where.line))\n"
    "    return rows\n"
)
LOCATION_CONTEXT = (
    "from typing import Iterable, Optional, Tuple\n"
    "\n"
    "\n"
    "class Location:\n"
    "    def __init__(self, line=0):\n"
    "        self.line = line\n"
    "\n"
    "\n"
)


def test_items_annotated_as_tuples_are_that_wide_and_typed_by_position() -> None:
    # twenty-eighth round: before, the annotation gave only ``tuple`` items, rows of two numbers (``(0, -1)``)
    info = hints.analyse(ast.parse(LINETABLE).body[0], skip_first=False)
    entries = info.params[1]
    assert entries.element == ["tuple3"] and [p.types for p in entries.item.parts] == [["int"], ["str"], ["none"]]
    assert entries.item.parts[2].classes == ["Location"]
    rows = [r for v in synth.Pools(info, random.Random(0)).by_param["entries"] if isinstance(v, list) for r in v
            if isinstance(r, tuple)]
    assert rows and all(len(r) == 3 for r in rows)
    assert any(isinstance(r[0], int) and isinstance(r[1], str) and r[2] is None for r in rows)
    assert any(isinstance(r[2], New) and r[2].cls == "Location" for r in rows)
    # ``Tuple[int, ...]`` has no width: its items stay as they were
    info = hints.analyse(ast.parse("def f(xs: List[Tuple[int, ...]]):\n    return xs\n").body[0], skip_first=False)
    assert info.params[0].item is None and info.params[0].element == ["tuple"]


@needs_bwrap
def test_rows_typed_by_their_annotation_reach_each_branch() -> None:
    result = _run(LINETABLE, context=LOCATION_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.57, every row was two numbers: a ValueError unpacking it)
    assert result.coverage == 1.0
