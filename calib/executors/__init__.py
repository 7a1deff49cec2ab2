"""Executors: run a reference function and its candidates on the same input states (docs/architecture.md "Seams").

:class:`SandboxExecutor` (kind ``sandbox``) is the deterministic executor: scaffolding from the file
context, input synthesis, bubblewrap. :mod:`calib.executors.llm` (the paper's non-agentic levels) and
:mod:`calib.executors.agent` (a tool-use loop) put a chat model in charge of the scaffolding and the
inputs while calib runs everything and decides; :mod:`calib.executors.native` (kinds ``native-c``,
``native-cpp``, ``native-java``, ``native-rust``, ``native-go``) compiles and compares functions in
other languages. Build one by kind with :func:`create_executor`; results are
:class:`Comparison` objects, rows of the executions table come from :func:`execution_rows`.
See docs/executors.md.
"""

from __future__ import annotations

from calib.executors.base import (
    EXECUTIONS_SCHEMA,
    NO_GENERATION,
    CandidateResult,
    Comparison,
    Executor,
    ExecutorConfig,
    InputResult,
    create_executor,
    execution_rows,
    register,
)
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import Limits, Sandbox, SandboxUnavailable

__all__ = [
    "CandidateResult",
    "Comparison",
    "EXECUTIONS_SCHEMA",
    "Executor",
    "ExecutorConfig",
    "InputResult",
    "Limits",
    "NO_GENERATION",
    "Sandbox",
    "SandboxExecutor",
    "SandboxUnavailable",
    "create_executor",
    "execution_rows",
    "register",
]
