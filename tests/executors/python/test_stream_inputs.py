"""Open files as input values (issue 24, §2): ``BytesIO(b'...')`` and ``StringIO('...')`` for a parameter x reads or
writes as a file (``fileobj.read(8)``, ``out.write(text)``): the value's text, what the harness gives x, what the output
state shows of it, the search's pools and the comparison feedback into what the file holds, and sandboxed comparisons
(calib/executors/sandbox/harness/values.py ``Stream``; docs/executors.md, *Open files as arguments*)."""

from __future__ import annotations

import asyncio
import io
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon, hints, redqueen
from calib.executors.sandbox.harness.placeholders import globals_in, materialize
from calib.executors.sandbox.harness.pools import Pools
from calib.executors.sandbox.harness.values import Obj, Stream, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FOOTER = '''\
def find_footer(fileobj):
    """Which tag a file ends with, or None."""
    fileobj.seek(0)
    if fileobj.read(8) == b"APETAGEX":
        version = fileobj.read(4)
        if version == b"\\xd0\\x07\\x00\\x00":
            return "v2"
        return "v1"
    fileobj.seek(0)
    if fileobj.read(3) == b"TAG":
        return "id3"
    return None
'''

DUMP = '''\
def dump(rows, out):
    for row in rows:
        out.write(",".join(str(v) for v in row))
        out.write("\\n")
    return out.tell()
'''


def _analysed(source: str) -> hints.Hints:
    import ast

    node = ast.parse(source).body[0]
    info = hints.analyse(node, skip_first=False)
    info.tree = ast.parse(source)
    return info


def test_open_files_are_written_as_bytesio_and_stringio_and_read_back():
    for text, content in (("BytesIO(b'AB\\x00')", b"AB\x00"), ("StringIO('a\\nb')", "a\nb"), ("BytesIO(b'')", b"")):
        value = decode(text)
        assert isinstance(value, Stream) and value.content == content
        assert encode(value) == text  # the text a person reads in ``calib compare``'s inputs
        assert decode(encode(value)) == value
    # the constructor's argument must be of its kind, and nothing else is taken
    for bad in ("BytesIO('text')", "StringIO(b'raw')", "BytesIO()", "BytesIO(b'a', 1)", "StringIO(newline='')"):
        with pytest.raises(ValueError, match="not an allowed constructor"):
            decode(bad)


def test_each_run_gets_a_fresh_file_and_the_stored_input_is_untouched():
    stored = decode("BytesIO(b'header-and-body')")
    first = materialize(stored, {})
    assert type(first) is io.BytesIO and first.read(6) == b"header"
    first.write(b"XX")  # x reads and writes its file
    second = materialize(stored, {})
    assert second is not first and second.tell() == 0 and second.read() == b"header-and-body"
    assert stored.content == b"header-and-body"
    text = materialize(decode("[StringIO('a')]"), {})[0]  # inside a list, as x's other arguments are
    assert type(text) is io.StringIO and text.read() == "a"
    held = globals_in(Obj(stream=Stream(b"\x01")), {})  # self.stream.read(): an attribute of self
    assert type(held.stream) is io.BytesIO and held.stream.read() == b"\x01"


def test_the_output_state_shows_what_an_in_memory_file_holds_and_where_it_is_at():
    buf = io.BytesIO(b"abc")
    buf.read(1)
    assert canon.canonical(buf) == {"object": "_io.BytesIO", "repr": "<_io.BytesIO object at 0x?>",
                                    "value": {"bytes": b"abc".hex()}, "position": 1}
    other = io.BytesIO(b"abc")
    other.read(2)  # the same contents read further: another output state
    assert canon.dumps(canon.canonical(other)) != canon.dumps(canon.canonical(buf))
    text = io.StringIO()
    text.write("x,y\n")
    assert canon.canonical(text)["value"] == "x,y\n" and canon.canonical(text)["position"] == 4
    text.close()  # a closed file has nothing to read: its repr only, as before
    assert "value" not in canon.canonical(text)


def test_a_parameter_used_as_a_file_gets_open_files_in_its_pool_bytes_first_where_x_writes_bytes():
    info = _analysed(FOOTER)
    (param,) = info.params
    assert "stream" in param.types and "object" in param.types  # an object with read/seek stays in the pool
    pool = Pools(info, random.Random(0)).by_param["fileobj"]
    streams = [v for v in pool if isinstance(v, Stream)]
    assert streams and isinstance(streams[0].content, bytes)
    assert streams[0].content.startswith(b"APETAGEX")  # x's own bytes literals lead the first file
    assert Stream(b"") in streams and Stream("") in streams  # empty files: the end-of-file branches
    writer = _analysed(DUMP)
    out = next(p for p in writer.params if p.name == "out")
    assert "stream" in out.types
    texts = [v for v in Pools(writer, random.Random(0)).by_param["out"] if isinstance(v, Stream)]
    assert isinstance(texts[0].content, str)  # no bytes literal in x: text files first


def test_a_comparison_on_what_x_read_rewrites_that_place_of_the_file():
    numbered = Stream(bytes(range(1, 65)))
    # ``fileobj.read(3) == b"TAG"`` read b"\x01\x02\x03": those bytes of the file become TAG
    (new,) = redqueen._rewrite("eq", numbered, b"\x01\x02\x03", b"TAG")
    assert isinstance(new, Stream) and new.content == b"TAG" + bytes(range(4, 65))
    assert redqueen._rewrite("eq", numbered, "abc", "TAG") == []  # a text comparison says nothing of bytes


def _compare(x: str, candidates: list[str]):
    ex = SandboxExecutor(ExecutorConfig(seed=0, workers=2))
    try:
        return asyncio.run(ex.compare(x, candidates))
    finally:
        ex.close()


@needs_bwrap
def test_a_function_that_reads_an_open_file_is_explored_with_files_and_told_apart_from_a_near_copy():
    near = FOOTER.replace('return "v1"', 'return "v2"')  # the other version's answer
    result = _compare(FOOTER, [FOOTER, near])
    assert result.conclusive, result.reason
    given = [i.state["args"]["fileobj"] for i in result.inputs if i.valid]
    assert any(g.startswith("BytesIO(b'APETAGEX") for g in given), given  # the search wrote the tag into a file
    assert '"position":' in "".join(i.output for i in result.inputs if i.valid)  # where x left the file
    same, other = result.candidates
    assert same.sim_func == 1.0
    assert other.sim_func is not None and other.sim_func < 1.0


@needs_bwrap
def test_what_x_writes_into_its_file_is_part_of_the_output_state():
    # the same return value (the position) with other text written: not a match
    spaced = DUMP.replace('",".join', '", ".join').replace("return out.tell()", "return len(out.getvalue())")
    result = _compare(DUMP, [spaced])
    assert result.conclusive, result.reason
    (cand,) = result.candidates
    assert cand.sim_func is not None and cand.sim_func < 1.0
    written = [i for i in result.inputs if i.valid and "StringIO(" in i.state["args"]["out"]]
    assert written, [i.state for i in result.inputs]
