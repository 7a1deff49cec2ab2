"""Tests of the model organism. The standard-library corpus is loaded and split once per session."""

from __future__ import annotations

import functools

from calib.organism.corpus import CorpusSplit, Function, load_stdlib_functions, split_corpus
from calib.organism.planted import PlantedItem, PlantSpec, plant


@functools.lru_cache(maxsize=None)
def stdlib_functions() -> tuple[Function, ...]:
    """The default corpus (body lines 3-40), loaded once."""
    return tuple(load_stdlib_functions())


@functools.lru_cache(maxsize=None)
def stdlib_split(seed: int = 0) -> CorpusSplit:
    """The default split of :func:`stdlib_functions`."""
    return split_corpus(stdlib_functions(), seed=seed)


@functools.lru_cache(maxsize=None)
def planted(seed: int = 0, spec: PlantSpec | None = None) -> tuple[PlantedItem, ...]:
    """The items planted in :func:`stdlib_split` with ``spec``."""
    return tuple(plant(stdlib_split(0), spec or PlantSpec(), seed=seed))
