"""The ``calib`` command line: one click group, one module per command."""

from calib.cli.main import cli, main

__all__ = ["cli", "main"]
