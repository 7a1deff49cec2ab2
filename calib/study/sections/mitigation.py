"""``[mitigation]``: post-training the target away from an audit's memorized functions (``study.kind =
"mitigation"``; docs/mitigation.md).

docs/study-spec.md documents every key; :class:`calib.study.spec.StudySpec` composes this section.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from calib.study.sections import Section

__all__ = ["METHODS", "MitigationSection"]

#: NPO and the paper's three DPO variants (the source of the preferred completion after the dash).
METHODS: tuple[str, ...] = ("npo", "dpo-ref", "dpo-target", "dpo-rewrite")


class MitigationSection(Section):
    """``[mitigation]``: the audit to mitigate, the methods and their post-training settings (paper App. H)."""

    audit: str = Field(min_length=1)
    methods: tuple[str, ...] = Field(default=("npo", "dpo-ref"), min_length=1)
    rewriter: str | None = None
    epochs: int = Field(default=10, ge=1, le=1_000)
    save_epochs: tuple[int, ...] = Field(default=(2, 4, 6, 8, 10), min_length=1)
    npo_learning_rate: float = Field(default=1e-5, gt=0.0, le=1.0)
    dpo_learning_rate: float = Field(default=3e-5, gt=0.0, le=1.0)
    batch_size: int = Field(default=8, ge=1, le=4_096)
    beta: float = Field(default=0.1, gt=0.0, le=100.0)
    lora_r: int = Field(default=32, ge=1, le=4_096)
    lora_alpha: int = Field(default=32, ge=1, le=65_536)
    lora_dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    retain_prompts: int = Field(default=200, ge=0, le=10**6)
    holdout: float = Field(default=0.0, ge=0.0, lt=1.0)
    benchmarks: tuple[str, ...] = ()
    benchmark_limit: int = Field(default=0, ge=0, le=10**6)
    benchmark_max_tokens: int = Field(default=512, ge=1, le=1_000_000)
    threads: int | None = Field(default=None, ge=1, le=1_024)

    @model_validator(mode="after")
    def _valid(self) -> MitigationSection:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"methods: {unknown} are not methods; use {list(METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise ValueError("methods: a method is listed twice")
        bad = [e for e in self.save_epochs if not 1 <= e <= self.epochs]
        if bad:
            raise ValueError(f"save_epochs: {bad} lie outside 1..epochs ({self.epochs})")
        if list(self.save_epochs) != sorted(set(self.save_epochs)):
            raise ValueError("save_epochs: list each epoch once, in increasing order")
        if any(not b.strip() for b in self.benchmarks) or len(set(self.benchmarks)) != len(self.benchmarks):
            raise ValueError("benchmarks: name each benchmark once (\"humaneval\", \"mbpp\", a task file or "
                             "\"organism:business\")")
        if "dpo-rewrite" in self.methods and self.rewriter is None:
            raise ValueError("rewriter: method dpo-rewrite needs rewriter = \"NAME\" (a chat server of [servers])")
        return self
