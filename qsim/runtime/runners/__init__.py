"""The runners of the executor, one per family of operators, registered by dialect.

A runner is `runner(op, inputs, context) -> outputs`: `inputs` are the op's input values in
order (None for an omitted optional input), `context` a qsim.runtime.executor.RunContext (the
graph, the backend, the values so far, and how to run a subgraph). The operators a model
defines itself are not a dialect: the executor runs every op that carries its definition
(ir.Op.definition) with `run_defined`.
"""
from __future__ import annotations

from ... import cvm
from .control import run_control
from .defined import run_defined
from .standard import STANDARD_DIALECTS, run_standard
from .tosa import run_tosa


def run_cvm(op, inputs: list, context) -> list:
    """CVM operators with their precision semantics (qsim.cvm)."""
    return cvm.runner(op, inputs, context.backend, context.graph)


BUILTIN_RUNNERS = {
    "tosa": run_tosa,
    "cvm": run_cvm,
    "control": run_control,
    **{dialect: run_standard for dialect in STANDARD_DIALECTS},
}

__all__ = ["BUILTIN_RUNNERS", "run_defined"]
