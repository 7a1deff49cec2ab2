"""Shared pieces of the ``calib stats`` subcommands: the --json flag, output, error translation."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from calib._exceptions import InvalidParameterError
from calib.stats._result import plain

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
confidence_option = click.option(
    "--confidence", type=float, default=0.95, show_default=True, help="Confidence level, in (0, 1)."
)


def translate_errors(func: F) -> F:
    """Turn the ``ValueError`` calib.stats raises for a bad parameter into a one-line CalibError."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InvalidParameterError:
            raise
        except ValueError as exc:
            raise InvalidParameterError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def emit(record: dict[str, Any], as_json: bool, summary: Callable[[dict[str, Any]], str]) -> None:
    """Print ``record`` as one JSON object, or the human summary of it."""
    data = plain(record)
    if as_json:
        click.echo(json.dumps(data, allow_nan=False))
    else:
        click.echo(summary(data))


def pct(x: float | None) -> str:
    """A rate as a percentage with enough digits for levels such as 5/5001."""
    return "n/a" if x is None else f"{100 * x:.4g}%"
