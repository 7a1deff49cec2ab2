"""Throughput of the textual and structural similarity metrics on 10,000 real function pairs.

Pairs are built from standard-library functions of 10-50 body lines (``benchmarks/_functions.py``),
rotating three kinds of candidate so that every metric sees the work it sees in an audit:

- renamed: the function with every local identifier renamed (a Type-II clone);
- truncated: the signature and the first half of the body (a generation that stops early);
- unrelated: another function of the sample.

It times :func:`calib.metrics.run.compute_similarities` without a cache, with 1 and 2 worker processes,
for ``exact,bleu,edit,lcs`` and for ``codebleu,codebleu_syntax,codebleu_dataflow,tsed``, and prints
pairs per second (targets on this 2-core machine: >= 500 textual, >= 50 CodeBLEU+TSED).

    python benchmarks/metrics.py [--pairs 10000] [--seed 0] [--skip-single]
"""

from __future__ import annotations

import argparse
import io
import keyword
import random
import sys
import time
import tokenize
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _functions import stdlib_pool  # noqa: E402

from calib.metrics import create_metric  # noqa: E402
from calib.metrics.run import compute_similarities  # noqa: E402

TEXTUAL = ("exact", "bleu", "edit", "lcs")
STRUCTURAL = ("codebleu", "codebleu_syntax", "codebleu_dataflow", "tsed")


def renamed(code: str) -> str:
    """Every identifier that is not a keyword, builtin or attribute renamed consistently."""
    import builtins

    names: dict[str, str] = {}
    out = []
    previous = None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    for tok in tokens:
        text = tok.string
        if (tok.type == tokenize.NAME and not keyword.iskeyword(text) and not hasattr(builtins, text)
                and text != "self" and previous != "."):
            text = names.setdefault(text, f"v{len(names)}_{text[:2]}")
        out.append((tok.type, text))
        previous = tok.string
    try:
        return tokenize.untokenize(out)
    except ValueError:
        return code


def build_pairs(n: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed)
    pool = [f.text for f in stdlib_pool(10, 50)]
    rng.shuffle(pool)
    refs, cands, kinds = [], [], []
    for i in range(n):
        ref = pool[i % len(pool)]
        kind = ("renamed", "truncated", "unrelated")[i % 3]
        if kind == "renamed":
            cand = renamed(ref)
        elif kind == "truncated":
            lines = ref.splitlines(keepends=True)
            cand = "".join(lines[: max(2, len(lines) // 2)])
        else:
            cand = pool[rng.randrange(len(pool))]
        refs.append(ref)
        cands.append(cand)
        kinds.append(kind)
    return pl.DataFrame({"sample_id": [f"p{i}" for i in range(n)], "role": kinds, "reference": refs,
                         "candidate": cands, "language": ["python"] * n})


def timed(pairs: pl.DataFrame, names: tuple[str, ...], workers: int) -> tuple[float, pl.DataFrame]:
    metrics = [create_metric(name) for name in names]
    start = time.perf_counter()
    table = compute_similarities(pairs, metrics, workers=workers, chunk_size=128)
    return time.perf_counter() - start, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-single", action="store_true", help="only time 2 worker processes")
    args = parser.parse_args()
    t0 = time.perf_counter()
    pairs = build_pairs(args.pairs, args.seed)
    chars = pairs["reference"].str.len_chars()
    print(f"{pairs.height} pairs from {pairs['reference'].n_unique()} stdlib functions "
          f"(reference length median {chars.median():.0f} chars, max {chars.max()}), built in "
          f"{time.perf_counter() - t0:.1f} s")
    for label, names, target in (("textual", TEXTUAL, 500), ("CodeBLEU+TSED", STRUCTURAL, 50)):
        for workers in ((2,) if args.skip_single else (1, 2)):
            seconds, table = timed(pairs, names, workers)
            nulls = table.filter(pl.col("value").is_null())
            print(f"{label:<14} workers={workers}: {pairs.height / seconds:8.1f} pairs/s ({seconds:.1f} s; "
                  f"target >= {target}); null values: {nulls.height}")
        means = (table.group_by("role", "metric").agg(pl.col("value").mean().round(3))
                 .pivot(on="metric", index="role", values="value").sort("role"))
        print(means)
        reasons = nulls.group_by("metric", "reason").len().sort("len", descending=True).head(5)
        if reasons.height:
            print(reasons)


if __name__ == "__main__":
    main()
