"""Input-to-state replacement (Redqueen) for the search (runs inside the sandbox; stdlib only).

A comparison x made on an input (:data:`.cmplog.PAIRS`: its kind and operands) says which value of the input to
rewrite into what so that the comparison may go the other way (:func:`replacements`); :mod:`.synth` queues the
results after an input that found something new.
"""

from __future__ import annotations

from .inputs import ARGV, DIR_PREFIX, ENV_PREFIX, FILE_PREFIX, STDIN
from .pools import KEEP, SEED, STANDINS
from .standins import CalibStandIn, is_standin, standin_name, standin_script
from .values import New, Obj, Stream, encode

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def _rewrite(kind: str, v: Any, a: Any, b: Any, depth: int = 0, rng: Any = None) -> list[Any]:
    """New values for one input value ``v`` so that the comparison ``a`` vs ``b`` (``kind`` as in
    :data:`.cmplog.PAIRS`) may go the other way: where ``v`` is (or contains) one side, put the other.
    A text a regular expression did not match gets strings it matches (:func:`.regexes.rewrite`); a text
    whose length, code point, character class or number x checked gets one that passes the check."""
    from . import regexes, shapes  # noqa: PLC0415 - loaded with the hints already

    out: list[Any] = []
    t = type(v)
    if v is KEEP or t is bool:
        return out
    if kind == "regex" and t in (str, bytes):
        return regexes.rewrite(v, a, b, rng)
    if kind in ("len", "len_order") and type(b) is int and t is type(a) and t in (str, bytes):
        sizes = [b] if kind == "len" else [b, b + 1, b - 1]
        if v == a or regexes.splice(v, a, a) is not None or len(v) == len(a):
            inside = v != a and regexes.splice(v, a, a) is not None  # else the whole text (``len(s.strip())``)
            return [regexes.splice(v, a, new) if inside else new for n in sizes
                    for new in regexes.resize(a if inside else v, n)]
    if kind in ("parts", "parts_order") and t is type(a) and t in (str, bytes) and type(b) is tuple and len(b) == 2:
        inside = v != a and regexes.splice(v, a, a) is not None  # ``len(host.split(":"))`` of part of the input
        if (v == a or inside) and type(b[1]) is int:  # ``len(ip.split(".")) == 4``: a text of four parts
            counts = [b[1]] if kind == "parts" else [b[1], b[1] + 1, b[1] - 1]
            return [regexes.splice(v, a, new) if inside else new for n in counts for new in regexes.parts(a, b[0], n)]
    if kind == "is" and t is type(a) and v == a:  # ``node[1] is None`` on ``[5, -4]``: ``[5, None]``
        return [b]
    if kind in ("isa", "as", "as_text") and t is type(a) and v == a:  # ``isinstance(n, bytes)`` on ``":status"``
        return _converted(v, b)
    if kind in ("whole", "whole_order") and (v is None if a is None else (type(v).__name__ == a and not v)):
        # ``match["turns"] == 1`` on ``[]`` (or ``None``): the number there
        return [b] if kind == "whole" or type(b) not in (int, float) else [b, b + 1, b - 1]
    if kind == "member" and type(v).__name__ == a and not v:  # ``mark in used`` on ``set()``: the mark there
        return [{b}] if t is set else [{b: 1}] if t is dict else [t([b])]
    if kind == "at" and t in (str, bytes) and v == a:  # ``buf[0:8] == MAGIC``: MAGIC there
        return [shapes.put(v, *b)]
    if kind == "insert" and t is type(a) and v == a:  # ``int(fmt[1:-1])`` of ``"()"``: a number between
        return [v[:b[0]] + b[1] + v[b[0]:]]
    if kind in ("ord", "charclass", "number") and t is str and type(a) is str:
        if kind == "ord" and type(b) is int:
            news = [regexes.splice(v, a, chr(c)) for c in (b, b + 1, b - 1) if 0 <= c <= 0x10FFFF]
        elif kind == "charclass" and type(b) is str:
            news = [regexes.splice(v, a, regexes.recast(a, b))]
        elif kind == "number" and not a:  # ``int("")`` of the empty field after a separator
            news = [v + "1"] if v[-1:] in "/:=,-_ " else []
        else:
            news = [regexes.splice(v, a, n) for n in ("1", "24")]
        if any(new is not None for new in news):
            return [new for new in news if new is not None]
    if t in (int, float, str, bytes):
        for this, other in ((a, b), (b, a)):
            if type(this) is not t:
                continue
            if kind == "eq" and type(other) in (str, bytes) and t in (int, float) and v == this:
                out.append(other)  # an int where x compares with a text (``tag in EMPTY_TAGS``): the text
            elif kind == "eq" and type(other) is t:
                if v == this:
                    out.append(other)
                elif t in (str, bytes) and this and this in v:
                    out.append(v.replace(this, other, 1))
                elif t in (str, bytes) and not this and other:  # an empty field of the text: fill the first
                    out.append(other + v)
            elif kind == "order" and v == this and t in (int, float) and type(other) in (int, float):
                out += [other, other + 1, other - 1]
            elif kind in ("prefix", "suffix") and this is a and type(other) is t:
                if v == this or (this and this in v):
                    joined = other + this if kind == "prefix" else this + other
                    out.append(joined if v == this else v.replace(this, joined, 1))
            elif kind == "contains" and type(other) is t:
                if this is b and v == this:  # the text came from the input: put the needle in it
                    out += [v + a, a + v]
                elif this is b and this and (new := regexes.splice(v, b, b + a)) is not None:
                    out.append(new)  # ``"netscape" in doctype.lower()``: in the part of the input it came from
                elif this is a and v == this and other:  # the needle came from the input: take from the text
                    out += [other[:1], other]
                elif this is a and other and v != other and (new := regexes.splice(v, a, other[:1])) is not None:
                    out.append(new)  # ``text[0] in "+-"``: the part of the input, from the text
        return out
    if depth >= 2:
        return out
    if t in (list, tuple):
        for i, item in enumerate(v[:8]):
            for new in _rewrite(kind, item, a, b, depth + 1, rng)[:1]:
                items = list(v)
                items[i] = new
                return [t(items)]
    elif t is dict:
        for key, item in list(v.items())[:8]:
            for new in _rewrite(kind, item, a, b, depth + 1, rng)[:1]:
                return [{**v, key: new}]
            if type(key) in (str, int) and kind == "eq":
                for new in _rewrite(kind, key, a, b, depth + 1, rng)[:1]:
                    if new not in v:
                        return [{(new if k == key else k): val for k, val in v.items()}]
    elif t is Obj:
        for attr, item in list(vars(v).items())[:8]:
            for new in _rewrite(kind, item, a, b, depth + 1, rng)[:1]:
                return [Obj(**{**vars(v), attr: new})]
    elif is_standin(v) and standin_script(v):  # what a stand-in's calls return: rewrite those values
        script = standin_script(v) or []
        for i, item in enumerate(script[:8]):
            for new in _rewrite(kind, item, a, b, depth + 1, rng)[:1]:
                items = list(script)
                items[i] = new
                return [CalibStandIn(standin_name(v), items)]
    elif t is Stream:  # ``fileobj.read(8) == b"APETAGEX"``: in what the open file holds
        for new in _rewrite(kind, v.content, a, b, depth + 1, rng)[:1]:
            if type(new) is type(v.content):
                return [Stream(new)]
    elif t is New:
        for i, item in enumerate(v.args[:8]):
            for new in _rewrite(kind, item, a, b, depth + 1, rng)[:1]:
                args = list(v.args)
                args[i] = new
                return [New(v.cls, *args, **v.attrs)]
    return out


def _converted(v: Any, kind: Any) -> list[Any]:
    """``v`` (a text, bytes or number) written as the builtin type named ``kind`` (:func:`.cmplog.isa`)."""
    t = type(v)
    if kind == "bytes" and t in (str, int, float):
        return [(v if t is str else str(v)).encode("utf-8", "surrogatepass")]
    if kind == "str":
        return [v.decode("latin-1") if t is bytes else str(v)]
    if kind in ("int", "float") and t in (str, bytes, int, float):
        try:
            number = float(v) if kind == "float" else int(v)
        except (ValueError, OverflowError):
            number = len(v) if t in (str, bytes) else 0
        return [float(number) if kind == "float" else int(number)]
    return []


OVERFLOW = 4  # the comparisons a run's rewrites come from, at most, in multiples of the limit (:func:`replacements`)
_AMBIENT = (ENV_PREFIX, FILE_PREFIX, DIR_PREFIX, STDIN, ARGV)  # pseudo-parameters of the input's environment


def _numbers_in_text(kind: str, v: Any, a: Any, b: Any) -> list[Any]:
    """A number x compared, written in a text input (an environment variable, stdin, a file): ``int(
    os.environ["PORT"]) > 1024`` on ``"80"`` gives ``"1024"``, ``"1025"``, ``"1023"``."""
    import re  # noqa: PLC0415 - loaded already (json needs it); only an explored text input gets here
    out: list[Any] = []
    if type(v) is not str or type(a) not in (int, float) or type(b) not in (int, float):
        return out
    for this, other in ((a, b), (b, a)):
        pattern = re.compile(r"(?<![\w.-])" + re.escape(str(this)) + r"(?![\w.])")
        if pattern.search(v):
            news = [other] if kind == "eq" else [other, other + 1, other - 1]
            out += [pattern.sub(str(new), v, count=1) for new in news]
    return out


def replacements(values: dict[str, Any], pairs: list[tuple[str, Any, Any]], limit: int = 8,
                 rng: Any = None, overflow: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Input-to-state replacement (Redqueen): inputs like ``values`` with one value rewritten so that a
    comparison x made on it (:data:`.cmplog.PAIRS`) may go the other way. ``url = "abc:x"`` whose
    ``scheme == "data"`` failed becomes ``"data:x"``; ``value[0] in "(["`` turns ``"abc"`` into ``"(bc"``;
    ``DATE.match(text)`` that failed on ``"abc"`` turns it into ``"2024-01-31"``. ``rng`` draws the strings
    a pattern matches (the search's; without one, a generator seeded by the pattern and the value).
    ``overflow``: where the rewrites of the comparisons past the ``limit`` go (up to :data:`OVERFLOW` times
    it), one each, in order: an ``elif`` chain of seventeen ``sectype == "SHT_…"`` gives its first eight
    here and the nine others there."""
    per_pair: list[list[tuple[dict[str, Any], str]]] = []  # each comparison's rewrites (and the value's name), in the
    # order x made the comparisons
    seen: set[str] = set()
    for kind, a, b in pairs:
        kind = "eq" if kind == "key" else kind  # a key or name looked up and not found (:func:`.cmplog._missing`)
        mine: list[tuple[dict[str, Any], str]] = []
        for name, v in values.items():
            if name in (SEED, STANDINS):
                continue
            news = _rewrite(kind, v, a, b, 0, rng)
            if name.startswith(_AMBIENT):
                news += _numbers_in_text(kind, v, a, b)
            for new in news:
                try:
                    key = name + "=" + encode(new)
                except (TypeError, ValueError):
                    continue
                if key not in seen:
                    seen.add(key)
                    mine.append(({**values, name: new}, name))
        if mine:
            per_pair.append(mine)
            if len(per_pair) >= limit * (OVERFLOW if overflow is not None else 1):
                break
    # each comparison's first rewrite of each input value first, then the others: a loop's first comparison
    # (``i < len(text)`` with ``i`` 0) rewrote every input value that happened to be 0 three ways (to 13, 14 and 12),
    # and filled the limit before ``c == exit`` was reached
    if overflow is not None:
        overflow.extend(mine[0][0] for mine in per_pair[limit:])
    first: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for mine in per_pair[:limit]:
        named: set[str] = set()
        for rewrite, name in mine:
            (rest if name in named else first).append(rewrite)
            named.add(name)
    return (first + rest)[:limit]
