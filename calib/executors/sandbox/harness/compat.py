"""``six``, the Python 2/3 compatibility library, as it is on Python 3, for code whose file imports it where it is
withheld (runs inside the sandbox; stdlib only).

On Python 3, ``six`` is the standard library under other names: ``six.PY3`` is true, ``six.text_type`` is ``str``,
``six.b(s)`` is ``s.encode("latin-1")``, ``six.iteritems(d)`` iterates ``d.items()``, ``six.moves.configparser`` is
``configparser``. A stand-in for it answered none of these as Python 3 does: ``six.b('\\x00') * 16`` was a stand-in, so
pyrad's ``Packet.SaltCrypt`` raised on its second line, and ``class Meta(six.with_metaclass(ABCMeta, object))`` was
built on a stand-in. Where ``import six`` finds no ``six`` (the paper's setting: the file and the standard
library), :class:`CompatFinder` (on ``sys.meta_path`` after the path finders, before the stand-ins) makes this
module, written here from six's documented Python 3 behaviour, and ``six.moves`` and its submodules
(``from six.moves.urllib.parse import urlparse``) as the standard modules they name. An installed ``six``
(``import_paths``) is found first and used.

Each build of x's module imports it afresh (:func:`forget`, called by :meth:`.scaffold.Module.build`): what one
input's code sets on it does not reach the next input's.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: ``six.moves`` names that are modules of the standard library (``six.moves.urllib`` is made below).
MOVED_MODULES = {
    "builtins": "builtins", "configparser": "configparser", "copyreg": "copyreg", "cPickle": "pickle",
    "queue": "queue", "reprlib": "reprlib", "socketserver": "socketserver", "_thread": "_thread",
    "http_client": "http.client", "http_cookies": "http.cookies", "http_cookiejar": "http.cookiejar",
    "html_parser": "html.parser", "html_entities": "html.entities", "collections_abc": "collections.abc",
    "urllib_parse": "urllib.parse", "urllib_error": "urllib.error", "urllib_request": "urllib.request",
    "urllib_response": "urllib.response", "urllib_robotparser": "urllib.robotparser",
    "email_mime_text": "email.mime.text",
    "email_mime_multipart": "email.mime.multipart", "email_mime_base": "email.mime.base", "_dummy_thread": "_thread",
    "BaseHTTPServer": "http.server", "SimpleHTTPServer": "http.server", "CGIHTTPServer": "http.server",
    "dbm_gnu": "dbm.gnu", "tkinter": "tkinter", "xmlrpc_client": "xmlrpc.client", "xmlrpc_server": "xmlrpc.server",
}
#: ``six.moves`` names that are objects of the standard library: (module, attribute).
MOVED_OBJECTS = {
    "range": ("builtins", "range"), "xrange": ("builtins", "range"), "zip": ("builtins", "zip"),
    "map": ("builtins", "map"), "filter": ("builtins", "filter"), "input": ("builtins", "input"),
    "intern": ("sys", "intern"), "reduce": ("functools", "reduce"), "reload_module": ("importlib", "reload"),
    "zip_longest": ("itertools", "zip_longest"), "filterfalse": ("itertools", "filterfalse"),
    "getcwd": ("os", "getcwd"), "getcwdb": ("os", "getcwdb"), "getoutput": ("subprocess", "getoutput"),
    "shlex_quote": ("shlex", "quote"), "UserDict": ("collections", "UserDict"),
    "UserList": ("collections", "UserList"), "UserString": ("collections", "UserString"),
    "StringIO": ("io", "StringIO"), "cStringIO": ("io", "StringIO"),
}
#: ``six.moves.urllib``'s submodules.
URLLIB_PARTS = ("parse", "error", "request", "response", "robotparser")


def _moved(name: str) -> Any:
    """A ``six.moves`` name: the module or object of the standard library it stands for (``AttributeError``
    for another name, as six raises)."""
    import importlib  # noqa: PLC0415 - loaded already by the import system

    if name in MOVED_MODULES:
        return importlib.import_module(MOVED_MODULES[name])
    if name in MOVED_OBJECTS:
        module, attr = MOVED_OBJECTS[name]
        return getattr(importlib.import_module(module), attr)
    if name == "urllib":
        return _urllib()
    raise AttributeError(f"module 'six.moves' has no attribute {name!r}")


def _urllib_part(name: str) -> Any:
    """``six.moves.urllib.parse`` and the other parts: the standard ``urllib`` module, imported when first read."""
    import importlib  # noqa: PLC0415

    if name in URLLIB_PARTS:
        return importlib.import_module(f"urllib.{name}")
    raise AttributeError(f"module 'six.moves.urllib' has no attribute {name!r}")


def _urllib() -> types.ModuleType:
    module = types.ModuleType("six.moves.urllib")
    module.__path__ = []  # ``from six.moves.urllib.parse import urlparse``: a package
    module.__getattr__ = _urllib_part  # type: ignore[method-assign] - PEP 562: each part imported when read
    return module


def _ensure(kind: type, s: Any, encoding: str, errors: str) -> Any:
    if isinstance(s, kind):
        return s
    if isinstance(s, str):
        return s.encode(encoding, errors)
    if isinstance(s, bytes):
        return s.decode(encoding, errors)
    raise TypeError(f"not expecting type '{type(s)}'")


def with_metaclass(meta: Any, *bases: Any) -> Any:
    """A base that makes the class defined on it a class of ``meta`` on ``bases`` (six's ``with_metaclass``):
    a throwaway class whose metaclass builds the real class in its place."""

    class Maker(type):
        def __new__(cls, name: str, _bases: Any, namespace: dict[str, Any]) -> Any:
            return meta(name, bases, namespace)

        @classmethod
        def __prepare__(cls, name: str, _bases: Any, **kwargs: Any) -> Any:
            return meta.__prepare__(name, bases)

    return type.__new__(Maker, "temporary_class", (), {})


def add_metaclass(metaclass: Any) -> Any:
    """A class decorator remaking the class with ``metaclass`` (six's ``add_metaclass``)."""

    def remake(cls: type) -> Any:
        namespace = dict(cls.__dict__)
        slots = namespace.get("__slots__")
        for slot in [slots] if isinstance(slots, str) else slots or ():
            namespace.pop(slot, None)
        namespace.pop("__dict__", None)
        namespace.pop("__weakref__", None)
        namespace["__qualname__"] = cls.__qualname__
        return metaclass(cls.__name__, cls.__bases__, namespace)

    return remake


def _reraise(tp: Any, value: Any = None, tb: Any = None) -> None:
    exc = tp() if value is None else value
    if exc.__traceback__ is not tb:
        raise exc.with_traceback(tb)
    raise exc


def _raise_from(value: Any, from_value: Any) -> None:
    raise value from from_value


def _call_as(name: str) -> Any:
    """``six.assertCountEqual(self, ...)``: the test case's own method."""
    return lambda case, *args, **kwargs: getattr(case, name)(*args, **kwargs)


def make_six() -> types.ModuleType:
    """A fresh ``six`` module (and ``six.moves`` in it) with Python 3's meanings."""
    import builtins  # noqa: PLC0415
    import functools  # noqa: PLC0415
    import io  # noqa: PLC0415

    six = types.ModuleType("six", "Python 2 and 3 compatibility utilities (calib's, Python 3's meanings)")
    moves = types.ModuleType("six.moves")
    moves.__path__ = []  # a package: ``import six.moves.urllib.parse``
    moves.__getattr__ = _moved  # type: ignore[method-assign] - PEP 562: resolved when read
    six.__dict__.update(
        moves=moves, PY2=False, PY3=True, PY34=True, string_types=(str,), integer_types=(int,), class_types=(type,),
        text_type=str, binary_type=bytes, MAXSIZE=sys.maxsize, __version__="1.16.0",
        b=lambda s: s.encode("latin-1"), u=lambda s: s, unichr=chr, int2byte=lambda i: bytes((i,)),
        byte2int=lambda bs: bs[0], indexbytes=lambda buf, i: buf[i], iterbytes=iter,
        StringIO=io.StringIO, BytesIO=io.BytesIO,
        iterkeys=lambda d, **kw: iter(d.keys(**kw)), itervalues=lambda d, **kw: iter(d.values(**kw)),
        iteritems=lambda d, **kw: iter(d.items(**kw)), iterlists=lambda d, **kw: iter(d.lists(**kw)),
        viewkeys=lambda d: d.keys(), viewvalues=lambda d: d.values(), viewitems=lambda d: d.items(),
        next=next, advance_iterator=next, callable=callable, exec_=builtins.exec, print_=print,
        get_unbound_function=lambda f: f, create_bound_method=types.MethodType,
        create_unbound_method=lambda f, cls: f, get_method_function=lambda m: m.__func__,
        get_method_self=lambda m: m.__self__, get_function_closure=lambda f: f.__closure__,
        get_function_code=lambda f: f.__code__, get_function_defaults=lambda f: f.__defaults__,
        get_function_globals=lambda f: f.__globals__, Iterator=object,
        ensure_binary=lambda s, encoding="utf-8", errors="strict": _ensure(bytes, s, encoding, errors),
        ensure_text=lambda s, encoding="utf-8", errors="strict": _ensure(str, s, encoding, errors),
        ensure_str=lambda s, encoding="utf-8", errors="strict": _ensure(str, s, encoding, errors),
        with_metaclass=with_metaclass, add_metaclass=add_metaclass, wraps=functools.wraps,
        python_2_unicode_compatible=lambda klass: klass, reraise=_reraise, raise_from=_raise_from,
        assertCountEqual=_call_as("assertCountEqual"), assertRaisesRegex=_call_as("assertRaisesRegex"),
        assertRegex=_call_as("assertRegex"), assertNotRegex=_call_as("assertNotRegex"))
    return six


class CompatFinder:
    """On ``sys.meta_path`` after the path finders: ``six`` and ``six.moves...`` where no ``six`` is installed."""

    made: list[str] = []  # the names it made, taken out of ``sys.modules`` again by :func:`forget`

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "six" and not (name.startswith("six.moves") and "six" in cls.made):  # (an installed six's
            return None  # own ``six.moves`` serves it)
        import importlib.machinery  # noqa: PLC0415 - loaded already by the import system

        return importlib.machinery.ModuleSpec(name, cls, is_package=name in ("six", "six.moves", "six.moves.urllib"))

    @classmethod
    def create_module(cls, spec: Any) -> Any:
        name = spec.name
        cls.made.append(name)
        if name == "six":
            return make_six()
        parent = sys.modules["six"]  # made here (find_spec): imported before its submodules
        if name == "six.moves":
            return parent.moves
        rest = name[len("six.moves."):]
        if rest.startswith("urllib.") and rest[len("urllib."):] in URLLIB_PARTS:
            return _urllib_part(rest[len("urllib."):])  # the standard module itself
        try:
            found = _moved(rest)
        except AttributeError:
            found = None
        if not isinstance(found, types.ModuleType):  # ``import six.moves.range``: no module, as in six
            cls.made.pop()
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return found

    @classmethod
    def exec_module(cls, module: Any) -> None:
        """Nothing to run: the module is made whole."""


def forget() -> None:
    """Take what :class:`CompatFinder` made out of ``sys.modules`` (the next build imports ``six`` afresh)."""
    for name in CompatFinder.made:
        sys.modules.pop(name, None)
    CompatFinder.made.clear()
