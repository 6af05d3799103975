"""The executor: runs any ir.Graph (float SkriptND, control flow, model-defined operators, TOSA,
CVM) on a backend (reference | kernels; the NPU is driven by qsim.npu)."""
from .executor import execute, register_dialect, run_graph, run_op
from .runners.tosa import run_tosa

__all__ = ["execute", "register_dialect", "run_graph", "run_op", "run_tosa"]
