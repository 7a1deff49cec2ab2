"""Type and size feedback beyond comparisons (issue 24 §2, nineteenth round).

While x is explored (:mod:`calib.executors.sandbox.harness.cmplog`):

- a text's method called on a value of another type (``first.endswith(b"\\n")`` on an item drawn as ``3``,
  ``"ab".endswith(b"\\n")``, ``n.isdigit()`` on a number) keeps ``("as", value, type)``, and the search writes
  the value as that type, as for ``isinstance`` (``isa``);
- ``struct.unpack(fmt, data)`` (``unpack_from``, a ``Struct``'s) on data shorter than the format reads keeps
  ``("len", data, size)`` (of the whole text when ``data`` is a slice of it), and on a text
  ``("as", text, "bytes")``, so ``read_int16(buf)`` on one byte gets an input of two;
- the first time a run's path wants a type, the search rewrites the input even when the run found no new line
  (``read_int16`` and ``read_int32`` both want bytes, on different paths).

And a module whose first build bound stand-ins without a failed import (``from . import seps``, served by the
stand-in package) has the stand-in modes varied, as one with a failed import has.
"""

from __future__ import annotations

import asyncio
import shutil
import struct

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog
from calib.executors.sandbox.harness.redqueen import replacements

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# python-debian's ``GpgInfo._get_full_bytes``: the second branch needs an item of bytes that ends with a newline
FULL_BYTES = (
    "def full_bytes(sequence):\n"
    "    lines = iter(sequence)\n"
    "    try:\n"
    "        first = next(lines)\n"
    "    except StopIteration:\n"
    "        return b''\n"
    "    join = b'\\n'\n"
    "    if first.endswith(b'\\n'):\n"
    "        join = b''\n"
    "    return first + join + join.join(lines)\n"
)

# paho-mqtt's ``Properties.readProperty``: each kind reads a number of its own size from the buffer
READERS = (
    "import struct\n"
    "\n"
    "def read_int16(buf):\n"
    "    return struct.unpack('!H', buf[:2])[0]\n"
    "\n"
    "def read_int32(buf):\n"
    "    return struct.unpack('!L', buf[:4])[0]\n"
    "\n"
    "def read_int64(buf):\n"
    "    return struct.unpack_from('!Q', buf, 1)[0]\n"
)
READ_PROPERTY = (
    "def read_property(buffer, kind):\n"
    "    if kind == 1:\n"
    "        value = read_int16(buffer)\n"
    "        size = 2\n"
    "        tag = 'short'\n"
    "    elif kind == 2:\n"
    "        value = read_int32(buffer)\n"
    "        size = 4\n"
    "        tag = 'long'\n"
    "    elif kind == 3:\n"
    "        value = read_int64(buffer)\n"
    "        size = 8\n"
    "        tag = 'long long'\n"
    "    else:\n"
    "        raise ValueError(kind)\n"
    "    return value, size, tag\n"
)

# guessit's ``iter_words``: the separators come from the withheld package, through a relative import
WORDS = (
    "def words(text):\n"
    "    start, inside = 0, False\n"
    "    for i, char in enumerate(text):\n"
    "        if char in seps:\n"
    "            if inside:\n"
    "                yield text[start:i]\n"
    "            inside = False\n"
    "            start = i + 1\n"
    "        else:\n"
    "            inside = True\n"
    "    if inside:\n"
    "        yield text[start:]\n"
)


def _raises(kind: type[BaseException], obj: object, name: str, *args: object) -> None:
    with pytest.raises(kind):
        cmplog.method(obj, name, *args)


def test_a_text_method_on_another_type_keeps_the_type_it_belongs_to() -> None:
    cmplog.take_pairs()
    _raises(AttributeError, 3, "endswith", b"\n")  # what x sees is unchanged: int has no endswith
    _raises(TypeError, "ab", "endswith", (b"\n", b"\r"))  # str.endswith(bytes)
    _raises(AttributeError, 5, "isdigit")
    assert cmplog.method(b"ab\n", "endswith", b"\n") is True  # the right type: a suffix pair, as before
    assert cmplog.take_pairs() == [("as", 3, "bytes"), ("as", "ab", "bytes"), ("as", 5, "str"),
                                   ("suffix", b"ab\n", b"\n")]
    part = cmplog.cut("Byte", None, 2)  # a slice of a text: the whole text is noted
    _raises(TypeError, struct, "unpack", "!H", part)
    assert cmplog.take_pairs() == [("as", "Byte", "bytes")]


def test_struct_unpack_keeps_the_size_it_reads() -> None:
    cmplog.take_pairs()
    _raises(struct.error, struct, "unpack", "!H", b"\x01")
    assert cmplog.method(struct, "unpack", "!H", b"\x01\x02") == (258,)  # enough bytes: nothing noted
    _raises(struct.error, struct.Struct("<I"), "unpack", b"ab")
    _raises(struct.error, struct, "unpack_from", "!H", b"\x01\x02", 1)  # 1 + 2 bytes from the start
    part = cmplog.cut(b"\x01\x02\x03", 2, 6)  # ``buf[2:6]`` of a buffer of three bytes: the buffer needs six
    _raises(struct.error, struct, "unpack", "!L", part)
    assert cmplog.take_pairs() == [("len", b"\x01", 2), ("len", b"ab", 4), ("len_order", b"\x01\x02", 3),
                                   ("len_order", b"\x01\x02\x03", 6)]

    class Record:
        def unpack(self, data: bytes) -> None:
            raise struct.error("a method of x's own")

    _raises(struct.error, Record(), "unpack", b"x")  # not the struct module nor a Struct: nothing noted
    assert cmplog.take_pairs() == []


def test_the_search_writes_a_number_as_bytes_and_resizes_bytes() -> None:
    news = replacements({"sequence": [3], "buffer": b"\x01"}, [("as", 3, "bytes"), ("len", b"\x01", 4)])
    assert {"sequence": [b"3"], "buffer": b"\x01"} in news  # inside the list's item
    assert any(len(new["buffer"]) == 4 and new["sequence"] == [3] for new in news)


@needs_bwrap
@pytest.mark.parametrize(("function", "context"), [(FULL_BYTES, ""), (READ_PROPERTY, READERS),
                                                   (WORDS, "from . import seps\n")],
                         ids=["bytes-items", "struct-sizes", "relative-import"])
def test_the_branches_behind_types_sizes_and_relative_imports_are_reached(function: str, context: str) -> None:
    # before this round: 0.75 (no item of bytes), 0.71 (no buffer of 4 or 9 bytes), 0.60 (no stand-in modes)
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(executor.compare(function, [], context=context))
    finally:
        executor.close()
    assert result.coverage == 1.0, result.uncovered_lines
    assert result.conclusive, result.reason
