"""``calib compare``: execution-based functional similarity of candidates to a reference function.

The executor's public face: TRUTH and each CANDIDATE are files holding one function each; the
optional ``--context`` file holds the code that preceded TRUTH in its source file (imports, constants,
helpers, the enclosing class). Input states are chosen on TRUTH (or read from ``--inputs``) and reused
for every candidate. See docs/executors.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import click

from calib._exceptions import InputError
from calib.cli._untrusted import json_text, shown

__all__ = ["compare", "load_inputs"]


def _read(path: Path, what: str) -> str:
    """The text of a regular file; anything else (a FIFO, a device, a directory) is refused before it is
    read, so a named pipe cannot make calib wait forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once (no writer needed)
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "not a regular file")
            raise InputError(f"the {what} is {kind}, not a regular file; save its content to a file and pass that",
                             path=str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            data = handle.read()
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", path=str(path)) from exc
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise InputError(f"the {what} is not UTF-8 (byte {exc.start}); re-encode it", path=str(path)) from exc


def load_inputs(path: Path) -> list[dict[str, Any]]:
    """Input states from a JSON file: a list (or ``{"inputs": [...]}``) of ``{"args": {...}, ...}``.

    Argument values are Python expressions written as strings (``"[1, 2]"``, ``"'text'"``,
    ``"Obj(size=3)"``); a JSON number, list, object, boolean or null is taken as that value.
    """
    from calib.executors.sandbox.harness.synth import STANDIN_MODES
    from calib.executors.sandbox.harness.values import New, Obj, decode, encode

    try:
        data = json.loads(_read(path, "inputs file"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    if isinstance(data, dict) and "inputs" in data:
        data = data["inputs"]
    if not isinstance(data, list) or not data:
        raise InputError('expected a non-empty JSON list of input states like {"args": {"n": "3"}}', path=str(path))
    states = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("args", {}), dict):
            raise InputError(f'input {i}: expected an object with "args": {{name: value}}', path=str(path))
        unknown = set(item) - {"args", "self", "files", "seed", "standins", "env", "stdin", "argv", "probe"}
        if unknown:
            raise InputError(f"input {i}: unknown key(s) {sorted(unknown)}; allowed: args, self, files, seed, "
                             "standins, env, stdin, argv, probe", path=str(path))
        args = {}
        for name, value in item.get("args", {}).items():
            source = value if isinstance(value, str) else encode(value)
            try:
                decode(source)
            except ValueError as exc:
                raise InputError(f"input {i}, argument {name!r}: {exc}", path=str(path)) from None
            args[name] = source
        state: dict[str, Any] = {"args": args, "files": {}}
        if "self" in item:
            source = item["self"] if isinstance(item["self"], str) else encode(item["self"])
            try:
                decoded = decode(source)
            except ValueError as exc:
                raise InputError(f"input {i}, self: {exc}", path=str(path)) from None
            if not isinstance(decoded, Obj | New):
                raise InputError(f"input {i}, self: expected Obj(attr=...) or New('Class', ...), got {source!r}",
                                 path=str(path))
            state["self"] = source
        if "seed" in item:
            if not isinstance(item["seed"], int) or isinstance(item["seed"], bool):
                raise InputError(f"input {i}: seed must be an integer", path=str(path))
            state["seed"] = item["seed"]
        if "standins" in item:
            if item["standins"] not in STANDIN_MODES:
                fixed = [m for m in tuple.__iter__(STANDIN_MODES) if not m.startswith("mixed")]
                raise InputError(f"input {i}: standins must be one of {', '.join(fixed)}, mixedN, mixedN~ID:V "
                                 "(up to 8 draws set; docs/executors.md, Input states) or nthN (N >= 1), "
                                 f"got {item['standins']!r}", path=str(path))
            if item["standins"] != "standin":
                state["standins"] = item["standins"]
        files = item.get("files", {})
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise InputError(f'input {i}: "files" must map file names to text', path=str(path))
        state["files"] = files
        if "env" in item or "stdin" in item or "argv" in item or "probe" in item:
            from calib.executors.sandbox.harness.ambient import check

            problem = check(item.get("env"), item.get("stdin"), item.get("argv"), item.get("probe"))
            if problem:
                raise InputError(f"input {i}: {problem}", path=str(path))
            for k, source in enumerate(item.get("probe", [])):  # a returned closure's first arguments
                try:
                    decode(source)
                except ValueError as exc:
                    raise InputError(f"input {i}, probe {k}: {exc}", path=str(path)) from None
            state.update({key: item[key] for key in ("env", "stdin", "argv", "probe") if key in item})
        states.append(state)
    return states


def _human(result: dict[str, Any], tau: float) -> str:
    """The human summary; every string from a run (reasons, messages) and every path is :func:`shown`."""
    lines = [f"conclusive: {'yes' if result['conclusive'] else 'no (' + shown(result['reason']) + ')'}",
             f"valid inputs {result['valid_inputs']} of {len(result['inputs'])}, line coverage "
             f"{'not measured' if result['coverage'] is None else format(result['coverage'], '.0%')}, "
             f"distinct outputs {result['distinct_outputs']}"]
    for cand in result["candidates"]:
        marks = "".join("." if m is None else ("=" if m else "x") for m in cand["matches"])
        sim = "n/a" if cand["sim_func"] is None else f"{cand['sim_func']:.2f}"
        verdict = "" if cand["sim_func"] is None else (" (>= tau_func)" if cand["sim_func"] >= tau else "")
        extra = f" [{shown(cand['outcome'])}: {shown(cand['message'])}]" if cand["outcome"] != "ran" else ""
        lines.append(f"{shown(cand['path'])}: sim_func {sim}{verdict}  {marks}{extra}")
    return "\n".join(lines)


@click.command("compare")
@click.argument("truth", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("candidates", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--context", "context_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File with the code that preceded TRUTH in its source file (imports, constants, helpers, class).")
@click.option("--inputs", "inputs_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON file of input states to use instead of synthesising them.")
@click.option("--language", type=click.Choice(["python", "c", "cpp", "java", "rust", "go"]), default="python",
              show_default=True, help="Language of the functions (Python: the sandbox executor; the others: the "
              "native executor, which compiles them).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input search.")
@click.option("--n-inputs", type=click.IntRange(min=1), default=10, show_default=True,
              help="Input states to choose (N).")
@click.option("--min-valid", type=click.IntRange(min=1), default=8, show_default=True,
              help="Valid input states needed for a conclusive result (N_in).")
@click.option("--coverage", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="Line coverage of TRUTH needed (C).")
@click.option("--min-distinct", type=click.IntRange(min=1), default=2, show_default=True,
              help="Distinct output states needed (N_out).")
@click.option("--tau-func", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="SIM_func threshold shown next to each candidate.")
@click.option("--timeout", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds per input state (wall clock).")
@click.option("--budget-runs", type=click.IntRange(min=1), default=200, show_default=True,
              help="Executions of TRUTH the input search may spend (twice that for a search within 0.2 of "
                   "the coverage criterion that still progresses).")
@click.option("--budget-seconds", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Most CPU seconds the input search may spend.")
@click.option("--import-path", "import_paths", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="Directory made importable (read-only) inside the sandbox; repeatable.")
@click.option("--module", "module_name", default=None,
              help="Module name TRUTH's file had (lets relative imports resolve with --import-path).")
@click.option("--bare", is_flag=True, help="Run the function alone: no context, no stand-ins (the paper's 'bare').")
@click.option("--show-outputs", is_flag=True, help="Include every canonical output state in --json output.")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Run without bubblewrap when it is unavailable. Generated code then runs UNISOLATED.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def compare(truth: Path, candidates: tuple[Path, ...], context_file: Path | None, inputs_file: Path | None,
            language: str, seed: int, n_inputs: int, min_valid: int, coverage: float, min_distinct: int,
            tau_func: float, timeout: float, budget_runs: int, budget_seconds: float,
            import_paths: tuple[str, ...], module_name: str | None, bare: bool, show_outputs: bool,
            unsafe_no_sandbox: bool, as_json: bool) -> None:
    """Run TRUTH and each CANDIDATE on the same input states and compare whole output states.

    Prints conclusive, reason, valid_inputs, coverage, distinct_outputs, inputs and, per candidate,
    path, sim_func (matched / valid inputs; null when inconclusive) and matches (one per input, null
    where TRUTH's input is not valid).
    """
    from calib.executors import ExecutorConfig, create_executor

    if min_valid > n_inputs:
        raise click.BadParameter(f"--min-valid {min_valid} exceeds --n-inputs {n_inputs}", param_hint="--min-valid")
    truth_text = _read(truth, "truth file")
    cand_texts = [_read(path, "candidate file") for path in candidates]
    context = _read(context_file, "context file") if context_file is not None else ""
    inputs = load_inputs(inputs_file) if inputs_file is not None else None
    if unsafe_no_sandbox:
        click.echo("WARNING: --unsafe-no-sandbox: if bubblewrap cannot run, untrusted code runs with NO "
                   "isolation (only rlimits); it can read and write your files and reach the network.", err=True)
    config = ExecutorConfig(n_inputs=n_inputs, min_valid=min_valid, coverage=coverage, min_distinct=min_distinct,
                            seed=seed, input_timeout=timeout, budget_runs=budget_runs,
                            budget_seconds=budget_seconds, bare=bare, import_paths=tuple(import_paths),
                            module_name=module_name, unsafe_no_sandbox=unsafe_no_sandbox)
    if language != "python" and inputs is not None:
        raise click.BadParameter("input states for compiled languages are synthesised; --inputs is Python only",
                                 param_hint="--inputs")
    executor: Any = create_executor("sandbox" if language == "python" else f"native-{language}", config)
    if executor.sandbox.unsafe:
        click.echo("WARNING: bubblewrap is unavailable: running untrusted code WITHOUT a sandbox.", err=True)
    result = asyncio.run(executor.compare(truth_text, cand_texts, context=context, inputs=inputs,
                                          names=[str(p) for p in candidates]))
    record = result.to_dict(outputs=show_outputs)
    record["truth"] = str(truth)
    record["language"] = language
    if as_json:
        click.echo(json_text(record))
    else:
        click.echo(_human(record, tau_func))
    sys.stdout.flush()
