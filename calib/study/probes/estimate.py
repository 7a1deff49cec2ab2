"""``calib check --estimate`` for a probes study: the generate stage's requests and tokens per panel model.

The tasks are loaded as the ``tasks`` stage loads them and every condition's prompt is built (both
offline); the reference solutions and the rewrites are not run here, so the prompts that reach the
models are at most the applicable ones (a task whose reference fails its tests, or a rewrite that fails
its proof-by-test, is left out by the run). Every panel model answers each prompt with one request for
``[probes] n`` completions of at most ``max_tokens`` tokens.
"""

from __future__ import annotations

from typing import Any

from calib._exceptions import CalibError
from calib.study.estimate import Estimate, Line, offline_context, organism_built, tokens_bound

__all__ = ["estimate"]


def _prompts(spec: Any, tasks: list[Any]) -> list[str]:
    """The applicable prompts of every task under every condition label, as the prompts stage builds them."""
    from calib.probes.prompting import build_prompt
    from calib.study.probes.stages import _bijection, labels

    p = spec.probes
    first = _bijection(spec, p.families[0])
    out = []
    for task in tasks:
        for _, condition, family in labels(spec):
            built = build_prompt(task, condition, style=p.style, bijection=_bijection(spec, family) if family else None,
                                 contract_bijection=first, seed=spec.study.seed, shown_tests=p.shown_tests)
            if built.applicable:
                out.append(built.prompt)
    return out


async def estimate(spec: Any, resources: Any, caps: dict[str, dict[str, Any] | None]) -> Estimate:
    """The prompts and generate stages' requests, tokenizer requests and token bounds per model (see the module)."""
    import asyncio

    from calib.study.probes.stages import _load

    found = Estimate()
    p = spec.probes
    if p.tasks.startswith("organism:") and not organism_built(spec):
        found.notes.append("the organism is not built yet (its first stage builds it): tasks unknown, "
                           "nothing estimated")
        return found
    try:
        tasks = await asyncio.to_thread(_load, offline_context(spec, resources))
    except (CalibError, OSError) as exc:
        found.notes.append(f"tasks: {' '.join(str(exc).split())}; nothing estimated")
        return found
    prompts = await asyncio.to_thread(_prompts, spec, tasks)
    n = len(prompts)
    inputs = sum(tokens_bound(text) for text in prompts)
    found.notes.append(f"prompts: at most {n:,} ({len(tasks):,} tasks; the run leaves out a task whose reference "
                       "fails its tests and a rewrite that fails its proof-by-test)")
    panel = spec.models.probed()
    first_caps = caps.get(panel[0])
    if first_caps is None or first_caps.get("tokenize"):  # prompt lengths in the first model's tokens
        found.lines.append(Line("prompts", panel[0], requests=0, input_tokens=0, output_tokens=0,
                                tokenizer_requests=n, exact={"requests", "input_tokens", "output_tokens"}))
    for name in panel:
        c = caps.get(name)
        budgets = c is None or (bool(c.get("tokenize")) and bool(c.get("max_context")))
        found.lines.append(Line("generate", name, requests=n, input_tokens=inputs, output_tokens=n * p.n * p.max_tokens,
                                tokenizer_requests=n if budgets else 0))
    if p.codec is not None:
        found.notes.append("codec: the CoDeC scoring requests are not estimated")
    return found
