"""Runs an ir.Graph op by op, in the graph's order, on one backend.

Each op kind's dialect ("tosa", "cvm", "nn", "math", ...) has a runner registered with
`register_dialect(dialect, runner)`; `runner(op, inputs, backend) -> outputs`. Runners
that need the enclosing graph (e.g. to read output tensor types) register with
`needs_graph=True` and are called as `runner(op, inputs, backend, graph)`.
The "tosa" dialect is registered here; COND_IF and WHILE_LOOP run their subgraphs with
this executor and the same backend.
"""
from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import QsimError, UsageError
from ..ir import Graph, Op



class Backend(enum.StrEnum):
    """Which implementation runs the integer operators (the same bits either way). A str enum:
    the dialect runners still compare the backend with these strings."""
    KERNELS = "kernels"         # the compiled Cython kernels
    REFERENCE = "reference"     # the numpy transcription of the spec pseudocode


BACKENDS = tuple(backend.value for backend in Backend)


@dataclass(frozen=True)
class _Runner:
    fn: Callable
    needs_graph: bool


_RUNNERS: dict[str, _Runner] = {}


def register_dialect(dialect: str, runner: Callable, *, needs_graph: bool = False) -> None:
    """Registers the runner of every op kind `<dialect>.NAME` (a later registration replaces it)."""
    _RUNNERS[dialect] = _Runner(runner, needs_graph)


def registered_dialects() -> list[str]:
    return sorted(_RUNNERS)


# Modules that register a dialect's runner when imported (imported on first use).
_DIALECT_MODULES = {"tosa": "qsim.tosa", "cvm": "qsim.cvm",
                    **{d: "qsim.skriptnd.execute"
                       for d in ("layout", "math", "linalg", "nn", "image", "quant", "algo")}}


def _runner_for(op: Op) -> _Runner:
    dialect = op.kind.dialect
    if dialect not in _RUNNERS and dialect in _DIALECT_MODULES:
        if dialect == "tosa":
            _register_tosa()
        else:
            importlib.import_module(_DIALECT_MODULES[dialect])
    try:
        return _RUNNERS[dialect]
    except KeyError:
        raise UsageError(f"{op.kind.name} {op.label!r}: no executor is registered for dialect {dialect!r}",
                         hint="import the module that registers it (qsim.runtime.register_dialect), or "
                              "lower the graph to TOSA first") from None


def _check_input(graph: Graph, name: str, value) -> np.ndarray:
    t = graph.tensor(name)
    if not isinstance(value, np.ndarray):
        raise UsageError(f"graph {graph.name!r}: input {name!r} is a {type(value).__name__}, not a numpy array")
    if value.dtype != t.dtype.numpy:
        raise UsageError(f"graph {graph.name!r}: input {name!r} is declared {t.dtype} (stored as "
                         f"{t.dtype.numpy}) but the array is {value.dtype}",
                         hint=f"pass np.asarray(x, dtype=np.{t.dtype.numpy})")
    if t.is_static and tuple(value.shape) != tuple(t.shape):
        raise UsageError(f"graph {graph.name!r}: input {name!r} has shape {list(value.shape)}, "
                         f"declared {list(t.shape)}")
    if not t.dtype.check_range(value):
        raise UsageError(f"graph {graph.name!r}: input {name!r} has values outside {t.dtype} "
                         f"[{t.dtype.min}, {t.dtype.max}]")
    return value


def execute(graph: Graph, inputs: dict[str, np.ndarray], backend: str = "kernels") -> dict[str, np.ndarray]:
    """Runs `graph` on `inputs` (by graph input name); returns every tensor's value by name
    (graph inputs, constants and every op output), so callers can dump intermediates."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}", hint="use 'reference' or 'kernels'")
    if not isinstance(inputs, dict):
        raise UsageError(f"graph {graph.name!r}: inputs must be a dict of input name -> array")
    missing = [n for n in graph.inputs if n not in inputs]
    extra = [n for n in inputs if n not in graph.inputs]
    if missing or extra:
        raise UsageError(f"graph {graph.name!r}: " + "; ".join(
            ([f"missing input(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown input(s) {', '.join(extra)}"] if extra else [])),
            hint="the graph's inputs are: " + ", ".join(graph.inputs))
    values: dict[str, np.ndarray] = {}
    for name, t in graph.tensors.items():
        if t.is_constant:
            values[name] = t.data
    for name in graph.inputs:
        values[name] = _check_input(graph, name, inputs[name])
    for op in graph.ops:
        args = [values[n] if n else None for n in op.inputs]
        runner = _runner_for(op)
        outs = runner.fn(op, args, backend, graph) if runner.needs_graph else runner.fn(op, args, backend)
        if len(outs) != len(op.outputs):
            raise QsimError(f"{op.kind.name} {op.label!r}: the runner returned {len(outs)} value(s) for "
                            f"{len(op.outputs)} output(s)")
        for name, value in zip(op.outputs, outs):
            values[name] = value
    return values


def run_op(graph: Graph, op: Op, inputs: list, backend: str = "kernels") -> list[np.ndarray]:
    """Runs one op of `graph` on the given input values (e.g. values another engine computed)."""
    runner = _runner_for(op)
    return runner.fn(op, inputs, backend, graph) if runner.needs_graph else runner.fn(op, inputs, backend)


def run_graph(graph: Graph, inputs: list[np.ndarray], backend: str = "kernels") -> list[np.ndarray]:
    """Runs `graph` on positional inputs (graph.inputs order); returns its outputs in order."""
    if len(inputs) != len(graph.inputs):
        raise UsageError(f"graph {graph.name!r} takes {len(graph.inputs)} input(s), got {len(inputs)}")
    values = execute(graph, dict(zip(graph.inputs, inputs)), backend)
    return [values[n] for n in graph.outputs]


def _run_tosa(op: Op, inputs: list[np.ndarray], backend: str, graph: Graph) -> list[np.ndarray]:
    from ..tosa import OPERATORS
    from ..tosa.control_flow import cond_if, while_loop
    from ..tosa.run import execute_call
    from ..tosa.verify import bind_op
    opdef = OPERATORS[op.kind.short_name]
    call = bind_op(opdef, op, graph)

    def sub(g: Graph, args: list[np.ndarray]) -> list[np.ndarray]:
        return run_graph(g, args, backend)

    if opdef.name == "COND_IF":
        return cond_if(inputs, call.attrs, sub)
    if opdef.name == "WHILE_LOOP":
        return while_loop(inputs, call.attrs, sub)
    outs = execute_call(call, inputs, backend)
    # i48 tensors are stored int64; every other output already has its storage dtype
    return [o.astype(graph.tensor(n).dtype.numpy, copy=False) for o, n in zip(outs, op.outputs)]


def _register_tosa() -> None:
    import qsim.tosa  # noqa: F401  (registers the tosa.* op kinds)
    register_dialect("tosa", _run_tosa, needs_graph=True)


_register_tosa()
