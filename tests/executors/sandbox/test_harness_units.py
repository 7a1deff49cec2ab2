"""The harness's pure pieces, run on the host without a sandbox: input values, canonical output states,
scaffolding (context trimming, placing x, free names, building the module with stand-ins).

These modules also run inside the sandbox; here they are imported as ordinary modules and only ever
execute the tests' own code.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import pathlib
import sys

import pytest

from calib.executors.sandbox.harness import canon, env, scaffold, workdir
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn, is_standin, standin_name
from calib.executors.sandbox.harness.values import New, Obj, decode, encode


def _same(value):
    """The canonical JSON text two executions are compared by."""
    return canon.dumps(canon.canonical(value))


# --- values: input values as safe expressions ---------------------------------------------------------

ROUND_TRIPS = [
    0, -7, 2**70, 1.5, -0.0, 1e300, float("inf"), float("-inf"), True, None, "it's \"quoted\"\n", b"\x00\xff",
    [], [1, [2, [3]]], (), (1,), (1, "a", None), {}, {"a": [1, {"b": (2, 3)}], 4: None}, set(), {1, 2, 3},
    frozenset(), frozenset({"x", "y"}), complex(1.5, -2.0), pathlib.Path("data/in.txt"),
    Obj(), Obj(size=3, name="n", child=Obj(items=[1, 2])), [Obj(a=1), (Obj(b={"k": 2}),)],
    New("Counter"), New("Counter", [1, 2], start=3),
]


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=[repr(v)[:40] for v in ROUND_TRIPS])
def test_encode_then_decode_gives_an_equal_value_of_the_same_type(value):
    source = encode(value)
    back = decode(source)
    assert back == value
    assert type(back) is type(value)
    assert encode(back) == source  # the text form is stable: the same input is printed the same way


def test_nan_and_signed_zero_survive_the_round_trip():
    assert math.isnan(decode(encode(float("nan"))))
    assert encode(float("nan")) == "float('nan')"
    assert math.copysign(1.0, decode(encode(-0.0))) == -1.0
    assert decode(encode([float("nan"), float("inf")]))[1] == math.inf


def test_stand_ins_round_trip_by_name():
    back = decode(encode(CalibStandIn("requests.Session")))
    assert is_standin(back) and standin_name(back) == "requests.Session"
    assert encode(back) == "StandIn('requests.Session')"


def test_decoding_builds_fresh_objects_so_a_mutating_function_cannot_change_the_stored_input():
    source = "{'items': [1, 2]}"
    first = decode(source)
    first["items"].append(3)
    assert decode(source) == {"items": [1, 2]}


def test_values_a_person_writes_in_an_inputs_file_decode():
    assert decode("Path('a/b.txt')") == pathlib.Path("a/b.txt")
    assert decode("float('-inf')") == -math.inf
    assert decode("set([3, 1])") == {1, 3}
    assert decode("1+2j") == 1 + 2j
    assert decode("Obj(size=2)").size == 2


EVAL_LIKE = [
    "__import__('os')", "__import__('os').system('true')", "open('/etc/passwd')", "os.system('ls')",
    "(lambda: 0)()", "[x for x in range(3)]", "eval('1')", "exec('x = 1')", "getattr(Obj(), '__class__')",
    "Obj(**{'a': 1})", "Obj(1)", "Path(1)", "float('1e5')", "StandIn('x').attr", "2 ** 10 ** 10", "a",
    "{[1]: 2}", "{[1]}", "set(1)", "tuple(Obj())", "1 +",
]


@pytest.mark.parametrize("source", EVAL_LIKE)
def test_anything_beyond_literals_and_the_allowed_constructors_is_a_value_error(source):
    with pytest.raises(ValueError, match="input value"):
        decode(source)


def test_values_that_cannot_be_written_as_inputs_are_refused_when_encoding():
    with pytest.raises(TypeError, match="cannot encode"):
        encode(object())


# --- canon: canonical output states ------------------------------------------------------------------


def test_dict_and_set_ordering_does_not_matter():
    assert _same({"b": 1, "a": 2}) == _same({"a": 2, "b": 1})
    assert _same({3, 1, 2}) == _same({2, 3, 1})
    assert _same({"k": {5, 4}, 1: "x"}) == _same({1: "x", "k": {4, 5}})


def test_what_python_tells_apart_stays_apart():
    assert _same((1, 2)) != _same([1, 2])
    assert _same(0.1 + 0.2) != _same(0.3)
    assert _same(-0.0) != _same(0.0)
    assert _same(1) != _same(1.0) != _same(True)
    assert _same({1, 2}) != _same(frozenset({1, 2}))
    assert _same("1") != _same(1)
    assert _same(b"a") != _same("a")
    assert _same(float("nan")) == _same(float("nan"))  # the same behaviour, though nan != nan


def test_objects_compare_by_class_and_state_not_by_address():
    class Point:
        def __init__(self, x):
            self.x = x

    assert _same(Point(1)) == _same(Point(1))
    assert _same(Point(1)) != _same(Point(2))

    class Opaque:
        pass

    first, second = canon.canonical(Opaque()), canon.canonical(Opaque())
    assert "0x?" in first["repr"] and first == second  # the repr's address is blanked


def test_addresses_and_the_harness_file_name_are_scrubbed_from_text():
    message = 'File "<calib:module>", line 3, in f: <Thing object at 0x7f3a2b1c4d50>'
    assert canon.scrub(message) == 'File "<code>", line 3, in f: <Thing object at 0x?>'
    assert canon.scrub("no address here: 0x1f") == "no address here: 0x1f"


def test_cycles_are_marked_instead_of_recursing():
    items: list = [1]
    items.append(items)
    assert canon.canonical(items) == {"list": [1, {"cycle": "list"}]}
    mapping: dict = {}
    mapping["self"] = mapping
    assert canon.canonical(mapping) == {"dict": [["self", {"cycle": "dict"}]]}

    class Node:
        def __init__(self):
            self.next = self

    assert canon.canonical(Node())["state"] == [["next", {"cycle": "Node"}]]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()  # the reference: hashlib (OpenSSL), not the harness's module


def test_what_a_size_bound_cuts_off_is_kept_as_a_digest():
    long_list = canon.canonical(list(range(canon.MAX_ITEMS + 10)))
    assert long_list["list"] == list(range(canon.MAX_ITEMS)) and long_list["truncated"] == canon.MAX_ITEMS + 10
    assert long_list["sha256"] == _sha(json.dumps(list(range(canon.MAX_ITEMS, canon.MAX_ITEMS + 10)),
                                              separators=(",", ":")).encode())
    changed = list(range(canon.MAX_ITEMS + 10))
    changed[-1] = -1
    assert _same(changed) != _same(list(range(canon.MAX_ITEMS + 10)))  # a difference past the bound
    text = "x" * canon.MAX_STR + "\udc80"  # a lone surrogate is str content too
    long_text = canon.canonical(text)
    assert long_text == {"str": "x" * canon.MAX_STR, "truncated": canon.MAX_STR + 1,
                         "sha256": _sha(text.encode("utf-8", "surrogatepass"))}
    raw = bytes(range(256)) * 100
    assert canon.canonical(raw) == {"bytes": raw[:canon.MAX_STR].hex(), "truncated": len(raw), "sha256": _sha(raw)}
    assert canon.CAPS == []  # none of these is a bound that hides behaviour


def test_a_depth_or_size_bound_is_recorded_so_the_input_is_unobservable():
    deep: list = []
    cursor = deep
    for _ in range(canon.MAX_DEPTH + 5):
        cursor.append([])
        cursor = cursor[0]
    canon.CAPS.clear()
    assert "depth_limit" in canon.dumps(canon.canonical(deep))
    assert canon.CAPS == ["depth_limit"]
    canon.CAPS.clear()
    shared = [0] * 1000
    assert "size_limit" in canon.dumps(canon.canonical([shared] * 300))  # 300,301 values > MAX_NODES
    assert canon.CAPS == ["size_limit"]
    canon.CAPS.clear()
    assert canon.canonical(list(range(canon.MAX_NODES + 1))) == {"size_limit": "list"} and canon.CAPS == ["size_limit"]
    canon.CAPS.clear()


def test_integers_of_any_size_are_kept_by_value():
    assert canon.canonical(2**80) == {"int": str(2**80)}  # beyond what JSON readers keep exactly
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the code under test may lower the limit: the form does not change
    try:
        big = 10**4500 + 7
        assert canon.canonical(big) == canon.canonical(big)
        sys.set_int_max_str_digits(0)
        assert canon.canonical(big) == {"int": str(big)}
    finally:
        sys.set_int_max_str_digits(limit)
    huge = -(10**100_000) - 3
    out = canon.canonical(huge)
    assert out["truncated"] == len(hex(huge)) and out["sha256"] == _sha(hex(huge).encode())
    assert out["int_hex"] == hex(huge)[: canon.MAX_STR] and out != canon.canonical(huge - 1)
    assert canon.canonical(2**20000) == {"int_hex": hex(2**20000)}


def _adder(k, minus=False):
    if minus:
        def add(y):
            return y - k
    else:
        def add(y):
            return y + k
    return add


def test_functions_compare_by_code_defaults_and_captured_values():
    assert _adder(1).__qualname__ == _adder(1, minus=True).__qualname__ == "_adder.<locals>.add"
    assert _same(_adder(1)) == _same(_adder(1))
    assert _same(_adder(1)) != _same(_adder(2))  # the same code over another value
    assert _same(_adder(1)) != _same(_adder(1, minus=True))  # another code under the same name
    assert canon.canonical(_adder(1))["closure"] == [1]
    assert _same(lambda y: y + 1) != _same(lambda y: y - 1)
    assert _same(lambda y: y + 1) != _same(lambda z: z + 1)  # a keyword call can tell them apart
    assert _same(lambda y, d=1: y) != _same(lambda y, d=2: y)
    assert _same(functools.partial(_adder(1), 2)) != _same(functools.partial(_adder(2), 2))
    assert _same([1].append) != _same([2].append)  # a bound method is also its object
    assert canon.canonical(len) == {"function": "len"}


def test_classes_made_inside_a_function_compare_by_their_body():
    def make(offset):
        class Local:
            def get(self):
                return offset

        return Local

    def other():
        class Local:
            def get(self):
                return 0

        return Local

    assert _same(make(1)) == _same(make(1)) and _same(make(1)) != _same(make(2))
    assert _same(make(0)) != _same(other())


def test_output_past_the_capture_bound_is_digested():
    first, second = env.Capture(), env.Capture()
    for capture, last in ((first, "a"), (second, "b")):
        capture.write("x" * env.MAX_CAPTURE)
        capture.write("y" * 10 + last)
    assert first.value() != second.value()
    tail = ("y" * 10 + "a").encode()
    assert first.value() == "x" * env.MAX_CAPTURE + f"<... 11 more characters, sha256 {_sha(tail)}>"


def test_files_past_the_size_bound_are_digested_and_too_many_files_are_unobservable(tmp_path):
    big = b"z" * (workdir.MAX_FILE_BYTES + 5)
    (tmp_path / "big.bin").write_bytes(big)
    assert workdir.files_written(str(tmp_path), {}) == {
        "big.bin": {"truncated": big[:workdir.MAX_FILE_BYTES].hex(), "sha256": _sha(big)}}
    for i in range(workdir.MAX_FILES):
        (tmp_path / f"f{i:03d}.txt").write_text("x")
    with pytest.raises(workdir.TooManyFiles):
        workdir.files_written(str(tmp_path), {})


def test_event_encoding_does_not_go_through_json_s_replaceable_functions(monkeypatch):
    monkeypatch.setattr(json, "dumps", lambda *a, **k: "forged")
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    monkeypatch.setattr(json.encoder, "encode_basestring_ascii", lambda s: '"forged"')
    event = {"event": "result", "output": "{\"a\": \"\u00e9\\udc80\"}", "index": 1}
    assert json.loads(canon.encode_event(event)) == event and canon.encode_event(event).isascii()
    assert canon.dumps({"b": 1, "a": [2.5, None]}) == '{"a":[2.5,null],"b":1}'


def test_a_capped_mapping_or_set_does_not_depend_on_insertion_order():
    n = canon.MAX_ITEMS + 100
    forward, backward = {i: i for i in range(n)}, {i: i for i in reversed(range(n))}
    assert _same(forward) == _same(backward)
    assert canon.canonical(forward)["truncated"] == n
    assert canon.canonical(forward)["sha256"] == canon.canonical(backward)["sha256"]
    grown = set(range(4 * n))
    grown -= set(range(n, 4 * n))
    assert _same(grown) == _same(set(range(n)))
    assert canon.canonical(grown)["truncated"] == n


def test_equal_paths_are_equal_however_much_they_were_used():
    # a Path caches derived fields (its text, its parts) the first time they are read: comparing its
    # attributes would make a used path differ from a fresh one
    used = pathlib.Path("data/in.txt")
    _ = (str(used), used.name, used.parent, used.suffix)
    assert _same(used) == _same(pathlib.Path("data/in.txt"))
    assert canon.canonical(used) == {"path": "data/in.txt"}
    assert _same(pathlib.Path("data/out.txt")) != _same(used)
    assert _same("data/in.txt") != _same(used)  # a str is not a path


def test_exceptions_generators_and_stand_ins_have_a_canonical_form():
    assert canon.canonical(ValueError("bad", 2)) == {"exception": "ValueError", "args": {"tuple": ["bad", 2]}}
    assert canon.canonical(CalibStandIn("requests.get()")) == {"standin": "requests.get()"}
    assert canon.canonical(len) == {"function": "len"}


# --- stand-ins: the call log ---------------------------------------------------------------------------


def test_stand_in_calls_are_logged_in_order_even_when_a_function_is_passed(monkeypatch):
    monkeypatch.setattr(LOG, "canon", canon.canonical)  # what the harness installs inside the sandbox
    LOG.reset()
    requests, bus = CalibStandIn("requests"), CalibStandIn("bus")

    def handler():
        return None

    requests.get("https://a", timeout=5).json()
    assert bus.subscribe(handler) is handler  # usable as a decorator, and still part of the behaviour
    assert [entry[:2] for entry in LOG.entries] == [["call", "requests.get"], ["call", "requests.get().json"],
                                                    ["call", "bus.subscribe"]]
    assert LOG.entries[0][2:] == [{"list": ["https://a"]}, {"dict": [["timeout", 5]]}]
    LOG.reset()


def test_calls_past_the_log_limit_are_kept_aside_not_dropped(monkeypatch):
    monkeypatch.setattr(LOG, "canon", canon.canonical)
    LOG.reset()
    db = CalibStandIn("db")
    for i in range(LOG.limit + 3):
        db.put(i)
    assert len(LOG.entries) == LOG.limit and [e[2] for e in LOG.overflow] == [
        {"list": [i]} for i in range(LOG.limit, LOG.limit + 3)]
    LOG.reset()
    assert LOG.entries == [] and LOG.overflow == []


# --- scaffold: the module x runs in --------------------------------------------------------------------

CUT_CONTEXT = '''    "b": 2,
}

LIMIT = 10

def helper(x):
    return x + 1

'''
FUNCTION = "def g(y):\n    return helper(y) + LIMIT\n"


def test_trim_context_drops_the_lines_of_a_statement_cut_at_the_start():
    trimmed = scaffold.trim_context(CUT_CONTEXT, FUNCTION)
    assert trimmed.startswith("LIMIT = 10\n")
    assert trimmed.endswith("return x + 1\n\n")
    ast.parse(trimmed + FUNCTION)


def test_trim_context_keeps_a_whole_context_and_adds_a_missing_final_newline():
    assert scaffold.trim_context("import os\nX = 1", FUNCTION) == "import os\nX = 1\n"
    assert scaffold.trim_context("", FUNCTION) == ""


def test_trim_context_gives_up_when_nothing_after_a_line_start_parses():
    assert scaffold.trim_context("def broken(:\n", FUNCTION) == ""


@pytest.mark.parametrize("context", [CUT_CONTEXT, "import os\nX = 1\n", "def broken(:\n", ""])
def test_placing_with_trim_is_placing_after_the_trimmed_context(context: str):
    # x's explore batch trims the whole context itself (job key trim) and reports the suffix's length, which the
    # host takes for the candidates: the same module as the host's trim_context gave, and that suffix's length
    trimmed = scaffold.trim_context(context, FUNCTION)
    here, there = scaffold.place(context, FUNCTION, trim=True), scaffold.place(trimmed, FUNCTION)
    assert (here.source, here.first_line, here.qualname) == (there.source, there.first_line, there.qualname)
    assert here.context_chars == there.context_chars == len(trimmed)
    assert context.endswith(trimmed) or trimmed == ""
    # without trim, a context the function does not parse after is dropped whole (a candidate's replay)
    untrimmed = scaffold.place(context, FUNCTION)
    assert untrimmed.context_chars == (len(context) if trimmed == context else 0)


CLASS_CONTEXT = '''import math

class Account:
    FEE = 2

    def __init__(self, balance=10):
        self.balance = balance

'''
METHOD = "    def withdraw(self, amount):\n        self.balance -= amount + self.FEE\n        return self.balance\n"


def test_place_finds_a_method_inside_its_class_context():
    placed = scaffold.place(scaffold.trim_context(CLASS_CONTEXT, METHOD), METHOD)
    assert placed.qualname == "Account.withdraw"
    assert placed.kind == "method"
    assert placed.classes == ["Account"]
    assert placed.node.lineno == placed.first_line == CLASS_CONTEXT.count("\n") + 1


@pytest.mark.parametrize("decorator,kind", [("staticmethod", "staticmethod"), ("classmethod", "classmethod"),
                                            ("property", "property"), ("functools.cache", "method")])
def test_place_tells_the_kinds_of_method_apart(decorator, kind):
    method = f"    @{decorator}\n    def rate(cls):\n        return 1\n"
    placed = scaffold.place(scaffold.trim_context(CLASS_CONTEXT, method), method)
    assert placed.kind == kind
    assert placed.first_line == CLASS_CONTEXT.count("\n") + 1  # the decorator's line, where x starts


def test_place_finds_a_method_of_a_nested_class():
    context = "class Outer:\n    class Inner:\n        X = 1\n\n"
    method = "        def get(self):\n            return self.X\n"
    placed = scaffold.place(scaffold.trim_context(context, method), method)
    assert placed.qualname == "Outer.Inner.get" and placed.classes == ["Outer", "Inner"]


def test_a_method_without_its_class_runs_as_a_module_level_function():
    placed = scaffold.place("", METHOD)
    assert placed.kind == "function" and placed.classes == []
    assert placed.source.startswith("def withdraw(self, amount):")


def test_place_reports_a_function_that_does_not_parse():
    with pytest.raises(scaffold.ScaffoldError, match="does not parse"):
        scaffold.place("", "def f(:\n    pass\n")
    with pytest.raises(scaffold.ScaffoldError, match="no function definition"):
        scaffold.place("", "x = 1\n")


def test_unresolved_names_are_the_globals_read_but_never_bound():
    source = '''import os
from pkg import thing as alias
A = 1

def f(a, *rest, **options):
    global G
    try:
        pass
    except CustomError as err:
        print(err)
    total = [q for q in options]
    match a:
        case {"k": v, **others}:
            pass
    return helper(a) + os.sep + alias + A + len(rest) + G + total + v + others + __name__ + MISSING
'''
    # G: declared global in f and bound nowhere by the module itself, so unbound when x runs (a stand-in since
    # issue 24's twentieth round; a ``global`` statement alone used to count as binding it)
    assert scaffold.unresolved_names(ast.parse(source)) == {"helper", "CustomError", "MISSING", "G"}
    assert scaffold.unresolved_names(ast.parse("G = 0\n" + source)) == {"helper", "CustomError", "MISSING"}


def test_the_module_binds_stand_ins_for_unresolvable_names_and_mocked_imports():
    context = "import requests\nfrom notinstalled_pkg_calib import fetch\n\nBASE = 'https://x'\n\n"
    function = "def get(user):\n    return requests.get(BASE + user), fetch(user), helper(user)\n"
    placed = scaffold.place(scaffold.trim_context(context, function), function)
    module = scaffold.Module(placed, module_name="calib_scaffold")
    ns = module.build()
    assert is_standin(ns["requests"]) and standin_name(ns["requests"]) == "requests"
    assert is_standin(ns["fetch"]) and standin_name(ns["fetch"]) == "notinstalled_pkg_calib.fetch"
    assert is_standin(ns["helper"])
    assert ns["BASE"] == "https://x"
    assert any("mocked" in w for w in module.warnings)
    assert any("ModuleNotFoundError" in w for w in module.warnings)
    assert "requests" in scaffold.MOCKED_MODULES and "subprocess" in scaffold.MOCKED_MODULES


def test_unresolved_names_skip_names_probed_for_a_name_error_and_every_kind_of_binding():
    source = '''try:
    xrange
except NameError:
    xrange = range
async def outer(x, /, y=UNSET, *, z):
    def inner():
        nonlocal x
        return [w async for w in Stream()]
    match y:
        case [first, *others] if first:
            return others, Known, (lambda k=Default: k)
class Klass(Base):
    pass
import a.b.c
'''
    assert scaffold.unresolved_names(ast.parse(source)) == {"UNSET", "Stream", "Known", "Default", "Base"}


def test_after_the_search_rewrites_x_only_the_statements_holding_rewritten_code_compile_again():
    from calib.executors.sandbox.harness import cmplog  # noqa: PLC0415

    context = "import os\nLIMIT = 3\n\ndef helper(v):\n    return v > LIMIT\n\nclass Box:\n    size = 2\n\n"
    function = "def f(n):\n    if helper(n) and n == 7:\n        return Box.size\n    return os.sep\n"
    placed = scaffold.place(context, function)
    module = scaffold.Module(placed, module_name="calib_scaffold")
    first = module.build()
    assert first["f"](7) == 2
    before = {stmt.lineno: module._code(stmt) for stmt in placed.tree.body}
    try:
        rewritten = cmplog.instrument(placed.node, placed.tree)
    finally:
        canon.PINNED.clear()  # what instrument pinned for this process's outputs: not the other tests'
    assert [node.name for node in rewritten] == ["f", "helper"]
    module.extra_globals[cmplog.NAME] = cmplog.compare
    module.recompile(rewritten)
    after = {stmt.lineno: module._code(stmt) for stmt in placed.tree.body}
    kept = {line for line in before if after[line] is before[line]}
    assert kept == {1, 2, 7}  # the import, the constant and the class: the same code objects
    assert cmplog.NAME in after[4].co_consts[0].co_names  # helper's comparison now reports to the recorder
    assert module.build()["f"](7) == 2
    module.recompile()
    assert all(module._code(stmt) is not after[stmt.lineno] for stmt in placed.tree.body)


def test_reindent_moves_a_candidate_to_the_truths_indentation():
    assert scaffold.reindent("def f():\n    return 1\n", "    ") == "    def f():\n        return 1\n"
    assert scaffold.indentation(METHOD) == "    "


def test_the_host_takes_a_reported_context_length_only_when_it_is_one():
    # scaffold.reported_context: x's explore batch says how long the context suffix it ran after is; a length of the
    # context is taken as it is (a lie only moves where the candidates run), anything else is trimmed on the host
    whole = scaffold.joined_context(CUT_CONTEXT)
    trimmed = scaffold.trim_context(CUT_CONTEXT, FUNCTION)
    assert scaffold.reported_context(whole, len(trimmed), FUNCTION) == trimmed
    assert scaffold.reported_context(whole, len(whole), FUNCTION) == whole
    assert scaffold.reported_context(whole, 0, FUNCTION) == ""
    assert scaffold.reported_context(whole, 3, FUNCTION) == whole[-3:]
    for bad in (-1, len(whole) + 1, True, "12", None, 1.0):
        assert scaffold.reported_context(whole, bad, FUNCTION) == trimmed, bad
