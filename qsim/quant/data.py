"""Deprecated: the old name of qsim.quant.calibration.data, which docs/cvm.md showed before
quant/ was split by concern. It gives the same objects, with a DeprecationWarning."""
import warnings

from .calibration.data import *  # noqa: F401,F403

warnings.warn("qsim.quant.data is deprecated: import qsim.quant.calibration.data instead",
              DeprecationWarning, stacklevel=2)
