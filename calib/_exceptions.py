"""The exceptions calib raises. Every one derives from :class:`CalibError`.

The command line turns a :class:`CalibError` into a one-line message on stderr and exit code 2, so
each message must say what was wrong (file, key, line, value) and how to fix it, on one line.
"""

from __future__ import annotations

__all__ = ["CalibError", "InputError", "InvalidParameterError"]


class CalibError(Exception):
    """Root of every error calib raises on purpose."""


class InvalidParameterError(CalibError, ValueError):
    """A parameter has a value outside what is allowed (names the parameter, the value, the range)."""


class InputError(CalibError):
    """A user-supplied file or table is unreadable or holds a bad value.

    Parameters
    ----------
    message
        What is wrong and how to fix it.
    path
        The file, when the problem is in a file.
    line
        The 1-based line (or table row) of the bad value, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
