"""calib installed from its wheel (not editable) finds every asset it ships: harness templates and prompts.

The wheel is built from the tracked files of this checkout with ``python -m build`` and installed with
``--no-deps`` into a fresh venv that sees this interpreter's packages (calib's dependencies) but takes
calib itself from the wheel; every command then runs from a folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (what a release builds from), without build leftovers."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(python, calib)`` of a venv with calib installed from a freshly built wheel."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to know the tracked files")
    root = tmp_path_factory.mktemp("wheel")
    src = _tracked_copy(root / "src")
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"),
                            str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("calib-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                          "--no-index", str(wheel)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return python, env_dir / "bin" / "calib", root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout
    return env


def test_calib_comes_from_the_wheel_not_the_checkout(installed):
    python, _, root = installed
    where = subprocess.run([str(python), "-c", "import calib; print(calib.__file__)"], capture_output=True,
                           text=True, cwd=root, env=_env(), check=True).stdout.strip()
    assert Path(where).is_relative_to(root / "venv"), where


def test_compare_python_from_the_wheel(installed, tmp_path):
    _, calib, _ = installed
    (tmp_path / "x.py").write_text("def f(a: int, b: int) -> int:\n    if a > b:\n        return a - b\n"
                                   "    return b * 2 + a\n")
    (tmp_path / "same.py").write_text("def f(a: int, b: int) -> int:\n    return a - b if a > b else 2 * b + a\n")
    (tmp_path / "other.py").write_text("def f(a: int, b: int) -> int:\n    return a + b\n")
    run = subprocess.run([str(calib), "compare", "x.py", "same.py", "other.py", "--json"], capture_output=True,
                         text=True, cwd=tmp_path, env=_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["conclusive"], result["reason"]
    sims = {c["path"]: c["sim_func"] for c in result["candidates"]}
    assert sims["same.py"] == 1.0 and sims["other.py"] < 1.0


def test_compare_c_from_the_wheel_finds_the_harness_templates(installed, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    _, calib, _ = installed
    (tmp_path / "x.c").write_text("int add3(int a, int b) {\n    return a + b + 3;\n}\n")
    (tmp_path / "same.c").write_text("int add3(int a, int b) {\n    int s = b;\n    s += a;\n    return s + 3;\n}\n")
    (tmp_path / "other.c").write_text("int add3(int a, int b) {\n    return a * b + 3;\n}\n")
    run = subprocess.run([str(calib), "compare", "x.c", "same.c", "other.c", "--language", "c", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["conclusive"] and result["language"] == "c"
    sims = {c["path"]: c["sim_func"] for c in result["candidates"]}
    assert sims["same.c"] == 1.0 and sims["other.c"] < 1.0


def test_every_prompt_loads_from_the_installed_package(installed):
    python, _, root = installed
    script = r"""
import json
from pathlib import Path
import calib
from calib.executors.llm import prompting
from calib.executors.agent import agent_system_prompt
from calib.metrics import judges
from calib.data import judge as data_judge

loaded = []
folder = prompting.PROMPTS_DIR / prompting.PROMPTS_VERSION
for path in sorted(folder.glob("*.json")):
    loaded.append(prompting.load_prompt(path.stem).name)
assert prompting.common_imports().strip(), "common_imports is empty"
loaded.append("common_imports")
assert agent_system_prompt().strip()
loaded.append("agent_system")
for name, spec in judges.JUDGES.items():
    assert judges.load_metric_prompt(spec.prompt_file).version, name
    loaded.append(name)
assert data_judge.load_judge_prompt().version
loaded.append("judge_meaningful_logic")
from calib.data.rules import RULES, load_rule
for name in RULES:
    loaded.append("rule_" + load_rule(name).name)
print(json.dumps({"package": str(Path(calib.__file__).parent), "loaded": loaded}))
"""
    run = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=root, env=_env(),
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert Path(out["package"]).is_relative_to(root / "venv")
    assert {"input_generation", "preamble", "preamble_retry", "common_imports", "agent_system",
            "judge_meaningful_logic", "rule_natural", "rule_continue", "rule_parrot"} <= set(out["loaded"])
    assert len([n for n in out["loaded"] if n.startswith("judge_") and n != "judge_meaningful_logic"]) == 3
