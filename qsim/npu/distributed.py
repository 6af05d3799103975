"""Moved to qsim.cluster.distributed (quant/'s evaluation runs on it too, and quant/ is below npu/).
This name stays the same module object, so imports and monkeypatches of
qsim.npu.distributed reach the code that runs."""
import sys

from ..cluster import distributed as _moved

sys.modules[__name__] = _moved
