"""Docs cover every command, option and public statistic (STYLE.md rule 10)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

import calib.stats
from calib.cli import cli

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _commands(group: click.Group, prefix: str = "calib"):
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from _commands(command, path)


COMMANDS = list(_commands(cli))


def _section(text: str, heading: str) -> str:
    """The text under the Markdown heading that names ``heading`` in backticks, up to the next heading."""
    match = re.search(rf"^#+ `{re.escape(heading)}`\n(.*?)(?=^#+ |\Z)", text, flags=re.M | re.S)
    assert match, f"docs/cli.md has no section headed `{heading}`"
    return match.group(1)


@pytest.mark.parametrize("path,command", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_and_option_is_documented(path, command):
    section = _section((DOCS / "cli.md").read_text(), path)
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("--"):
                assert f"`{opt}`" in section, f"{path}: option {opt} is not documented in docs/cli.md"


def test_global_options_are_documented():
    text = (DOCS / "cli.md").read_text()
    for param in cli.params:
        for opt in param.opts:
            assert f"`{opt}`" in text


@pytest.mark.parametrize("name", calib.stats.__all__)
def test_every_public_statistic_is_documented(name):
    assert re.search(rf"\b{re.escape(name)}\b", (DOCS / "statistics.md").read_text()), name


def test_every_server_config_key_is_documented():
    from calib.servers import anthropic, openai, tgi
    from calib.servers.embedded import kind as embedded

    text = (DOCS / "servers.md").read_text()
    for module in (openai, tgi, anthropic, embedded):
        for key in module._KEYS:
            assert f"`{key}`" in text, f"{module.__name__}: config key {key} is not documented in docs/servers.md"


@pytest.mark.parametrize("doc,schema", [("data.md", "calib.data.schema:FUNCTIONS_SCHEMA"),
                                        ("organism.md", "calib.organism.planted:TRUTH_SCHEMA"),
                                        ("data.md", "calib.data.prompts:PROMPTS_SCHEMA"),
                                        ("executors.md", "calib.executors.base:EXECUTIONS_SCHEMA"),
                                        ("metrics.md", "calib.metrics.base:SIMILARITIES_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:WINDOWS_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:SCORES_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:OPERATING_POINTS_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:EXTRACTION_CLAIMS_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:BUDGETS_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:PAIRED_SCHEMA"),
                                        ("extraction.md", "calib.study.tables:CENSUS_SCHEMA"),
                                        ("report.md", "calib.study.tables:CONTROL_SCREEN_SCHEMA"),
                                        ("dedup.md", "calib.dedup.counts:DUPLICATES_SCHEMA"),
                                        ("dedup.md", "calib.dedup.counts:COUNTS_SCHEMA"),
                                        ("mitigation.md", "calib.mitigation.pairs:PAIRS_SCHEMA"),
                                        *[("mitigation.md", f"calib.study.mitigation.tables:{name}") for name in (
                                            "CHECKPOINTS_SCHEMA", "MITIGATION_GENERATIONS_SCHEMA",
                                            "MITIGATION_SCORES_SCHEMA", "TRAJECTORY_SCHEMA")],
                                        *[("probes.md", f"calib.study.probes.tables:{name}") for name in (
                                            "PROBE_TASKS_SCHEMA", "PROBE_PROMPTS_SCHEMA", "PROBE_GENERATIONS_SCHEMA",
                                            "TEST_RESULTS_SCHEMA", "PASS_AT_K_SCHEMA", "MODEL_PAIRS_SCHEMA",
                                            "OPCODES_SCHEMA", "CODEC_SCHEMA", "CODEC_SCORES_SCHEMA")]])
def test_every_table_column_is_documented(doc, schema):
    import importlib

    module, name = schema.split(":")
    text = (DOCS / doc).read_text()
    for column in getattr(importlib.import_module(module), name):
        assert f"`{column}`" in text, f"column {column} of {schema} is not documented in docs/{doc}"


def test_every_executor_setting_is_documented():
    import dataclasses

    from calib.executors.base import ExecutorConfig

    text = (DOCS / "executors.md").read_text()
    for field in dataclasses.fields(ExecutorConfig):
        assert f"`{field.name}`" in text, f"ExecutorConfig.{field.name} is not documented in docs/executors.md"


def test_every_mocked_module_is_documented():
    from calib.executors.sandbox.harness.scaffold import MOCKED_MODULES

    text = (DOCS / "executors.md").read_text()
    for module in sorted(MOCKED_MODULES):
        assert f"`{module}`" in text, f"mocked module {module} is not listed in docs/executors.md"


def test_every_metric_is_documented():
    from calib.metrics import METRIC_NAMES

    text = (DOCS / "metrics.md").read_text()
    for name in METRIC_NAMES:
        assert f"**`{name}`**" in text or f"| `{name}` |" in text, f"metric {name} is not documented in docs/metrics.md"


def test_every_study_spec_key_is_documented():
    from pydantic import BaseModel

    from calib.study.spec import StudySpec

    text = (DOCS / "study-spec.md").read_text()

    def walk(model: type[BaseModel], prefix: str):
        for name, field in model.model_fields.items():
            yield prefix, name
            annotation = field.annotation
            for candidate in (annotation, *getattr(annotation, "__args__", ())):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    yield from walk(candidate, f"{prefix}.{name}" if prefix else name)

    for section, key in walk(StudySpec, ""):
        if section:
            body = re.search(rf"^## `\[{section}\]`\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
            assert body and f"| `{key}` |" in body.group(1), f"[{section}] {key} missing in docs/study-spec.md"
        else:
            assert f"`[{key}]`" in text or f"`[{key}.NAME]`" in text, f"section [{key}] is not documented"
