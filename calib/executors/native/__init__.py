"""Native executors: run a C, C++, Java, Rust or Go function and its candidates on the same inputs.

One comparison (docs/native-executors.md):

1. parse x's signature (name, parameters, return type) with a small per-language parser; a type the
   harness cannot read or write makes the sample inconclusive (``unsupported: <type>``);
2. fill the language's harness template (``calib/executors/native/harness/<language>/``) with each variant (x and
   every candidate, same signature) and compile each once, in the *build* sandbox profile;
3. *explore*: run x on a seeded pool of ``3 * n_inputs`` synthesized input states (or on the given
   ones) in one *run*-profile process and keep ``n_inputs`` of those x finishes on, preferring ones
   with outputs not seen yet;
4. *replay* x (a fresh process: an input whose output differs is ``nondeterministic``) and each
   candidate on the chosen states, concurrently (at most ``workers`` processes).

A process that dies (a crash, the time limit) gives the input it was on that outcome and restarts
after it, so one hostile input costs one input.

Line coverage of x (:class:`~calib.executors.native.language.Coverage`: C and C++ with gcov, Rust with
llvm-cov, Go with go tool cover): a second, instrumented build of x runs alongside, and the language's
report reads its counts in the build sandbox; the share of x's own lines reached is ``coverage`` and the
criterion C applies. Where the kit reports each input's lines, x's coverage build runs on the whole pool
and the inputs are chosen by the lines they reach (:mod:`.guided`). Where coverage cannot be measured (the
tools absent, the coverage build failing, an unusable report) the sample is inconclusive with a reason
starting ``coverage_unavailable:``. Java measures no coverage yet: ``coverage`` is NaN, with a warning,
and conclusiveness rests on the valid-input and distinct-output criteria alone.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calib._exceptions import CalibError, InvalidParameterError
from calib.executors.base import CandidateResult, Comparison, ExecutorConfig, InputResult, register
from calib.executors.native.coverage import REPORT_BYTES, LineCoverage, copy_of, line_coverage, write_copies
from calib.executors.native.guided import choose, choose_covering
from calib.executors.native.language import Tools
from calib.executors.native.languages import LANGUAGES, Language
from calib.executors.native.sandbox import Profile, build, inside, run_lines
from calib.executors.native.types import Signature, Unsupported, args_of, check_state, synthesize
from calib.executors.native.warm import prepared
from calib.executors.sandbox import Sandbox
from calib.executors.validity import validity

__all__ = ["LANGUAGES", "NativeExecutor", "ToolchainMissing"]

_POOL_FACTOR = 3
_MAX_DEATHS = 3  # time-outs of a candidate before its remaining inputs are given up (each costs a restart)


class ToolchainMissing(CalibError):
    """The compiler or runtime of a language is not installed here."""


class NativeExecutor:
    """Runs functions written in ``language`` (``c``, ``cpp``, ``java``, ``rust``, ``go``) in the sandbox.

    Parameters
    ----------
    config
        The executor settings (:class:`ExecutorConfig`): ``n_inputs``, ``min_valid``, ``min_distinct``,
        ``seed``, ``input_timeout`` (seconds per input), ``memory_mb`` (address space of a run; the JVM
        gets its heap inside it plus a fixed allowance), ``workers`` and ``unsafe_no_sandbox``.
    language
        One of :data:`LANGUAGES`.

    Raises
    ------
    InvalidParameterError
        ``language`` is not supported.
    ToolchainMissing
        The language's compiler is not installed (the message names the Debian package).
    """

    def __init__(self, config: ExecutorConfig, language: str) -> None:
        if language not in LANGUAGES:
            raise InvalidParameterError(f"language={language!r}: need one of {', '.join(sorted(LANGUAGES))}")
        self.config = config
        self.language = language
        self.lang: Language = LANGUAGES[language]
        self.tools = self.lang.find_tools()
        if self.tools is None:
            raise ToolchainMissing(f"cannot run {language} code: {self.lang.compiler} is not installed "
                                   f"(apt-get install {self.lang.package})")
        self.sandbox = Sandbox(unsafe=config.unsafe_no_sandbox)
        self._limit: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    @property
    def _slots(self) -> asyncio.Semaphore:
        """At most ``workers`` compilers and runs at a time (per event loop: one per ``asyncio.run``)."""
        loop = asyncio.get_running_loop()
        if self._limit is None or self._limit[0] is not loop:
            self._limit = (loop, asyncio.Semaphore(max(1, self.config.workers)))
        return self._limit[1]

    # --- building -------------------------------------------------------------------------------------

    async def _compile(self, sig: Signature, function: str, workdir: str, context: str, *,
                       coverage: bool = False, tools: Tools | None = None) -> tuple[str | None, str]:
        """Compile one variant (``coverage``: x's coverage build) into ``workdir``; (the directory, "") or
        (None, the compiler's complaint). ``tools``: those :attr:`Language.prepare_build` gave, if any."""
        lang, tools = self.lang, tools or self.tools
        assert tools is not None
        argv = lang.coverage.build_argv if coverage and lang.coverage else lang.build_argv
        for name, text in lang.sources(function, sig, context).items():
            Path(workdir, name).write_text(text, encoding="utf-8")
        where = inside(self.sandbox, workdir, "/build")
        binds, env = ((workdir, "/build", True), *tools.build_binds), tools.build_env
        shared = lang.warm and await prepared(self.sandbox, tools, lang.name, lang.warm, self._slots,
                                              lang.build_memory)
        if shared:  # the language's shared build directory, read-only (calib/executors/native/warm.py)
            binds, env = (*binds, (shared, "/warm", False)), (*env, ("CALIB_WARM", inside(self.sandbox, shared,
                                                                                         "/warm")))
        profile = Profile(memory_bytes=lang.build_memory, cpu_seconds=120, tmpfs_bytes=512 << 20,
                          file_bytes=256 << 20, open_files=1024, seccomp=False, ro=tools.ro, binds=binds, env=env)
        async with self._slots:
            done = await build(self.sandbox, profile, argv(tools, where), wall_seconds=180.0)
        if done.returncode == 0 and not done.timed_out:
            return workdir, ""
        text = (done.stderr or done.stdout).decode("utf-8", "replace").replace("/build/", "")
        head = "\n".join(text.strip().splitlines()[:12])
        return None, f"compile error: {done.died or 'failed'}: {head}"

    # --- running --------------------------------------------------------------------------------------

    async def _run_all(self, workdir: str, args: list[list[Any]], *, giving_up: bool,
                       counts: tuple[tuple[tuple[str, str], ...], dict[int, bytes]] | None = None
                       ) -> dict[int, tuple[bool, str]]:
        """Run one compiled variant on every argument list: per index, (finished, canonical output) or
        (False, why not). A death (crash, time limit) costs the input it was on; the rest run again.
        ``counts``: x's coverage build, run with that environment added, and the mapping receiving the
        copy of the counts each input's record carries, by index (:mod:`.coverage`)."""
        lang, tools, c = self.lang, self.tools, self.config
        assert tools is not None
        where = inside(self.sandbox, workdir, "/build")
        memory = (c.memory_mb << 20) + lang.run_overhead
        env = tools.run_env if counts is None else (*tools.run_env, *counts[0])
        profile = Profile(memory_bytes=memory, cpu_seconds=int(c.input_timeout * len(args) + 10 + lang.startup),
                          ro=tools.ro, binds=((workdir, "/build", False),), env=env, each=lang.each)
        results: dict[int, tuple[bool, str]] = {}
        pending = list(range(len(args)))
        deaths = 0
        while pending:
            key = secrets.token_hex(16)  # a new key per process: only lines carrying it are the harness's
            async with self._slots:
                got = await run_lines(self.sandbox, profile, lang.run_argv(tools, where, c.memory_mb),
                                      [key, *(args[i] for i in pending)], first_seconds=lang.startup + c.input_timeout,
                                      line_seconds=c.input_timeout)
            events = [event for event in got.lines if event.get("key") == key]
            seen: set[int] = set()
            for event in events:
                k = event.get("i")
                if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(pending) or k in seen:
                    continue
                seen.add(k)
                if counts is not None and (data := copy_of(event)) is not None:
                    counts[1][pending[k]] = data
                if isinstance(event.get("out"), dict):
                    results[pending[k]] = (True, json.dumps(event["out"], sort_keys=True, separators=(",", ":")))
                else:
                    results[pending[k]] = (False, str(event.get("error", "malformed harness output")))
            missing = [p for k, p in enumerate(pending) if k not in seen]
            if not missing:
                break
            why = got.died or "exited early"  # e.g. the function called exit()
            if not any("ready" in event for event in events) and got.stderr.strip():
                why = "harness failed: " + got.stderr.strip().splitlines()[-1][:200]
            results[missing[0]] = (False, why)
            pending = missing[1:]
            deaths += why == "timeout"
            if giving_up and deaths >= _MAX_DEATHS:
                for p in pending:
                    results[p] = (False, f"not run: {deaths} earlier inputs ended in {why}")
                break
        return results

    async def _report(self, built: tuple[str | None, str] | None, args: list[list[Any]], work: str
                      ) -> tuple[bytes, list[int]] | str:
        """Run x's coverage build ``built`` (None: the analysis tools are missing) on ``args`` and the
        language's report on the copies of the counts: (the report, the index of each copy in copy order),
        or why coverage is unavailable (the sample's reason then starts ``coverage_unavailable:``)."""
        tools, kit = self.tools, self.lang.coverage
        assert tools is not None and kit is not None
        if built is None:
            return f"coverage_unavailable: {kit.missing(tools)}"
        cov_dir, why = built
        if cov_dir is None:
            return f"coverage_unavailable: x's coverage build failed ({' '.join(why.split())[:300]})"
        unsafe = self.sandbox.unsafe  # then the counts and the report's scratch go to host directories of their own
        for name in ("prefix", "scratch"):
            Path(work, name).mkdir(parents=True, mode=0o755)
        where = inside(self.sandbox, cov_dir, "/build")
        copies: dict[int, bytes] = {}
        env = kit.run_env(where, f"{work}/prefix" if unsafe else "/tmp")
        await self._run_all(cov_dir, args, giving_up=False, counts=(env, copies))
        order = sorted(copies)
        write_copies(f"{work}/counts", [copies[i] for i in order], kit.count_name)
        counts = inside(self.sandbox, f"{work}/counts", "/counts")
        profile = Profile(memory_bytes=2 << 30, cpu_seconds=60, tmpfs_bytes=64 << 20, open_files=256, seccomp=False,
                          ro=tools.ro, binds=((cov_dir, "/build", False), (f"{work}/counts", "/counts", False)),
                          env=tools.build_env)
        argv = kit.report_argv(tools, where, counts, f"{work}/scratch" if unsafe else "/tmp")
        async with self._slots:
            done = await build(self.sandbox, profile, argv, wall_seconds=90.0, keep=REPORT_BYTES)
        if done.returncode != 0 or done.timed_out:
            text = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()
            status = done.died or f"exit {done.returncode}"
            return f"coverage_unavailable: the coverage report failed ({status}: " \
                   f"{text[-1][:200] if text else 'no message'})"
        return done.stdout, order

    async def _coverage(self, sig: Signature, truth: str, built: tuple[str | None, str] | None,
                        args: list[list[Any]], work: str) -> LineCoverage | str:
        """x's line coverage on ``args``, or why it is unavailable."""
        kit = self.lang.coverage
        assert kit is not None
        got = await self._report(built, args, work)
        if isinstance(got, str):
            return got
        cov = kit.read(got[0], truth, sig)
        return cov if isinstance(cov, LineCoverage) else f"coverage_unavailable: {cov}"

    async def _reach(self, sig: Signature, truth: str, built: tuple[str | None, str] | None,
                     args: list[list[Any]], work: str) -> tuple[frozenset[int], dict[int, frozenset[int]]] | str:
        """x's executable lines and the lines each argument list reached (by index; an input without a copy
        of its counts reached none), or why they are unavailable."""
        kit = self.lang.coverage
        assert kit is not None and kit.per_copy is not None
        got = await self._report(built, args, work)
        if isinstance(got, str):
            return got
        each = kit.per_copy(got[0], truth, sig)
        if isinstance(each, str):
            return f"coverage_unavailable: {each}"
        executable, lines = each
        if len(lines) != max(1, len(got[1])):
            return f"coverage_unavailable: the report has {len(lines)} parts for {len(got[1])} copies"
        return executable, dict(zip(got[1], lines))

    # --- comparing ------------------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        settings = {k: v for k, v in asdict(self.config).items() if k not in ("workers", "unsafe_no_sandbox")}
        settings["sandbox"] = "bubblewrap" if self.sandbox.isolated else "none (--unsafe-no-sandbox)"
        settings["language"] = self.language
        return settings

    def _inconclusive(self, reason: str, names: Sequence[str]) -> Comparison:
        return Comparison(conclusive=False, reason=reason, valid_inputs=0, coverage=math.nan, distinct_outputs=0,
                          inputs=(), candidates=tuple(CandidateResult(n, (), None, "not_run") for n in names),
                          executor=f"native-{self.language}", config=self._settings())

    async def compare(self, truth: str, candidates: Sequence[str], *, context: str = "",
                      inputs: Sequence[Mapping[str, Any]] | None = None,
                      names: Sequence[str] | None = None) -> Comparison:
        """Choose input states on ``truth``, run it and every candidate on them, and compare.

        ``context`` (the rest of x's file): where the language reads it (:attr:`Language.context`), the
        types and helpers x uses are built with every variant; elsewhere each variant must be
        self-contained apart from the standard library (docs/native-executors.md, "File context")."""
        c = self.config
        names = list(names) if names is not None else [f"candidate {i + 1}" for i in range(len(candidates))]
        if len(names) != len(candidates):
            raise InvalidParameterError(f"{len(names)} names for {len(candidates)} candidates")
        try:
            sig = self.lang.signature(truth, context)
        except Unsupported as exc:
            return self._inconclusive(f"unsupported: {exc}", names)
        if inputs is not None:
            try:
                pool = [dict(s) for s in inputs]
                for state in pool:
                    check_state(sig, state)
            except ValueError as exc:
                raise InvalidParameterError(f"inputs: {exc}") from None
        else:
            pool = synthesize(sig, _POOL_FACTOR * c.n_inputs, c.seed)
        tools = self.tools
        if self.lang.prepare_build is not None and tools is not None:  # e.g. Rust: the crates x uses, built once
            got = await self.lang.prepare_build(self.sandbox, tools, sig, self._slots)
            if isinstance(got, str):
                return self._inconclusive(f"unsupported: {got}", names)
            tools = got
        root = tempfile.mkdtemp(prefix=f"calib-{self.language}-")
        kit = self.lang.coverage
        measured = kit is not None
        tooled = kit is not None and self.tools is not None and not kit.missing(self.tools)
        cov: LineCoverage | str | None = None
        try:
            variants = list(dict.fromkeys([truth, *candidates]))
            dirs = [str(Path(root, str(k))) for k in range(len(variants))]
            for d in [*dirs, *([str(Path(root, "cov"))] if tooled else [])]:
                Path(d).mkdir()
            builds = [self._compile(sig, v, d, context, tools=tools) for v, d in zip(variants, dirs)]
            if tooled:
                builds.append(self._compile(sig, truth, str(Path(root, "cov")), context, coverage=True, tools=tools))
            built = await asyncio.gather(*builds)
            by_text = dict(zip(variants, built))
            cov_built = built[len(variants)] if tooled else None
            truth_dir, why = by_text[truth]
            if truth_dir is None:
                header = re.search(r"fatal error: ([\w./+-]+): No such file or directory", why)
                if header:  # C, C++: a library x's file uses is not installed here
                    return self._inconclusive(f"unsupported: external header <{header.group(1)}> is not installed",
                                              names)
                return self._inconclusive(f"unparsable: x does not compile: {why}", names)
            # explore; where the kit splits its report per input, x's coverage build runs on the pool too
            guided = tooled and kit is not None and kit.per_copy is not None
            pool_args = args_of(sig, pool)
            first = await asyncio.gather(self._run_all(truth_dir, pool_args, giving_up=False),
                                         *([self._reach(sig, truth, cov_built, pool_args, f"{root}/reach")]
                                           if guided else []))
            explored = first[0]
            reach = first[1] if guided else None
            want = c.n_inputs if inputs is None else len(pool)
            chosen = choose_covering(explored, len(pool), want, reach[1]) if isinstance(reach, tuple) \
                else choose(explored, len(pool), want)
            states = [pool[i] for i in chosen]
            args = args_of(sig, states)
            jobs = [self._run_all(truth_dir, args, giving_up=False)]
            jobs += [self._run_all(d, args, giving_up=True) for d, _ in (by_text[v] for v in candidates)
                     if d is not None]
            finished = [k for k, i in enumerate(chosen) if explored[i][0]]
            if measured and not guided:  # on the states x finished on, alongside the replays (again below if
                # one is invalid)
                jobs.append(self._coverage(sig, truth, cov_built, [args[k] for k in finished], f"{root}/coverage0"))
            replays = await asyncio.gather(*jobs)
            valid = [k for k in finished if replays[0].get(k) == explored[chosen[k]]]
            if isinstance(reach, tuple):
                cov = line_coverage(reach[0], frozenset().union(*(reach[1].get(chosen[k], frozenset())
                                                                 for k in valid)))
            elif guided:
                cov = reach
            elif measured:
                cov = replays.pop()
                if valid != finished and isinstance(cov, LineCoverage):
                    cov = await self._coverage(sig, truth, cov_built, [args[k] for k in valid], f"{root}/coverage1")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        again, ran = replays[0], iter(replays[1:])
        rows: list[InputResult] = []
        for k, i in enumerate(chosen):
            ok, out = explored[i]
            valid, status, reason = ok, "ok" if ok else "invalid", "" if ok else out
            if ok and again.get(k) != (True, out):
                valid, status, reason = False, "invalid", "nondeterministic"
            rows.append(InputResult(index=k, state=states[k], valid=valid, status=status, reason=reason,
                                    output=_output((ok, out))))
        valid_rows = [r for r in rows if r.valid]
        distinct = len({r.output for r in valid_rows})
        line_cov = cov if isinstance(cov, LineCoverage) else None
        # where measured, the criterion applies, and a coverage that could not be measured makes the sample
        # inconclusive; Java: not measured, the criterion is not applied (docs/native-executors.md, "Validity and
        # line coverage")
        verdict = validity(c, valid_inputs=len(valid_rows), distinct_outputs=distinct,
                           coverage=line_cov.value if line_cov else None,
                           invalid_reasons=[r.reason for r in rows if not r.valid])
        unavailable = cov if isinstance(cov, str) else ""
        conclusive = verdict.conclusive and not unavailable
        warnings = () if measured else (f"coverage_unavailable: line coverage is not measured for {self.language} "
                                        "code; conclusiveness uses valid_inputs and distinct_outputs only",)
        results = []
        for name, text in zip(names, candidates):
            cand_dir, error = by_text[text]
            if cand_dir is None:
                matches = tuple(False if r.valid else None for r in rows)
                results.append(CandidateResult(name, matches, 0.0 if conclusive else None, "unparsable", error,
                                               tuple(None for _ in rows)))
                continue
            got = next(ran)
            outs = tuple(_output(got.get(r.index, (False, "not run"))) for r in rows)
            matches = tuple((outs[r.index] == r.output) if r.valid else None for r in rows)
            hits = sum(1 for m in matches if m)
            sim = hits / len(valid_rows) if conclusive and valid_rows else None
            results.append(CandidateResult(name, matches, sim, "ran", "", outs))
        return Comparison(conclusive=conclusive, reason="; ".join(filter(None, [unavailable, verdict.reason])),
                          valid_inputs=len(valid_rows), coverage=line_cov.value if line_cov else math.nan,
                          distinct_outputs=distinct, inputs=tuple(rows), candidates=tuple(results),
                          executor=f"native-{self.language}", runs=len(pool),
                          uncovered_lines=line_cov.uncovered if line_cov else (), warnings=warnings,
                          config=self._settings())


def _output(result: tuple[bool, str]) -> str:
    """A canonical output state, or ``{"outcome": why}`` for a run that did not finish."""
    return result[1] if result[0] else json.dumps({"outcome": result[1]}, separators=(",", ":"))


def _register_kinds() -> None:
    """Executor kinds ``native-c``, ``native-cpp``, ``native-java``, ``native-rust``, ``native-go``."""
    for language in LANGUAGES:
        register(f"native-{language}")(lambda config, language=language: NativeExecutor(config, language))


_register_kinds()
