"""Moved to qsim.cluster.local_cluster (quant/'s evaluation runs on it too, and quant/ is below npu/).
This name stays the same module object, so imports and monkeypatches of
qsim.npu.local_cluster reach the code that runs."""
import sys

from ..cluster import local_cluster as _moved

sys.modules[__name__] = _moved
