"""The report's tables of agreement between several judges and between several embedding models.

Written from summary.json (``proxies.judges_agreement``, ``proxies.embeddings_agreement``; computed by
:mod:`calib.report.functional.judges`); nothing is computed here. A study with one judge server and one
embedding server gets no block.
"""

from __future__ import annotations

from typing import Any

from calib.report.document import Block, Paragraph, Table
from calib.report.format import sim

__all__ = ["judges_blocks"]


def _members(family: dict[str, Any]) -> str:
    return ", ".join(f"`{m['metric']}` (server `{m['server']}`)" for m in family["members"])


def _family(family: dict[str, Any], judges: bool, anchor: str) -> list[Block]:
    header = ("metric", "compared with", "pairs", "Pearson r", "Spearman ρ", *(("Cohen's κ (quadratic, 11 levels)",)
                                                                        if judges else ()))
    rows = tuple((f"`{p['a']}`", f"`{p['b']}`", str(p["n"]), sim(p["pearson_r"]), sim(p["spearman_rho"]),
                  *((sim(p["kappa"]),) if judges else ())) for p in family["pairs"])
    what = "judges" if judges else "embedding models"
    return [Table(header, rows, anchor, f"Agreement of the {what} on `{family['metric']}`: {_members(family)}; "
                                        f"{family['n_pairs']} (sample, completion) pairs with a value.")]


def judges_blocks(proxies: dict[str, Any]) -> list[Block]:
    """A paragraph and one table per metric measured on several judge or embedding servers (none otherwise)."""
    judges = proxies.get("judges_agreement") or []
    embeddings = proxies.get("embeddings_agreement") or []
    if not judges and not embeddings:
        return []
    blocks: list[Block] = [Paragraph(
        "Agreement between servers (§5.2 of the functional-memorization paper compares judges and embedding "
        "models): each metric measured on several servers is compared server against server over the (sample, "
        "completion) pairs of both models where both have a value (no execution needed): Pearson's r, "
        "Spearman's ρ and, for judges, Cohen's κ of their scores rounded to the nearest tenth (the ordinal levels "
        "0, 0.1, …, 1), quadratic-weighted; – where fewer than 3 pairs remain or a score is constant.")]
    for i, family in enumerate(judges):
        blocks += _family(family, True, f"judges-agreement-table-{i + 1}")
    for i, family in enumerate(embeddings):
        blocks += _family(family, False, f"embeddings-agreement-table-{i + 1}")
    return blocks
