"""Synthetic "business rule" functions: one hidden table, several surface forms of the same logic.

The paper's central example (functional-memorization, Figure 1) is a function that hard-codes values
for specific cities; the target model reproduces the logic in a restructured implementation. Each
:class:`BusinessRule` here is one such function: a template (shipping cost, tax, payment discount,
speed limit, card network, subscription fee), a fixed signature, and a random table of 3-6 entries
keyed by words from a fixed list. :func:`render` writes the same logic in one of :data:`FORMS`:

- ``dict``: a dict of tuples and a lookup (``in`` test or ``.get``);
- ``ifelif``: an ``if``/``elif`` chain assigning the fields;
- ``loop``: a list of tuples scanned by a ``for`` loop;
- ``match``: a ``match`` statement assigning the fields.

Every rendering renames the local variables and shuffles the entries with ``rename_seed``. All forms
of a rule return the same value (or raise the same exception) on every input; :func:`probe_inputs`
lists inputs that reach every entry and the unknown-key branch.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from calib._exceptions import InvalidParameterError

__all__ = [
    "BusinessRule",
    "FORMS",
    "TEMPLATES",
    "Template",
    "generate_rules",
    "probe_inputs",
    "render",
]

FORMS: tuple[str, ...] = ("dict", "ifelif", "loop", "match")

Value = int | float | str


@dataclass(frozen=True)
class Template:
    """One kind of business rule.

    ``compute`` is the logic after the lookup, with ``$field`` standing for the (renamed) local that
    holds each field; ``missing`` is the statement for an unknown key (it must return or raise).
    """

    name: str
    stem: str
    args: tuple[str, ...]
    key_expr: str
    keys: tuple[str, ...]
    unknown_key: str
    fields: tuple[tuple[str, tuple[str, ...]], ...]
    values: Callable[[random.Random], tuple[Value, ...]]
    compute: tuple[str, ...]
    missing: str
    probes: tuple[tuple[Value, ...], ...]


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def _speeds(rng: random.Random) -> tuple[int, int]:
    car = rng.randrange(30, 140, 10)
    return car, car - rng.randrange(0, 40, 10)


_CITIES = ("Amsterdam", "Athens", "Berlin", "Bologna", "Bordeaux", "Brno", "Cork", "Dresden", "Gdansk",
           "Geneva", "Ghent", "Graz", "Lille", "Lisbon", "Lyon", "Madrid", "Malmo", "Milan", "Munich",
           "Nantes", "Oslo", "Porto", "Prague", "Riga", "Seville", "Tallinn", "Turin", "Valencia",
           "Vienna", "Zurich")
_REGIONS = ("Alberta", "Bavaria", "Brittany", "Catalonia", "Flanders", "Galicia", "Hesse", "Lapland",
            "Lombardy", "Moravia", "Normandy", "Ontario", "Provence", "Quebec", "Saxony", "Silesia",
            "Styria", "Tuscany", "Tyrol", "Umbria", "Valais", "Wales", "Yukon", "Zeeland")
_METHODS = ("alipay", "apple_pay", "bank_transfer", "bitcoin", "cash", "cheque", "credit_card", "debit_card",
            "gift_card", "google_pay", "ideal", "invoice", "klarna", "paypal", "sepa", "sofort", "voucher")
_ROADS = ("alley", "avenue", "boulevard", "bridge", "country_road", "expressway", "freeway", "gravel",
          "highway", "motorway", "residential", "ring_road", "school_zone", "service_road", "tunnel")
_PREFIXES = tuple(str(n) for n in range(30, 70))
_NETWORKS = ("amex", "diners", "discover", "elo", "jcb", "maestro", "mastercard", "mir", "rupay", "troy",
             "unionpay", "visa")
_TIERS = ("basic", "bronze", "business", "diamond", "enterprise", "family", "gold", "plus", "premium",
          "pro", "silver", "starter", "student", "team", "titanium", "ultimate")

TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "shipping", "shipping_cost", ("city", "weight"), "city", _CITIES, "Atlantis",
            (("threshold", ("threshold", "free_upto", "limit_kg", "cutoff")),
             ("base", ("base", "flat", "base_fee", "minimum")),
             ("rate", ("rate", "per_kg", "extra", "surcharge"))),
            lambda r: (r.randint(1, 20), _money(r, 2, 15), _money(r, 0.1, 3)),
            ("if weight <= $threshold:", "    return $base", "return round($base + (weight - $threshold) * $rate, 2)"),
            "raise ValueError('no shipping to ' + city)",
            ((0.5,), (7,), (18.25,), (60,)),
        ),
        Template(
            "tax", "regional_tax", ("region", "amount"), "region", _REGIONS, "Narnia",
            (("allowance", ("allowance", "exempt", "threshold", "free")),
             ("rate", ("rate", "pct", "tax_rate", "factor"))),
            lambda r: (r.randrange(0, 5000, 50), round(r.uniform(0.01, 0.3), 3)),
            ("if amount <= $allowance:", "    return 0.0", "return round((amount - $allowance) * $rate, 2)"),
            "raise KeyError(region)",
            ((0,), (120.0,), (2500,), (9999.99,)),
        ),
        Template(
            "discount", "checkout_total", ("method", "total"), "method", _METHODS, "barter",
            (("pct", ("pct", "percent", "off", "discount")),
             ("cap", ("cap", "max_off", "ceiling", "limit"))),
            lambda r: (r.randint(1, 30), r.randint(5, 100)),
            ("return round(total - min(total * $pct / 100, $cap), 2)",),
            "return total",
            ((9.99,), (100,), (480.5,), (2000,)),
        ),
        Template(
            "speed", "speed_limit", ("road", "is_truck"), "road", _ROADS, "skyway",
            (("car", ("car", "normal", "default", "limit")),
             ("truck", ("truck", "heavy", "hgv", "lorry"))),
            _speeds,
            ("if is_truck:", "    return $truck", "return $car"),
            "return 50",
            ((True,), (False,)),
        ),
        Template(
            "card", "card_network", ("number",), "number[:2]", _PREFIXES, "00",
            (("network", ("network", "brand", "issuer", "scheme")),
             ("length", ("length", "digits", "size", "n_digits"))),
            lambda r: (r.choice(_NETWORKS), r.randint(13, 19)),
            ("if len(number) == $length:", "    return $network", "return 'invalid'"),
            "return 'unknown'",
            tuple((n,) for n in (2, 12, 13, 14, 15, 16, 17, 18, 19, 20)),
        ),
        Template(
            "fee", "monthly_fee", ("tier", "months"), "tier", _TIERS, "legacy",
            (("fee", ("fee", "price", "monthly", "charge")),
             ("free", ("free", "trial", "grace", "free_months"))),
            lambda r: (_money(r, 1, 99), r.randint(0, 6)),
            ("return round(max(0, months - $free) * $fee, 2)",),
            "raise ValueError('unknown tier: ' + tier)",
            ((0,), (1,), (5,), (24,)),
        ),
    )
}

_COMPANIES = ("acme", "apex", "atlas", "aurora", "beacon", "bluebird", "cascade", "cedar", "cobalt", "comet",
              "crescent", "delta", "ember", "falcon", "fjord", "globex", "granite", "harbor", "horizon",
              "initech", "juniper", "keystone", "lumen", "maple", "meridian", "nimbus", "northwind", "oak",
              "orbit", "pinnacle", "quartz", "redwood", "sierra", "summit", "tandem", "umbra", "vertex",
              "willow", "zenith", "zephyr")
_TABLE_NAMES = ("table", "rules", "lookup", "entries", "config", "params", "mapping", "settings")
_KEY_NAMES = ("name", "key", "option", "label", "item", "candidate")
_ENTRY_NAMES = ("entry", "found", "row", "record", "result", "hit")


@dataclass(frozen=True)
class BusinessRule:
    """One synthetic business-rule function: its name, signature, template and hidden table.

    ``table`` holds ``(key, values)`` pairs in generation order; ``constants`` flattens it (each key
    followed by its values), the facts a target that memorized the logic would reproduce.
    """

    name: str
    signature: str
    template: str
    table: tuple[tuple[str, tuple[Value, ...]], ...]
    constants: tuple[Value, ...]


def generate_rules(n: int, *, seed: int | str, templates: Sequence[str] | None = None,
                   exclude_names: Sequence[str] = ()) -> list[BusinessRule]:
    """``n`` rules with distinct names, cycling through ``templates`` (default: all, shuffled).

    Each rule draws 3-6 distinct keys from its template's word list and random values for them.
    """
    names = list(templates) if templates is not None else sorted(TEMPLATES)
    unknown = [t for t in names if t not in TEMPLATES]
    if unknown or not names:
        raise InvalidParameterError(f"templates={names!r}: choose from {sorted(TEMPLATES)}")
    if n < 0:
        raise InvalidParameterError(f"n={n} must be >= 0")
    rng = random.Random(f"calib.organism.business:{seed}")
    if templates is None:
        rng.shuffle(names)
    taken = set(exclude_names)
    rules = []
    for i in range(n):
        template = TEMPLATES[names[i % len(names)]]
        free = [c for c in _COMPANIES if f"{c}_{template.stem}" not in taken]
        if not free:
            raise InvalidParameterError(
                f"n={n}: only {len(_COMPANIES)} distinct names per template; ask for fewer rules"
            )
        name = f"{rng.choice(free)}_{template.stem}"
        taken.add(name)
        keys = rng.sample(template.keys, rng.randint(3, 6))
        table = tuple((key, template.values(rng)) for key in keys)
        constants = tuple(v for key, values in table for v in (key, *values))
        rules.append(BusinessRule(name, f"def {name}({', '.join(template.args)}):", template.name, table, constants))
    return rules


def probe_inputs(rule: BusinessRule) -> list[tuple[Value, ...]]:
    """Argument tuples that reach every table entry (with each probe value) and the unknown key."""
    template = TEMPLATES[rule.template]
    keys = [key for key, _ in rule.table] + [template.unknown_key]
    if template.name == "card":
        # The key is the number's first two digits; the probes are the number's lengths.
        return [((key + "0123456789" * 2)[: int(probe[0])],) for key in keys for probe in template.probes]
    return [(key, *probe) for key in keys for probe in template.probes]


def _indent(lines: Sequence[str], levels: int) -> list[str]:
    return ["    " * levels + line for line in lines]


def render(rule: BusinessRule, form: str, *, rename_seed: int | str) -> str:
    """The source of ``rule`` written in ``form`` (one of :data:`FORMS`), ending in a newline.

    ``rename_seed`` picks the local variable names, the entry order and small syntactic variants.
    """
    if form not in FORMS:
        raise InvalidParameterError(f"form={form!r}: choose from {list(FORMS)}")
    template = TEMPLATES[rule.template]
    rng = random.Random(f"calib.organism.render:{rule.name}:{form}:{rename_seed}")
    used = set(template.args)
    local: dict[str, str] = {}
    for field, synonyms in template.fields:
        local[field] = rng.choice([s for s in synonyms if s not in used])
        used.add(local[field])
    table_name = rng.choice([s for s in _TABLE_NAMES if s not in used])
    key_name = rng.choice([s for s in _KEY_NAMES if s not in used])
    entry_name = rng.choice([s for s in _ENTRY_NAMES if s not in used])
    entries = list(rule.table)
    rng.shuffle(entries)
    compute = [string.Template(line).substitute(local) for line in template.compute]
    fields = ", ".join(local[field] for field, _ in template.fields)
    key = template.key_expr

    def values(vals: tuple[Value, ...]) -> str:
        return ", ".join(repr(v) for v in vals)

    body: list[str]
    if form == "dict":
        body = [f"{table_name} = {{"] + [f"    {k!r}: ({values(v)}),"for k, v in entries] + ["}"]
        if rng.random() < 0.5:
            body += [f"if {key} not in {table_name}:", f"    {template.missing}", f"{fields} = {table_name}[{key}]"]
        else:
            body += [f"{entry_name} = {table_name}.get({key})", f"if {entry_name} is None:",
                     f"    {template.missing}", f"{fields} = {entry_name}"]
        body += compute
    elif form == "ifelif":
        body = []
        for i, (k, v) in enumerate(entries):
            body += [f"{'if' if i == 0 else 'elif'} {key} == {k!r}:", f"    {fields} = {values(v)}"]
        body += ["else:", f"    {template.missing}"] + compute
    elif form == "loop":
        body = [f"{table_name} = ["] + [f"    ({k!r}, {values(v)})," for k, v in entries] + ["]"]
        body += [f"for {key_name}, {fields} in {table_name}:", f"    if {key_name} == {key}:"]
        body += _indent(compute, 2) + [template.missing]
    else:
        body = [f"match {key}:"]
        for k, v in entries:
            body += [f"    case {k!r}:", f"        {fields} = {values(v)}"]
        body += ["    case _:", f"        {template.missing}"] + compute
    return "\n".join([rule.signature] + _indent(body, 1)) + "\n"
