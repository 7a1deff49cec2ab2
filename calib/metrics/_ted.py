"""Tree edit distance (Zhang and Shasha, 1989), compiled with numba: the kernel behind TSED.

Zhang, K. and Shasha, D. (1989). Simple fast algorithms for the editing distance between trees and
related problems. SIAM J. Comput. 18(6). The distance is exact, so it equals APTED's (Pawlik and
Augsten, 2016) for the same costs; only the running time differs. Costs are constant per operation:
``delete`` and ``insert`` per node, ``rename`` when two labels differ (0 when they are equal).

A tree is given in preorder as three integer arrays: ``labels`` (an id per label), ``sizes`` (subtree
sizes, the node included) and ``depths`` (the root at 0). :func:`tree_edit_distance` turns them into
the postorder arrays of the algorithm (the leftmost-leaf descendants and the keyroots) for either
the trees as given or both trees mirrored (the same distance), and runs the decomposition whose
keyroot subtrees are smaller: code trees often end in a large body, where the mirrored (right-path)
decomposition does less work.

The kernel is compiled on first use and cached on disk (``cache=True``), so later processes load it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit

__all__ = ["TooCostly", "preorder_arrays", "tree_edit_distance"]


class TooCostly(ValueError):
    """The distance would take more than the allowed work (see :func:`tree_edit_distance`)."""


@njit(cache=True)
def _keyroots(lld: np.ndarray) -> np.ndarray:
    """The keyroots of a postorder tree: for each leftmost leaf, the highest node having it, ascending."""
    n = lld.shape[0]
    highest = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        highest[lld[i]] = i  # postorder: later nodes with the same lld are ancestors
    count = 0
    for i in range(n):
        if highest[i] >= 0:
            count += 1
    out = np.empty(count, dtype=np.int64)
    k = 0
    for i in range(n):
        if highest[i] >= 0:
            out[k] = highest[i]
            k += 1
    out.sort()
    return out


@njit(cache=True)
def _zhang_shasha(labels1: np.ndarray, lld1: np.ndarray, labels2: np.ndarray, lld2: np.ndarray,
                  delete: float, insert: float, rename: float) -> float:
    """Zhang-Shasha over postorder arrays (0-based); ``lld`` is each node's leftmost-leaf descendant."""
    n1, n2 = labels1.shape[0], labels2.shape[0]
    keys1, keys2 = _keyroots(lld1), _keyroots(lld2)
    treedist = np.zeros((n1, n2), dtype=np.float64)
    forest = np.zeros((n1 + 1, n2 + 1), dtype=np.float64)
    for i in keys1:
        li = lld1[i]
        rows = i - li + 2
        for j in keys2:
            lj = lld2[j]
            cols = j - lj + 2
            forest[0, 0] = 0.0
            for x in range(1, rows):
                forest[x, 0] = forest[x - 1, 0] + delete
            for y in range(1, cols):
                forest[0, y] = forest[0, y - 1] + insert
            for x in range(1, rows):
                a = li + x - 1
                whole_a = lld1[a] == li
                label_a = labels1[a]
                pa = lld1[a] - li
                for y in range(1, cols):
                    b = lj + y - 1
                    best = forest[x - 1, y] + delete
                    other = forest[x, y - 1] + insert
                    if other < best:
                        best = other
                    if whole_a and lld2[b] == lj:  # both forests are whole trees
                        other = forest[x - 1, y - 1] + (0.0 if label_a == labels2[b] else rename)
                        if other < best:
                            best = other
                        forest[x, y] = best
                        treedist[a, b] = best
                    else:
                        other = forest[pa, lld2[b] - lj] + treedist[a, b]
                        if other < best:
                            best = other
                        forest[x, y] = best
    return treedist[n1 - 1, n2 - 1]


def _postorder(labels: np.ndarray, sizes: np.ndarray, depths: np.ndarray,
               mirrored: bool) -> tuple[np.ndarray, np.ndarray]:
    """Postorder labels and leftmost-leaf descendants, of the tree or of its mirror image."""
    n = labels.shape[0]
    pre = np.arange(n, dtype=np.int64)
    if mirrored:  # the reversed preorder is the postorder of the mirror image
        return labels[::-1].copy(), (n - pre - sizes)[::-1].copy()
    post = pre - depths + sizes - 1
    order = np.empty(n, dtype=np.int64)
    order[post] = pre
    lld = pre - depths
    return labels[order], lld[order]


def _keyroot_work(lld: np.ndarray) -> int:
    """The summed subtree sizes of the keyroots: the factor of this tree in Zhang-Shasha's running time."""
    n = lld.shape[0]
    highest = np.full(n, -1, dtype=np.int64)
    np.maximum.at(highest, lld, np.arange(n, dtype=np.int64))
    keys = highest[highest >= 0]
    return int((keys - lld[keys] + 1).sum())


def preorder_arrays(tree: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Preorder ``(labels, sizes, depths)`` of a nested ``(label, (child, ...))`` tree with int labels.

    A helper for tests and small trees (iterative, so deep trees are fine).
    """
    labels: list[int] = []
    depths: list[int] = []
    parents: list[int] = []
    stack = [(tree, 0, -1)]
    while stack:
        (label, children), depth, parent = stack.pop()
        index = len(labels)
        labels.append(label)
        depths.append(depth)
        parents.append(parent)
        stack.extend((child, depth + 1, index) for child in reversed(children))
    sizes = np.ones(len(labels), dtype=np.int64)
    for index in range(len(labels) - 1, 0, -1):
        sizes[parents[index]] += sizes[index]
    return np.asarray(labels, dtype=np.int64), sizes, np.asarray(depths, dtype=np.int64)


def tree_edit_distance(tree1: Sequence[np.ndarray], tree2: Sequence[np.ndarray], *, delete: float = 1.0,
                       insert: float = 1.0, rename: float = 1.0, max_work: float = math.inf) -> float:
    """The tree edit distance from ``tree1`` to ``tree2``, each preorder ``(labels, sizes, depths)``.

    Parameters
    ----------
    tree1, tree2
        Non-empty trees as int64 arrays: label ids, subtree sizes and depths, in preorder.
    delete, insert, rename
        Cost of deleting a node of ``tree1``, inserting a node of ``tree2``, and renaming a node whose
        label differs (a node mapped to one with the same label costs 0).
    max_work
        Most inner-loop steps allowed (the product of the two trees' summed keyroot subtree sizes, for
        the cheaper decomposition; ~3 ns each). Deeply nested trees with siblings on both sides of
        the nesting (``((((1))))``) make Zhang-Shasha quartic.

    Returns
    -------
    float
        The minimum total cost of an edit script turning ``tree1`` into ``tree2``.

    Raises
    ------
    TooCostly
        When the work exceeds ``max_work``.
    """
    work = {}
    for mirrored in (False, True):
        post1 = _postorder(*tree1, mirrored)
        post2 = _postorder(*tree2, mirrored)
        work[mirrored] = (_keyroot_work(post1[1]) * _keyroot_work(post2[1]), post1, post2)
    steps, post1, post2 = min(work.values(), key=lambda item: item[0])
    if steps > max_work:
        raise TooCostly(f"tree edit distance needs {steps:.3g} steps > max_work={max_work:.3g}")
    return float(_zhang_shasha(post1[0], post1[1], post2[0], post2[1], float(delete), float(insert), float(rename)))
