"""``[probes]``: the scale-aware diagnostics study (``study.kind = "probes"``; docs/probes.md).

docs/study-spec.md documents every key; :class:`calib.study.spec.StudySpec` composes this section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from calib.study.sections import Section

__all__ = ["CONDITIONS", "FAMILIES", "ISO_CONDITIONS", "BijectionSettings", "CodecDataset", "CodecSection",
           "ProbesSection"]

#: Every condition a probes study can run; ``original`` is always run (the others are compared with it).
CONDITIONS: tuple[str, ...] = ("original", "syn20", "syn40", "dead_code", "iso", "iso_enc", "iso_dec")
#: The conditions that rewrite the task through a bijection (one run per family).
ISO_CONDITIONS: tuple[str, ...] = ("iso", "iso_enc", "iso_dec")
FAMILIES: tuple[str, ...] = ("affine", "base", "cubic")


class BijectionSettings(Section):
    """``[probes.bijection]``: the parameters of the three families (paper §5.4, §7.1)."""

    affine_a: int = Field(default=3, ge=-10**9, le=10**9)
    affine_b: int = Field(default=5, ge=-10**9, le=10**9)
    base: int = Field(default=7, ge=2, le=36)
    cubic_c: int = Field(default=1, ge=-10**9, le=10**9)

    @model_validator(mode="after")
    def _valid(self) -> BijectionSettings:
        if self.affine_a == 0:
            raise ValueError("affine_a must not be 0 (t -> 0*t + b is not invertible)")
        if self.base == 10:
            raise ValueError("base must not be 10 (reading decimal digits in base 10 changes nothing)")
        return self


class CodecDataset(Section):
    """One ``[[probes.codec.datasets]]`` entry: a set of texts, known seen or unseen by the models."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    source: str = Field(min_length=1)
    seen: bool
    text_column: str = "text"
    limit: int = Field(default=0, ge=0, le=10**9)


class CodecSection(Section):
    """``[probes.codec]``: the decoder-side likelihood probe (Zawalski et al. 2025; paper §5.3)."""

    datasets: tuple[CodecDataset, ...] = Field(min_length=2)
    n_context: int = Field(default=3, ge=1, le=1_000)
    separator: str = "\n\n"
    concurrency: int = Field(default=4, ge=1, le=4_096)

    @model_validator(mode="after")
    def _both_sides(self) -> CodecSection:
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ValueError("two codec datasets share a name")
        if not any(d.seen for d in self.datasets) or all(d.seen for d in self.datasets):
            raise ValueError("datasets: the AUC needs at least one seen = true and one seen = false dataset")
        return self


class ProbesSection(Section):
    """``[probes]``: tasks, conditions, generation and measures of a probes study."""

    tasks: str = "mbpp"
    limit: int = Field(default=0, ge=0, le=10**9)
    conditions: tuple[Literal["original", "syn20", "syn40", "dead_code", "iso", "iso_enc", "iso_dec"], ...] = \
        CONDITIONS  # type: ignore[assignment]
    families: tuple[Literal["affine", "base", "cubic"], ...] = ("affine",)
    bijection: BijectionSettings = BijectionSettings()
    style: Literal["mbpp", "completion"] = "mbpp"
    shown_tests: int = Field(default=3, ge=0, le=1_000)
    n: int = Field(default=5, ge=1, le=10_000)
    k: tuple[int, ...] = (1,)
    temperature: float = Field(default=0.0, ge=0.0, le=100.0)
    max_tokens: int = Field(default=512, ge=1, le=1_000_000)
    stop: tuple[str, ...] = ()
    bootstrap: int = Field(default=10_000, ge=100, le=10_000_000)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    test_timeout: float = Field(default=5.0, gt=0.0, le=3_600.0)
    workers: int = Field(default=0, ge=0, le=4_096)
    concurrency: int = Field(default=8, ge=1, le=4_096)
    unsafe_no_sandbox: bool = False
    codec: CodecSection | None = None

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value: str) -> str:
        if value.startswith("organism:") and value != "organism:business":
            raise ValueError(f"tasks = {value!r}: the organism's tasks are 'organism:business'")
        return value

    @field_validator("conditions")
    @classmethod
    def _conditions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("a condition is listed twice")
        if "original" not in value:
            raise ValueError("conditions must include 'original' (every other condition is compared with it)")
        return value

    @field_validator("families")
    @classmethod
    def _families(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or len(set(value)) != len(value):
            raise ValueError(f"families must list distinct bijection families of {list(FAMILIES)}")
        return value

    @field_validator("k")
    @classmethod
    def _k(cls, value: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        n = info.data.get("n", 1)
        if not value or len(set(value)) != len(value) or any(k < 1 or k > n for k in value):
            raise ValueError(f"k must list distinct attempts, each in [1, n] = [1, {n}] (pass@k needs n >= k)")
        return value
