"""Comparisons past a run's first eight (issue 24 §2: "branch conditions and comparison operands of uncovered lines
drive new candidate values").

A run that finds something new queues input-to-state rewrites for the comparisons it made, at most eight
(:func:`redqueen.replacements`' limit: a loop's comparisons would fill the queue). A dispatch on a value read out of
an argument (pyelftools' ``ELFFile._make_section``: ``sectype = section_header['sh_type']``, then seventeen
``sectype == 'SHT_…'``) had its branches past the eighth comparison never tried: the value lives inside a mapping, so
no pool walks its literals. The rewrites of later comparisons (up to four times the limit) are now kept aside, one
per comparison, and run once where the search would end short of the criteria.
"""

from __future__ import annotations

import asyncio

from calib.executors.sandbox.harness import redqueen


def test_rewrites_past_the_limit_go_to_the_overflow_one_per_comparison_in_order() -> None:
    wanted = [f"kind{i}" for i in range(12)]
    pairs = [("eq", "abc", w) for w in wanted]
    values = {"kind": "abc", "count": 3}
    overflow: list[dict[str, object]] = []
    first = redqueen.replacements(values, pairs, overflow=overflow)
    assert [r["kind"] for r in first] == wanted[:8]
    assert [r["kind"] for r in overflow] == wanted[8:]
    assert all(r["count"] == 3 for r in [*first, *overflow])
    assert redqueen.replacements(values, pairs) == first  # without an overflow: as before, the first eight only
    many = [("eq", "abc", f"k{i}") for i in range(100)]
    kept: list[dict[str, object]] = []
    redqueen.replacements(values, many, overflow=kept)
    assert len(kept) == 8 * (redqueen.OVERFLOW - 1)  # comparisons taken up to OVERFLOW times the limit


# eight comparisons at the top (``in`` a tuple: one each) fill a run's rewrites before the dispatch is reached
ROUTE = '''def route(message):
    kind = message["kind"]
    if kind in ("ping", "pong", "noop", "hello", "bye", "ack", "nack", "wait"):
        return "control"
    if kind == "create":
        target = message.get("target", "")
        return "create " + target
    elif kind == "update":
        fields = sorted(message.get("fields", []))
        return "update " + ",".join(map(str, fields))
    elif kind == "delete":
        target = message.get("target", "")
        return "delete " + target
    elif kind == "query":
        limit = message.get("limit", 10)
        return "query " + str(limit)
    return "unknown " + str(kind)
'''


def test_a_dispatch_past_the_eighth_comparison_is_reached(executor) -> None:
    # before: coverage 0.50, none of the four branches after the tuple reached in 200 runs
    result = asyncio.run(executor.compare(ROUTE, [], context=""))
    assert result.conclusive, result.reason
    assert not result.uncovered_lines
    messages = [i.state["args"]["message"] for i in result.inputs if i.valid]
    for branch in ("create", "update", "delete", "query"):  # the chosen inputs hold each kind the dispatch wants
        assert any(f"'kind': '{branch}'" in m for m in messages), (branch, messages)
