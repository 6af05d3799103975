"""The executor: runs any ir.Graph (float SkriptND, control flow, model-defined operators, TOSA,
CVM) on a backend (reference | kernels; the NPU is driven by qsim.npu)."""
from .executor import execute, register_dialect, run_graph, run_op

__all__ = ["execute", "register_dialect", "run_graph", "run_op"]
