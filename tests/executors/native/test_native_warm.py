"""The C++ executor's shared build directory (calib/executors/native/warm.py).

Checked on real builds in the sandbox: the directory is made once, holds the precompiled header and
the harness objects, and every variant builds with it; a recipe that fails leaves builds as they were.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from calib.executors.native import LANGUAGES
from calib.executors.native import warm as warm_module
from calib.executors.native.warm import READY, Warm, cache_root
from tests.executors.native.test_native import compare, needs

SCORE = """int score(const std::vector<int>& xs, int bonus) {
  int s = 0;
  for (int v : xs) {
    if (v > 0) s += v; else s -= 1;
  }
  return s + bonus;
}"""


def _expected(state: dict) -> int:
    total = sum(v if v > 0 else -1 for v in state["xs"]) + state["bonus"]
    return (total + 2**31) % 2**32 - 2**31  # int arithmetic wraps (-fwrapv)


@needs("cpp")
def test_cpp_builds_share_a_precompiled_header_and_the_harness_objects():
    result = compare("cpp", SCORE, [SCORE, SCORE.replace("s -= 1", "s -= 2")], input_timeout=2.0)
    assert result.conclusive and result.coverage == 1.0, result.reason
    assert all(json.loads(row.output)["return"] == _expected(row.state) for row in result.inputs)
    made = [d for d in cache_root().glob("cpp-*") if (d / READY).is_file()]
    assert made, "no complete shared build directory"
    folder = made[0]
    for name in ("pch/bits/stdc++.h.gch", "pch-cov/bits/stdc++.h.gch", "harness.o", "harness-cov.o"):
        assert (folder / name).stat().st_size > 0, name


@needs("cpp")
def test_a_failing_recipe_leaves_builds_as_they_were(monkeypatch):
    lang = LANGUAGES["cpp"]
    assert lang.warm is not None
    broken = Warm(key=lambda tools: "broken-recipe", files=lang.warm.files, argv=lambda tools, where: ["/bin/false"])
    monkeypatch.setitem(LANGUAGES, "cpp", dataclasses.replace(lang, warm=broken))
    result = compare("cpp", SCORE, [SCORE], input_timeout=2.0)
    assert result.conclusive and result.candidates[0].sim_func == 1.0, result.reason
    assert warm_module._DONE["cpp-broken-recipe"] is None
    assert not (cache_root() / "cpp-broken-recipe").exists()
    assert not [p for p in cache_root().iterdir() if p.name.startswith(".cpp-broken-recipe")]  # no leftovers


def test_the_directory_depends_on_the_toolchain_flags_and_harness():
    lang = LANGUAGES["cpp"]
    tools = lang.find_tools()
    if tools is None or lang.warm is None:
        pytest.skip("g++ is not installed")
    key = lang.warm.key(tools)
    assert key == lang.warm.key(tools) and len(key) == 16
    other = dataclasses.replace(tools, exe={**tools.exe, "cxx": tools.exe["cxx"] + "-other"})
    assert lang.warm.key(other) != key
