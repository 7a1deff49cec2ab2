"""The ``calib`` entry point: help, version, and errors as one line on stderr with exit code 2.

A few runs go through ``python -m calib`` in real subprocesses, started together once per module, to
see exit codes and stderr exactly as a user does; the rest call :func:`calib.cli.main` in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version

import click
import pytest

from calib._exceptions import CalibError, InputError, InvalidParameterError
from calib.cli import cli, main

# --- real subprocesses -----------------------------------------------------------------------------

SUBPROCESS_RUNS = {
    "help": (["--help"], {}),
    "version": (["--version"], {}),
    "unknown": (["frobnicate"], {}),
    "nan_file": (["stats", "conformal", "--controls", "{nan}", "--alpha", "0.1"], {}),
    "debug": (["--debug", "stats", "interval", "--k", "11", "--n", "10"], {}),
    "env_debug": (["stats", "interval", "--k", "11", "--n", "10"], {"CALIB_DEBUG": "1"}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every entry of SUBPROCESS_RUNS, run concurrently as ``python -m calib ...``."""
    tmp = tmp_path_factory.mktemp("subprocess")
    nan = tmp / "controls.txt"
    nan.write_text("0.25\n0.5\nnan\n0.75\n")
    base_env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    started = {}
    for name, (args, extra_env) in SUBPROCESS_RUNS.items():
        argv = [sys.executable, "-m", "calib", *(a.format(nan=nan) for a in args)]
        started[name] = subprocess.Popen(argv, cwd=tmp, env={**base_env, **extra_env}, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=600)  # a guard against a hang, not a time bound
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_help_as_a_subprocess(runs):
    r = runs["help"]
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.startswith("Usage: calib ")
    for word in ("--version", "--debug", "--help", "stats"):
        assert word in r.stdout


def test_version_as_a_subprocess_is_the_installed_distribution(runs):
    r = runs["version"]
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"calib, version {version('calib')}\n"  # docs/cli.md: "calib, version X"


def test_unknown_command_as_a_subprocess(runs):
    r = runs["unknown"]
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert "frobnicate" in r.stderr and "Traceback" not in r.stderr


def test_bad_score_file_as_a_subprocess_names_file_and_line(runs):
    r = runs["nan_file"]
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("calib: error: ")
    assert "controls.txt:3:" in r.stderr  # "nan" is the third line of the file written above


@pytest.mark.parametrize("name", ["debug", "env_debug"])
def test_debug_shows_the_traceback_as_a_subprocess(runs, name):
    r = runs[name]
    assert r.returncode != 0
    assert "Traceback (most recent call last)" in r.stderr
    assert "InvalidParameterError" in r.stderr
    assert r.stderr.count("\n") > 5


# --- help and version in-process -------------------------------------------------------------------


def test_version_in_process(calib):
    r = calib("--version")
    assert r.code == 0
    assert r.out == f"calib, version {version('calib')}\n"
    assert r.err == ""


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_flags(calib, flag):
    r = calib(flag)
    assert r.code == 0
    assert "Usage: calib" in r.out and "stats" in r.out


def test_stats_help_lists_every_subcommand(calib):
    r = calib("stats", "--help")
    assert r.code == 0
    for name in ("interval", "beta-law", "conformal", "budget", "plan", "census"):
        assert name in r.out


@pytest.mark.parametrize("name", ["interval", "beta-law", "conformal", "budget", "plan", "census"])
def test_every_subcommand_has_help_with_json(calib, name):
    r = calib("stats", name, "--help")
    assert r.code == 0
    assert f"Usage: calib stats {name}" in r.out
    assert "--json" in r.out


def test_success_exits_zero(calib):
    r = calib("stats", "interval", "--k", "1", "--n", "2")
    assert r.code == 0 and r.err == ""


# --- usage errors: one line, exit 2 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle", "command"),
    [
        (["frobnicate"], "frobnicate", "calib"),
        (["stats", "frobnicate"], "frobnicate", "calib stats"),
        (["--bogus"], "--bogus", "calib"),
        (["stats", "interval", "--k", "1", "--n", "10", "--bogus"], "--bogus", "calib stats interval"),
        (["stats", "interval", "--k", "x", "--n", "10"], "--k", "calib stats interval"),
        (["stats", "interval", "--k", "1", "--n", "10", "--confidence", "abc"], "--confidence",
         "calib stats interval"),
        (["stats", "interval", "--n", "10"], "--k", "calib stats interval"),
        (["stats", "interval", "--k", "1", "--n", "10", "extra"], "extra", "calib stats interval"),
        (["stats", "beta-law", "--n", "1.5", "--alpha", "0.1"], "--n", "calib stats beta-law"),
        (["stats", "conformal", "--alpha", "0.1"], "--controls", "calib stats conformal"),
    ],
)
def test_usage_errors_are_one_line_naming_the_problem(calib, args, needle, command):
    err = calib(*args).one_line_error()
    assert needle in err
    assert err.startswith(f"{command}: error: ")
    assert f"see '{command} --help'" in err


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "interval", "--k", "11", "--n", "10"],  # k > n, a ValueError of calib.stats
        ["stats", "interval", "--k", "1", "--n", "10", "--confidence", "1.5"],
        ["stats", "beta-law", "--n", "0", "--alpha", "0.1"],
    ],
)
def test_bad_values_from_the_statistics_are_one_line(calib, args):
    err = calib(*args).one_line_error()
    # the option types refuse a confidence outside (0, 1) and N = 0 themselves; k > n only the statistic can
    assert err.startswith(("calib: error: ", f"calib stats {args[1]}: error: Invalid value for '--"))


# --- CalibError and --debug ------------------------------------------------------------------------


@click.command("boom")
@click.option("--kind", default="calib")
def _boom(kind: str) -> None:
    """A command that fails the way the option says."""
    if kind == "calib":
        raise CalibError("first part of the message\n   and its second part")
    if kind == "input":
        raise InputError("score 'x' is not a number", path="scores.txt", line=7)
    if kind == "click":
        raise click.ClickException("a click error")
    if kind == "permission":
        raise PermissionError(13, "Permission denied", "/data/out.parquet")
    if kind == "rename":
        raise IsADirectoryError(21, "Is a directory", "run/.tmp123", None, "run/report")
    if kind == "disk":
        raise OSError(28, "No space left on device", "run/tables/x.parquet")
    if kind == "decode":
        b"score\n\x81".decode("utf-8")
    if kind == "valueerror":
        raise ValueError("an internal inconsistency")
    raise RuntimeError("a bug, not a user error")


@pytest.fixture
def boom(monkeypatch):
    monkeypatch.setitem(cli.commands, "boom", _boom)


def test_calib_error_is_one_line_without_traceback(calib, boom):
    err = calib("boom").one_line_error()
    # The message's two lines are joined with single spaces (main._one_line).
    assert err == "calib: error: first part of the message and its second part"


def test_input_error_names_file_and_line(calib, boom):
    err = calib("boom", "--kind", "input").one_line_error()
    assert err == "calib: error: scores.txt:7: score 'x' is not a number"


def test_click_exception_exits_two_not_one(calib, boom):
    # click's own exit code for a ClickException is 1; calib promises 2 for every user error.
    err = calib("boom", "--kind", "click").one_line_error()
    assert err == "calib: error: a click error"


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("permission", "calib: error: /data/out.parquet: Permission denied; check its permissions or choose another "
                       "path"),
        ("rename", "calib: error: run/.tmp123 -> run/report: Is a directory; it is a folder; give a file"),
        ("disk", "calib: error: run/tables/x.parquet: No space left on device; the disk is full; free space or "
                 "choose another path"),
        ("decode", "calib: error: an input file is not UTF-8 text (byte 0x81 at offset 6); give a text file saved "
                   "as UTF-8 (--debug shows which file was being read)"),
    ],
)
def test_os_and_decoding_errors_are_one_line_naming_the_path(calib, boom, kind, line):
    assert calib("boom", "--kind", kind).one_line_error() == line


@pytest.mark.parametrize(("kind", "error"), [("bug", RuntimeError), ("valueerror", ValueError)])
def test_other_exceptions_are_bugs_and_keep_their_traceback(boom, kind, error):
    # not swallowed into one line: main() lets them through, so Python prints the traceback (exit code 1)
    with pytest.raises(error):
        main(["boom", "--kind", kind])


def test_debug_flag_reraises_os_errors(boom):
    with pytest.raises(PermissionError):
        main(["--debug", "boom", "--kind", "permission"])


def test_debug_flag_reraises_the_calib_error(boom):
    with pytest.raises(CalibError, match="first part"):
        main(["--debug", "boom"])


def test_debug_flag_reraises_usage_errors():
    with pytest.raises(click.UsageError):
        main(["--debug", "frobnicate"])


def test_debug_flag_shows_the_translated_statistics_error_and_its_cause():
    with pytest.raises(InvalidParameterError) as info:
        main(["--debug", "stats", "interval", "--k", "11", "--n", "10"])
    assert isinstance(info.value.__cause__, ValueError)  # translated at the seam with "from exc"


@pytest.mark.parametrize("value", ["1", "yes"])
def test_calib_debug_environment_variable_reraises(monkeypatch, boom, value):
    monkeypatch.setenv("CALIB_DEBUG", value)
    with pytest.raises(CalibError):
        main(["boom"])


@pytest.mark.parametrize("value", ["0", ""])
def test_calib_debug_off_values_keep_one_line(calib, monkeypatch, boom, value):
    monkeypatch.setenv("CALIB_DEBUG", value)
    assert calib("boom").one_line_error().startswith("calib: error: first part")


def test_debug_does_not_change_a_successful_run(calib):
    r = calib("--debug", "stats", "interval", "--k", "1", "--n", "2", "--json")
    assert r.json()["k"] == 1


def test_args_default_to_sys_argv(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["calib", "--version"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"calib, version {version('calib')}\n"


@pytest.mark.parametrize("args", [[], ["stats"]])
def test_no_command_shows_readable_help(calib, args):
    r = calib(*args)
    assert r.code in (0, 2)
    text = r.out + r.err
    assert "error:" not in text
    assert "\nCommands:\n" in text  # the help as click formats it, one section per line
