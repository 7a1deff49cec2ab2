"""The ``probes`` study end to end with two scripted models whose right answers are known exactly.

Both models sit behind a loopback OpenAI-compatible server of the test's own (real HTTP, calib's
``openai`` server kind) and answer in MBPP style:

- ``memorizer`` answers every prompt with the task's reference solution, whatever the condition says:
  it passes original, synonym and dead-code prompts, and fails every isomorphism (the rewritten tests
  need the encoded interface) while writing the *same program*: pass@1 drops from 1 to 0 and the
  opcode JSD from original is exactly 0 — the paper's "kept the algorithm, mis-serialised the
  interface" signature (§6.3.2).
- ``adapter`` answers isomorphism prompts with the known-correct transformed solution T∘f∘T⁻¹
  (``calib.probes.isomorphism.transformed_reference``) and the others with the reference: pass@1 is 1
  everywhere, and its isomorphism programs differ from its original ones (JSD > 0).

The study is run in two steps: up to the ``prompts`` stage, then (with the answers keyed by the exact
prompt texts the study wrote) to the end. Every expected number follows from those two policies.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import threading
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from calib.probes.isomorphism import metamorphic_check, transformed_reference
from calib.probes.transforms import make_bijection
from calib.study import RunOptions, run_study
from tests._loopback import serve_app

FIXTURES = Path(__file__).resolve().parents[2] / "probes" / "fixtures" / "tasks.jsonl"
N = 2
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def _spec(url: str) -> str:
    return f"""[study]
name = "probes-scripted"
kind = "probes"
seed = 0

[servers.memorizer]
kind = "openai"
base_url = "{url}"
model = "memorizer"

[servers.adapter]
kind = "openai"
base_url = "{url}"
model = "adapter"

[models]
panel = ["memorizer", "adapter"]

[probes]
tasks = "{FIXTURES}"
style = "mbpp"
conditions = ["original", "syn20", "syn40", "dead_code", "iso", "iso_enc", "iso_dec"]
families = ["affine", "cubic"]
n = {N}
k = [1, 2]
bootstrap = 500
test_timeout = 5.0
"""


class ScriptedServer:
    """An OpenAI-compatible ``/v1/completions`` whose answer depends on the model and the prompt."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], str] = {}
        self.url = ""
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "memorizer"}, {"id": "adapter"}]})

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = body.get("prompt")
        text = self.answers.get((body.get("model"), prompt), "no answer") if isinstance(prompt, str) else ""
        n = int(body.get("n", 1))
        return web.json_response({"id": "x", "object": "text_completion", "model": body.get("model"),
                                  "choices": [{"index": i, "text": text, "finish_reason": "stop"} for i in range(n)]})

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        async with serve_app(app) as url:
            self.url = url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:  # the event belongs to the server's loop: set it from there
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    server = ScriptedServer()
    with server:
        yield server


@pytest.fixture(scope="module")
def run(scripted: ScriptedServer, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("probes")
    spec = root / "probes.toml"
    spec.write_text(_spec(scripted.url))
    run_dir = root / "run"
    first = run_study(spec, run_dir=run_dir, options=RunOptions(until="prompts", progress=False))
    assert first.ran == ["tasks", "prompts"]
    tasks = {r["task_id"]: r for r in pl.read_parquet(run_dir / "tables" / "tasks.parquet").iter_rows(named=True)}
    prompts = pl.read_parquet(run_dir / "tables" / "prompts.parquet").filter(pl.col("applicable"))
    for p in prompts.iter_rows(named=True):
        task = tasks[p["task_id"]]
        plain = f"```python\n{task['code']}\n```\n"
        scripted.answers[("memorizer", p["prompt"])] = plain
        if p["family"] is None:
            scripted.answers[("adapter", p["prompt"])] = plain
        else:
            solution = transformed_reference(task["code"], task["entry_point"], p["condition"],
                                             make_bijection(p["family"]))
            scripted.answers[("adapter", p["prompt"])] = f"Here it is:\n```python\n{solution}\n```\n[DONE]"
    rest = run_study(spec, run_dir=run_dir, options=RunOptions(progress=False))
    assert rest.skipped[:2] == ["tasks", "prompts"] and "report" in rest.ran
    return run_dir


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def test_every_fixture_task_is_kept_and_every_rewrite_is_proved_by_its_known_correct_solution(run):
    tasks = _table(run, "tasks")
    assert tasks.height == 8 and tasks["reference_passed"].all()
    prompts = _table(run, "prompts")
    labels = ["original", "syn20", "syn40", "dead_code", "iso:affine", "iso:cubic", "iso_enc:affine", "iso_enc:cubic",
              "iso_dec:affine", "iso_dec:cubic"]
    assert prompts.height == 8 * len(labels)
    assert set(prompts["label"]) == set(labels)
    applicable = prompts.filter(pl.col("applicable"))
    # T∘f∘T⁻¹ passes every rewritten test: the metamorphic rewrite preserved each task
    assert applicable["reference_passed"].all()
    by = {(r["task_id"], r["label"]): r for r in prompts.iter_rows(named=True)}
    # count_vowels (task 7) maps strings to ints: no integer to encode on its inputs
    assert not by[("7", "iso_enc:affine")]["applicable"] and "no integer" in by[("7", "iso_enc:affine")]["reason"]
    assert by[("7", "iso_dec:affine")]["applicable"]
    # the gcd test compares with math.gcd(...), not a literal: not rewritable
    assert not by[("3", "iso:affine")]["applicable"] and "test" in by[("3", "iso:affine")]["reason"]
    # digit_sum(0) == 0 under affine T(v) = 3v + 5: digit_sum(5) == 5 shown for iso
    assert "assert digit_sum(5) == 5" in by[("1", "iso:affine")]["prompt"]
    # synonym fuzzing never changes the tests; dead code lengthens the prompt, as the contract does
    for task in tasks["task_id"]:
        assert by[(task, "syn40")]["tests"] == by[(task, "original")]["tests"]
        assert by[(task, "dead_code")]["added_tokens"] > 0


def _memorizer_passes(run: Path) -> dict[str, dict[str, bool]]:
    """label -> task -> whether the untransformed reference passes the label's tests, found in process
    (trusted reference code): an equivariant task (max of a list under a monotone T) passes anyway."""
    tasks = {r["task_id"]: r for r in _table(run, "tasks").iter_rows(named=True)}
    out: dict[str, dict[str, bool]] = {}
    for p in _table(run, "prompts").filter(pl.col("applicable")).iter_rows(named=True):
        task = tasks[p["task_id"]]
        out.setdefault(p["label"], {})[p["task_id"]] = all(metamorphic_check(task["code"], p["tests"], task["setup"]))
    return out


def test_pass_at_k_of_the_two_scripted_policies_is_exactly_what_they_imply(run):
    passes = _memorizer_passes(run)
    assert all(passes["original"].values())
    # the study ran the untransformed reference on every rewritten test in the sandbox: the same verdicts
    for p in _table(run, "prompts").filter(pl.col("applicable")).iter_rows(named=True):
        assert p["original_passes"] == (passes[p["label"]][p["task_id"]] if p["family"] else None), p["label"]
    # the paper's premise holds on these tasks: most isomorphic tasks defeat the untransformed solution
    iso = [ok for label, tasks in passes.items() if ":" in label for ok in tasks.values()]
    assert sum(iso) < len(iso) / 2
    passk = _table(run, "pass_at_k")
    for row in passk.iter_rows(named=True):
        share = sum(passes[row["label"]].values()) / len(passes[row["label"]])
        assert row["n_problems"] == len(passes[row["label"]]), row
        expected = share if row["model"] == "memorizer" else 1.0
        assert math.isclose(row["estimate"], expected, abs_tol=1e-12), row
        assert row["low"] <= row["estimate"] <= row["high"]
        if expected in (0.0, 1.0):  # every resample of a constant is that constant
            assert row["low"] == row["high"] == expected
        assert row["original"] == 1.0
        assert math.isclose(row["difference"], expected - 1.0, abs_tol=1e-12)
        assert math.isclose(row["relative_change"], expected - 1.0, abs_tol=1e-12)
        assert row["difference_low"] <= row["difference"] <= row["difference_high"]
    assert passk.height == 2 * len(passes) * 2  # models × labels × k
    pairs = _table(run, "model_pairs")
    assert pairs.height == len(passes) * 2
    for row in pairs.iter_rows(named=True):
        assert (row["model_a"], row["model_b"]) == ("memorizer", "adapter")
        share = sum(passes[row["label"]].values()) / len(passes[row["label"]])
        assert math.isclose(row["difference"], 1.0 - share, abs_tol=1e-12), row


def test_pass_at_k_matches_the_test_results_counted_by_hand(run):
    # pass@1 = mean over problems of c/n (Chen et al. 2021, eq. 1 with k = 1)
    results = _table(run, "test_results")
    assert (results["tests_total"] > 0).all()
    for (model, label), group in results.group_by(["model", "label"]):
        per_task = group.group_by("task_id").agg(pl.col("passed").mean())
        row = _table(run, "pass_at_k").filter((pl.col("model") == model) & (pl.col("label") == label)
                                              & (pl.col("k") == 1)).row(0, named=True)
        assert math.isclose(row["estimate"], per_task["passed"].mean(), abs_tol=1e-12)
    failed = results.filter(~pl.col("passed"))
    assert failed.height > 0
    assert set(failed["model"]) == {"memorizer"} and all(":" in label for label in failed["label"])
    assert (failed["status"] == "ok").all()  # the program ran; its answers were wrong
    assert all("AssertionError" in errors for errors in failed["errors"].to_list())


def test_opcode_divergence_is_zero_for_the_same_program_and_positive_for_the_adapted_one(run):
    ops = _table(run, "opcodes")
    memorizer = ops.filter((pl.col("model") == "memorizer") & (pl.col("label") != "original"))
    assert memorizer["jsd"].to_list() == [0.0] * memorizer.height
    adapter = ops.filter(pl.col("model") == "adapter")
    iso = adapter.filter(pl.col("label").str.contains(":"))
    assert iso.height > 0 and (iso["jsd"] > 0).all() and (iso["passing_jsd"] > 0).all()
    plain = adapter.filter(pl.col("label").is_in(["syn20", "syn40", "dead_code"]))
    assert plain["jsd"].to_list() == [0.0] * plain.height
    # the pooled histogram is the sum over the N identical programs of one (model, task, label)
    row = ops.filter((pl.col("model") == "memorizer") & (pl.col("label") == "original")).row(0, named=True)
    from calib.probes.opcodes import opcode_histogram

    task = _table(run, "tasks").filter(pl.col("task_id") == row["task_id"]).row(0, named=True)
    single = opcode_histogram(task["code"] + "\n")
    assert json.loads(row["histogram"]) == {op: N * count for op, count in single.items()}


def test_the_report_shows_the_pass_at_1_table_and_the_jsd_figure(run):
    report = run / "report"
    md = (report / "report.md").read_text()
    assert "pass@1" in md and "iso:affine" in md and "memorizer" in md
    figures = list((report / "figures").glob("*")) if (report / "figures").is_dir() else []
    assert any("jsd" in f.name.lower() for f in figures), [f.name for f in figures]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["kind"] == "probes"


def test_a_finished_run_rerun_does_no_work(run):
    result = run_study(run / "study.toml", run_dir=run, options=RunOptions(progress=False))
    assert result.ran == [] and "report" in result.skipped


# --- the spec -------------------------------------------------------------------------------------

PROBES_SPEC = """[study]
name = "p"
kind = "probes"

[servers.a]
kind = "openai"
base_url = "http://127.0.0.1:9"

[servers.b]
kind = "openai"
base_url = "http://127.0.0.1:9"

[models]
panel = ["a", "b"]

[probes]
tasks = "tasks.jsonl"
n = 5
k = [1, 5]
"""

CODEC = """
[[probes.codec.datasets]]
name = "one"
source = "tasks.jsonl"
seen = true
"""

BAD_PROBES = {
    "no_probes_table": (PROBES_SPEC.split("[probes]")[0], "study.kind = 'probes' needs a [probes] table"),
    "k_above_n": (PROBES_SPEC.replace("k = [1, 5]", "k = [1, 6]"), "probes.k: k must list distinct attempts"),
    "no_original": (PROBES_SPEC + 'conditions = ["iso"]\n', "conditions must include 'original'"),
    "unknown_condition": (PROBES_SPEC + 'conditions = ["original", "syn30"]\n', "probes.conditions"),
    "unknown_family": (PROBES_SPEC + 'families = ["quadratic"]\n', "probes.families"),
    "base_ten": (PROBES_SPEC + "\n[probes.bijection]\nbase = 10\n", "base must not be 10"),
    "affine_zero": (PROBES_SPEC + "\n[probes.bijection]\naffine_a = 0\n", "affine_a must not be 0"),
    "panel_unknown_server": (PROBES_SPEC.replace('panel = ["a", "b"]', 'panel = ["a", "c"]'),
                             "models.panel = 'c' names no [servers.c] table"),
    "missing_task_file": (PROBES_SPEC.replace("tasks.jsonl", "gone.jsonl"),
                          "probes.tasks: 'gone.jsonl' does not exist"),
    "codec_one_side": (PROBES_SPEC + CODEC + CODEC.replace('"one"', '"two"'),
                       "the AUC needs at least one seen = true and one seen = false dataset"),
    "organism_tasks_without_organism": (PROBES_SPEC.replace('"tasks.jsonl"', '"organism:business"'),
                                        "probes.tasks = 'organism:business' needs an [organism] table"),
    "probes_in_functional": (PROBES_SPEC.replace('kind = "probes"', 'kind = "extraction"')
                             .replace('panel = ["a", "b"]', 'target = "a"'),
                             "[probes] is read only by study.kind = 'probes'"),
}


@pytest.mark.parametrize("name", sorted(BAD_PROBES))
def test_bad_probes_specs_give_one_line_naming_the_key(tmp_path, name):
    from calib._exceptions import InputError
    from calib.study.spec import load_spec

    text, needle = BAD_PROBES[name]
    (tmp_path / "tasks.jsonl").write_text(FIXTURES.read_text())
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path)) and needle in message and "\n" not in message, message


def test_the_shipped_mbpp_recipe_names_its_panel_and_codec_files(tmp_path):
    import shutil as sh

    from calib.study.spec import load_spec

    root = Path(__file__).resolve().parents[3] / "studies"
    sh.copy(root / "probes-mbpp.toml", tmp_path / "probes-mbpp.toml")
    (tmp_path / "data" / "codec").mkdir(parents=True)
    for name in ("seen-a", "unseen-a"):
        (tmp_path / "data" / "codec" / f"{name}.jsonl").write_text('{"text": "x"}\n')
    spec = load_spec(tmp_path / "probes-mbpp.toml")
    assert spec.models.probed() == ("small", "large") and spec.probes.tasks == "mbpp:sanitized"
    assert all(spec.servers[name]["kind"] == "openai" for name in spec.models.probed())


def test_the_shipped_probes_demo_is_valid_and_its_paths_resolve(tmp_path):
    from calib.study.probes.stages import labels
    from calib.study.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[3] / "studies" / "probes-demo.toml")
    assert spec.models.probed() == ("reference", "target")
    assert len(labels(spec)) == 4 + 3
    (tmp_path / "tasks.jsonl").write_text(FIXTURES.read_text())
    (tmp_path / "p.toml").write_text(PROBES_SPEC)
    assert load_spec(tmp_path / "p.toml").probes.tasks == str(tmp_path / "tasks.jsonl")


def test_calib_check_lists_the_condition_labels_and_the_task_source(tmp_path):
    import subprocess
    import sys

    (tmp_path / "tasks.jsonl").write_text(FIXTURES.read_text())
    (tmp_path / "p.toml").write_text(PROBES_SPEC + 'families = ["affine", "base"]\n')
    proc = subprocess.run([sys.executable, "-m", "calib", "check", "p.toml", "--no-probe"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "valid probes study 'p'" in proc.stdout
    assert ("conditions: original, syn20, syn40, dead_code, iso:affine, iso:base, iso_enc:affine, iso_enc:base, "
            "iso_dec:affine, iso_dec:base") in proc.stdout
    assert f"tasks: {tmp_path / 'tasks.jsonl'}" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "calib", "check", "p.toml", "--no-probe", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    found = json.loads(proc.stdout)
    assert found["kind"] == "probes" and found["stages"][0] == "tasks" and set(found["servers"]) == {"a", "b"}
