"""Canonical forms along canon.canonical's fast paths, checked against what a reader derives by hand.

canon writes scalars inside lists, dicts and objects without a call of ``canonical`` per item, sorts a
dict's str keys by ``json``'s text made directly, skips the ``__slots__`` walk for classes without slots,
and keeps the containers on the current path in one set per top-level call.
Each test fixes what those paths must give: the forms, orders and size cuts documented in canon's
docstrings, computed here independently (``json.dumps``, ``hashlib``, counting the values visited).
"""

from __future__ import annotations

import asyncio
import hashlib
import json

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon
from tests.executors.sandbox.test_forkserver import needs_bwrap


def _sha(items):
    # canon digests the items past MAX_ITEMS as compact JSON, keys sorted, UTF-8 (canon._tail)
    text = json.dumps(items, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def test_slots_of_a_base_and_of_its_subclass_are_all_state():
    class Base:
        __slots__ = ("a", "b")

    class Child(Base):
        __slots__ = ("c",)

    class Open(Base):  # slots from the base, the rest in __dict__
        pass

    class Kind(type):
        pass

    class Meta(metaclass=Kind):  # a metaclass other than type: the general walk
        __slots__ = ("m",)

    child, open_, meta = Child(), Open(), Meta()
    child.a, child.b, child.c = 1, "x", [2.5]
    open_.a, open_.z = 3, None  # b left unset: not part of the state
    meta.m = (True,)
    assert canon.canonical(child)["state"] == [["a", 1], ["b", "x"], ["c", {"list": [{"float": "2.5"}]}]]
    assert canon.canonical(open_)["state"] == [["a", 3], ["z", None]]
    assert canon.canonical(meta)["state"] == [["m", {"tuple": [True]}]]


def test_plain_object_state_is_sorted_by_name_with_each_value_canonical():
    class Plain:
        pass

    obj = Plain()
    obj.zeta, obj.alpha, obj.mid = 2**60, "s", {"k": 0.1}
    assert canon.canonical(obj)["state"] == [
        ["alpha", "s"], ["mid", {"dict": [["k", {"float": "0.1"}]]}], ["zeta", {"int": str(2**60)}]]


def test_dict_keys_and_set_items_sort_by_their_json_text():
    # json's text, not the raw string: '"a b"' sorts before '"a"' (space < quote), and "é" is "\\u00e9"
    keys = ["a", "a b", "é", "z", "A", "a!", "\udc80", "\\"]
    out = canon.canonical({k: i for i, k in enumerate(keys)})
    assert [k for k, _ in out["dict"]] == sorted(keys, key=json.dumps)
    mixed = {3, "3", None, -1, "b", 2.5}
    expected = sorted([3, "3", None, -1, "b", {"float": "2.5"}], key=lambda c: json.dumps(c, sort_keys=True))
    assert canon.canonical(mixed) == {"set": expected}


def test_shared_sub_list_is_cut_where_the_values_visited_reach_max_nodes():
    # each copy of the shared list is 1 + 1000 values; the outer list is 1. A copy is cut whole when it
    # has more items than values left: after k full copies MAX_NODES - 2 - 1001 k are left for the next
    shared = list(range(1000))
    full = (canon.MAX_NODES - 2 - 1000) // 1001 + 1  # the first k with MAX_NODES - 2 - 1001 k < 1000
    canon.CAPS.clear()
    out = canon.canonical([shared] * 300)
    assert canon.CAPS == ["size_limit"]
    canon.CAPS.clear()
    assert out["list"][:full] == [{"list": shared[:canon.MAX_ITEMS], "truncated": 1000,
                                   "sha256": _sha(shared[canon.MAX_ITEMS:])}] * full
    assert out["list"][full:] == [{"size_limit": "list"}] * (300 - full)


def test_scalars_after_a_large_item_are_cut_one_by_one_when_the_budget_runs_out():
    # outer list 1 value, the big list 1 + 150,000: the next MAX_NODES - 150,002 ints are kept
    big, count = list(range(150_000)), 60_000
    kept = canon.MAX_NODES - 150_002
    canon.CAPS.clear()
    out = canon.canonical([big, *[7] * count])
    assert canon.CAPS == ["size_limit"]
    canon.CAPS.clear()
    items = [canon.canonical(big), *[7] * kept, *[{"size_limit": "int"}] * (count - kept)]
    canon.CAPS.clear()
    assert out == {"list": items[:canon.MAX_ITEMS], "truncated": count + 1, "sha256": _sha(items[canon.MAX_ITEMS:])}
    # inside a dict: all its keys first (one value each), then its values in key order
    size = 30_000  # not more items than values left, but keys and values together are
    kept = canon.MAX_NODES - 150_002 - 1 - size
    out = canon.canonical([big, {f"k{i:05}": 7 for i in range(size)}])
    canon.CAPS.clear()
    pairs = [[f"k{i:05}", 7 if i < kept else {"size_limit": "int"}] for i in range(size)]
    assert out["list"][1] == {"dict": pairs[:canon.MAX_ITEMS], "truncated": size,
                              "sha256": _sha(pairs[canon.MAX_ITEMS:])}


def test_large_buffers_keep_their_digest_when_it_is_remembered_and_the_memo_stays_bounded():
    from calib.executors.sandbox.harness import digests

    buffer = bytearray(range(256)) * 1024  # 256 KiB, as asyncio's SSL protocol holds
    whole = hashlib.sha256(bytes(buffer)).hexdigest()  # the reference: OpenSSL's SHA-256
    first = canon.canonical(buffer)
    assert first == {"bytearray": bytes(buffer[:canon.MAX_STR]).hex(), "truncated": len(buffer), "sha256": whole}
    assert canon.canonical(buffer) == first  # from the memo: the same digest
    buffer[-1] ^= 1  # one byte changed past the part shown: another digest, never the remembered one
    assert canon.canonical(buffer)["sha256"] == hashlib.sha256(bytes(buffer)).hexdigest() != whole
    text = "é" * (canon.MAX_STR + 5)
    assert canon.canonical(text)["sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()
    for i in range(3 * digests.MEMO_ENTRIES):
        assert digests.digest(b"%d" % i * 100) == hashlib.sha256(b"%d" % i * 100).hexdigest()
    assert 0 < len(digests._known) <= digests.MEMO_ENTRIES
    big = bytes(digests.MEMO_BYTES + 1)
    assert digests.digest(big) == hashlib.sha256(big).hexdigest() and big not in digests._known


def test_shared_items_are_not_cycles_and_a_failed_closure_cell_leaves_no_trace():
    shared = [1]
    assert canon.canonical([shared, (shared,)]) == {"list": [{"list": [1]}, {"tuple": [{"list": [1]}]}]}
    loop: list = [2]
    loop.append(loop)
    assert canon.canonical(loop) == {"list": [2, {"cycle": "list"}]}

    class Flaky(list):  # its first iteration fails, as a broken __iter__ of the code's own would
        failed = False

        def __iter__(self):
            if not Flaky.failed:
                Flaky.failed = True
                raise ValueError("once")
            return super().__iter__()

    holder = [Flaky([5])]
    func = (lambda: holder)  # noqa: E731 - a closure over holder
    out = canon.canonical([func, holder])
    # canon reads a ValueError while reading a closure cell as an empty cell (canon._function) ...
    assert out["list"][0]["closure"] == [{"empty_cell": True}]
    # ... and holder, no longer on the path, is then seen whole, not as a cycle
    assert out["list"][1] == {"list": [{"list": [5], "type": f"{__name__}.{Flaky.__qualname__}"}]}


def test_a_logger_is_its_configuration_not_the_levels_it_was_asked_about_or_the_other_loggers():
    import logging  # noqa: PLC0415

    log = logging.getLogger("calib.tests.canon.logger")
    log.setLevel(logging.INFO)
    before = canon.dumps(canon.canonical(log))
    log.isEnabledFor(logging.WARNING)  # fills the logger's memo (Logger._cache) as a log.warning() would
    logging.getLogger("calib.tests.canon.other")  # another logger in the process's registry (the manager)
    assert log._cache and canon.dumps(canon.canonical(log)) == before
    state = dict(canon.canonical(log)["state"])
    assert state["level"] == logging.INFO and state["name"] == "calib.tests.canon.logger"
    assert "_cache" not in state and "manager" not in state
    log.setLevel(logging.ERROR)  # what it does changes: so does its form
    assert canon.dumps(canon.canonical(log)) != before


LOGGING_CONTEXT = '''import logging

log = logging.getLogger("feeds")


class Feed:
    def __init__(self):
        self.log = log
        self.items = []

'''
ADD = '''    def add(self, item, strict=False):
        if not isinstance(item, str):
            self.log.warning("not a text: %r", item)
            if strict:
                raise TypeError(item)
            item = str(item)
        self.items.append(item.strip())
        return len(self.items)
'''


@needs_bwrap
def test_a_logger_in_the_output_state_does_not_make_inputs_nondeterministic():
    # the instance's state holds the module's logger: an input that logs a warning fills the logger's memo,
    # which a later input then showed, in the search's process and the replay's in a different order
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(executor.compare(ADD, [ADD], context=LOGGING_CONTEXT))
    finally:
        executor.close()
    assert "nondeterministic" not in {r.reason for r in result.inputs}, result.reason
    assert result.conclusive, result.reason
    assert result.candidates[0].sim_func == 1.0
