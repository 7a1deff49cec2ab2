"""Structural metrics: CodeBLEU (and its syntax and data-flow parts) and TSED.

CodeBLEU (Ren et al., 2020) comes from the ``codebleu`` package (``calc_codebleu``, its default
whitespace tokenizer); it handles all of :data:`~calib.metrics.base.LANGUAGES` under the same names.
One ``calc_codebleu`` call serves the three metrics of a pair (an LRU cache keyed by reference,
candidate and language):

- ``codebleu_syntax``: the syntax match (the share of the reference's AST subtrees found in the candidate);
- ``codebleu_dataflow``: the data-flow match. When the reference has no data flow the package returns
  0 and logs a warning; here the value is null (:class:`MetricUnavailable`, "no data flow in the
  reference") and the warning is not logged;
- ``codebleu``: CodeBLEU with equal weights, 0.25 x (BLEU + weighted BLEU + syntax + data flow), the
  paper's formula. Where the reference has no data flow it is the mean of the other three parts
  (equal weights over the parts that exist). This differs from the package's own ``codebleu``, which
  replaces a data-flow score of 0 by 1 (``dataflow or 1``) both when there is no data flow and when
  none of the reference's data flow is matched; where the data-flow score is positive the two agree.

codebleu 0.7 collects the variables a data-flow edge comes from in Python sets, whose order follows
the string hash and so changes with ``PYTHONHASHSEED``; that order numbers the variables when data
flows are compared, so the package's data-flow score of one pair differs between processes (and can
drop below 1 for code that only renames identifiers). Here those sets keep first-seen order (the
order of the code), which makes every value a pure function of the two texts.

TSED (Song et al., 2024, ACL short): both codes are parsed with tree-sitter; the labels are the node
types of every node, named and anonymous (``ERROR`` and missing-token nodes included), the root
included; δ is the tree edit distance with costs ``delete``, ``insert``, ``rename`` (1, 1, 1 by
default: the paper's defaults) computed exactly by Zhang-Shasha (:mod:`calib.metrics._ted`, the same
distance as the paper's APTED); TSED = max(1 - δ / max(|G1|, |G2|), 0) with |G| the node count.

Code that does not parse cleanly is still scored: tree-sitter recovers with ``ERROR`` nodes, and the
lost structure lowers both scores, as it should for a broken generation. A value is null only where
it would mean nothing: empty (whitespace-only) code, a language outside calib's, no data flow in the
reference (``codebleu_dataflow``), or trees too large or too deeply nested for TSED's distance
(:attr:`TSED.max_cells`, :attr:`TSED.max_work`).
"""

from __future__ import annotations

import functools
import math
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, NamedTuple

import numpy as np
from tree_sitter import Language, Parser

from calib._exceptions import InvalidParameterError
from calib.data.treesitter import parser as _brace_parser
from calib.metrics._ted import TooCostly, tree_edit_distance
from calib.metrics.base import LANGUAGE_NAMES, LANGUAGES, MetricUnavailable, normalize_language, register

__all__ = ["CODEBLEU_LANGUAGES", "CodeBLEU", "CodeBLEUParts", "TSED", "codebleu_parts", "syntax_tree"]

#: calib language → the ``lang`` of ``calc_codebleu`` (the same names; all are supported in 0.7.0).
CODEBLEU_LANGUAGES = {"python": "python", "c": "c", "cpp": "cpp", "java": "java", "rust": "rust", "go": "go"}

_CODEBLEU_PARTS = {"codebleu": "codebleu", "codebleu_syntax": "syntax", "codebleu_dataflow": "dataflow"}


class _NoWarnings:
    """Stands in for ``logging`` inside ``codebleu.dataflow_match``: drops its "no data-flow" warning.

    That warning goes through ``logging.warning``, which would also configure the root logger of the
    whole process when it has no handler yet; the null value and its reason replace it here.
    """

    @staticmethod
    def warning(*args: Any, **kwargs: Any) -> None:
        return None


class _FirstSeenSet(dict):
    """Stands in for ``set`` inside codebleu's data-flow code: a set that iterates in first-seen order.

    codebleu 0.7 merges the variables a variable comes from with ``list(set(...))``. A set of strings
    iterates in hash order, which changes with ``PYTHONHASHSEED``; the order then decides how variables
    are numbered when data flows are normalised, so the data-flow match (and CodeBLEU) of one pair
    changed from process to process, and renamed code could lose its data-flow match. In first-seen
    order (the order of the code) the value is a pure function of the two texts.
    """

    def __init__(self, items: Any = ()) -> None:
        super().__init__(dict.fromkeys(items))

    def add(self, item: Any) -> None:
        self[item] = None


@functools.cache
def _codebleu() -> Any:
    """``calc_codebleu`` with its data flow in code order and its warning silenced (imported on first use)."""
    dataflow_match = import_module("codebleu.dataflow_match")
    dataflow_match.logging = _NoWarnings
    for module in (dataflow_match, import_module("codebleu.parser.DFG")):
        module.set = _FirstSeenSet  # module globals come before builtins: the library's own code is unchanged
    return import_module("codebleu").calc_codebleu


@functools.cache
def _versions() -> dict[str, str]:
    """Installed versions of codebleu, tree-sitter and the grammars (they change the values)."""
    names = ["codebleu", "tree-sitter"] + [f"tree-sitter-{lang}" for lang in LANGUAGES]
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def _language(language: str) -> str:
    try:
        return normalize_language(language)
    except InvalidParameterError as exc:
        raise MetricUnavailable(str(exc)) from exc


def _require_code(reference_code: str, candidate_code: str) -> None:
    for role, code in (("reference", reference_code), ("candidate", candidate_code)):
        if not code or not code.strip():
            raise MetricUnavailable(f"empty {role}")


class CodeBLEUParts(NamedTuple):
    """The parts of CodeBLEU for one pair; ``dataflow`` is ``None`` when the reference has no data flow."""

    ngram: float
    weighted_ngram: float
    syntax: float
    dataflow: float | None

    @property
    def codebleu(self) -> float:
        """Equal weights over the parts that exist (all four, or three without data flow)."""
        parts = [self.ngram, self.weighted_ngram, self.syntax]
        if self.dataflow is not None:
            parts.append(self.dataflow)
        return sum(parts) / len(parts)


def _reference_has_dataflow(reference_code: str, language: str) -> bool:
    """Whether codebleu extracts any data flow from the reference (its own steps, as in ``calc_codebleu``)."""
    _codebleu()
    dataflow_match = import_module("codebleu.dataflow_match")
    utils = import_module("codebleu.utils")
    code = reference_code.strip()
    try:
        code = dataflow_match.remove_comments_and_docstrings(code, language)
    except Exception:  # noqa: BLE001 - codebleu keeps the code as it is when this fails
        pass
    ts_parser = Parser(utils.get_tree_sitter_language(language))
    flow = dataflow_match.get_data_flow(code, [ts_parser, dataflow_match.dfg_function[language]])
    return len(dataflow_match.normalize_dataflow(flow)) > 0


@functools.lru_cache(maxsize=64)
def _cached_parts(reference_code: str, candidate_code: str, language: str) -> CodeBLEUParts:
    lang = CODEBLEU_LANGUAGES[language]
    result = _codebleu()([reference_code], [candidate_code], lang=lang, weights=(0.25, 0.25, 0.25, 0.25))
    dataflow: float | None = float(result["dataflow_match_score"])
    if dataflow == 0.0 and not _reference_has_dataflow(reference_code, lang):
        dataflow = None
    return CodeBLEUParts(float(result["ngram_match_score"]), float(result["weighted_ngram_match_score"]),
                         float(result["syntax_match_score"]), dataflow)


def codebleu_parts(reference_code: str, candidate_code: str, language: str) -> CodeBLEUParts:
    """The CodeBLEU parts of one pair, from one cached ``calc_codebleu`` call.

    Raises
    ------
    MetricUnavailable
        For empty code or a language outside calib's.
    """
    language = _language(language)
    _require_code(reference_code, candidate_code)
    return _cached_parts(reference_code, candidate_code, language)


class CodeBLEU:
    """CodeBLEU (``part="codebleu"``) or one of its parts (``"syntax"``, ``"dataflow"``) as a metric.

    Parameters
    ----------
    part
        ``codebleu`` (equal weights), ``syntax`` or ``dataflow``.
    """

    kind = "structural"
    #: 2: data flow in code order (1 took codebleu's hash order, which changed with PYTHONHASHSEED).
    version = "2"

    def __init__(self, part: str = "codebleu") -> None:
        names = {value: key for key, value in _CODEBLEU_PARTS.items()}
        if part not in names:
            raise InvalidParameterError(f"part={part!r}: expected one of {', '.join(names)}")
        self.part = part
        self.name = names[part]

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        """The part's value in [0, 1]; raises :class:`MetricUnavailable` (see the module docstring)."""
        parts = codebleu_parts(reference_code, candidate_code, language)
        if self.part == "syntax":
            return parts.syntax
        if self.part == "dataflow":
            if parts.dataflow is None:
                name = LANGUAGE_NAMES[_language(language)]
                raise MetricUnavailable(f"no data flow in the reference (codebleu finds none in this {name} code)")
            return parts.dataflow
        return parts.codebleu

    def fingerprint(self) -> dict[str, Any]:
        """Name, version, the packages and the weighting."""
        return {"name": self.name, "version": self.version, "packages": _versions(),
                "weights": [0.25, 0.25, 0.25, 0.25], "tokenizer": "whitespace",
                "no_dataflow": "mean of the other three parts", "dataflow_order": "code order"}


@register("codebleu")
def _make_codebleu() -> CodeBLEU:
    return CodeBLEU("codebleu")


@register("codebleu_syntax")
def _make_codebleu_syntax() -> CodeBLEU:
    return CodeBLEU("syntax")


@register("codebleu_dataflow")
def _make_codebleu_dataflow() -> CodeBLEU:
    return CodeBLEU("dataflow")


@functools.cache
def _parser(language: str) -> Parser:
    if language == "python":
        return Parser(Language(import_module("tree_sitter_python").language()))
    return _brace_parser(language)


_LABEL_IDS: dict[str, int] = {}


def syntax_tree(code: str, language: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tree-sitter tree of ``code`` in preorder: label ids (node types), subtree sizes and depths.

    Every node counts, named and anonymous, the root included; the walk is iterative (any depth).
    """
    cursor = _parser(normalize_language(language)).parse(code.encode("utf-8", "surrogatepass")).walk()
    label_ids = _LABEL_IDS
    labels: list[int] = []
    depths: list[int] = []
    sizes: list[int] = []
    open_nodes: list[int] = []
    depth = 0
    while True:
        kind = cursor.node.type
        label = label_ids.get(kind)
        if label is None:
            label = label_ids.setdefault(kind, len(label_ids))
        open_nodes.append(len(labels))
        labels.append(label)
        depths.append(depth)
        sizes.append(1)
        if cursor.goto_first_child():
            depth += 1
            continue
        while True:
            start = open_nodes.pop()
            sizes[start] = len(labels) - start
            if cursor.goto_next_sibling():
                break
            if not cursor.goto_parent():
                return (np.asarray(labels, dtype=np.int64), np.asarray(sizes, dtype=np.int64),
                        np.asarray(depths, dtype=np.int64))
            depth -= 1


class TSED:
    """Tree Similarity of Edit Distance over tree-sitter trees (Song et al., 2024).

    Parameters
    ----------
    delete, insert, rename
        Costs of the edit operations (finite, >= 0); renaming a node to the same label costs 0.
    """

    name = "tsed"
    kind = "structural"
    version = "1"
    #: Largest ``|G1| x |G2|`` computed (two float64 matrices of this size, ~400 MB); beyond it the value is null.
    max_cells: ClassVar[int] = 25_000_000
    #: Most Zhang-Shasha steps (~3 ns each, so ~3 s); beyond it (deep two-sided nesting) the value is null.
    max_work: ClassVar[float] = 1e9

    def __init__(self, delete: float = 1.0, insert: float = 1.0, rename: float = 1.0) -> None:
        costs = {"delete": delete, "insert": insert, "rename": rename}
        for key, value in costs.items():
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InvalidParameterError(f"tsed {key}={value!r}: expected a finite number >= 0")
        self.delete, self.insert, self.rename = float(delete), float(insert), float(rename)

    def distance(self, reference_code: str, candidate_code: str, language: str) -> tuple[float, int, int]:
        """δ (reference → candidate) and the node counts of the two trees."""
        language = _language(language)
        _require_code(reference_code, candidate_code)
        tree1, tree2 = syntax_tree(reference_code, language), syntax_tree(candidate_code, language)
        n1, n2 = len(tree1[0]), len(tree2[0])
        if n1 * n2 > self.max_cells:
            raise MetricUnavailable(f"trees too large for TSED ({n1} x {n2} nodes > {self.max_cells} cells)")
        try:
            delta = tree_edit_distance(tree1, tree2, delete=self.delete, insert=self.insert, rename=self.rename,
                                       max_work=self.max_work)
        except TooCostly as exc:
            raise MetricUnavailable(f"trees too costly for TSED ({n1} x {n2} nodes): {exc}") from exc
        return delta, n1, n2

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        """max(1 - δ / max(|G1|, |G2|), 0); raises :class:`MetricUnavailable` for empty code."""
        delta, n1, n2 = self.distance(reference_code, candidate_code, language)
        return max(1.0 - delta / max(n1, n2), 0.0)

    def fingerprint(self) -> dict[str, Any]:
        """Name, version, costs and the grammar versions."""
        return {"name": self.name, "version": self.version, "delete": self.delete, "insert": self.insert,
                "rename": self.rename, "labels": "node types, named and anonymous",
                "packages": {key: value for key, value in _versions().items() if key != "codebleu"}}


@register("tsed")
def _make_tsed(delete: float = 1.0, insert: float = 1.0, rename: float = 1.0) -> TSED:
    return TSED(delete=delete, insert=insert, rename=rename)
