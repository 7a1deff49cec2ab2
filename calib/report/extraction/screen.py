"""The control screen of an ``extraction`` report: what ``[extraction.screen]`` flagged, and both control pools.

Cooper et al., "Extractable Memorization From First Principles", App. D.2 and E.1: controls that are reused
member text sit at the top of the control scores and raise τ, so the paper reports the full pool beside the
decontaminated one. The study's ``screen`` stage writes the ``control_screen`` table (one row per control: its
best n-gram overlap and Jaccard with a member or training-corpus document, flagged or not, and why); the
analysis removes the flagged controls and the ``analyze.decontaminate`` list from the ``decontaminated`` pool.
:func:`screen_summary` is summary.json's ``control_screen`` (null without a screen); :func:`screen_blocks` the
"Control screen" section. Nothing is recomputed here but counts: the operating points of both pools are the
headline's.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from calib._exceptions import InputError
from calib.report.document import Block, Heading, Paragraph, Table
from calib.report.format import DASH, fixed, number, pct
from calib.report.run import RunTables

__all__ = ["SCREEN_COLUMNS", "screen_blocks", "screen_summary"]

#: The columns the report reads from the ``control_screen`` table (calib/study/tables.py CONTROL_SCREEN_SCHEMA).
SCREEN_COLUMNS = ("sample_id", "source", "ngrams", "overlap", "overlap_match", "jaccard", "jaccard_match",
                  "minhash_jaccard", "flagged", "reason")

#: How many of the highest-scoring unflagged controls the summary lists (the screen's near misses).
NEAR_MISSES = 5


def _table(run: RunTables) -> pl.DataFrame:
    """The run's ``control_screen`` table (written by the ``screen`` stage), its columns checked."""
    frame = run.tables.get("control_screen")
    path = run.root / "tables" / "control_screen.parquet"
    if frame is None:
        if not path.is_file():
            raise InputError("the spec has [extraction.screen] but the run has no control_screen table; run "
                             "`calib study SPEC` again (the screen stage writes it)", path=str(path))
        frame = pl.read_parquet(path)
    missing = [c for c in SCREEN_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"the control_screen table lacks column(s) {', '.join(missing)}; re-run `calib study SPEC` "
                         "with this version of calib", path=str(path))
    return frame


def _row(r: dict[str, Any], manual: set[str]) -> dict[str, Any]:
    return {**{k: r[k] for k in SCREEN_COLUMNS}, "also_listed": r["sample_id"] in manual}


def _method(screen: dict[str, Any], members: int, corpus: str) -> str:
    return (f"Every control sample was compared with the {members} member samples{corpus}: a control is flagged when "
            f"at least {screen['overlap']:g} of its distinct {screen['ngram_tokens']}-token n-grams (calib's code "
            "tokens) occur in one of those documents, or when the exact Jaccard similarity of its "
            f"{screen['shingle_tokens']}-token shingle set with one reaches {screen['jaccard']:g} (MinHash LSH "
            f"candidates, {screen['num_perm']} permutations, each verified exactly). Flagged controls and the "
            "`analyze.decontaminate` list are removed from the decontaminated pool; the full pool keeps them.")


def screen_summary(run: RunTables, settings: dict[str, Any], headline: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary.json's ``control_screen``: the screen's settings, its flags, near misses and both pools' results."""
    screen = settings["screen"]
    if screen is None:
        return None
    table = _table(run)
    manual = set(settings["decontaminate"])
    flagged = table.filter(pl.col("flagged"))
    near = table.filter(~pl.col("flagged")).with_columns(
        pl.max_horizontal(pl.col("overlap").fill_null(0.0), pl.col("jaccard").fill_null(0.0)).alias("_top")) \
        .sort(["_top", "sample_id"], descending=[True, False]).head(NEAR_MISSES)
    samples = run.tables["samples"]
    controls = samples.filter(pl.col("membership") == "control")["sample_id"].to_list()
    removed = sorted(set(flagged["sample_id"].to_list()) | (manual & set(controls)))
    source = screen.get("source", "members")
    corpus = {"members": "", "organism": " and every document of the organism's training corpus",
              "corpus": " and every document of the training corpus " + ", ".join(
                  f"`{p}`" for p in screen.get("paths", []))}[source]
    members = int((samples["membership"] == "member").sum())
    pools = []
    for h in headline:
        by = {p["pool"]: p for p in h["pools"]}
        pools.append({"role": h["role"], "procedure": h["procedure"], "suffix_tokens": h["suffix_tokens"],
                      "all": by.get("all"), "decontaminated": by.get("decontaminated")})
    return {"settings": screen, "source": source, "controls": table.height, "screened_against_members": members,
            "flagged": flagged.height, "listed": len(manual), "removed_samples": removed,
            "rows": [_row(r, manual) for r in flagged.sort("sample_id").to_dicts()],
            "near_misses": [_row(r, manual) for r in near.drop("_top").to_dicts()],
            "pools": pools, "method": _method(screen, members, corpus)}


# --- blocks -------------------------------------------------------------------------------------
def _findings(rows: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    return tuple((f"`{r['sample_id']}`", r["source"] or DASH, number(r["ngrams"]), fixed(r["overlap"], 3),
                  f"`{r['overlap_match']}`" if r["overlap_match"] else DASH, fixed(r["jaccard"], 3),
                  fixed(r["minhash_jaccard"], 3), f"`{r['jaccard_match']}`" if r["jaccard_match"] else DASH,
                  "yes" if r["also_listed"] else "", r["reason"] or DASH) for r in rows)


_FINDING_HEADERS = ("control", "source", "n-grams", "n-gram overlap", "overlap with", "Jaccard", "MinHash estimate",
                    "Jaccard with", "also listed", "reason")


def _op(op: dict[str, Any] | None) -> str:
    if op is None:
        return DASH
    claims = f"{number(op['claims'])}/{number(op['n_members'])}" if op["k"] else f"{DASH}/{number(op['n_members'])}"
    rate = DASH if op["calibrated_rate"] is None or not op["k"] else \
        f"{pct(op['calibrated_rate'])} [{pct(op['low'])}, {pct(op['high'])}]"
    return f"N = {number(op['n_controls'])}, K = {op['k']}, τ = {op['threshold'] or 'none'}, claims {claims}, {rate}"


def screen_blocks(summary: dict[str, Any]) -> list[Block]:
    """The "Control screen" section (only with ``[extraction.screen]``)."""
    screen = summary.get("control_screen")
    if screen is None:
        return []
    blocks: list[Block] = [
        Heading(2, "Control screen", "control-screen"),
        Paragraph(f"Controls that are reused member text are no non-members: they sit at the top of the control scores "
                  f"and raise τ (extraction paper App. D.2, E.1). {screen['method']} The screen flagged "
                  f"**{screen['flagged']} of {screen['controls']}** control samples; `analyze.decontaminate` lists "
                  f"{screen['listed']} id(s); {len(screen['removed_samples'])} control sample(s) are left out of the "
                  "decontaminated pool."),
    ]
    if screen["rows"]:
        blocks.append(Table(_FINDING_HEADERS, _findings(screen["rows"]), "control-screen-table",
                            "Flagged controls: their best-matching member or corpus document."))
    if screen["near_misses"]:
        blocks.append(Table(_FINDING_HEADERS, _findings(screen["near_misses"]), "control-screen-near",
                            "The unflagged controls closest to a screened document (check them by hand)."))
    rows = tuple((p["role"], f"`{p['procedure']}`", str(p["suffix_tokens"]), _op(p["all"]), _op(p["decontaminated"]))
                 for p in screen["pools"])
    if rows:
        blocks.append(Table(("role", "procedure", "ℓ_s", "full control pool", "decontaminated pool (screened)"), rows,
                            "control-screen-pools", "Both pools at the primary α: N controls, K, τ, claims / members, "
                            "calibrated rate [interval]."))
    return blocks
