"""Tasks from the model organism: its planted business rules, with tests, as a probes benchmark.

Each business rule of the organism (``calib.organism.business``) is a function whose hidden table only
a model trained on it can know: the target model (trained on the members' rules) can pass their tests,
the reference cannot, and neither can pass the controls' (rules nobody trained on). That makes the
organism a benchmark with known contamination, on which the scale-aware probes can be run end to end
without downloading anything: ``tasks = "organism:business"`` in ``[probes]``.

A task's tests are the rule's probe inputs (every table entry and the unknown key, with each probe
value of its template; ``calib.organism.business.probe_inputs``) and the value the audited rendering
returns on them; probes on which it raises are left out (an ``assert f(...) == v`` test needs a value).
The rule's source is calib's own generated code, so it is run here, in process, to compute them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from calib.organism.business import TEMPLATES, BusinessRule, probe_inputs
from calib.probes.tasks import Task

__all__ = ["STATEMENTS", "business_tasks"]

#: What each template's function does, in words (the hidden table is what a model must know).
STATEMENTS: dict[str, str] = {
    "shipping": "Write a function that returns the shipping cost of a parcel of the given weight to the given city, "
                "using the company's rate table (free weight threshold, base fee, rate per extra kilogram).",
    "tax": "Write a function that returns the regional tax due on an amount in the given region, using the "
           "company's table of tax-free allowances and rates.",
    "discount": "Write a function that returns the checkout total after the discount the company gives for the "
                "payment method (a percentage, capped).",
    "speed": "Write a function that returns the speed limit on the given road type, for trucks or for cars, "
             "using the company's table.",
    "card": "Write a function that returns the card network of a card number from its first two digits, checking "
            "the number's length.",
    "fee": "Write a function that returns the fee for a number of months of the given subscription tier, after "
           "the tier's free months.",
}


def _template_of(name: str) -> str | None:
    for template in TEMPLATES.values():
        if name.endswith("_" + template.stem):
            return template.name
    return None


def _entry_point(code: str) -> str:
    tree = ast.parse(code)
    return next(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def _tests(code: str, entry_point: str, rule: BusinessRule) -> list[str]:
    namespace: dict[str, Any] = {}
    exec(compile(code, f"<organism rule {entry_point}>", "exec"), namespace)  # noqa: S102 - calib's own rule
    function = namespace[entry_point]
    tests = []
    for args in probe_inputs(rule):
        try:
            value = function(*args)
        except Exception:  # noqa: BLE001, S112 - a probe on which the rule raises has no value to assert
            continue
        tests.append(f"assert {entry_point}({', '.join(repr(a) for a in args)}) == {value!r}")
    return tests


def business_tasks(truth: pl.DataFrame | str | Path, *, memberships: Sequence[str] = ("member", "control")
                   ) -> list[Task]:
    """One :class:`~calib.probes.tasks.Task` per business rule of the organism's truth table.

    ``task_id`` is ``MEMBERSHIP-ITEM_ID`` (so a report can tell trained rules from controls); the
    statement is the template's description, the code the audited rendering, the tests its probe values.
    """
    frame = truth if isinstance(truth, pl.DataFrame) else pl.read_parquet(truth)
    rows = frame.filter((pl.col("kind") == "business_rule") & pl.col("membership").is_in(list(memberships)))
    tasks = []
    for row in rows.sort(["membership", "item_id"], descending=[True, False]).iter_rows(named=True):
        code = row["audited"]
        entry_point = _entry_point(code)
        template = _template_of(entry_point)
        if template is None:
            continue
        keys = [c for c in row["constants"] if c in TEMPLATES[template].keys]
        rule = BusinessRule(entry_point, row["signature"], template, tuple((k, ()) for k in keys), ())
        tests = _tests(code, entry_point, rule)
        if len(tests) < 2:
            continue
        tasks.append(Task(task_id=f"{row['membership']}-{row['item_id']}", prompt=STATEMENTS[template], code=code,
                          entry_point=entry_point, tests=tuple(tests), setup="", source="organism:business"))
    return tasks
