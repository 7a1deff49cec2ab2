"""The installed version of calib, read from the package metadata."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("calib")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
