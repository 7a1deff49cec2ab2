"""Inputs that are code, and what x's file reads before x runs (issue 24 §2, twenty-fifth round).

- a parameter x inspects as a function (``inspect.getdoc(operation)``, ``inspect.signature(fn)``, ``fn.__func__``)
  takes functions of several signatures and docstring styles, built per run from their source
  (``Code('def fetch(url, timeout=10): ...')``, :mod:`.funcs`);
- a parameter x reads as a type (``type_.__dataclass_fields__``, ``cls.__annotations__``, ``get_origin(tp)``) takes a
  dataclass, an enum, a ``TypedDict`` (with a ``Literal`` field), a ``NamedTuple`` and type hints, built the same way;
- a parameter x parses as Python source (``ast.parse(function_source)``) takes source texts;
- ``input()`` under another module-level name (``raw_input = input`` in a ``try``) reads stdin like ``input()``;
- ``self`` attributes a decorator of the file reads before x runs (``if cls.authenticated: return meth(cls, ...)``)
  are attributes of the input's ``self``;
- a method that a method of x's class calls, defined after x in the file (outside its context), is a stand-in.
- the ``self`` of a method of a named tuple's subclass is built by its constructor, from its fields.
- bytes x writes to ``sys.stdout.buffer`` (or to what ``sys.stdout.detach()`` gives) are its output, as text is.
- what x does with an item at a position (``tag.contents[0].strip()``) describes the items, as a loop over them does.
- an item at a position checked with ``isinstance`` (``root = doc.children[0]``; ``isinstance(root, Division)``) is an
  instance of that class of the file, first.
Each sandboxed case's figure before these changes (01284c0) is in its comment."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import json
import random
import shutil
import typing

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor, _well_formed_state
from calib.executors.sandbox.harness import callees, env, fixups, funcs, hints, inputs, pools, scaffold
from calib.executors.sandbox.harness.values import decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = "") -> object:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        return asyncio.run(executor.compare(truth, candidates, context=context))
    finally:
        executor.close()


def _pools(source: str, name: str) -> pools.Pools:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    info = hints.analyse(node, skip_first=False)
    hints.mine_module(tree, info)
    return pools.Pools(info, random.Random(0))


# knack's ``option_descriptions`` (introspection.py), shortened: the ``:param`` lines of a command's docstring
DESCRIPTIONS = '''\
def option_descriptions(operation):
    lines = inspect.getdoc(operation)
    if not lines:
        return {}
    breaks = [":param", ":type", ":return", ":rtype"]
    found = {}
    lines = lines.splitlines()
    index = 0
    while index < len(lines):
        match = re.search(r"\\s*(:param)\\s+(.+?)\\s*:(.*)", lines[index])
        if not match:
            index += 1
            continue
        name = match.group(2).split()[-1]
        text = match.group(3).strip()
        index += 1
        while index < len(lines):
            more = lines[index].strip()
            if any(more.startswith(b) for b in breaks):
                break
            if more:
                text += " " + more
            index += 1
        found[name] = text
    return found
'''
FIRST_LINE_ONLY = DESCRIPTIONS.replace('            if more:\n                text += " " + more\n', "")


@needs_bwrap
def test_a_function_x_reads_the_docstring_of_is_an_input() -> None:
    # at 01284c0: coverage 0.54, one output state (no value of the pool had a docstring with :param lines)
    result = _compare(DESCRIPTIONS, [DESCRIPTIONS, FIRST_LINE_ONLY], context="import inspect\nimport re\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert any(str(i.state["args"]["operation"]).startswith("Code(") for i in result.inputs)
    returned = [json.loads(i.output).get("return") for i in result.inputs if i.valid]
    assert any(r != {"dict": []} for r in returned)  # some input's docstring had parameters
    same, first_line = result.candidates
    assert same.sim_func == 1.0
    assert first_line.sim_func is not None and first_line.sim_func < 1.0  # the continued :param line tells it


SIGNATURE = '''\
def parameters(function):
    if inspect.ismethod(function):
        function = function.__func__
    found = []
    for name, p in inspect.signature(function).parameters.items():
        if p.kind == p.VAR_POSITIONAL:
            found.append("*" + name)
        elif p.kind == p.VAR_KEYWORD:
            found.append("**" + name)
        elif p.default is not p.empty:
            found.append(name + "=")
        else:
            found.append(name)
    return found
'''


@needs_bwrap
def test_a_function_whose_signature_x_reads_is_an_input() -> None:
    # at 01284c0: coverage 0.67 (``inspect.signature`` of every pooled value raised or had no parameters)
    result = _compare(SIGNATURE, [], context="import inspect\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0


GET_ARGS = '''\
def get_function_args(function_source):
    try:
        node = ast.parse(function_source.lstrip()).body[0].args
    except SyntaxError:
        return []
    return [a.arg for a in chain(node.args, node.kwonlyargs)]
'''


@needs_bwrap
def test_a_text_x_parses_as_python_source_is_an_input() -> None:
    # pydocstyle's ``get_function_args``; at 01284c0: coverage 0.75 (no pooled text held a function)
    result = _compare(GET_ARGS, [], context="import ast\nfrom itertools import chain\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    returned = [json.loads(i.output).get("return") for i in result.inputs if i.valid]
    assert any(isinstance(r, dict) and len(r.get("list", [])) >= 2 for r in returned)  # a def's parameters


def test_functions_are_built_per_run_with_their_source() -> None:
    values = funcs.examples()
    assert [decode(encode(v)) for v in values] == values  # they travel as text, like every input value
    made = [funcs.build(v) for v in values]
    assert made[0] is not funcs.build(values[0])  # a fresh function each run: x may set its attributes
    assert inspect.getdoc(made[0]).startswith("Compute a value.") and ":param first:" in inspect.getdoc(made[0])
    assert inspect.getsource(made[1]).startswith("def fetch(url, timeout=10):")
    assert inspect.ismethod(made[2]) and list(inspect.signature(made[2]).parameters) == ["left", "right", "how"]
    assert made[4](3) == 3  # a lambda source gives the lambda
    point, color, movie, pair, flags, child, *hints_ = [funcs.build(v) for v in funcs.types()]
    assert dataclasses.is_dataclass(point) and [f.name for f in dataclasses.fields(point)] == ["x", "y", "label"]
    assert typing.get_type_hints(point) == {"x": int, "y": float, "label": str}  # types, not texts
    assert [m.value for m in color] == [1, "green"] and movie.__total__ is False and pair._fields == ("left", "right")
    assert flags.__bases__ == (object,) and flags.WRITE == 2 and child.__mro__[1].__name__ == "Base"
    assert hints_[:3] == [typing.List[int], typing.Dict[str, int], typing.Optional[str]]
    assert typing.get_args(hints_[5]) == ("a", 1) and hints_[-1] is int
    assert all(ast.parse(s) for s in funcs.sources()[:-1])
    with pytest.raises(SyntaxError):  # and one text that does not parse (``except SyntaxError``)
        ast.parse(funcs.sources()[-1])


def test_only_parameters_inspected_as_functions_take_functions() -> None:
    source = (
        "def x(operation, cls, text, other, tp, record):\n"
        "    doc = inspect.getdoc(operation)\n"
        "    name = cls.__name__\n"  # classes have names and docstrings too: not a sign of a function
        "    tree = ast.parse(textwrap.dedent(text))\n"
        "    origin = typing.get_origin(tp)\n"
        "    return doc, name, tree, other.__func__, fields(record)\n"  # a bare ``fields``: maybe the file's own
    )
    p = _pools(source, "x")
    kinds = {q.name: q.types for q in p.hints.params}
    assert kinds["operation"][0] == "function" and kinds["other"][0] == "function"
    assert not {"function", "source", "type"} & set(kinds["cls"] + kinds["record"])
    assert kinds["text"][0] == "source" and kinds["tp"][0] == "type"
    assert p.by_param["tp"][0] == funcs.Code(funcs.TYPES[0])
    assert isinstance(p.by_param["operation"][0], funcs.Code)
    assert p.by_param["text"][0] == funcs.SOURCES[0]


YES_NO = '''\
def yn(prompt, default="y"):
    if default not in ["y", "n"]:
        default = "y"
    while True:
        answer = raw_input(prompt + " [y/n] ").strip()
        if answer == "":
            return True
        if re.match("y(?:es)?", answer, re.I):
            return default == "y"
        elif re.match("n(?:o)?", answer, re.I):
            return default == "n"
'''
YES_NO_CONTEXT = "import re\ntry:\n    raw_input\nexcept NameError:\n    raw_input = input\n"


@needs_bwrap
def test_input_under_another_module_name_reads_stdin() -> None:
    # clint's ``yn``; at 01284c0: coverage 0.40 (no input state had stdin: every ``raw_input`` met its end)
    result = _compare(YES_NO, [], context=YES_NO_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all(isinstance(i.state.get("stdin"), str) for i in result.inputs)


def test_scan_knows_the_module_names_of_input() -> None:
    tree = ast.parse(YES_NO_CONTEXT + "from six.moves import input as ask\n" + YES_NO)
    node = tree.body[-1]
    uses = inputs.scan(node, tree, {"prompt", "default"})
    assert uses.stdin and uses.stdin_lines == 1
    shadowed = ast.parse("def x(raw_input):\n    return raw_input('?')\n")  # a parameter of that name: not stdin
    assert not inputs.scan(shadowed.body[0], ast.parse(YES_NO_CONTEXT), {"raw_input"}).stdin


# typedload's ``_enumload``, reduced: an enum class and the value to load into it
ENUM_LOAD = '''\
def enumload(value, type_):
    names = list(type_.__members__)
    if not names:
        raise ValueError("%s has no members" % type_.__name__)
    for name, member in type_.__members__.items():
        if member.value == value or name == value:
            return member
    raise ValueError("%r not between %s" % (value, ", ".join(names)))
'''


@needs_bwrap
def test_a_class_x_loads_data_into_is_an_input() -> None:
    # at 01284c0: coverage 0.71 (``type_`` was an object with ``__members__``, never an enum)
    result = _compare(ENUM_LOAD, [])
    assert result.conclusive, result.reason
    assert any("class Color(Enum)" in str(i.state["args"]["type_"]) for i in result.inputs)


# the shape of a typed loader's look at a class's fields (typedload's ``discriminatorliterals``, written anew): which
# fields take a ``Literal``, and its values
LITERAL_FIELDS = '''\
def literal_fields(cls):
    try:
        fields = cls.__annotations__.items()
    except AttributeError:
        return {}
    found = {}
    for name, hint in fields:
        if getattr(hint, "__origin__", None) is not Literal:
            continue
        found[name] = sorted(map(str, hint.__args__))
    return found
'''


@needs_bwrap
def test_a_class_whose_annotations_x_reads_is_an_input() -> None:
    # at 8b42715: inconclusive, distinct_outputs 1 < 2 (``cls`` was an object with ``__annotations__`` of plain values:
    # every input gave ``{}``)
    result = _compare(LITERAL_FIELDS, [], context="from typing import Literal\n")
    assert result.conclusive, result.reason
    assert any("kind: Literal['film', 'series']" in str(i.state["args"]["cls"]) for i in result.inputs)
    assert any(json.loads(i.output)["return"] == {"dict": [["kind", {"list": ["film", "series"]}]]}
               for i in result.inputs)


GUARD_CONTEXT = '''\
class Error(Exception):
    pass


def authentication_required(meth):
    def check(cls, *args, **kwargs):
        if cls.authenticated:
            return meth(cls, *args, **kwargs)
        raise Error("Authentication required")
    return check


class Client:
    def __init__(self, host):
        self.host = host
        self.authenticated = False
        self.scripts = {}

'''
RENAME = '''\
    @authentication_required
    def rename(self, old, new):
        if old not in self.scripts:
            return "no such script"
        if new in self.scripts:
            return "exists"
        self.scripts[new] = self.scripts.pop(old)
        return "renamed"
'''


@needs_bwrap
def test_self_attributes_a_decorator_reads_are_inputs() -> None:
    # sievelib's ``@authentication_required``; at 01284c0: 0 valid inputs (call_failed: x's body never ran)
    result = _compare(RENAME, [], context=GUARD_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all("authenticated=" in i.state["self"] for i in result.inputs)
    returned = {json.loads(i.output).get("return") for i in result.inputs if i.valid}
    assert {"renamed", "exists", "no such script"} <= returned


def test_the_wrapper_that_hands_self_on_is_described() -> None:
    placed = scaffold.place(GUARD_CONTEXT, RENAME)
    info = hints.analyse(placed.node, skip_first=True)
    callees.add_guards(info, placed)
    assert "authenticated" in [p.name for p in info.self_params]
    # a decorator factory whose inner function only marks the method reads nothing of self
    marking = ("def check_for(kind):\n    def decorator(f):\n        f._check_for = kind\n        return f\n"
               "    return decorator\n\n\nclass Checker:\n    pass\n\n")
    placed = scaffold.place(marking, "    @check_for(1)\n    def check(self, node):\n        return self.seen\n")
    info = hints.analyse(placed.node, skip_first=True)
    callees.add_guards(info, placed)
    assert [p.name for p in info.self_params] == ["seen"]


# pyelftools' ``LocationParser``, shortened: x calls a static method defined before it, which calls two defined after
# it in the file (outside x's context)
PARSER_CONTEXT = '''\
class LocationParser(object):
    def __init__(self, location_lists):
        self.location_lists = location_lists

    @staticmethod
    def has_location(attr, version):
        return (LocationParser._is_loclistptr(attr) and
                (LocationParser._has_expr(attr, version) or LocationParser._has_list(attr, version)))

    def _describe(self, attr):
        return self._label(attr) + ":"

'''
PARSE_ATTRIBUTE = '''\
    def parse(self, attr, version):
        if self.has_location(attr, version):
            if self._has_expr(attr, version):
                return ("expr", attr.value)
            elif self._has_list(attr, version):
                return ("list", self.location_lists.get(attr.value))
            return self._describe(attr)
        else:
            raise ValueError("Attribute does not have location information")
'''


@needs_bwrap
def test_methods_a_callee_calls_that_stand_after_x_are_stand_ins() -> None:
    # at 01284c0: coverage 0.14, one output state (``LocationParser._is_loclistptr``: AttributeError on every input)
    result = _compare(PARSE_ATTRIBUTE, [], context=PARSER_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage >= 6 / 7  # (``return self._describe(attr)`` needs the three stand-ins' answers together)
    logged = [json.loads(i.output).get("calls", []) for i in result.inputs if i.valid]
    assert any(call[:2] == ["call", "LocationParser._is_loclistptr"] and len(call[2]["list"]) == 1
               for calls in logged for call in calls)  # called on the class: its one argument, as given


def test_callees_missing_names_what_stands_after_x() -> None:
    placed = scaffold.place(PARSER_CONTEXT, PARSE_ATTRIBUTE)
    methods = [m for m in placed.tree.body[0].body if isinstance(m, ast.FunctionDef) and m is not placed.node]
    found = dict(fixups.callees_missing(methods, placed.node, "LocationParser"))
    # x's own ``self._has_expr`` is left to the input's ``self``; the static method's calls on the class are static
    assert found == {"_is_loclistptr": True, "_has_expr": True, "_has_list": True, "_label": False}


# parsley's ``Term`` (terml/nodes.py), shortened: a method of a named tuple's subclass reads its fields
TERM_CONTEXT = '''\
from collections import namedtuple

_Term = namedtuple("Term", "tag data args")


class Term(_Term):
    def __new__(cls, tag, data, args):
        if data and args:
            raise ValueError("Term %s can't have both data and children" % (tag,))
        return _Term.__new__(cls, tag, data, tuple(args or ()))

'''
UNPARSE = '''\
    def unparse(self):
        if self.data is not None:
            if self.tag.name == ".String.":
                return '"%s"' % self.data
            return str(self.data)
        if self.tag.name == ".tuple.":
            return "[%d]" % len(self.args)
        return "%s(%d)" % (self.tag.name, len(self.args))
'''


@needs_bwrap
def test_a_named_tuples_self_is_built_from_its_fields() -> None:
    # at 01284c0: coverage 0.43, one output state (``self`` was a bare instance: its read-only fields stand-ins)
    result = _compare(UNPARSE, [], context=TERM_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all(i.state["self"].startswith("New('Term', ") for i in result.inputs)


def test_a_named_tuples_fields_are_its_constructors_parameters() -> None:
    placed = scaffold.place(TERM_CONTEXT, UNPARSE)
    info = hints.analyse(placed.node, skip_first=True)
    params = callees.constructor(placed, info)
    assert [p.name for p in params] == ["tag", "data", "args"]  # ``__new__``'s, in order
    assert "name" in params[0].attrs  # x's ``self.tag.name`` describes the constructor's ``tag``
    inline = scaffold.place("from collections import namedtuple\n\n\nclass P(namedtuple('P', ['x', 'y'])):\n"
                            "    pass\n\n", "    def norm(self):\n        return self.x.real + self.y\n")
    assert [p.name for p in callees.constructor(inline, hints.analyse(inline.node, skip_first=True))] == ["x", "y"]


def test_a_code_values_source_never_runs_on_the_host(tmp_path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('host')\nlambda: 0\n"
    state = {"args": {"operation": encode(funcs.Code(source))}}
    assert _well_formed_state(state)  # checked as text: a well-formed value
    assert decode(state["args"]["operation"]) == funcs.Code(source)
    assert not marker.exists()  # decoding made the placeholder only; its source runs in the sandbox, per run


EMIT = '''\
def emit(data, binary):
    if binary:
        out = sys.stdout.detach()  # (dkim's ``dkimsign``: ``sys.stdout = sys.stdout.detach()``)
        out.write(data if isinstance(data, bytes) else str(data).encode())
    elif isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        print(data)
    return len(data)
'''


@needs_bwrap
def test_bytes_written_to_stdouts_buffer_are_output() -> None:
    # at 01284c0: 0.86 of its lines (``sys.stdout.buffer`` and ``detach()`` raised AttributeError in every run)
    result = _compare(EMIT, [], context="import sys\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    binary = [(ast.literal_eval(i.state["args"]["data"]), json.loads(i.output)) for i in result.inputs
              if i.valid and i.state["args"]["data"].startswith("b'")]
    assert binary
    for data, out in binary:  # what went to the buffer is the output's stdout (bytes past UTF-8 as ``\\xff``)
        assert out["stdout"] == data.decode("utf-8", "backslashreplace") and out["return"] == len(data)


def test_the_capture_keeps_bytes_as_text() -> None:
    capture = env.Capture()
    capture.write("a")
    capture.buffer.write(b"b\xff")
    capture.detach().write(bytearray(b"c"))
    assert capture.buffer is capture.detach()  # one binary stream beneath, as ``sys.stdout``'s
    assert capture.value() == "ab\\xffc" and capture.encoding == "utf-8"  # undecodable bytes stay distinct
    with pytest.raises(TypeError):
        capture.buffer.write("text")  # a binary stream takes bytes, as ``sys.stdout.buffer`` does


# ofxparse's ``OfxParser.toDecimal``, shortened: the first item of an attribute is a text
TO_DECIMAL = '''\
def to_decimal(tag):
    d = tag.contents[0].strip()
    if re.search(r".*\\..*,", d):
        d = d.replace(".", "")
    if re.search(r".*,.*\\.", d):
        d = d.replace(",", "")
    if "." not in d and "," in d:
        d = d.replace(",", ".")
    return decimal.Decimal(d.replace(" ", ""))
'''


@needs_bwrap
def test_what_x_does_with_an_item_at_a_position_describes_the_items() -> None:
    # at 01284c0: coverage 0.12 (``tag.contents`` held numbers: ``strip`` of its first item raised on every input)
    result = _compare(TO_DECIMAL, [], context="import decimal\nimport re\n")
    assert result.conclusive, result.reason
    assert result.coverage >= 7 / 8
    assert any(i.state["args"]["tag"].startswith("Obj(contents=['") for i in result.inputs)  # texts in it


def test_an_item_read_at_a_position_is_described() -> None:
    source = "def x(tokens, tag, name):\n    fmt = tokens[3].split('=')\n    first = tag.contents[-1].strip()\n" \
             "    return fmt, first, name['key'].lower()\n"
    info = hints.analyse(ast.parse(source).body[0], skip_first=False)
    tokens, tag, name = info.params
    assert tokens.item is not None and tokens.item.seps == ["="] and "str" in tokens.item.types
    contents = tag.children["contents"]
    assert contents.item is not None and "str" in contents.item.types  # ``strip``: a text, at any depth below 2
    assert name.item is None and name.keys == ["key"]  # a key is not a position: what mappings hold stays as it was
    loop = hints.analyse(ast.parse("def x(tokens):\n    for t in tokens:\n        if t[0] == 4 and t[4]:\n"
                                   "            return t[2][0]\n").body[0], skip_first=False).params[0]
    assert loop.item is not None and loop.item.item is None  # an item's positions are fields, each of its own kind


def test_items_checked_against_a_class_after_indexing_are_instances() -> None:
    source = ("class Division:\n    attributes = None\n\n\n"
              "def x_finish(document):\n    root = document.children[0]\n    if isinstance(root, Division):\n"
              "        return root.attributes\n    return None\n")
    tree = ast.parse(source)
    info = hints.analyse(tree.body[1], skip_first=False)
    hints.mine_module(tree, info)
    p = pools.Pools(info, random.Random(0))
    first = p.by_param["document"][0]
    assert [type(v).__name__ for v in first.children] == ["New"] and first.children[0].cls == "Division"
