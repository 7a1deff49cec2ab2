"""How often the sandbox executor gives a conclusive measurement of a real function, with no LLM at all.

A sample of real functions (``benchmarks/_functions.py``: half standard library, half third-party
packages from site-packages, 10-50 body lines, seeded) is run through
:class:`calib.executors.python.SandboxExecutor` as ``compare(x, [])``: only x is explored and replayed,
so the figure is whether x alone yields a conclusive sample (docs/architecture.md, "Execution semantics": at least
8 valid inputs of 10, line coverage >= 80 %, at least 2 distinct output states).

Two conditions:

- ``own_package``: x's own package is importable (``import_paths=(site-packages,)`` for third-party
  functions; the standard library always is) and ``module_name`` is x's dotted module name, so relative
  imports resolve;
- ``file_only`` (the paper's setting): only x's file context and the standard library; third-party and
  relative imports are withheld and become stand-ins.

and two set-ups in each: ``bare`` (``ExecutorConfig(bare=True)``: x alone, no context, no stand-ins) and
``sandbox`` (the full executor with the file context). Target (issue): >= 50 % conclusive in
``file_only`` / ``sandbox``.

Inconclusive results are grouped by their reason string: ``unparsable``, ``crashed``, ``few_valid``
(valid inputs < 8), ``low_coverage``, ``few_distinct`` (first matching category, in that order);
``few_valid`` is split by the most common reason among x's invalid inputs (``missing_name``,
``call_failed``, ``standin``, ``timeout``, ``nondeterministic`` ..., or "search found only k inputs").
``--out FILE`` writes one JSON line per (function, condition, set-up) with the reason, the counts, the
invalid reasons, the scaffold warnings and the seconds.

Every rate comes with its 95 % Clopper-Pearson interval (:func:`calib.stats.clopper_pearson`).

``--fresh`` draws all ``n`` functions from code never used during development instead
(``benchmarks/_fresh.py``: Debian ``python3-*`` packages at the versions pinned in
``benchmarks/fresh-packages.txt``, downloaded and unpacked into ``--fresh-cache``, never installed; sample seed
``--fresh-seed``, executor seed ``--seed``). Their ``file_only`` condition is exactly the default sample's
third-party one; in ``own_package`` the unpacked packages and site-packages are importable. The header and
``--json`` describe the sample (packages, versions, seeds).

Run: ``python benchmarks/conclusive.py [--n 300] [--seed 0] [--workers 2] [--json] [--out results.jsonl]``
(``--budget-runs``/``--budget-seconds`` change the input-search budget; ``--conditions``/``--setups``
run a subset; ``--limit-seconds`` starts nothing new after that long;
``--fresh [--fresh-seed 1] [--fresh-list FILE] [--fresh-cache DIR]`` the fresh sample;
``--exclude FILE.jsonl`` (repeatable) leaves the functions of earlier ``--out`` files out of the fresh pools,
so that a held-out sample shares no function with the samples the search was tuned on).
``benchmarks/tuning-functions.jsonl`` is that file for the fresh samples the search was tuned on since issue 24's
third round (``--fresh --n 120`` at fresh seeds 1, 3 and 4: 306 functions; then fresh seed 7 drawn with those
excluded, 120 more, in the sixth round; then, in the eighth, the 598 new functions of fresh seeds 13-18 and
1, 3, 4, 7 drawn with the first 306 excluded; then, in the ninth, the 282 functions of fresh seeds 13-15
drawn with the first 1,024 excluded, and then the 369 of fresh seeds 27-31, held out first (drawn with
the first 1,306 excluded) and tuned on after; in the tenth, the 336 of fresh seeds 37-41, held out first
(drawn with the first 1,675 excluded) and looked at after, then the 286 of fresh seeds 42-46 (the first
2,011 excluded) likewise: each line's ``tuned_on`` says how it was drawn); a held-out
figure is measured as
``--fresh --fresh-seed S --n 120 --conditions file_only --setups sandbox --exclude benchmarks/tuning-functions.jsonl``
with a seed S no session has looked at function by function. By the eleventh round those exclusions left the
first list's pools nearly empty (its seeds 47-51 drew 157 distinct functions in 600 draws), so held-out figures
since then come from a second list of 58 other packages, ``benchmarks/fresh-packages-2.txt``
(``--fresh --fresh-list benchmarks/fresh-packages-2.txt --fresh-seed S``), whose functions no session had seen:
its seeds 1-5 (467 distinct functions) were measured held out in the eleventh round, then looked at and added to
the tuning file (2,764 lines), so that round's second held-out sample is its seeds 6-10 with all of them excluded;
their 442 functions, and the 157 of the first list's seeds 47-51, were added after (3,363 lines). In the
twelfth round its seeds 11-15 (442 functions) were measured held out, then looked at and added (3,805
lines); its seeds 16-20, drawn with those excluded, were measured once and not looked at function by
function: they stay held out (a "before" for the next round), and its seeds 21 and up are untouched.
In the thirteenth round seeds 16-20 were measured again at the round's start, then looked at and added
(417 functions, 4,222 lines); its seeds 21-25, drawn with all of those excluded (the first 3,805 lines plus
seeds 16-20's functions), were measured before and after each change and never looked at function by
function: they stay held out, and its seeds 26 and up are untouched.
In the fourteenth round seeds 21-25 were measured again at the round's start, then looked at and added (399
functions, 4,621 lines); its seeds 26-30, drawn with all of those excluded, were measured before and after the
round's changes and never looked at function by function.
In the fifteenth round seeds 26-30 were looked at and added (440 functions, 5,061 lines). By then the second
list's pools held 1,117 functions in 13 packages (whoosh, sqlglot, xmlschema, elementpath and the YAML libraries
most of them), so a third list of 60 other packages was made, ``benchmarks/fresh-packages-3.txt`` (2,890
functions no session had seen). Its seeds 1-5 (``--fresh --fresh-list benchmarks/fresh-packages-3.txt
--fresh-seed S --n 120 --conditions file_only --setups sandbox --exclude benchmarks/tuning-functions.jsonl``, 541
functions) are that round's held-out sample, measured at its start and end and never looked at function by
function: they stay held out. Its seeds 6-10, drawn with the tuning file's first 5,061 lines and seeds 1-5's
functions excluded (``--exclude`` that file and ``--exclude`` the ``--out`` file of seeds 1-5), were the round's
tuning sample and were added after (499 functions, 5,560 lines). In the sixteenth round the third list's seeds 1-5
were the tuning sample, looked at and added (541 functions, 6,101 lines); its seeds 11-15, drawn with all 6,101
lines excluded, are that round's held-out sample, measured at its start and end only. The second list's seeds 31-35
(measured in the fifteenth and sixteenth rounds, never looked at) and the third list's seeds 16 and up are untouched.
In the seventeenth round the third list's seeds 11-15 were the tuning sample, looked at and added (472 functions,
6,573 lines). Held out, measured at the round's start and end and never looked at function by function: the third
list's seeds 16-20 (drawn with the first 6,101 lines and seeds 11-15's functions excluded), 21-25 (also seeds
16-20's excluded) and 26-30 (also seeds 21-25's excluded), and the second list's seeds 31-35. The third list's seeds
31 and up are untouched.
In the eighteenth round the third list's seeds 31-35 (drawn with the tuning file's 6,573 lines excluded, not the
held-out seeds 16-30's functions) were the tuning sample, looked at and added (425 functions, 6,998 lines); its
seeds 36-40, drawn with those 600 draws excluded too (``--exclude`` each of seeds 31-35's ``--out`` files), are held
out, measured before and after each change and never looked at function by function.
In the nineteenth round the third list's seeds 41-45 (drawn with the tuning file's first 6,998 lines and the
held-out draws excluded: seeds 36-40 as above, and seeds 31-35 drawn again with the 6,998 lines excluded) were the
tuning sample, looked at and added (301 functions, 7,299 lines); seeds 46-50, drawn with those excluded too, were
a validation sample (only the names of functions whose verdict changed seen); the held-out samples stayed held out
(the same; one change was undone after it lost two of their functions). Seeds 51 and up are untouched. A sample of
600 draws holds about 300 distinct functions (a package's functions are drawn again across seeds), so one
function's verdict moves a five-seed rate by up to five draws.
In the twentieth round the third list was used up (a draw with the tuning file and every earlier sample's draws
excluded found no function), and a fourth list was made, ``benchmarks/fresh-packages-4.txt`` (62 packages, 3,329
functions no session had seen). Its seeds 1-5 (``--fresh --fresh-list benchmarks/fresh-packages-4.txt --fresh-seed S
--n 120 --conditions file_only --setups sandbox --exclude benchmarks/tuning-functions.jsonl``, its first 7,299
lines) and seeds 6-10 (also ``--exclude`` each of seeds 1-5's ``--out`` files) are held out, measured at the round's
start and end and never looked at function by function; seeds 11-15 (seeds 1-10's draws excluded too) were the
round's tuning sample, looked at and added to the tuning file (476 functions, 7,775 lines); seeds 16-20 (seeds
11-15's draws excluded too) were a validation sample (only the names of functions whose verdict changed seen). In
the twenty-second round seeds 11-15 stayed the tuning sample and 16-20 the validation sample (one regression there,
avro's ``merge``, looked at); seeds 21-25 (``--exclude benchmarks/tuning-functions.jsonl``, all its 7,775 lines, and
each of seeds 1-10's and 16-20's ``--out`` files) were drawn as a held-out sample, and became a second validation
sample when one regression there (avro's ``RecordSchema.__init__``) was looked at; seeds 26-30 (seeds 21-25's draws
excluded too) were then held out, measured at the round's start (its first commit's code) and end only. In the
twenty-third round the roles stayed (11-15 tuning, 16-20 validation with its regressions looked at; 1-5, 6-10 and
26-30 held out, measured at the end only, the start being the twenty-second round's end rows). In the
twenty-fourth round too, except that seeds 26-30 lost one function's verdict (drawn five times) to a change of the
round, which was found by bisecting that function's verdict over the round's commits without its name or code being
looked at, and mended: seeds 26-30 count as a validation sample from then on. Seeds 31 and up were then untouched.
In the twenty-fifth round the roles stayed: 11-15 tuning, 16-20 and 26-30 validation (only the names of functions
whose verdict changed seen), 1-5 and 6-10 held out, measured at the round's end only (the start: the twenty-fourth
round's end rows). So in the twenty-sixth, the start being the twenty-fifth round's end rows; it also measured all
five samples three times before its end rows (at 6e79801, a446c69 and 3dd58dd; of the held-out samples only the
totals and the numbers of functions up and down were read, no function looked at). The twenty-seventh round changed
only speed: all five samples were measured at its start and end (one run each; no function of seeds 1-10 looked at);
the exclusion files were drawn again from ``benchmarks/tuning-functions.jsonl`` and each seed's draw, in the order
above (seeds 11-15's 476 functions are the file's last 476 lines). In the twenty-eighth round the roles stayed: 11-15
tuning, 16-20 and 26-30 validation (only the names of functions whose verdict changed seen), 1-5 and 6-10 held out
(their totals and the numbers of functions up and down read, no function looked at); measured at the round's start,
after each change on the tuning sample, and at its end. So in the twenty-ninth, where the start rows are the
twenty-eighth round's end rows, each change was measured on 11-15, then 16-20 and 26-30 (a variant chosen between
two only by the validation samples), and the held-out samples once, at the end. So in the thirtieth, the start rows
being the twenty-ninth round's end rows; three variants of one change (a mixed mode's draws set one at a time: all
along, only once a search had found no line for 30 runs, only in the splice runs) were each measured on 11-15, 16-20
and 26-30, and the one kept (all along) was the best on 11-15 and, counted by distinct functions, on 16-20 and 26-30.
So in the thirty-first (shaped answers of withheld calls), the start rows being the thirtieth round's end rows: three
variants on 11-15, the kept one then on 16-20 and 26-30, the held-out samples once at the end. In the thirty-second,
seeds 31-35 (``--exclude benchmarks/tuning-functions.jsonl`` and each of seeds 1-30's ``--out`` files, not one
another's) were the tuning sample, looked at function by function; 11-15 was measured again for one variant, 16-20 and
26-30 stayed validation samples (only the names of functions whose verdict changed seen), 1-5 and 6-10 were measured
once at the end (totals and the numbers up and down read). In the thirty-third, the same roles: each change measured
on 31-35, 16-20, 26-30 and 11-15 (a change that lost verdicts there dropped), the held-out samples once at the end.
In the thirty-fourth, seeds 31-35 stayed a tuning sample and seeds 36-40 (drawn with the tuning file and each of
seeds 1-35's ``--out`` files excluded) became a second one, looked at function by function; 16-20, 26-30 and 11-15
as before, 1-5 and 6-10 held out, measured once at the end. Seeds 41 and up are untouched.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import statistics
import subprocess
import sys
import textwrap
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fresh import DEFAULT_CACHE, LIST, FreshError, import_roots, sample_fresh  # noqa: E402
from _functions import PACKAGES, Function, sample_functions, site_packages  # noqa: E402

from calib.executors.base import ExecutorConfig  # noqa: E402
from calib.executors.python import SandboxExecutor  # noqa: E402
from calib.stats import clopper_pearson  # noqa: E402

CONDITIONS = ("own_package", "file_only")
SETUPS = ("bare", "sandbox")
CATEGORIES = ("unparsable", "crashed", "few_valid", "low_coverage", "few_distinct", "executor_error")
ORIGINS = ("stdlib", "third_party", "fresh")
N_INPUTS = ExecutorConfig().n_inputs


def category(reason: str) -> str:
    """The first matching category of an inconclusive result's reason string."""
    if reason.startswith("unparsable"):
        return "unparsable"
    if reason.startswith("crashed"):
        return "crashed"
    if reason.startswith("executor error"):
        return "executor_error"
    if "valid_inputs" in reason:
        return "few_valid"
    if "coverage" in reason:
        return "low_coverage"
    if "distinct_outputs" in reason:
        return "few_distinct"
    return "other"


class Runner:
    """One executor per (set-up, import paths, module name), all behind one semaphore of ``workers``.

    ``compare(x, [])`` runs its batches one after another (explore, then x's replay), so at most
    ``workers`` sandboxes run at once.
    """

    def __init__(self, *, seed: int, workers: int, fresh_paths: tuple[str, ...] = (), **settings: Any) -> None:
        self.settings = settings  # further ExecutorConfig fields (budgets), the same for every run
        self.seed = seed
        self.workers = workers
        self.slots = asyncio.Semaphore(workers)
        self.executors: dict[tuple[Any, ...], SandboxExecutor] = {}
        self.site = str(site_packages())
        self.fresh_paths = (*fresh_paths, self.site)  # own_package of a fresh function: the unpacked packages

    def executor(self, fn: Function, condition: str, setup: str) -> SandboxExecutor:
        if condition == "own_package":
            paths = {"third_party": (self.site,), "fresh": self.fresh_paths}.get(fn.origin, ())
            module = fn.module_name
        else:
            paths, module = (), None
        key = (setup, paths, module)
        if key not in self.executors:
            config = ExecutorConfig(bare=setup == "bare", import_paths=paths, module_name=module, seed=self.seed,
                                    workers=self.workers, **self.settings)
            self.executors[key] = SandboxExecutor(config)
        return self.executors[key]

    async def measure(self, fn: Function, condition: str, setup: str,
                      deadline: float | None = None) -> dict[str, Any] | None:
        ex = self.executor(fn, condition, setup)
        row: dict[str, Any] = {"function_id": fn.function_id, "origin": fn.origin, "package": fn.package,
                               "module": fn.module_name, "file": fn.file, "start_line": fn.start_line,
                               "qualname": fn.qualname, "body_lines": fn.body_lines, "condition": condition,
                               "setup": setup}
        async with self.slots:
            if deadline is not None and time.monotonic() > deadline:
                return None
            started = time.perf_counter()
            try:
                cmp = await ex.compare(fn.text, [], context=fn.context)
            except Exception as exc:  # noqa: BLE001 - an executor bug is a finding, not the end of the run
                last = traceback.extract_tb(exc.__traceback__)[-1]
                row.update(conclusive=False, reason=f"executor error: {type(exc).__name__}: {exc} "
                                                    f"({Path(last.filename).name}:{last.lineno})",
                           inputs=0, valid_inputs=0, coverage=0.0, distinct_outputs=0, runs=0, invalid_reasons={},
                           warnings=[])
                row["seconds"] = round(time.perf_counter() - started, 3)
                row["category"] = "executor_error"
                return row
            seconds = time.perf_counter() - started
            invalid = Counter(i.reason or i.status for i in cmp.inputs if not i.valid)
        row.update(conclusive=cmp.conclusive, reason=cmp.reason, inputs=len(cmp.inputs), valid_inputs=cmp.valid_inputs,
                   coverage=round(cmp.coverage, 4), distinct_outputs=cmp.distinct_outputs, runs=cmp.runs,
                   seconds=round(seconds, 3), invalid_reasons=dict(invalid),
                   warnings=list(cmp.warnings)[:20])
        row["category"] = "conclusive" if cmp.conclusive else category(cmp.reason)
        return row


async def run_all(functions: list[Function], runner: Runner, *, deadline: float | None,
                  conditions: Sequence[str] = CONDITIONS, setups: Sequence[str] = SETUPS,
                  ) -> tuple[list[dict[str, Any]], list[Function]]:
    """Every (function, condition, set-up) at once behind the runner's semaphore.

    After ``deadline`` no new measurement starts; functions missing any of their four are dropped.
    """
    total = len(functions) * len(conditions) * len(setups)
    finished = 0

    async def one(fn: Function, cond: str, setup: str) -> dict[str, Any] | None:
        nonlocal finished
        if deadline is not None and time.monotonic() > deadline:
            return None
        row = await runner.measure(fn, cond, setup, deadline)
        finished += 1
        if finished % 100 == 0 or finished == total:
            print(f"  {finished}/{total} measurements", file=sys.stderr, flush=True)
        return row

    results = await asyncio.gather(*(one(fn, cond, setup) for fn in functions
                                     for cond in conditions for setup in setups))
    per = len(conditions) * len(setups)
    rows: list[dict[str, Any]] = []
    done: list[Function] = []
    for i, fn in enumerate(functions):
        mine = results[i * per : (i + 1) * per]
        if all(r is not None for r in mine):
            rows += mine  # type: ignore[arg-type]
            done.append(fn)
    return rows, done


def dominant(row: dict[str, Any]) -> str:
    """The most common reason among x's invalid inputs, or how many inputs the search found at all."""
    reasons = row["invalid_reasons"]
    if reasons:
        return max(sorted(reasons), key=reasons.get)
    return f"search found only {row['inputs']} inputs" if row["inputs"] < N_INPUTS else "none"


def _rate(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """k of n conclusive, the share in %, and its 95 % Clopper-Pearson interval in % (None without rows)."""
    rows = list(rows)
    k = sum(r["conclusive"] for r in rows)
    if not rows:
        return {"k": 0, "n": 0, "pct": None, "ci95_pct": None}
    ci = clopper_pearson(k, len(rows), 0.95)
    return {"k": k, "n": len(rows), "pct": round(100 * k / len(rows), 1),
            "ci95_pct": [round(100 * ci.low, 1), round(100 * ci.high, 1)]}


def summarise(rows: list[dict[str, Any]], examples: int) -> dict[str, Any]:
    """Rates per condition x set-up (all and per origin present), reason categories, and examples."""
    origins = [o for o in ORIGINS if any(r["origin"] == o for r in rows)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["condition"], r["setup"])].append(r)
    table = []
    for cond in CONDITIONS:
        for setup in SETUPS:
            g = groups[(cond, setup)]
            if not g:
                continue
            bad = [r for r in g if not r["conclusive"]]
            cats = Counter(r["category"] for r in bad)
            dominant_reasons = Counter(dominant(r) for r in bad if r["category"] == "few_valid")
            problems = Counter(p for r in bad for p in ("valid_inputs", "coverage", "distinct_outputs")
                               if p in r["reason"])
            seconds = [r["seconds"] for r in g]
            table.append({
                "condition": cond, "setup": setup, "all": _rate(g),
                **{origin: _rate(r for r in g if r["origin"] == origin) for origin in origins},
                "inconclusive": {c: cats[c] for c in (*CATEGORIES, "other") if cats[c]},
                "inconclusive_by_origin": {origin: dict(Counter(r["category"] for r in bad if r["origin"] == origin))
                                           for origin in origins},
                "few_valid_dominant_reason": dict(dominant_reasons.most_common()),
                "problems": dict(problems),
                "seconds_median": round(statistics.median(seconds), 3) if seconds else None,
                "seconds_max": round(max(seconds), 3) if seconds else None,
            })
    picked: dict[str, list[dict[str, Any]]] = {}
    paper = [r for r in groups[("file_only", "sandbox")] if not r["conclusive"]]
    for cat in (*CATEGORIES, "other"):
        hits = [r for r in paper if r["category"] == cat]
        if cat == "few_valid":  # one example per dominant reason first, so every reason is shown
            by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in hits:
                by_reason[dominant(r)].append(r)
            ordered = [rs[i] for i in range(max((len(v) for v in by_reason.values()), default=0))
                       for rs in by_reason.values() if i < len(rs)]
            hits = ordered
        if hits:
            picked[cat] = [{"qualname": r["qualname"], "file": r["file"], "line": r["start_line"],
                            "reason": r["reason"], "invalid_reasons": r["invalid_reasons"]}
                           for r in hits[: examples * (2 if cat == "few_valid" else 1)]]
    return {"table": table, "examples_file_only_sandbox": picked}


def _fmt_rate(rate: dict[str, Any], ci: bool = False) -> str:
    if not rate["n"]:
        return "-"
    low, high = rate["ci95_pct"]
    return f"{rate['k']}/{rate['n']} ({rate['pct']:.1f} %" + (f", CI {low:.1f}-{high:.1f})" if ci else ")")


def describe(sample: dict[str, Any]) -> str:
    """One paragraph naming the sample: seed, packages and versions."""
    if sample["kind"] == "fresh":
        pkgs = " ".join(f"{p['name'].removeprefix('python3-')}={p['version']}({p['drawn']})"
                        for p in sample["packages"])
        return (f"fresh sample, seed {sample['seed']}: {len(sample['packages'])} Debian packages of "
                f"{sample['list']} (sha256 {sample['list_sha256'][:12]}), pool {sample['pool']} functions "
                f"({sample['dropped_seen_in_development']} dropped as seen in development, "
                f"{sample.get('excluded', 0)} excluded by --exclude); "
                f"python3-PACKAGE=VERSION(drawn): {pkgs}")
    pkgs = " ".join(f"{name}={version}" for name, version in sample["packages"].items())
    return (f"default sample, seed {sample['seed']}: standard library of Python {sample['python']} and "
            f"site-packages: {pkgs}")


def print_report(summary: dict[str, Any], meta: dict[str, Any]) -> None:
    origins = [o for o in ORIGINS if o in meta["origins"]]
    print(f"conclusive rate of x alone, compare(x, []): {meta['functions']} functions "
          f"({', '.join(str(meta['origins'][o]) + ' ' + o for o in origins)}), "
          f"executor seed {meta['seed']}, {meta['workers']} workers, search budget {meta['budget_runs']} runs / "
          f"{meta['budget_seconds']:g} s, {meta['seconds']:.0f} s, calib {meta['calib_commit']}")
    print(textwrap.fill(describe(meta["sample"]), 120, subsequent_indent="  ", break_on_hyphens=False))
    print(f"\n{'condition':<12} {'setup':<8} {'all (95 % Clopper-Pearson)':>34} "
          + " ".join(f"{o:>20}" for o in origins) + "  median s")
    for t in summary["table"]:
        print(f"{t['condition']:<12} {t['setup']:<8} {_fmt_rate(t['all'], ci=True):>34} "
              + " ".join(f"{_fmt_rate(t[o]):>20}" for o in origins) + f"  {t['seconds_median']}")
    print(f"\ninconclusive, by first matching category (all / {' / '.join(origins)}):")
    for t in summary["table"]:
        cats = ", ".join(f"{c} {n} (" + "/".join(str(t['inconclusive_by_origin'][o].get(c, 0)) for o in origins)
                         + ")" for c, n in t["inconclusive"].items())
        print(f"  {t['condition']:<12} {t['setup']:<8} {cats}")
        if t["few_valid_dominant_reason"]:
            dom = ", ".join(f"{k} {v}" for k, v in t["few_valid_dominant_reason"].items())
            print(f"  {'':<12} {'':<8}   few_valid, dominant invalid reason: {dom}")
        probs = ", ".join(f"{k} {v}" for k, v in t["problems"].items())
        print(f"  {'':<12} {'':<8}   criteria failed (any): {probs}")
    print("\nexamples (file_only / sandbox):")
    for cat, items in summary["examples_file_only_sandbox"].items():
        print(f"  {cat}:")
        for e in items:
            extra = f" {e['invalid_reasons']}" if e["invalid_reasons"] else ""
            print(f"    {e['qualname']}  {e['file']}:{e['line']}\n      {e['reason'][:200]}{extra}")


def _commit() -> str:
    """The checkout's commit, with ``+dirty`` when calib/executors has uncommitted changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "calib/executors"], cwd=root, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _versions(packages: Iterable[str]) -> dict[str, str]:
    """Installed distribution and version of each top-level package (``attr`` -> ``attrs 23.2.0``)."""
    found = importlib.metadata.packages_distributions()
    out = {}
    for name in sorted(set(packages)):
        dists = found.get(name, [])
        out[name] = " ".join(f"{d}-{importlib.metadata.version(d)}" for d in sorted(set(dists))) or "absent"
    return out


def _excluded(paths: list[Path]) -> frozenset[str]:
    """The function ids of earlier ``--out`` files (one JSON object per line, key ``function_id``)."""
    ids: set[str] = set()
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            sys.exit(f"conclusive.py --exclude {path}: cannot read it ({exc.strerror}); give an --out file of an "
                     "earlier run")
        for number, line in enumerate(lines, 1):
            try:
                ids.add(str(json.loads(line)["function_id"]))
            except (ValueError, KeyError, TypeError):
                if line.strip():
                    sys.exit(f"conclusive.py --exclude {path}: line {number} is not a JSON object with a "
                             "function_id; give an --out file of an earlier run")
    return frozenset(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300,
                        help="functions (default sample: half stdlib, half third-party; --fresh: all fresh)")
    parser.add_argument("--seed", type=int, default=0, help="executor seed, and the sample's without --fresh")
    parser.add_argument("--fresh", action="store_true",
                        help="draw all n from code never used in development (Debian packages of --fresh-list)")
    parser.add_argument("--fresh-seed", type=int, default=1, help="sample seed of --fresh")
    parser.add_argument("--fresh-list", type=Path, default=LIST, help="pinned package list of --fresh")
    parser.add_argument("--fresh-cache", type=Path, default=DEFAULT_CACHE,
                        help="where --fresh keeps the downloaded, unpacked packages")
    parser.add_argument("--exclude", type=Path, action="append", default=[], metavar="JSONL",
                        help="--fresh: leave out the functions of an earlier --out file (a tuning sample), so the "
                             "sample is held out from it; repeatable")
    parser.add_argument("--workers", type=int, default=2, help="sandboxes at once")
    parser.add_argument("--min-lines", type=int, default=10)
    parser.add_argument("--max-lines", type=int, default=50)
    parser.add_argument("--limit-seconds", type=float, default=None,
                        help="start no new measurement after this many seconds (unfinished functions are dropped)")
    parser.add_argument("--budget-runs", type=int, default=ExecutorConfig.budget_runs,
                        help="input-search budget: runs of x per exploration")
    parser.add_argument("--budget-seconds", type=float, default=ExecutorConfig.budget_seconds,
                        help="input-search budget: seconds per exploration")
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS))
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--examples", type=int, default=4, help="examples per inconclusive category")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--out", type=Path, default=None, help="write per-function results as JSONL")
    args = parser.parse_args()

    if args.n < 1:
        parser.error(f"--n {args.n}: need at least 1 function")
    started = time.perf_counter()
    if args.exclude and not args.fresh:
        parser.error("--exclude leaves functions out of a --fresh sample: add --fresh")
    if args.fresh:
        try:
            functions, sample = sample_fresh(args.n, args.fresh_seed, list_path=args.fresh_list,
                                             cache=args.fresh_cache, min_lines=args.min_lines,
                                             max_lines=args.max_lines, exclude=_excluded(args.exclude))
        except FreshError as exc:
            sys.exit(f"conclusive.py --fresh: {exc}")
    else:
        functions = sample_functions(args.n, args.seed, min_lines=args.min_lines, max_lines=args.max_lines)
        sample = {"kind": "default", "seed": args.seed, "python": sys.version.split()[0],
                  "packages": _versions(PACKAGES)}
    sampled = time.perf_counter() - started
    runner = Runner(seed=args.seed, workers=args.workers, budget_runs=args.budget_runs,
                    budget_seconds=args.budget_seconds,
                    fresh_paths=import_roots(sample) if args.fresh else ())
    deadline = time.monotonic() + args.limit_seconds if args.limit_seconds else None
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    rows, measured = asyncio.run(run_all(functions, runner, deadline=deadline, conditions=args.conditions,
                                         setups=args.setups))
    seconds = time.perf_counter() - t0
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            for r in rows:
                handle.write(json.dumps(r) + "\n")
    meta = {"python": sys.version.split()[0], "calib_commit": _commit(), "functions": len(measured),
            "sampled": len(functions),
            "origins": dict(Counter(f.origin for f in measured)),
            "packages": dict(sorted(Counter(f.package for f in measured if f.origin != "stdlib").items())),
            "seed": args.seed, "workers": args.workers, "budget_runs": args.budget_runs,
            "budget_seconds": args.budget_seconds, "seconds": round(seconds, 1),
            "sampling_seconds": round(sampled, 1), "host_cpu_seconds": round(time.process_time() - cpu0, 1),
            "sample": sample}
    summary = summarise(rows, args.examples)
    if args.json:
        print(json.dumps({**meta, **summary}, indent=1))
    else:
        print_report(summary, meta)
        print(f"\nsampling {meta['sampling_seconds']} s; host CPU {meta['host_cpu_seconds']} s; "
              f"packages {meta['packages']}")


if __name__ == "__main__":
    main()
