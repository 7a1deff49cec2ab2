"""calib: audit language models for memorization of their training data as calibrated claims."""

from calib._exceptions import CalibError, InputError, InvalidParameterError
from calib._version import __version__

__all__ = ["CalibError", "InputError", "InvalidParameterError", "__version__"]
