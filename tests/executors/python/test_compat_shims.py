"""A project's own Python 2/3 compatibility module, withheld, gives six's names as six gives them on Python 3 (issue 24
§2; calib/executors/sandbox/harness/compat.py; docs/executors.md, *Scaffolding*).

dpkt's ``from .compat import BytesIO``, pyelftools' ``from ..common.py3compat import BytesIO, iteritems``: with the
package withheld (the paper's setting), ``BytesIO(buf)`` was a stand-in, so ``f.readline()`` read nothing of the input
and dpkt's HTTP ``Request.unpack`` never got past its first check (coverage 0.33). A module whose name ends in
``compat``, ``_compat``, ``py3compat``, ``compatibility`` or ``six`` now gives the names six has from the harness's six
(``compat.make_six``, checked against the real six in test_six_compat.py); its other names (dpkt's ``compat_ord``)
stay stand-ins.
"""

from __future__ import annotations

import ast
import asyncio
import io
import json

import six as real_six

from calib.executors.sandbox.harness import compat

FIRST_WORDS = '''def first_words(buf, limit=2):
    f = BytesIO(buf)
    line = f.readline().decode("ascii", "ignore")
    words = line.strip().split()
    if len(words) < limit:
        raise ValueError("too short: %r" % line)
    out = {}
    for k, v in iteritems(dict(enumerate(words))):
        out[k] = compat.text_type(v).upper() if compat.PY3 else v
    return out, compat_ord(buf[0])
'''
RELATIVE = "from .compat import BytesIO, iteritems, compat_ord\nfrom . import compat\n"


def test_a_compat_module_gives_sixs_names_and_no_other_module_does() -> None:
    names = compat.shim("dpkt.compat")
    assert names["BytesIO"] is io.BytesIO is real_six.BytesIO
    assert names["PY3"] is True and names["text_type"] is str and names["binary_type"] is bytes
    assert list(names["iteritems"]({"a": 1})) == list(real_six.iteritems({"a": 1}))
    assert names["int2byte"](65) == real_six.int2byte(65) == b"A"
    for module in ("..common.py3compat", "_compat", "pkg.compatibility", ".six"):
        assert compat.shim(module).keys() == names.keys(), module
    assert "compat_ord" not in names and "moves" not in names and "__name__" not in names
    assert compat.shim("dpkt.utils") == {} and compat.shim("compatible") == {}


def test_the_input_is_read_through_the_compat_modules_bytesio(executor) -> None:
    # before: coverage 0.89, every BytesIO call a stand-in's (``compat.BytesIO().readline()`` logged)
    result = asyncio.run(executor.compare(FIRST_WORDS, [], context=RELATIVE))
    assert result.conclusive, result.reason
    assert not result.uncovered_lines
    outputs = [json.loads(i.output) for i in result.inputs if i.valid]
    assert not any("BytesIO" in entry[1] for out in outputs for entry in out["calls"])
    read = 0
    for i, out in zip([i for i in result.inputs if i.valid], outputs):
        buf = ast.literal_eval(i.state["args"]["buf"])
        if "return" in out and isinstance(buf, bytes):  # the words of the input's first line, read for real
            words = buf.split(b"\n")[0].decode("ascii", "ignore").split()
            assert out["return"]["tuple"][0] == {"dict": [[k, w.upper()] for k, w in enumerate(words)]}
            assert out["calls"][-1][1] == "compat.compat_ord"  # six lacks it: a stand-in still
            read += 1
    assert read


def test_a_compat_module_imported_under_another_name_answers_as_python_3(executor) -> None:
    x = ('def words(buf):\n'
         '    line = BytesIO(buf).readline().decode("ascii", "ignore")\n'
         '    if p3.PY3 and isinstance(line, p3.text_type):\n'
         '        return line.split()\n'
         '    return None\n')
    context = "from mypkg.compat import BytesIO\nimport mypkg.py3compat as p3\n"
    inputs = [{"args": {"buf": "b'abc def'"}}, {"args": {"buf": "b''"}}]
    result = asyncio.run(executor.compare(x, [], context=context, inputs=inputs))
    assert [json.loads(i.output)["return"] for i in result.inputs] == [{"list": ["abc", "def"]}, {"list": []}]

