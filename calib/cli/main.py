"""The ``calib`` click group and the entry point that turns errors into one-line messages.

Errors a user can fix (a :class:`~calib.CalibError`, a bad option or argument) end the program with
one line on stderr and exit code 2; ``--debug`` (or ``CALIB_DEBUG=1``) shows the traceback instead.
So do the errors the system reports about a user's files, which no command anticipated: an
:class:`OSError` (a path that is a folder, unwritable, missing, a full disk) becomes one line naming the
path and what to do, a :class:`UnicodeDecodeError` one line saying the input is not UTF-8 text. Any other
exception is a bug in calib and keeps its traceback (exit code 1), as does ``KeyboardInterrupt`` (which
click turns into ``calib: aborted``).
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click

from calib._exceptions import CalibError
from calib._version import __version__

EXIT_USAGE = 2

#: Every command: name -> ``module:attribute``. A command's module is imported only when that command runs
#: (or its help is shown), so ``calib serve`` does not pay for the statistics stack and ``calib stats``
#: does not pay for the servers: each costs seconds of start-up otherwise.
COMMANDS = {
    "check": "calib.cli.study:check",
    "cluster": "calib.cli.cluster:cluster",
    "compare": "calib.cli.compare:compare",
    "compare-runs": "calib.cli.compare_runs:compare_runs",
    "dedup": "calib.cli.dedup:dedup",
    "executors": "calib.cli.executors:executors",
    "extract": "calib.cli.extract:extract",
    "mitigate": "calib.cli.mitigate:mitigate",
    "organism": "calib.cli.organism:organism",
    "report": "calib.cli.report:report",
    "serve": "calib.cli.serve:serve",
    "similarity": "calib.cli.similarity:similarity",
    "stats": "calib.cli.stats:stats",
    "study": "calib.cli.study:study",
}


class _LazyCommands(dict):  # type: ignore[type-arg]
    """The group's command table: a value is a :class:`click.Command` or, until first looked up, the
    ``module:attribute`` that defines it. Every read resolves, so ``cli.commands`` reads as click's own."""

    @staticmethod
    def _load(name: str, target: str) -> click.Command:
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if command.name != name:
            raise RuntimeError(f"calib: command {name!r} is defined as {command.name!r} in {module}")
        return command

    def __getitem__(self, name: str) -> click.Command:
        value = dict.__getitem__(self, name)
        if isinstance(value, str):
            value = self._load(name, value)
            dict.__setitem__(self, name, value)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def values(self) -> Iterator[click.Command]:  # type: ignore[override]
        return iter([self[name] for name in list(self)])

    def items(self) -> Iterator[tuple[str, click.Command]]:  # type: ignore[override]
        return iter([(name, self[name]) for name in list(self)])

    def pop(self, name: str, *default: Any) -> Any:
        if name in self:
            value = self[name]
            dict.pop(self, name)
            return value
        return dict.pop(self, name, *default)



@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="calib")
@click.option("--debug", is_flag=True, help="Show the full traceback when an error stops calib.")
def cli(debug: bool) -> None:
    """Audit language models for memorization of their training data.

    Every rate calib reports comes with the false-positive rate it certifies and an interval.
    Documentation: docs/ in the source tree (docs/cli.md lists every command).
    """


cli.commands = _LazyCommands(COMMANDS)


def _debug_requested(args: Sequence[str]) -> bool:
    if os.environ.get("CALIB_DEBUG", "") not in ("", "0"):
        return True
    return "--debug" in args


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: What to do about an OSError, by errno (the rest get "check the path").
_OS_HINTS = {
    errno.EACCES: "check its permissions or choose another path",
    errno.EPERM: "check its permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose another path",
    errno.ENOENT: "check that the path (and its folder) exists",
    errno.EISDIR: "it is a folder; give a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder; fix the path",
    errno.EEXIST: "something is already there; move it away or choose another path",
    errno.ENOSPC: "the disk is full; free space or choose another path",
    errno.EDQUOT: "the disk quota is exceeded; free space or choose another path",
    errno.ENAMETOOLONG: "the name is too long; shorten it",
}


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the path(s) it names, the system's reason and what to do."""
    where = ""
    if exc.filename is not None:
        where = f"{os.fsdecode(exc.filename)}: "
        if exc.filename2 is not None:
            where = f"{os.fsdecode(exc.filename)} -> {os.fsdecode(exc.filename2)}: "
    reason = exc.strerror or str(exc) or type(exc).__name__
    hint = _OS_HINTS.get(exc.errno or 0, "check the path" if exc.filename is not None else "")
    return _one_line(f"{where}{reason}{'; ' + hint if hint else ''}")


def decode_error_line(exc: UnicodeDecodeError) -> str:
    """One line for undecodable input: which byte, and that calib reads text files as UTF-8."""
    byte = exc.object[exc.start : exc.start + 1].hex()
    return (f"an input file is not UTF-8 text (byte 0x{byte} at offset {exc.start}); give a text file "
            f"saved as UTF-8 (--debug shows which file was being read)")


def main(args: Sequence[str] | None = None) -> None:
    """Run the ``calib`` command line; exits the process with the command's status."""
    argv = list(sys.argv[1:] if args is None else args)
    debug = _debug_requested(argv)
    try:
        rv = cli.main(args=argv, prog_name="calib", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("calib: aborted", err=True)
        sys.exit(1)
    except click.exceptions.NoArgsIsHelpError as exc:
        # A group called without a command: show its help, as a user asking for it would see it.
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
        sys.exit(0)
    except click.UsageError as exc:
        if debug:
            raise
        command = exc.ctx.command_path if exc.ctx is not None else "calib"
        hint = f" (see '{command} --help')"
        click.echo(f"{command}: error: {_one_line(exc.format_message())}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        if debug:
            raise
        click.echo(f"calib: error: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code if exc.exit_code != 1 else EXIT_USAGE)
    except CalibError as exc:
        if debug:
            raise
        click.echo(f"calib: error: {_one_line(str(exc))}", err=True)
        sys.exit(getattr(exc, "exit_code", EXIT_USAGE))  # a [budget] cap: 4 (docs/cli.md)
    except UnicodeDecodeError as exc:
        if debug:
            raise
        click.echo(f"calib: error: {decode_error_line(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        if debug:
            raise
        click.echo(f"calib: error: {os_error_line(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)
