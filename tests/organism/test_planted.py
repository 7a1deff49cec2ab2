"""Business-rule forms, planted members and controls, and the ground-truth table."""

from __future__ import annotations

import ast
import json
import random
import statistics
from collections import Counter

import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.organism import business
from calib.organism.business import FORMS, TEMPLATES, generate_rules, probe_inputs, render
from calib.organism.corpus import NearCopyIndex
from calib.organism.edits import _edit_rename, _edit_reorder
from calib.organism.planted import (
    KINDS,
    TRUTH_SCHEMA,
    PlantSpec,
    target_training_texts,
    truth_table,
    write_truth,
)
from tests.organism import planted, stdlib_functions, stdlib_split

# -- business rules ----------------------------------------------------------------------------------


def _outputs(source: str, name: str, inputs: list[tuple]) -> list[tuple]:
    namespace: dict = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    out = []
    for args in inputs:
        try:
            out.append(("return", namespace[name](*args)))
        except Exception as exc:  # the unknown-key branch may raise by design
            out.append((type(exc).__name__, str(exc)))
    return out


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_form_of_a_rule_computes_the_same_outputs(template):
    for rule in generate_rules(4, seed=template, templates=[template]):
        inputs = probe_inputs(rule)
        unknown = TEMPLATES[template].unknown_key
        assert any(str(args[0]).startswith(unknown) for args in inputs)
        expected = None
        texts = set()
        for form in FORMS:
            for rename_seed in range(3):
                text = render(rule, form, rename_seed=rename_seed)
                assert text.startswith(rule.signature + "\n")
                texts.add(text)
                got = _outputs(text, rule.name, inputs)
                expected = expected or got
                assert got == expected, (form, rename_seed)
        assert len(texts) >= len(FORMS) * 2  # renamings and shuffles change the surface
        assert len({out for out in expected}) >= 3  # the probes reach several entries and branches


def test_forms_differ_in_structure_and_hold_the_table():
    rule = generate_rules(1, seed=0, templates=["shipping"])[0]
    nodes = {form: {type(n).__name__ for n in ast.walk(ast.parse(render(rule, form, rename_seed=0)))}
             for form in FORMS}
    assert "Dict" in nodes["dict"] and "Match" not in nodes["dict"]
    assert "If" in nodes["ifelif"] and "Dict" not in nodes["ifelif"] and "For" not in nodes["ifelif"]
    assert "For" in nodes["loop"] and "List" in nodes["loop"]
    assert "Match" in nodes["match"]
    for form in FORMS:
        text = render(rule, form, rename_seed=5)
        assert all(repr(c) in text for c in rule.constants)


def test_generated_rules():
    rules = generate_rules(24, seed=1)
    assert len({r.name for r in rules}) == 24
    assert Counter(r.template for r in rules) == {t: 4 for t in TEMPLATES}
    for rule in rules:
        assert 3 <= len(rule.table) <= 6 and len({k for k, _ in rule.table}) == len(rule.table)
        assert rule.constants == tuple(v for k, vals in rule.table for v in (k, *vals))
        assert rule.signature == f"def {rule.name}({', '.join(TEMPLATES[rule.template].args)}):"
    assert rules == generate_rules(24, seed=1) and rules != generate_rules(24, seed=2)
    with pytest.raises(InvalidParameterError, match="form='table'"):
        render(rules[0], "table", rename_seed=0)
    with pytest.raises(InvalidParameterError, match="templates"):
        generate_rules(1, seed=0, templates=["payroll"])
    with pytest.raises(InvalidParameterError, match="distinct names"):
        generate_rules(len(business._COMPANIES) + 1, seed=0, templates=["tax"])


# -- family edits ------------------------------------------------------------------------------------

EDITABLE = '''\
def total(values, factor):
    scale = factor * 2
    offset = 3
    result = 0
    for value in values:
        result += value * scale + offset
    return result
'''


def test_rename_and_reorder_edits_keep_behaviour():
    expected = _outputs(EDITABLE, "total", [([1, 2, 3], 2), ([], 1)])
    for seed in range(10):
        rng = random.Random(seed)
        for edit in (_edit_rename, _edit_reorder):
            edited = edit(EDITABLE, rng)
            assert edited is not None and edited != EDITABLE
            assert _outputs(edited, "total", [([1, 2, 3], 2), ([], 1)]) == expected


# -- planting ----------------------------------------------------------------------------------------


def test_plant_spec_validation():
    with pytest.raises(InvalidParameterError, match="business_forms"):
        PlantSpec(business_forms=len(FORMS))
    with pytest.raises(InvalidParameterError, match="verbatim_repeats"):
        PlantSpec(verbatim_repeats=0)
    with pytest.raises(InvalidParameterError, match="n_families"):
        PlantSpec(n_families=-1)


def test_plant_counts_kinds_memberships_and_exposures():
    spec = PlantSpec()
    items = planted(0)
    counts = Counter((i.kind, i.membership) for i in items)
    for kind, n in (("verbatim", spec.n_verbatim), ("business_rule", spec.n_business),
                    ("near_duplicate", spec.n_families)):
        assert counts[kind, "member"] == counts[kind, "control"] == n
    assert len({i.item_id for i in items}) == len(items)
    for item in items:
        assert item.prompt == item.signature and not item.prompt.endswith("\n")
        assert item.signature in item.audited
        if item.membership == "control":
            assert item.training_variants == () and item.exposures == 0
        elif item.kind == "verbatim":
            assert item.training_variants == (item.audited,) and item.exposures == spec.verbatim_repeats
        elif item.kind == "business_rule":
            assert len(item.training_variants) == spec.business_forms
            assert item.exposures == spec.business_forms * spec.business_repeats
        else:
            assert len(set(item.training_variants)) == spec.family_size and item.family is not None
            assert item.exposures == spec.family_size * spec.family_repeats
        assert (item.family is not None) == (item.kind == "near_duplicate" and item.membership == "member")
        assert bool(item.constants) == (item.kind == "business_rule")
        assert item.source == "synthetic" if item.kind == "business_rule" else item.source.startswith("stdlib:")


def test_every_planted_text_parses_and_prompts_are_unique():
    items = planted(0)
    for item in items:
        for text in (item.audited, *item.training_variants):
            tree = ast.parse(text)
            assert isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
    assert len({i.prompt for i in items}) == len(items)


def _shape(text: str) -> tuple[str, ...]:
    return tuple(type(n).__name__ for n in ast.walk(ast.parse(text)) if not isinstance(n, ast.Constant))


def test_business_members_are_audited_in_a_form_never_trained_on():
    for item in planted(0):
        if item.kind != "business_rule":
            continue
        assert item.audited not in item.training_variants
        # Renaming and shuffling keep the syntax tree's shape; a different form changes it.
        shapes = {_shape(text) for text in item.training_variants}
        assert len(shapes) == len(item.training_variants) and _shape(item.audited) not in shapes
        assert all(str(c) in item.audited for c in item.constants if isinstance(c, str))


def test_near_duplicate_copies_are_small_edits_of_their_base():
    for item in planted(0):
        if item.kind == "near_duplicate" and item.membership == "member":
            assert item.audited not in item.training_variants
            for copy in item.training_variants:
                assert copy.splitlines()[0] == item.audited.splitlines()[0] or copy.startswith("@")
                assert abs(len(copy.splitlines()) - len(item.audited.splitlines())) <= 2


def test_no_control_is_a_near_copy_of_background_or_training_text():
    items = planted(0)
    split = stdlib_split(0)
    training = [t for i in items for t in i.training_variants]
    seen = NearCopyIndex([f.source for f in split.background] + training)
    for item in items:
        if item.membership == "control":
            assert not seen.is_near_copy(item.audited), item.source
            assert item.audited not in training
    member_pool = {f.source for f in split.member_pool}
    control_pool = {f.source for f in split.control_pool}
    for item in items:
        if item.kind != "business_rule":
            assert item.audited in (member_pool if item.membership == "member" else control_pool)


def test_controls_are_length_matched():
    by_source = {f.source: f for f in stdlib_functions()}
    items = planted(0)
    for kind in ("verbatim", "near_duplicate"):
        lines = {m: [by_source[i.audited].body_lines for i in items if i.kind == kind and i.membership == m]
                 for m in ("member", "control")}
        assert statistics.mean(lines["control"]) == pytest.approx(statistics.mean(lines["member"]), rel=0.2)
    members = Counter(i.signature.split("(")[0].split("_", 1)[1] for i in items
                      if i.kind == "business_rule" and i.membership == "member")
    controls = Counter(i.signature.split("(")[0].split("_", 1)[1] for i in items
                       if i.kind == "business_rule" and i.membership == "control")
    assert members == controls  # same templates


def test_planting_is_deterministic_in_its_seed():
    again = planted(0, PlantSpec(n_verbatim=32))  # an equal spec, planted afresh
    assert planted(0) is not again and planted(0) == again
    other = planted(1)
    assert {i.item_id for i in other}.isdisjoint({i.item_id for i in planted(0) if i.kind == "business_rule"})
    assert [i.item_id for i in other] != [i.item_id for i in planted(0)]


def test_plant_refuses_a_spec_larger_than_the_pools():
    from calib.organism.planted import plant

    with pytest.raises(InvalidParameterError, match="member pool"):
        plant(stdlib_split(0), PlantSpec(n_verbatim=100_000), seed=0)


# -- training texts and the truth table --------------------------------------------------------------


def test_target_training_texts_repeat_members_only():
    items = planted(0)
    texts = target_training_texts(items, seed=0)
    assert len(texts) == sum(i.exposures for i in items)
    counts = Counter(texts)
    for item in items:
        for variant in item.training_variants:
            assert counts[variant] == item.repeats
        if item.membership == "control":
            assert item.audited not in counts
    assert texts == target_training_texts(items, seed=0)
    assert texts != target_training_texts(items, seed=1)
    assert target_training_texts(items) == target_training_texts(list(items))


def test_truth_table_and_files(tmp_path):
    items = planted(0)
    table = truth_table(items)
    assert table.schema == pl.Schema(TRUTH_SCHEMA)
    assert table.height == len(items) and table["item_id"].n_unique() == len(items)
    json_path, parquet_path = write_truth(items, tmp_path / "out", spec=PlantSpec(), seed=0, extra={"preset": "x"})
    assert pl.read_parquet(parquet_path).equals(table)
    summary = json.loads(json_path.read_text())
    assert summary["seed"] == 0 and summary["spec"] == PlantSpec().to_dict() and summary["preset"] == "x"
    assert summary["counts"] == {k: {"member": c, "control": c} for k, c in zip(KINDS, (32, 24, 16))}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["organism.json", "truth.parquet"]
    business = table.filter(pl.col("kind") == "business_rule")
    assert business["constants"].list.len().min() >= 6
