"""Executors: run a whole ir.Graph on a backend (reference | kernels; npu elsewhere)."""
from .executor import execute, register_dialect, run_graph

__all__ = ["execute", "register_dialect", "run_graph"]
