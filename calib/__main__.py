"""Run the calib command line as ``python -m calib``."""

from calib.cli import main

main()
