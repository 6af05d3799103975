"""Moved to qsim.cluster.scheduler_address (quant/'s evaluation runs on it too, and quant/ is below npu/).
This name stays the same module object, so imports and monkeypatches of
qsim.npu.scheduler_address reach the code that runs."""
import sys

from ..cluster import scheduler_address as _moved

sys.modules[__name__] = _moved
