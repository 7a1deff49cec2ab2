"""``measure.judge_server`` and ``measure.embedding_server``: one server's name or a list of them.

A single name keeps the metric names and the measure stage's fingerprint it had before lists existed (old
runs are not recomputed); each further server's metrics are named ``METRIC@SERVER``; a name no
``[servers.NAME]`` table defines, a repeated name or an empty list is one line naming the key. ``calib
check`` asks every server for its capability, and the estimate counts each server's measure requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calib._exceptions import InputError
from calib.study.functional.check import needs
from calib.study.functional.estimate import measure_notes
from calib.study.functional.measure import _measure_settings
from calib.study.runner import RunOptions
from calib.study.spec import load_spec

SPEC = """[study]
name = "judges"

[organism]
preset = "tiny"

[servers.t]
kind = "embedded"
model_dir = "organism:target"

[servers.r]
kind = "embedded"
model_dir = "organism:reference"

[servers.ja]
kind = "openai"
base_url = "http://127.0.0.1:9"
model = "a"

[servers.jb]
kind = "anthropic"
model = "b"

[models]
target = "t"
reference = "r"

[data]
source = "organism"

[measure]
metrics = ["bleu", "judge_functional", "judge_structure", "embedding"]
{servers}
"""


def _spec(tmp_path: Path, servers: str):
    path = tmp_path / "s.toml"
    path.write_text(SPEC.format(servers=servers))
    return load_spec(path)


def test_one_name_keeps_the_names_and_the_fingerprint_it_had(tmp_path):
    plain = _spec(tmp_path, 'judge_server = "ja"\nembedding_server = "t"')
    listed = _spec(tmp_path, 'judge_server = ["ja"]\nembedding_server = ["t"]')
    assert plain.measure.judge_server == listed.measure.judge_server == "ja"
    expected = [("bleu", "bleu", None), ("judge_functional", "judge_functional", "ja"),
                ("judge_structure", "judge_structure", "ja"), ("embedding", "embedding", "t")]
    assert plain.measure.measured() == listed.measure.measured() == expected
    # the fingerprint's settings as the measure stage built them when a spec could name one server only
    before = {"measure": plain.measure.model_dump(mode="json", exclude={"workers"}),
              "servers": {"judge": plain.servers["ja"], "embedding": plain.servers["t"]}}
    assert before["measure"]["judge_server"] == "ja"
    for spec in (plain, listed):
        assert _measure_settings(spec, RunOptions(progress=False)) == before


def test_several_names_suffix_the_further_servers_metrics(tmp_path):
    spec = _spec(tmp_path, 'judge_server = ["ja", "jb"]\nembedding_server = ["t", "r"]')
    assert spec.measure.judge_servers == ("ja", "jb") and spec.measure.embedding_servers == ("t", "r")
    assert [name for name, _, _ in spec.measure.measured()] == [
        "bleu", "judge_functional", "judge_functional@jb", "judge_structure", "judge_structure@jb", "embedding",
        "embedding@r"]
    settings = _measure_settings(spec, RunOptions(progress=False))
    assert list(settings["servers"]) == ["judge", "judge@jb", "embedding", "embedding@r"]
    assert settings["servers"]["judge@jb"] == spec.servers["jb"]
    wanted = needs(spec)
    assert wanted["ja"] == wanted["jb"] == ["chat"] and "embeddings" in wanted["t"] and "embeddings" in wanted["r"]
    notes = measure_notes(spec, 5)  # 5 samples: 10 (sample, completion) pairs
    assert ("measure: at most 20 chat requests (one per sample and completion, 2 metric(s): judge_functional, "
            "judge_structure), at most 512 answer tokens each to ja; their input tokens depend on the generations: "
            "not in the figures") in notes
    assert any("at most 20 chat requests" in n and "judge_functional@jb, judge_structure@jb" in n
               and " to jb;" in n for n in notes)
    # 10 pairs in one chunk of 64: at most 20 distinct texts, ceil(20 / 32) = 1 request of 32 texts
    assert any("at most 1 embedding requests (embedding@r: 32 texts each) to r;" in n for n in notes)
    assert len(notes) == 4


@pytest.mark.parametrize(("servers", "needle"), [
    ('judge_server = ["ja", "nope"]', "s.toml:33: measure.judge_server = 'nope' names no [servers.nope] table "
                                      "(servers defined: ja, jb, r, t)"),
    ('judge_server = "ja"\nembedding_server = ["t", "gone"]', "measure.embedding_server = 'gone' names no "
                                                              "[servers.gone] table"),
    ('judge_server = ["ja", "ja"]', "measure.judge_server: server(s) ['ja'] listed twice"),
    ("judge_server = []", "measure.judge_server: an empty list names no server"),
    ('judge_server = ["ja", 3]', "measure.judge_server: expected a server's name or a list of names"),
])
def test_a_bad_server_list_is_one_line_naming_the_key(tmp_path, servers, needle):
    with pytest.raises(InputError) as caught:
        _spec(tmp_path, servers)
    message = str(caught.value)
    assert needle in message and len(message.splitlines()) == 1, message
    assert "s.toml:" in message
