"""A handler of every exception after a withheld exception's handler (issue 24 §2: "stand-in answers chosen per call
site to flip uncovered branches").

A withheld module's exception class is :class:`CalibStandInError` itself, so the failure a stand-in call raises in
the modes ``raise`` and ``raise_in_try`` is always caught by ``except mutagen.id3.ID3NoHeaderError:``, and the
``except Exception as err:`` after it (mutagen's ``copy`` and ``list_tags_raw``) was never reached. Where x has such
a broad handler after another one, a run in either mode is retried in ``raise_other_in_try``: the calls in x's ``try``
bodies then raise :class:`CalibStandInFailure`, which no withheld name stands for.
"""

from __future__ import annotations

import ast
import asyncio

import pytest

from calib.executors.sandbox.harness import calls, hints, pools, standins
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn, CalibStandInError, CalibStandInFailure

COPY = '''def copy_tags(src, dst):
    """Returns 0 on success."""
    try:
        tags = mutagen.id3.ID3(src, translate=False)
    except mutagen.id3.ID3NoHeaderError:
        return 1
    except Exception as err:
        message = "cannot read %s: %s" % (src, err)
        print(message, file=sys.stderr)
        return 2
    tags.save(dst)
    return 0
'''


def _node(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_a_broad_handler_after_another_is_found_in_the_source() -> None:
    assert hints.broad_after(_node(COPY))
    only = "def f(p):\n    try:\n        g(p)\n    except Exception:\n        return 1\n"
    assert not hints.broad_after(_node(only))  # the only handler: the modes before this one reach it
    two = "def f(p):\n    try:\n        g(p)\n    except KeyError:\n        return 1\n    except {}:\n        pass\n"
    assert hints.broad_after(_node(two.format("")))  # a bare ``except:``
    assert hints.broad_after(_node(two.format("BaseException")))
    assert not hints.broad_after(_node(two.format("OSError")))
    assert not hints.broad_after(None)
    assert "raise_other_in_try" in pools.STANDIN_MODES and "raise_other_in_try" in pools.ASKED_MODES


def test_in_the_mode_a_call_in_a_try_body_fails_with_a_class_no_withheld_name_stands_for() -> None:
    LOG.reset(calls.standin_default("raise_other_in_try"))
    try:
        ID3 = CalibStandIn("mutagen.id3.ID3")
        assert isinstance(ID3(), CalibStandIn)  # outside a try body: a stand-in, as in ``standin``
        LOG.trying = 1
        with pytest.raises(CalibStandInFailure) as failed:
            ID3("song.mp3")
        assert not isinstance(failed.value, CalibStandInError)
        assert standins.asked_to_fail(failed.value)  # a failure the input state asked for, not a misuse
        withheld = standins.standin_for("mutagen.id3.ID3NoHeaderError")
        assert withheld is CalibStandInError and not isinstance(failed.value, withheld)
    finally:
        LOG.reset()


def test_the_search_reaches_the_broad_handler(executor) -> None:
    # before: coverage 0.62, lines 8-10 never run in 460 runs (every failure was the withheld class's)
    result = asyncio.run(executor.compare(COPY, [], context="import sys\nimport mutagen.id3\n"))
    assert result.conclusive, result.reason
    assert not result.uncovered_lines
    broad = [i for i in result.inputs if i.valid and i.state.get("standins") == "raise_other_in_try"]
    assert broad and '"return":2' in broad[0].output and "cannot read" in broad[0].output
