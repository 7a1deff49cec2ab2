"""``six`` with its Python 3 meanings where a file imports it and it is withheld (issue 24, §2;
calib/executors/sandbox/harness/compat.py; docs/executors.md, *Scaffolding*).

The reference is six itself (the installed package, a test dependency): each name the harness gives must behave as
six's own does on this Python."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import textwrap
from abc import ABCMeta

import pytest
import six as real_six

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.bwrap import load_harness
from calib.executors.sandbox.harness import compat

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_the_made_six_answers_as_six_does_on_python_3():
    made = compat.make_six()
    for name in ("PY2", "PY3", "string_types", "integer_types", "class_types", "text_type", "binary_type", "MAXSIZE",
                 "StringIO", "BytesIO", "next", "callable", "print_", "Iterator", "wraps"):
        assert getattr(made, name) == getattr(real_six, name), name
    for text in ("", "abc", "\x00\xff\x10"):
        assert made.b(text) == real_six.b(text) and made.u(text) == real_six.u(text)
        for ensure in ("ensure_binary", "ensure_text", "ensure_str"):
            assert getattr(made, ensure)(text) == getattr(real_six, ensure)(text)
            assert getattr(made, ensure)(text.encode("utf-8")) == getattr(real_six, ensure)(text.encode("utf-8"))
    with pytest.raises(TypeError):
        made.ensure_binary(3)
    with pytest.raises(TypeError):
        real_six.ensure_binary(3)
    data = b"\x01\x80\xff"
    assert [made.int2byte(i) for i in (0, 65, 255)] == [real_six.int2byte(i) for i in (0, 65, 255)]
    assert made.byte2int(data) == real_six.byte2int(data) and made.indexbytes(data, 2) == real_six.indexbytes(data, 2)
    assert list(made.iterbytes(data)) == list(real_six.iterbytes(data))
    d = {"a": 1, "b": 2}
    for name in ("iteritems", "iterkeys", "itervalues"):
        assert list(getattr(made, name)(d)) == list(getattr(real_six, name)(d))
    for name in ("viewitems", "viewkeys", "viewvalues"):
        assert list(getattr(made, name)(d)) == list(getattr(real_six, name)(d))

    class Thing:
        def method(self):
            return 1

    bound = made.create_bound_method(Thing.method, Thing())
    assert bound() == 1 and made.get_method_function(bound) is real_six.get_method_function(bound)
    assert made.get_method_self(bound) is real_six.get_method_self(bound)


def test_classes_made_with_a_metaclass_match_sixs():
    made = compat.make_six()

    class Base:
        pass

    built = {}
    for which, lib in (("made", made), ("six", real_six)):
        class Shape(lib.with_metaclass(ABCMeta, Base)):
            sides = 0

        @lib.add_metaclass(ABCMeta)
        class Slotted:
            __slots__ = ("x",)

        built[which] = (Shape, Slotted)
    for ours, theirs in zip(built["made"], built["six"]):
        assert type(ours) is type(theirs) is ABCMeta
        assert [k.__name__ for k in ours.__mro__] == [k.__name__ for k in theirs.__mro__]
    assert built["made"][0].sides == 0 and built["made"][1].__slots__ == ("x",)
    assert built["made"][0].__qualname__.endswith("Shape")


def test_six_moves_are_the_standard_modules_and_objects_six_names():
    moves = compat.make_six().moves
    for name in ("configparser", "queue", "range", "zip", "map", "filter", "reduce", "zip_longest", "StringIO",
                 "http_client", "urllib_parse", "cPickle", "builtins", "reprlib", "copyreg", "shlex_quote", "UserDict"):
        assert getattr(moves, name) is getattr(real_six.moves, name), name
    for part in compat.URLLIB_PARTS:  # six's are lazy modules of its own holding the standard module's names
        theirs = getattr(real_six.moves.urllib, part)
        names = [n for n in dir(theirs) if not n.startswith("_")]
        assert names and all(getattr(getattr(moves.urllib, part), n) is getattr(theirs, n) for n in names), part
    with pytest.raises(AttributeError):
        moves.no_such_name  # noqa: B018 - the read is the test


def _run_without_six(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter without site-packages (so no installed six), the harness loaded and its
    finder on ``sys.meta_path`` as a batch has it."""
    finder = "\nfrom _harness import compat\nsys.meta_path.append(compat.CompatFinder)\n"
    boot = "import sys\n" + load_harness() + finder
    return subprocess.run([sys.executable, "-I", "-S", "-c", boot + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


def test_the_finder_serves_six_where_none_is_installed_and_each_build_gets_a_fresh_one():
    done = _run_without_six("""
        import six
        from six.moves import configparser, range as r
        from six.moves.urllib.parse import urlparse
        import six.moves.urllib.request
        import urllib.parse, configparser as cp
        assert six.PY3 and six.b("\\xff") == b"\\xff"
        assert configparser is cp and r is range and urlparse is urllib.parse.urlparse
        assert not hasattr(urllib.parse, "__path__")  # the standard module is handed over unchanged
        try:
            import six.moves.range
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("six.moves.range is no module")
        six.PY3 = False  # what one input's code does to it
        compat.forget()
        import six as again
        assert again is not six and again.PY3 and "six.moves.urllib.parse" not in sys.modules
        print("ok")
    """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_an_installed_six_is_found_first_and_its_moves_are_its_own(tmp_path):
    (tmp_path / "six").mkdir()
    (tmp_path / "six" / "__init__.py").write_text("PY3 = 'installed'\n")  # a six without a moves module
    done = _run_without_six(f"""
        sys.path.insert(0, {str(tmp_path)!r})
        import six
        print(six.PY3)
        try:
            import six.moves
        except ModuleNotFoundError:
            print("no moves")  # as Python says without the harness: the installed six's business, not ours
    """)
    assert done.returncode == 0 and done.stdout.split() == ["installed", "no", "moves"], done.stderr


SALT = '''\
def salt(value, secret=b"k"):
    if isinstance(value, six.text_type):
        value = value.encode("utf-8")
    buf = struct.pack("B", len(value)) + value
    if len(buf) % 16 != 0:
        buf += six.b("\\x00") * (16 - (len(buf) % 16))
    out = six.b("")
    for i in range(len(buf)):
        out += six.int2byte(buf[i] ^ secret[0])
    return out
'''
CONTEXT = "import struct\nimport six\nfrom six.moves import range\n\n"


@needs_bwrap
def test_a_function_using_six_runs_as_on_python_3_in_the_sandbox():
    near = SALT.replace('six.b("\\x00")', 'six.b("\\x01")')  # pads with another byte
    ex = SandboxExecutor(ExecutorConfig(seed=0, workers=2))
    try:
        result = asyncio.run(ex.compare(SALT, [SALT, near], context=CONTEXT))
    finally:
        ex.close()
    assert result.conclusive, result.reason
    assert not any("import stand-ins" in w for w in result.warnings), result.warnings  # six was imported
    outputs = [i.output for i in result.inputs if i.valid]
    assert outputs and not any('"six.' in o for o in outputs)  # no stand-in call in any output state
    state = next(i.state for i in result.inputs if i.valid and i.state["args"].get("value", "").startswith("'"))
    value = eval(state["args"]["value"])  # noqa: S307 - a literal the test's own search wrote
    secret = eval(state["args"].get("secret", "b'k'"))  # noqa: S307
    namespace: dict = {"six": real_six}
    exec(CONTEXT.replace("import six\n", "") + SALT, namespace)  # noqa: S102 - x itself, run with the real six
    expected = namespace["salt"](value, secret)
    output = next(i.output for i in result.inputs if i.state == state)
    assert f'"return":{{"bytes":"{expected.hex()}"}}' in output
    same, other = result.candidates
    assert same.sim_func == 1.0 and other.sim_func is not None and other.sim_func < 1.0


def test_a_parameter_handed_to_sixs_iteritems_is_a_mapping():
    import ast

    from calib.executors.sandbox.harness import hints

    # configshell-fb 1.1.28, configshell/shell.py ``_complete_token_kparam``: kparams is read only through six
    source = ("def complete(text, kparams, other):\n"
              "    current = {}\n"
              "    for key, value in six.iteritems(kparams):\n"
              "        current[key] = value\n"
              "    for v in itervalues(other):\n"
              "        current[v] = text\n"
              "    return current\n")
    info = hints.analyse(ast.parse(source).body[0], skip_first=False)
    by_name = {p.name: p for p in info.params}
    assert "dict" in by_name["kparams"].types and "dict" in by_name["other"].types
    assert "dict" not in by_name["text"].types
