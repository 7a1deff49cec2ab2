"""Input synthesis: a coverage-guided search over the value pools (runs inside the sandbox; stdlib only).

The search starts from a diagonal walk through the pools (input i takes the i-th value of every pool) and one factor
at a time around input 0, then mutates one or two values of a kept input at a time, and keeps an input when it reaches
new statements or a new output. An input that found something new also queues input-to-state replacements
(:func:`replacements`): the comparisons x made on it, recorded by :mod:`.cmplog`, say which input value to rewrite
into what. It stops once N inputs can be chosen with coverage ≥ C and at least N_out distinct outputs (and progress
stops; during the diagonal walk too), after 60 runs without progress, or when the run or CPU-time budget is spent.
Everything is drawn from one ``random.Random(seed)``: same function, same seed, same inputs. The pools are in
:mod:`.pools`.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic as _real_monotonic  # bound before env.freeze()
from time import process_time as _real_cpu

from .inputs import ARGV, DIR_PREFIX, ENV_PREFIX, FILE_PREFIX, STDIN
from .pools import (  # noqa: F401 - STANDIN_MODES and varies_seed are used through this module
    INIT_PREFIX,
    KEEP,
    PROBE_PREFIX,
    SEED,
    SELF_PREFIX,
    STANDIN_MODES,
    STANDINS,
    TWIN,
    Pools,
    file_content,
    name_type,
    varies_seed,
)
from .record import Record, select  # noqa: F401 - select: the search's choice, read as synth.select
from .redqueen import _AMBIENT, _rewrite, replacements  # noqa: F401 - also read as synth.replacements, synth._rewrite
from .standins import RAISE_DRAW, SHAPED_FROM, forcing, is_mixed
from .values import New, Obj, decode, encode

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


_WANTS = frozenset({"at", "insert", "len", "len_order"})  # comparisons whose first sight is progress (:func:`search`)
#: A value read as another type than it has and a key or name looked up and not found (:mod:`.cmplog`): an error on
#: the way, whose first sight is progress where the input can be rewritten (:func:`_wanted`). (An ``isinstance``
#: check, ``isa``, is not: both its branches run, and rewriting on every run that met one flooded the search.)
_WANTED_ON_REWRITE = frozenset({"as", "key"})
_LADDERS, _RUNGS = 2, 8  # inputs retried in the ``nthK`` modes per search, and the most K
_LATER = 32  # rewrites kept of the comparisons past each run's first eight (:func:`.redqueen.replacements`)
_MENDED = 16  # inputs retried per search with the call that failed and made them invalid answering (see search)
_FALSY = frozenset({"none", "false", "zero", "empty_str", "empty_list"})  # modes whose stand-in calls answer falsy
WALL_FACTOR = 4  # a search whose runs mostly wait (for their timeouts) ends after 4x its budget in wall time
#: A search whose valid inputs reached at least the coverage criterion less ``NEAR`` of x's lines when its run budget is
#: spent, and that found a line or an output in its last ``stagnation`` runs, may run up to ``EXTEND`` times the budget
#: (the CPU-time budget still holds). On fresh samples the search was never tuned on, most functions a bigger budget
#: opens were within 0.2 of C at 200 runs, and none below 0.5 (docs/executors.md, "Search budget").
NEAR = 0.2
EXTEND = 2
#: A search that would end short of the criteria, its valid inputs within NEAR of the coverage criterion, runs
#: SPLICE_RUNS more, once, where half the inputs each take one or two of another kept input's values (the lines of
#: some branches need two values at once, each found by a different input); appended where the search ends, so that
#: every search that meets the criteria runs as it ran without them
SPLICE_RUNS = 60


def _wanted(pair: tuple[str, Any, Any], record: Record) -> str:
    """What makes a comparison in :data:`_WANTS` or :data:`_WANTED_ON_REWRITE` met for the first time: its kind and
    the value wanted (a length, a magic number where it goes, a key); for a type (``as``) also the lines the run
    reached (``read_int16(buf)`` and ``read_int32(buf)`` both want bytes, on different paths)."""
    return repr(pair[::2]) if pair[0] != "as" else repr((pair[0], pair[2], sorted(record.lines)))


def clock() -> tuple[float, float]:
    return _real_cpu(), _real_monotonic()  # a search's start: (CPU seconds of this process, wall-clock seconds)


def spent(start: tuple[float, float], budget: float) -> float:
    """The share of ``budget`` used since ``start``: CPU time of this process (not wall-clock time, unless
    over WALL_FACTOR x), so that on a busy machine a search gets the same runs and inputs."""
    return max(_real_cpu() - start[0], (_real_monotonic() - start[1]) / WALL_FACTOR) / budget


def search(pools: Pools, run: Callable[[dict[str, Any]], Record], *, executable: frozenset[int], n: int,
           min_valid: int, coverage: float, min_distinct: int, budget_runs: int, budget_seconds: float,
           avoid: set[str], patience: int = 20, stagnation: int = 60) -> list[Record]:
    """Coverage-guided search; returns every record (use :func:`select` for the chosen inputs)."""
    rng = pools.rng
    start = clock()
    records: list[Record] = []
    seen: set[str] = set(avoid)
    longest = max([len(v) for v in pools.by_param.values()] + [1])

    def make(values: dict[str, Any]) -> dict[str, Any]:
        state: dict[str, Any] = {"args": {name: encode(v) for name, v in values.items()
                                          if not name.startswith((SELF_PREFIX, INIT_PREFIX, PROBE_PREFIX, *_AMBIENT,
                                                                  ARGV))
                                          and name not in (SEED, STANDINS) and v is not TWIN}}
        if pools.probe_names:
            state["probe"] = [encode(values[name]) for name in pools.probe_names]
        if SEED in values:
            state["seed"] = values[SEED]
        if values.get(STANDINS, "standin") != "standin":
            state["standins"] = values[STANDINS]
        attrs = {name[len(SELF_PREFIX):]: v for name, v in values.items()
                 if name.startswith(SELF_PREFIX) and v is not KEEP}
        if pools.owner is not None:
            state["self"] = encode(New(pools.owner, *(values[n] for n in pools.init_names), **attrs))
        elif pools.hints.self_params:
            state["self"] = encode(Obj(**attrs))
        for name in [name for name, v in values.items() if v is TWIN]:  # the same text: an equal, separate self
            state["args"][name] = state.get("self") or encode(New(pools.twin_of))
        named = [*state["args"].values(), state.get("self") or ""]  # ``New('TOMLFile', 'input.txt')`` names one too
        files = [f for f in pools.files if any(f in s for s in named)] or pools.files[:1]
        state["files"] = {f: file_content(f) for f in files} if pools.hints.files or pools.path_typed() else {}
        if pools.ambient:
            ambient(values, state)
        return state

    def ambient(values: dict[str, Any], state: dict[str, Any]) -> None:
        """The environment variables, stdin, command line, files and folders of the search's values in
        ``state``."""
        written, env = state["files"], {}
        for name, v in values.items():
            if name.startswith(FILE_PREFIX):
                written.pop(name[len(FILE_PREFIX):], None)
                if isinstance(v, str):
                    written[name[len(FILE_PREFIX):]] = v
            elif name.startswith(DIR_PREFIX) and isinstance(v, dict):
                folder = name[len(DIR_PREFIX):]
                written.update({f: c for f, c in v.items()} if folder == "." else
                               {f"{folder}/{f}": c for f, c in v.items()} or {folder + "/": ""})
            elif name.startswith(ENV_PREFIX) and isinstance(v, str):
                env[name[len(ENV_PREFIX):]] = v
        if pools.uses.env:
            state["env"] = env
        if STDIN in values:
            state["stdin"] = values[STDIN] if isinstance(values[STDIN], str) else ""
        if ARGV in values:  # sys.argv[1:]: texts (a rewrite may have put a number in); files it names written
            argv = values[ARGV]
            state["argv"] = argv = [str(a)[:4096] for a in argv][:64] if isinstance(argv, list | tuple) else []
            written.update({a: pools.content(a, 0) for a in argv if a in pools.argv_files and a not in written})

    pending: list[dict[str, Any]] = []  # input-to-state replacements waiting for a run
    later: list[dict[str, Any]] = []  # and those of comparisons past a run's first eight: see overflowed (below)
    searched: dict[int, dict[str, Any]] = {}  # the values behind each state run (by the state's id)
    drawn: dict[int, dict[str, tuple[int, int]]] = {}  # the mixed-mode draws each state's run made (by its id)
    wants: dict[int, dict[str, set[int]]] = {}  # and the shaped answers its use of call answers asks for
    reached: set[int] = set()
    shown: set[str] = set()
    retried = dict.fromkeys(("echo", "raise_in_try", "raise_other_in_try", "nth", "mended"), 0)  # inputs retried so
    # the ``echo`` retries wait until the search finds no new line for half its ``stagnation``: tried at once, they
    # changed the course of searches that were finding lines without them (tomllib's ``parse_key``: 0.86 -> 0.64)
    echoes: list[dict[str, Any]] = []
    ladders: list[dict[str, Any]] = []  # the ``nthK`` retries: run once the search stops finding anything (below)
    spliced: list[int] = []  # where the splice runs end, once given (SPLICE_RUNS)
    wanted: set[str] = set()  # the kinds and wanted values of the comparisons in _WANTS met (see below)
    shaped: set[str] = set()  # the calls whose answers were retried as data (see below)

    def attempt(values: dict[str, Any]) -> bool:
        try:
            state = make(values)
        except ValueError:  # an int past sys.get_int_max_str_digits() (``n >= 1 << k`` rewritten): no input holds it
            return False
        key = repr(sorted(state.items()))
        if key in seen:
            return False
        seen.add(key)
        record = run(state)
        record.values = values
        records.append(record)
        searched[id(state)] = values
        if record.drawn:
            drawn[id(state)] = record.drawn
        if record.wants:
            wants[id(state)] = record.wants
        if record.valid and (record.lines - reached or record.output not in shown):
            # an input that found something new: the comparisons it made may open more; the oldest first
            pending.extend(replacements(values, pools.pairs, overflow=later)[:max(0, 64 - len(pending))])  # (<= 64)
            del later[_LATER:]
        elif record.valid:
            # a part of the input compared with what x wants at that place (``buf[0:8] == MAGIC``), or its length
            # with a size (``len(buf) > 524``), for the first time: progress a line cannot show (the ``and``
            # before it held), so the input is rewritten to pass; so is a value x read as another type than it
            # has, or a key or name x looked up and did not find, the first time the input can be rewritten for it
            placed = [p for p in pools.pairs if p[0] in _WANTS and _wanted(p, record) not in wanted]
            news = replacements(values, placed) if placed else []
            wanted.update(_wanted(p, record) for p in placed)
            for pair in pools.pairs:
                if pair[0] in _WANTED_ON_REWRITE and (key := _wanted(pair, record)) not in wanted \
                        and (found := replacements(values, [pair])):
                    wanted.add(key)
                    news += found
            pending.extend(news[:max(0, 64 - len(pending))])
        # a stand-in handed a value (``clean(number, ' -')``), or called in a try body of x: then in that mode
        # (``raise_in_try`` also where stand-in modes are not drawn, the stand-ins being x's arguments); a run in it,
        # where a broad handler follows another, again with failures no handler names (``raise_other_in_try``)
        asked = (("echo", record.handed, None, ("standin",)), ("raise_in_try", record.in_try, "standin", ("standin",)),
                 ("raise_other_in_try", record.in_try and pools.broad_after, None, ("raise", "raise_in_try")))
        for mode, hit, undrawn, was in asked:
            if hit and record.valid and values.get(STANDINS, undrawn) in was and retried[mode] < 8:
                retried[mode] += 1
                (echoes if mode == "echo" else pending).insert(0, {**values, STANDINS: mode})
        # a call's answer x took apart as data (``d.items()``, ``d["k"]``, ``v.split(".")``), the first time for that
        # call: the input again with that answer each data of the kind (:data:`.standins._SHAPED_RETURNS`), at once
        for key, fits in record.wants.items() if record.valid and is_mixed(values.get(STANDINS)) else ():
            if key not in shaped:
                shaped.add(key)
                mode = values[STANDINS]
                pending[:0] = [{**values, STANDINS: forcing(mode, key, SHAPED_FROM + f)} for f in sorted(fits)]
        # a mixed mode's call that failed by its draw made the input invalid after it reached lines no valid input had
        # (``if info.show_in_help():`` answered, then ``HelpParameter(**kwargs)`` failed): the input again at once, that
        # call answering a stand-in. The last failing draw is the one that ended the run; those before it were handled
        if not record.valid and record.status == "standin" and retried["mended"] < _MENDED \
                and is_mixed(mode := values.get(STANDINS)) and record.lines - reached:
            failed = [key for key, (size, value) in record.drawn.items() if size == SHAPED_FROM and value == RAISE_DRAW]
            if failed:
                retried["mended"] += 1
                pending.insert(0, {**values, STANDINS: forcing(mode, failed[-1], 0)})
        # stand-ins called twice or more where each answer was falsy (a chain of checks they answer, run through to
        # its end): then the K-th call true, one input per K, after the echo retries
        if record.valid and record.called >= 2 and values.get(STANDINS) in _FALSY and retried["nth"] < _LADDERS:
            retried["nth"] += 1
            ladders.extend({**values, STANDINS: f"nth{k}"} for k in range(1, min(record.called, _RUNGS) + 1))
        if record.valid:
            reached.update(record.lines)
            shown.add(record.output)
        return True

    def satisfied() -> bool:
        # what the chosen inputs can at most reach: the valid records' lines and outputs (select is costly)
        if executable and len(reached & executable) / len(executable) < coverage or len(shown) < min_distinct:
            return False
        chosen = select(records, n)
        covered = frozenset().union(*(r.lines for r in chosen)) if chosen else frozenset()
        share = len(covered & executable) / len(executable) if executable else 1.0
        return (len(chosen) >= max(min_valid, n) and share >= coverage
                and len({r.output for r in chosen}) >= min_distinct)

    def mutate(base: dict[str, Any] | None) -> dict[str, Any]:
        """One or two values of the kept input ``base`` redrawn, or (no base) every value drawn afresh."""
        names = pools.names
        # an attribute of self keeps the constructed instance's value half of the time
        keep = 0.75 if pools.owner is not None else 0.5
        values = {name: KEEP if name.startswith(SELF_PREFIX) and rng.random() < keep else
                  pools.fresh(name) if rng.random() < 0.35 else rng.choice(pools.by_param[name]) for name in names}
        if base is not None and names:
            kept = {name: decode(src) for name, src in base["args"].items()}
            kept.update({f"{PROBE_PREFIX}{i}": decode(text) for i, text in enumerate(base.get("probe", []))})
            if "seed" in base:
                kept[SEED] = base["seed"]
            kept[STANDINS] = base.get("standins", "standin")
            if base.get("self"):
                spec = decode(base["self"])
                if isinstance(spec, New):
                    kept.update(zip(pools.init_names, spec.args))
                    kept.update({SELF_PREFIX + k: v for k, v in spec.attrs.items()})
                else:
                    kept.update({SELF_PREFIX + k: v for k, v in vars(spec).items()})
            behind = searched.get(id(base), {})
            kept.update({name: behind.get(name) for name in names if name.startswith(_AMBIENT)})
            donor = searched.get(id(rng.choice(parents)), {}) if spliced and rng.random() < 0.5 else {}
            differ = [name for name in names if name in donor and donor[name] is not kept.get(name, KEEP)
                      and repr(donor[name]) != repr(kept.get(name, KEEP))]
            if differ:  # a splice (SPLICE_RUNS): one or two of another kept input's values
                for name in rng.sample(differ, min(len(differ), rng.choice((1, 1, 2)))):
                    kept[name] = donor[name]
            else:
                # in a mixed stand-in mode, each draw the base's run made is redrawn like a value (the mode kept,
                # that draw set to another answer): one stand-in's answer changed, the others' kept
                made = drawn.get(id(base), {}) if is_mixed(base.get("standins", "")) else {}
                choices = [*names, *made] if made else names
                for name in rng.sample(choices, min(len(choices), rng.choice((1, 1, 2)))):
                    if name in made:
                        size, was = made[name]
                        fits = wants.get(id(base), {}).get(name)
                        if fits and is_mixed(kept[STANDINS]) and rng.random() < 0.5:  # data x takes apart
                            kept[STANDINS] = forcing(kept[STANDINS], name, SHAPED_FROM + rng.choice(sorted(fits)))
                        elif size > 1 and is_mixed(kept[STANDINS]):
                            kept[STANDINS] = forcing(kept[STANDINS], name, (was + rng.randrange(1, size)) % size)
                    else:
                        kept[name] = values[name]
            values = {name: kept.get(name, KEEP) for name in names}
        return values

    def far() -> bool:
        """Whether the valid inputs' lines are further than NEAR from the coverage criterion (or x has none)."""
        return not executable or len(reached & executable) / len(executable) < round(coverage - NEAR, 9)

    def splice() -> int:
        """Where the search would end short of the criteria, within NEAR of the coverage criterion: once,
        SPLICE_RUNS runs more (see :func:`mutate`); the run they end at (0: the search ends)."""
        if spliced or done_at is not None or len(parents) < 2 or far():
            return 0
        spliced.append(runs + SPLICE_RUNS)
        return spliced[0]

    walk: dict[str, Any] = {"done_at": None, "reached": 0, "shown": 0, "records": 0, "valid": 0}
    extra = {"until": 0, "done": False}  # where the overflowed rewrites' runs end; whether they ran (once)

    def walked(runs: int) -> bool:
        """The stopping rule (below) during the walk too: once the criteria hold, it goes on only while
        it progresses (or, all of x's lines reached, until the chosen inputs all give different outputs;
        with lines left, the walk still reaches some of them). ``satisfied`` (which chooses the inputs
        again) is asked only when what it needs can hold: enough valid inputs, outputs and lines reached."""
        fresh = sum(1 for r in records[walk["records"]:] if r.valid)
        progress = (len(reached) > walk["reached"] or len(shown) > walk["shown"]
                    or (walk["done_at"] is None and fresh > 0))
        walk.update(records=len(records), valid=walk["valid"] + fresh, reached=len(reached), shown=len(shown))
        if (progress and walk["valid"] >= max(min_valid, n) and len(shown) >= min_distinct
                and len(reached & executable) >= coverage * len(executable) and satisfied()):
            walk["done_at"] = runs  # progress with the criteria met: the patience starts again
        done_at = walk["done_at"]
        return done_at is not None and (runs - done_at >= patience or executable <= reached and len(shown) >= n
                                        and len({r.output for r in select(records, n)}) >= n)

    def overflowed() -> int:  # where the search would end short of the criteria, once: the rewrites of comparisons
        # past each run's first eight (``later``) queued first, and twice the queue's length in runs; where they end
        if extra["done"] or not later:
            return 0
        extra["done"] = True
        pending[:0], later[:] = later, []
        extra["until"] = runs + 2 * len(pending)
        return extra["until"]

    def ladder() -> int:
        """The nthK retries queued first; the runs they get (twice what is queued)."""
        pending[:0], ladders[:] = ladders, []
        return 2 * len(pending)

    runs = 0
    base = {name: pool[0] for name, pool in pools.by_param.items()}
    for i in range(longest + 2):  # the diagonal walk through the pools
        # input 0 takes every pool's first (most plausible) value; later ones staggered per parameter (no lockstep)
        values = {name: pool[0 if i == 0 else (i + 3 * j) % len(pool)]
                  for j, (name, pool) in enumerate(pools.by_param.items())}
        runs += attempt(values)
        pools.walk_runs = runs
        if runs >= budget_runs or spent(start, budget_seconds) > 1 or walked(runs):
            return records
        # ... and one factor at a time (input 0 with one value changed): a walk changing many parameters at once
        # rarely gets every one right; this finds, per parameter, the values that run and the branches each opens
        if len(base) > 1 and i + 1 < longest and runs < budget_runs // 2:
            for name, pool in pools.by_param.items():
                if i + 1 < len(pool):
                    runs += attempt({**base, name: pool[i + 1]})
                    pools.walk_runs = runs
                    if walked(runs):
                        return records
            if runs >= budget_runs or spent(start, budget_seconds) > 1:
                return records
    covered: set[int] = set()
    outputs: set[str] = set()
    parents: list[dict[str, Any]] = []
    for record in records:
        if record.valid and (record.lines - covered or record.output not in outputs):
            parents.append(record.state)
        covered |= record.lines
        outputs.add(record.output)
    stale = 0
    done_at: int | None = runs if satisfied() else None
    last_progress = last_line = runs
    limit = budget_runs
    while spent(start, budget_seconds) <= 1 and stale < 4 * budget_runs:
        # a search that stopped finding anything new rarely starts again (5x the budget gained 3 of 100 functions
        # in benchmarks/conclusive.py): give up after `stagnation` runs without progress
        # (the nthK retries run only where a search short of the criteria would end, with runs of their own past
        # the budget: queued with the echoes, they changed the course of searches still finding lines, convertdate's
        # ``haab_monthcalendar``: coverage 1.00 -> 0.38)
        climb = bool(ladders) and done_at is None
        if runs - last_progress >= stagnation:
            if climb:
                last_progress, limit = runs, max(limit, runs + ladder())
            elif splice():
                last_progress, limit = runs, max(limit, spliced[0])
            elif done_at is None and overflowed():
                last_progress, limit = runs, max(limit, extra["until"])
            else:
                break
        if echoes and runs - last_line >= stagnation // 2:
            pending[:0], echoes[:] = echoes, []
        if spliced and runs >= max(spliced[0], extra["until"]) and done_at is None:
            if not overflowed():
                break
            last_progress, limit = runs, max(limit, extra["until"])
        if runs >= limit:  # the run budget spent: once, a search near the coverage criterion that is still
            # finding lines or outputs goes on (:data:`EXTEND`); others end here
            if limit > budget_runs or done_at is not None or far():
                if climb:
                    limit = runs + ladder()
                elif splice():
                    limit = spliced[0]
                elif done_at is None and overflowed():
                    limit = extra["until"]
                else:
                    break
            else:
                limit = budget_runs * EXTEND
        # once the criteria hold, keep searching only while it still finds lines or outputs
        if done_at is not None and (runs - done_at >= patience
                                    or len(shown) >= n and len({r.output for r in select(records, n)}) >= n):
            break
        if pending and rng.random() < 0.6:  # an input-to-state replacement first, most of the time
            values = pending.pop(0)
        else:
            values = mutate(rng.choice(parents) if parents and rng.random() < 0.8 else None)
        if not attempt(values):
            stale += 1
            continue
        runs += 1
        record = records[-1]
        if record.valid and (record.lines - covered or record.output not in outputs):
            last_line = runs if record.lines - covered else last_line
            parents.append(record.state)
            covered |= record.lines
            outputs.add(record.output)
            last_progress = runs
            if satisfied():
                done_at = runs  # progress: the patience starts again
    return records
