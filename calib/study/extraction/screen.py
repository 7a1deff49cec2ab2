"""The ``screen`` stage of an extraction study: the automatic decontamination screen of the controls.

Cooper et al., "Extractable Memorization From First Principles", App. D.2 and E.1: controls that reproduce
member text are no non-members; they sit at the top of the control scores and raise the threshold τ. The
paper removes verified contaminants by hand (``analyze.decontaminate`` still does); ``[extraction.screen]``
finds candidates automatically. Every control sample is compared with every member sample and, with a
``source``, every document of a training corpus (the organism's own, or files read as ``[dedup]`` reads them):

- **n-gram overlap**: the share of the control's distinct token ``ngram_tokens``-grams (calib's code tokens,
  hashed as :func:`calib.dedup.shingles.shingles` does) found in one screened document, exactly (an
  inverted index of every document's n-grams);
- **Jaccard**: the exact Jaccard similarity of ``shingle_tokens``-shingle sets, the candidates proposed by
  MinHash LSH and verified exactly (:class:`calib.dedup.minhash.TextualIndex`, datasketch), with
  datasketch's MinHash estimate beside it.

A control is flagged when either reaches its threshold; the analysis stages then remove the flagged
controls (with the ``analyze.decontaminate`` list) from the ``decontaminated`` pool and keep the full pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import InputError
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec
from calib.study.tables import CONTROL_SCREEN_SCHEMA

__all__ = ["screen_controls", "screen_settings", "screen_stage", "screened_out"]


class _Postings:
    """An inverted index of distinct hashed n-grams: for a query set, the exact count shared with each document."""

    def __init__(self, sets: Sequence[np.ndarray]) -> None:
        self.n_docs = len(sets)
        sizes = np.array([s.size for s in sets], dtype=np.int64)
        hashes = np.concatenate(list(sets)) if sets else np.empty(0, dtype=np.uint64)
        docs = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
        order = np.argsort(hashes, kind="stable")
        self.hashes, self.docs = hashes[order], docs[order]

    def shared(self, query: np.ndarray) -> np.ndarray:
        """Per document, how many of ``query``'s (distinct) hashes it holds."""
        lo = np.searchsorted(self.hashes, query, side="left")
        hi = np.searchsorted(self.hashes, query, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            return np.zeros(self.n_docs, dtype=np.int64)
        starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        return np.bincount(self.docs[starts + np.arange(total)], minlength=self.n_docs)


def screen_controls(controls: Sequence[tuple[str, str, str]], documents: Sequence[tuple[str, str]], *,
                    ngram_tokens: int = 13, overlap: float = 0.5, shingle_tokens: int = 5, jaccard: float = 0.5,
                    num_perm: int = 128, seed: int = 1) -> pl.DataFrame:
    """Screen each control against each document (see the module docstring).

    Parameters
    ----------
    controls
        ``(sample_id, source, text)`` of each control.
    documents
        ``(key, text)`` of each screened document (members, corpus documents); keys unique.
    ngram_tokens, overlap
        The n-gram size and the share of a control's n-grams in one document that flags it.
    shingle_tokens, jaccard, num_perm, seed
        The shingle size, the Jaccard threshold that flags a control, and the MinHash permutations.

    Returns
    -------
    polars.DataFrame
        :data:`calib.study.tables.CONTROL_SCREEN_SCHEMA`, one row per control in input order.
    """
    from calib.dedup.minhash import MinHasher, TextualIndex, shingles
    from calib.dedup.minhash import jaccard as exact_jaccard

    keys = [k for k, _ in documents]
    texts = [t for _, t in documents]
    postings = _Postings([shingles(t, ngram_tokens) for t in texts])
    index = TextualIndex(threshold=jaccard, num_perm=num_perm, shingle_size=shingle_tokens, seed=seed)
    if keys:
        index.add(keys, texts)
    found = index.search([t for _, _, t in controls]) if controls else []
    hasher = MinHasher(num_perm, seed, shingle_tokens)
    position = {k: i for i, k in enumerate(keys)}
    rows = []
    for (sid, source, text), verified in zip(controls, found):
        grams = shingles(text, ngram_tokens)
        shared = postings.shared(grams)
        best = int(np.argmax(shared)) if shared.size else 0
        share = float(shared[best] / grams.size) if grams.size and shared.size else 0.0
        overlap_match = keys[best] if shared.size and shared[best] > 0 else None
        if verified.matches:
            match, value = verified.matches[0]
        elif overlap_match is not None:
            match = overlap_match
            value = exact_jaccard(shingles(text, shingle_tokens), shingles(texts[position[match]], shingle_tokens))
        else:
            match, value = None, 0.0
        estimate = None
        if match is not None:
            mine, theirs = hasher.signatures([text, texts[position[match]]])
            estimate = float(mine.jaccard(theirs))
        why = []
        if share >= overlap:
            why.append(f"{share:.3f} of its {ngram_tokens}-token n-grams are in {overlap_match} (>= {overlap:g})")
        if value >= jaccard:
            why.append(f"Jaccard {value:.3f} with {match} (>= {jaccard:g})")
        rows.append({"sample_id": sid, "source": source, "ngrams": int(grams.size), "overlap": share,
                     "overlap_match": overlap_match, "jaccard": float(value), "jaccard_match": match,
                     "minhash_jaccard": estimate, "flagged": bool(why), "reason": "; ".join(why) or None})
    return pl.DataFrame(rows, schema=CONTROL_SCREEN_SCHEMA)


def screened_out(ctx: StageContext) -> set[str]:
    """The control sample ids the screen flagged (empty when the spec runs no screen)."""
    if not ctx.spec.extraction.screening():
        return set()
    table = ctx.table("control_screen")
    return set(table.filter(pl.col("flagged"))["sample_id"].to_list())


# --- the stage ----------------------------------------------------------------------------------
def screen_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    screen = spec.extraction.screen
    return {"screen": screen and screen.model_dump(mode="json"), "seed": spec.study.seed,
            "organism": spec.organism and spec.organism.model_dump(mode="json", exclude={"cache_dir"})}


def _corpus(ctx: StageContext) -> list[tuple[str, str]]:
    """``(corpus:<id>, text)`` of the training corpus ``[extraction.screen] source`` names (none for members)."""
    screen = ctx.spec.extraction.screen
    if screen.source == "organism":
        if ctx.spec.organism is None:
            raise InputError("extraction.screen.source = 'organism' needs an [organism] table; use source = "
                             "'members' or 'corpus'")
        from calib.organism.build import training_corpus

        return [(f"corpus:{doc_id}", text) for doc_id, text, _ in training_corpus(ctx.resources.organism())]
    if screen.source != "corpus":
        return []
    from calib.data.sources import CorpusSpec, iter_documents
    from calib.study.corpus_caps import count_dropped

    spec = CorpusSpec(paths=screen.paths, format=screen.format, content_column=screen.content_column,
                      extensions=screen.extensions, max_document_bytes=screen.max_file_bytes)
    out: dict[str, str] = {}
    dropped: dict[str, int] = {}
    for doc in iter_documents(spec):
        if doc.text is None:
            count_dropped(dropped, {doc.metadata.get("error", "unreadable"): 1}, doc.source, ctx.event)
            continue
        out.setdefault(f"corpus:{doc.source}", doc.text)
    ctx.resources.counts["screen_dropped"] = dropped
    return list(out.items())


async def _screen(ctx: StageContext) -> pl.DataFrame:
    screen = ctx.spec.extraction.screen
    samples = ctx.table("samples")
    members = samples.filter(pl.col("membership") == "member")
    controls = samples.filter(pl.col("membership") == "control")
    corpus = await asyncio.to_thread(_corpus, ctx)
    documents = [(f"member:{sid}", text) for sid, text in members.select("sample_id", "function").iter_rows()]
    documents += corpus
    frame = await asyncio.to_thread(
        screen_controls, list(controls.select("sample_id", "source", "function").iter_rows()), documents,
        ngram_tokens=screen.ngram_tokens, overlap=screen.overlap, shingle_tokens=screen.shingle_tokens,
        jaccard=screen.jaccard, num_perm=screen.num_perm, seed=(ctx.spec.study.seed + 1) % (1 << 32))
    flagged = int(frame["flagged"].sum())
    ctx.resources.counts["screen_corpus"] = len(corpus)
    ctx.event("control_screen", controls=frame.height, members=members.height, corpus=len(corpus), flagged=flagged)
    return frame


#: The screen of an extraction study with ``[extraction.screen]`` (after samples; it sends no request).
screen_stage = Stage("screen", ("samples",), "control_screen", "1", screen_settings, _screen, offline=True)
