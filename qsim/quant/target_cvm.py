"""Deprecated: the old name of qsim.quant.cvm.target, which docs/cvm.md showed before
quant/ was split by concern. It gives the same objects, with a DeprecationWarning."""
import warnings

from .cvm.target import *  # noqa: F401,F403

warnings.warn("qsim.quant.target_cvm is deprecated: import qsim.quant.cvm.target instead",
              DeprecationWarning, stacklevel=2)
