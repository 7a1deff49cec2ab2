"""I/O isomorphisms of a task: rewritten tests, the encoding contract and a known-correct solution.

Given a bijection T (:mod:`calib.probes.transforms`), the transformed task asks for a function g with
g(x') = T(f(T⁻¹(x'))), so that f(x) = y ⇔ g(T(x)) = T(y) (Rajput et al., "Memorization Diagnostics
for Code LLMs Should be Scale-Aware", §5.4; the metamorphic relation of Chen et al. 1998). The
algorithm is unchanged; only the interface is re-encoded. Three conditions separate the two sides of
the interface (§5.2, §6.3.1): ``iso`` encodes inputs and outputs, ``iso_enc`` inputs only (the model
must decode), ``iso_dec`` outputs only (the model must encode).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from calib._exceptions import InvalidParameterError

from .testparse import NotApplicable, ParsedTest, Unparseable, check_entry_point, parse_test
from .transforms import Bijection, NotInDomain, check_roundtrip, count_ints, map_ints

__all__ = [
    "ORIGINAL_ISO",
    "NotApplicable",
    "ParsedTest",
    "Rewritten",
    "contract_text",
    "metamorphic_check",
    "parse_test",
    "rewrite_tests",
    "transformed_reference",
]

ORIGINAL_ISO = ("iso", "iso_enc", "iso_dec")
_ENCODES_INPUTS = {"iso": True, "iso_enc": True, "iso_dec": False}
_ENCODES_OUTPUTS = {"iso": True, "iso_enc": False, "iso_dec": True}


@dataclass(frozen=True)
class Rewritten:
    """The tests of a task rewritten for one (condition, bijection).

    Attributes
    ----------
    tests : tuple of str
        The rewritten assert statements (empty when not applicable).
    applicable : bool
        Whether the task can be posed under this condition and bijection.
    reason : str or None
        Why not, when not applicable.
    values_mapped : int
        Integers T replaced on the transformed side(s), over all tests.
    values_changed : int
        Of those, how many T actually changed (T(v) ≠ v; base 7 fixes 0..6, for example).
    roundtrip_checked : int
        Integers v for which T⁻¹(T(v)) = v was checked (every mapped one).
    condition : str
        ``"iso"``, ``"iso_enc"`` or ``"iso_dec"``.
    bijection : Bijection
        The bijection used.
    """

    tests: tuple[str, ...]
    applicable: bool
    reason: str | None
    values_mapped: int
    values_changed: int
    roundtrip_checked: int
    condition: str
    bijection: Bijection


def _check_condition(condition: str) -> None:
    if condition not in ORIGINAL_ISO:
        raise InvalidParameterError(f"condition must be one of {', '.join(ORIGINAL_ISO)}, got {condition!r}")


def _write(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError as exc:  # an int beyond sys.get_int_max_str_digits()
        raise Unparseable("a value has too many digits to write as a literal") from exc
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        same = False
    if not same:
        raise Unparseable(f"value {text[:60]} cannot be written back as a Python literal")
    return text


def _render(parsed: ParsedTest, args: tuple, kwargs: tuple[tuple[str, Any], ...], expected: Any) -> str:
    parts = [_write(a) for a in args] + [f"{k}={_write(v)}" for k, v in kwargs]
    call = f"{parsed.entry_point}({', '.join(parts)})"
    if parsed.op == "truthy":
        return f"assert {call}"
    if parsed.op == "falsy":
        return f"assert not {call}"
    return f"assert {call} {parsed.op} {_write(expected)}"


def _not_applicable(reason: str, condition: str, bijection: Bijection) -> Rewritten:
    return Rewritten((), False, reason, 0, 0, 0, condition, bijection)


def rewrite_tests(tests: Sequence[str], entry_point: str, condition: str, bijection: Bijection) -> Rewritten:
    """Rewrite a task's assert tests into tests of the transformed task.

    ``iso``: ``assert ENTRY(T(args)) == T(expected)``; ``iso_enc``: ``ENTRY(T(args)) == expected``;
    ``iso_dec``: ``ENTRY(args) == T(expected)``, where T acts on every ``int`` (not ``bool``) nested
    anywhere in the values. Every mapped integer v is checked to satisfy T⁻¹(T(v)) = v (a failure
    raises :class:`~calib.probes.transforms.RoundTripError`, a bug).

    The task is not applicable when a test cannot be parsed (:func:`parse_test`), an integer lies
    outside T's domain, no integer is touched on the transformed side(s), or T changes none of them
    (the rewritten tests would equal the originals).

    Parameters
    ----------
    tests : sequence of str
        The task's assert statements.
    entry_point : str
        Name of the function under test.
    condition : str
        One of :data:`ORIGINAL_ISO`.
    bijection : Bijection
        The transform T.
    """
    _check_condition(condition)
    check_entry_point(entry_point)
    if isinstance(tests, str):
        raise InvalidParameterError("tests must be a sequence of assert strings, got a single str; wrap it in a list")
    if not tests:
        return _not_applicable("no tests", condition, bijection)
    enc_in, enc_out = _ENCODES_INPUTS[condition], _ENCODES_OUTPUTS[condition]
    checked = changed = 0

    def forward(v: int) -> int:
        nonlocal checked, changed
        u = check_roundtrip(bijection, v)
        checked += 1
        changed += u != v
        return u

    rewritten, n_in, n_out = [], 0, 0
    for i, test in enumerate(tests):
        parsed = parse_test(test, entry_point)
        if isinstance(parsed, NotApplicable):
            return _not_applicable(f"test {i}: {parsed.reason}", condition, bijection)
        args, kwargs, expected = parsed.args, parsed.kwargs, parsed.expected
        try:
            if enc_in:
                n_in += count_ints(args) + sum(count_ints(v) for _, v in kwargs)
                args = map_ints(args, forward)
                kwargs = tuple((k, map_ints(v, forward)) for k, v in kwargs)
            if enc_out and parsed.op == "==":
                n_out += count_ints(expected)
                expected = map_ints(expected, forward)
            rewritten.append(_render(parsed, args, kwargs, expected))
        except NotInDomain as exc:
            return _not_applicable(f"test {i}: value {exc.value!r} is outside the domain of T ({exc.reason})",
                                   condition, bijection)
        except Unparseable as exc:
            return _not_applicable(f"test {i}: {exc}", condition, bijection)
    missing = [side for side, on, n in (("inputs", enc_in, n_in), ("outputs", enc_out, n_out)) if on and n == 0]
    if len(missing) == (enc_in + enc_out):
        return _not_applicable(f"no integer in the {' or '.join(missing)}", condition, bijection)
    if changed == 0:
        return _not_applicable("T leaves every integer in the tests unchanged (all are fixed points of T)",
                               condition, bijection)
    return Rewritten(tuple(rewritten), True, None, n_in + n_out, changed, checked, condition, bijection)


def _side_sentences(condition: str, entry_point: str) -> list[str]:
    nested = ("including integers nested at any depth inside lists, tuples, sets and dictionaries "
              "(dictionary keys as well as values)")
    sentences = []
    if _ENCODES_INPUTS[condition]:
        sentences.append(
            f"Inputs are encoded. Every integer v in the arguments of `{entry_point}`, {nested}, is replaced "
            f"by T(v) before the call, so `{entry_point}` receives encoded integers and must recover each "
            f"original value with T⁻¹ before using it.")
    else:
        sentences.append(f"Inputs are NOT encoded: `{entry_point}` receives its arguments exactly as in the "
                         f"original task.")
    if _ENCODES_OUTPUTS[condition]:
        sentences.append(
            f"Outputs are encoded. Every integer w in the value `{entry_point}` returns, {nested}, must be "
            f"replaced by T(w), so `{entry_point}` must return the encoded result, not the plain one.")
    else:
        sentences.append(f"Outputs are NOT encoded: `{entry_point}` must return exactly the value the original "
                         f"task asks for.")
    return sentences


def contract_text(condition: str, bijection: Bijection, entry_point: str, *, include_source: bool = False) -> str:
    """The encoding contract appended to a task's prompt under ``condition``.

    Parameters
    ----------
    condition : str
        One of :data:`ORIGINAL_ISO`.
    bijection : Bijection
        The transform T (its formulas are stated).
    entry_point : str
        The function the contract binds.
    include_source : bool
        Also show ``bijection.python_source()`` (reference implementations of T and T⁻¹).
    """
    _check_condition(condition)
    check_entry_point(entry_point)
    lines = [
        f"Encoding contract for `{entry_point}`.",
        "This task uses an integer encoding T and its inverse T⁻¹:",
        f"    {bijection.formula()}",
        f"    {bijection.inverse_formula()}",
        "T⁻¹(T(v)) = v for every integer v, so nothing is lost by the encoding.",
        *_side_sentences(condition, entry_point),
        "Only values of type int are encoded. True and False, floats, strings and None are never encoded, "
        "and an answer that is a boolean must stay a plain True or False.",
        "The algorithm to implement is the same as in the original task; only the representation of the "
        "integers listed above changes. The tests below are written in this encoded form.",
    ]
    if include_source:
        lines += ["For reference, T and T⁻¹ in Python:", "", bijection.python_source().rstrip()]
    return "\n".join(lines) + "\n"


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node

    def _rename_def(self, node: Any) -> Any:
        if node.name == self.old:
            node.name = self.new
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _rename_def

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.new if n == self.old else n for n in node.names]
        return node

    visit_Nonlocal = visit_Global


_MAPPER = '''
def _calib_map_ints(value, fn):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return fn(value)
    if isinstance(value, list):
        return [_calib_map_ints(item, fn) for item in value]
    if isinstance(value, tuple):
        return tuple(_calib_map_ints(item, fn) for item in value)
    if isinstance(value, dict):
        return {_calib_map_ints(k, fn): _calib_map_ints(v, fn) for k, v in value.items()}
    if isinstance(value, frozenset):
        return frozenset(_calib_map_ints(item, fn) for item in value)
    if isinstance(value, set):
        return {_calib_map_ints(item, fn) for item in value}
    return value
'''


def transformed_reference(code: str, entry_point: str, condition: str, bijection: Bijection) -> str:
    """Python source of a known-correct solution of the transformed task.

    The original solution with ``entry_point`` renamed everywhere (so recursion still reaches the
    original), T and T⁻¹ from ``bijection.python_source()``, a small int-only recursive mapper, and a
    wrapper ``def ENTRY(*args, **kwargs)`` that decodes the inputs (``iso``, ``iso_enc``), calls the
    original and encodes its result (``iso``, ``iso_dec``).

    Parameters
    ----------
    code : str
        The original reference solution; must define ``entry_point`` at top level.
    entry_point : str
        Name of the function under test.
    condition : str
        One of :data:`ORIGINAL_ISO`.
    bijection : Bijection
        The transform T.
    """
    _check_condition(condition)
    check_entry_point(entry_point)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise InvalidParameterError(f"code does not parse: {exc.msg} (line {exc.lineno})") from exc
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    original = "_calib_original"
    while original in names:
        original += "_"
    tree = ast.fix_missing_locations(_Rename(entry_point, original).visit(tree))
    defined = {getattr(n, "name", None) for n in tree.body} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if original not in defined:
        raise InvalidParameterError(
            f"code does not define {entry_point!r} at top level; pass the name the solution defines")
    call_args = "*args, **kwargs"
    prelude = []
    if _ENCODES_INPUTS[condition]:
        prelude = ["    args = _calib_map_ints(args, _calib_decode)",
                   "    kwargs = {k: _calib_map_ints(v, _calib_decode) for k, v in kwargs.items()}"]
    result = f"{original}({call_args})"
    if _ENCODES_OUTPUTS[condition]:
        result = f"_calib_map_ints({result}, _calib_encode)"
    wrapper = "\n".join([f"def {entry_point}(*args, **kwargs):", *prelude, f"    return {result}"])
    header = f"# calib isomorphism wrapper: condition={condition}, {bijection.formula()}"
    return "\n\n\n".join([
        ast.unparse(tree),
        header + "\n" + bijection.python_source("_calib_encode", "_calib_decode").rstrip(),
        _MAPPER.strip(),
        wrapper,
    ]) + "\n"


def metamorphic_check(code: str, tests: Sequence[str], setup: str = "") -> list[bool]:
    """Run ``setup``, ``code`` and each test in a fresh namespace in this process; pass/fail per test.

    **Trusted code only**: this calls :func:`exec` with no sandbox, no time limit and no isolation,
    so it is meant for checking reference solutions and their transformed wrappers (unit tests,
    self-checks). Model generations are executed in the sandbox executor, never here. A test passes
    when none of setup, code or test raises an :class:`Exception`.

    Parameters
    ----------
    code : str
        Solution source.
    tests : sequence of str
        Assert statements.
    setup : str
        Source run before ``code`` in every namespace (e.g. MBPP's ``test_setup_code`` / imports).
    """
    if isinstance(tests, str):
        raise InvalidParameterError("tests must be a sequence of assert strings, got a single str; wrap it in a list")
    results = []
    for test in tests:
        namespace: dict[str, Any] = {"__name__": "__calib_metamorphic__"}
        try:
            exec(setup, namespace)  # trusted reference code only, see the docstring
            exec(code, namespace)
            exec(test, namespace)
        except Exception:
            results.append(False)
        else:
            results.append(True)
    return results
