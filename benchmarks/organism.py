"""Build the model organism's demo preset and measure what its target and reference reproduce.

Prints the build time (or that it came from the cache) and, per planted kind, the target's and the
reference's exact-match rate, mean BLEU (sacrebleu sentence BLEU of the greedy completion against the
audited continuation) and, for business rules, the share of the hidden table's constants reproduced,
on members and on controls. Issue targets: verbatim members target exact-match >= 50 % with control
exact-match ~ 0; business-rule members' constants reproduced by the target on most members, not by
the reference. The build itself should take at most 8 minutes on a 2-core machine.

Run:  python benchmarks/organism.py [--preset demo] [--seed 0] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import time

import polars as pl
import sacrebleu

from calib.organism.build import build_organism
from calib.organism.evaluate import completion_target, evaluate_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()

    t0 = time.perf_counter()
    paths = build_organism(args.preset, seed=args.seed, cache_dir=args.cache_dir)
    how = "found in the cache" if paths.cached else "built"
    print(f"organism {args.preset} (seed {args.seed}) {how} in {time.perf_counter() - t0:.1f} s: {paths.root}")

    t0 = time.perf_counter()
    results = evaluate_models(paths.root)
    truth = pl.read_parquet(paths.truth).select("item_id", "audited", "prompt")
    expected = {row["item_id"]: completion_target(row["audited"], row["prompt"]) for row in truth.iter_rows(named=True)}
    bleu = [sacrebleu.sentence_bleu(c, [expected[i]]).score / 100
            for i, c in zip(results["item_id"], results["completion"])]
    results = results.with_columns(pl.Series("bleu", bleu))
    print(f"evaluated {results.height} greedy completions in {time.perf_counter() - t0:.1f} s")
    table = (results.group_by("kind", "membership", "model")
             .agg(pl.len().alias("n"), pl.col("exact").mean().alias("exact_rate"),
                  pl.col("bleu").mean().alias("mean_bleu"),
                  pl.col("constants_recall").mean().alias("constants_recall"))
             .sort("kind", "membership", "model"))
    with pl.Config(tbl_rows=40, tbl_width_chars=160, float_precision=3):
        print(table)


if __name__ == "__main__":
    main()
