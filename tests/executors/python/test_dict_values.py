"""A local bound to an item of a parameter (``tokens = info[month]``) describes the parameter's values (issue 24 §2).

dateparser's ``LanguageValidator._validate_months`` looks up each month in its ``info`` dict, checks that
the value is a list and that each of its items is a non-empty text: the dicts it drew held numbers only, so
the loop over a month's translations never ran (coverage 0.73 on the second package list's seeds 16-20, the
thirteenth round's tuning sample; ``_validate_weekdays`` and ``_validate_skip_list`` alike).
"""

from __future__ import annotations

import ast
import random

from calib.executors.sandbox.harness import hints, synth

VALIDATE = (
    "def validate(language, info):\n"
    "    problems = []\n"
    "    for month in ('january', 'february', 'march', 'april', 'may', 'june', 'july', 'august',\n"
    "                  'september', 'october', 'november', 'december'):\n"
    "        if month not in info or not info[month]:\n"
    "            problems.append(('missing', month))\n"
    "            continue\n"
    "        tokens = info[month]\n"
    "        if isinstance(tokens, list):\n"
    "            for token in tokens:\n"
    "                if not isinstance(token, str) or not token:\n"
    "                    problems.append(('invalid', month, token))\n"
    "        else:\n"
    "            problems.append(('not a list', month, type(tokens).__name__))\n"
    "    return language, problems\n"
)


def test_the_use_of_a_looked_up_value_describes_the_values_of_the_dict() -> None:
    info = hints.analyse(ast.parse(VALIDATE).body[0], skip_first=False)
    param = next(p for p in info.params if p.name == "info")
    assert param.keys[:3] == ["january", "february", "march"] and len(param.keys) == 12
    assert param.item is not None and "list" in param.item.types and "str" in param.item.element
    pool = synth.Pools(info, random.Random(0)).by_param["info"]
    keyed = [d for d in pool if isinstance(d, dict) and set(d) == set(param.keys)]
    # dicts whose values are drawn as the body uses them: lists of texts, besides those of numbers
    assert any(any(isinstance(v, list) and v and all(isinstance(t, str) for t in v) for v in d.values())
               for d in keyed)
    # the end-to-end evidence is the measured sample: dateparser's three validators became conclusive
    # (docs/executors.md, "Measured"); a function this small was reached by mutation before too
