"""Deprecated: the old name of qsim.quant.cvm.context, which docs/cvm.md showed before
quant/ was split by concern. It gives the same objects, with a DeprecationWarning."""
import warnings

from .cvm.context import *  # noqa: F401,F403

warnings.warn("qsim.quant.cvm_context is deprecated: import qsim.quant.cvm.context instead",
              DeprecationWarning, stacklevel=2)
