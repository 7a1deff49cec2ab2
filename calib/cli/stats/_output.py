"""Shared pieces of the ``calib stats`` subcommands: the --json flag, output, error translation."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from calib._exceptions import InvalidParameterError
from calib.stats import plain

F = TypeVar("F", bound=Callable[..., Any])

#: The largest count (controls, candidates, trials, characters) the subcommands take. The statistics are
#: computed in double precision: beyond about 10^15 the Beta law's quantiles come out NaN, and planning
#: the controls for 10^14 candidates already takes tens of seconds, so calib stops at 10^12.
MAX_COUNT = 10**12


class Count(click.ParamType):
    """A whole number in ``[minimum, MAX_COUNT]``; may be written ``1e6`` or ``1_000_000``."""

    name = "integer"

    def __init__(self, minimum: int = 0, maximum: int = MAX_COUNT) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            try:
                number = int(text)
            except ValueError:
                try:
                    as_float = float(text)
                except ValueError:
                    self.fail(f"{text!r} is not a whole number", param, ctx)
                if not math.isfinite(as_float) or not as_float.is_integer():
                    self.fail(f"{text!r} is not a whole number", param, ctx)
                number = int(as_float)
        if number < self.minimum:
            self.fail(f"{value!r} is below {self.minimum}; give a count >= {self.minimum}", param, ctx)
        if number > self.maximum:
            limit = f"{self.maximum:.0e}".replace("e+", "e")
            self.fail(f"{value!r} is above {limit}, the largest count calib computes with (its statistics are in "
                      "double precision); give a smaller count", param, ctx)
        return number


class Probability(click.ParamType):
    """A finite number in (0, 1), or in (0, 1] with ``one=True``; NaN and infinities are refused."""

    name = "probability"

    def __init__(self, one: bool = False) -> None:
        self.one = one

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (0.0 < number < 1.0 or (self.one and number == 1.0)):
            where = "(0, 1]" if self.one else "(0, 1)"
            self.fail(f"{value!r} is not in {where}; give a probability such as 0.95", param, ctx)
        return number


json_option = click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
confidence_option = click.option(
    "--confidence", type=Probability(), default=0.95, show_default=True, help="Confidence level, in (0, 1)."
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
