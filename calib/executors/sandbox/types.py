"""The sandbox's limits, what a batch gives back, and the error for a host without a sandbox."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from calib._exceptions import CalibError

__all__ = ["Limits", "SandboxRun", "SandboxUnavailable", "base_interpreter"]


class SandboxUnavailable(CalibError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed batch."""

    cpu_seconds: int = 60
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 64
    open_files: int = 256
    tmpfs_bytes: int = 64 << 20
    tmpfs_inodes: int = 8192
    output_bytes: int = 32 << 20


@dataclass(frozen=True)
class SandboxRun:
    """What came back from one batch."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_exceeded: bool
    seconds: float
    wrapped: bool = False  # run by bwrap, which exits with 128 + N when its child dies of signal N
    cpu_seconds: float | None = None  # the batch process's CPU time (known when a fork server ran it)

    @property
    def died(self) -> str | None:
        """Why the process ended early (``timeout``, ``output_limit``, ``signal SIGSEGV`` ...), else None."""
        if self.timed_out:
            return "timeout"
        if self.output_exceeded:
            return "output_limit"
        signum = None
        if self.returncode is not None and self.returncode < 0:
            signum = -self.returncode
        elif self.wrapped and self.returncode is not None and 128 < self.returncode < 128 + 65:
            signum = self.returncode - 128
        if signum is not None:
            try:
                return f"signal {signal.Signals(signum).name}"
            except ValueError:
                return f"signal {signum}"
        if self.returncode:
            return f"exit {self.returncode}"
        return None



def base_interpreter() -> str:
    """The real interpreter (not a venv or pyenv shim): its start-up is what every batch pays."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)

