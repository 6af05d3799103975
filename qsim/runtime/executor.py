"""The executor: runs any ir.Graph op by op, in the graph's order, on one backend.

Every op goes to one runner (qsim.runtime.runners): an operator the model defines itself
(ir.Op.definition) to its @lower body; any other op to the runner of its dialect: the
SkriptND standard operators (float), control.if / control.loop, TOSA 0.30 (with COND_IF and
WHILE_LOOP) and CVM. `register_dialect` adds a dialect. The backend ("kernels" or "reference")
matters to the integer dialects; float operators compute the same on both.

Inputs are checked against the graph before anything runs (DataError naming the input): the
declared shape (a dynamic extent within its bound, 2.6.1); integer tensors take integer arrays
whose every value fits the declared type (never a silent wrap-around), bool tensors bool
arrays, float tensors any numeric array; each is converted to the declared storage type.
Every op output is checked against its declared shape and stored in its declared dtype.
By default every tensor is returned; `keep` returns only some and drops the others as soon
as nothing reads them, `on_value` streams every op output to the caller (see execute).
"""
from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import DataError, InvalidGraphError, MismatchError, UnsupportedError, UsageError
from ..ir import Graph, Op
from ..kernels.backend import BACKENDS
from ..limits import MemoryUse, active_use, counting, max_memory, pinned_max_tensor_bytes
from ..skriptnd.compose import dynattr
from ..threads import pinned_thread_count
from .plan import STREAM_ALL, Step, check_keep, check_stream, plan_for
from .runners import BUILTIN_RUNNERS, run_defined


@dataclass(frozen=True)
class RunContext:
    """What a runner may use besides the op and its inputs."""
    graph: Graph
    backend: str
    values: Mapping[str, np.ndarray]      # the live values so far (captured by subgraphs)

    def run_subgraph(self, graph: Graph, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Runs a control-flow body with this backend; returns its outputs in order."""
        values = execute(graph, dict(inputs), self.backend, keep=graph.outputs)
        return [values[n] for n in graph.outputs]


Runner = Callable[[Op, list, RunContext], list]

_RUNNERS: dict[str, Runner] = dict(BUILTIN_RUNNERS)


def register_dialect(dialect: str, runner: Runner) -> None:
    """Registers the runner of every op kind `<dialect>.NAME` (a later registration replaces it)."""
    _RUNNERS[dialect] = runner


def registered_dialects() -> list[str]:
    return sorted(_RUNNERS)


def runner_for(op: Op) -> Runner:
    if op.definition is not None:
        return run_defined
    runner = _RUNNERS.get(op.kind.dialect)
    if runner is None:
        raise UnsupportedError(
            f"{op.kind.name} '{op.label}': neither a standard operator nor one the model defines, "
            f"and no runner is registered for dialect '{op.kind.dialect}'",
            hint="the executor runs the SkriptND standard operators, control flow, TOSA, CVM and "
                 "operators a model defines with a @lower body; register others with "
                 "qsim.runtime.register_dialect")
    return runner


def _check_input(graph: Graph, name: str, value) -> np.ndarray:
    t = graph.tensor(name)
    where = f"graph '{graph.name}': input '{name}'"
    if not isinstance(value, np.ndarray):
        raise UsageError(f"{where} is a {type(value).__name__}, not a numpy array",
                         hint=f"pass np.asarray(x, dtype=np.{t.dtype.numpy})")
    declared = [d if d is not None else "?" for d in t.shape]
    if value.ndim != t.rank or any(d is not None and d != e for d, e in zip(t.shape, value.shape)):
        raise DataError(f"{where} has shape {list(value.shape)}, the graph declares {declared}",
                        hint="give an array of the declared shape")
    bounds = t.max_shape or ()
    for k, (d, e) in enumerate(zip(t.shape, value.shape)):
        if d is None and k < len(bounds) and bounds[k] >= 0 and e > bounds[k]:
            # 2.6.1: the upper bound of a dynamic input extent is checked when the graph runs
            raise DataError(f"{where} has extent {e} at dimension {k}, above its upper bound "
                            f"{bounds[k]}", hint=f"the graph declares at most {bounds[k]} there")
    storage = t.dtype.numpy
    if storage.kind == "f" and value.dtype.kind in "biuf":
        return value.astype(storage, copy=False)
    if value.dtype != storage and not (storage.kind in "iu" and value.dtype.kind in "iu"):
        raise DataError(f"{where} is declared {t.dtype} (stored as {storage}) but the array is "
                        f"{value.dtype}", hint=f"pass np.asarray(x, dtype=np.{storage})")
    if not t.dtype.check_range(value):
        raise DataError(f"{where} has values outside {t.dtype} [{t.dtype.min}, {t.dtype.max}]",
                        hint="integer inputs are converted only where every value fits")
    return value.astype(storage, copy=False)


def _feeds(graph: Graph, inputs) -> dict:
    """`inputs` by graph input name (a mapping, or a sequence in graph input order)."""
    if isinstance(inputs, Mapping):
        feeds = dict(inputs)
    elif isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        if len(inputs) != len(graph.inputs):
            raise DataError(f"graph '{graph.name}' takes {len(graph.inputs)} input(s) "
                            f"({', '.join(graph.inputs)}); got {len(inputs)}")
        feeds = dict(zip(graph.inputs, inputs))
    else:
        raise UsageError(f"graph '{graph.name}': inputs must be a dict of input name -> array, or "
                         "a list in graph input order")
    missing = [n for n in graph.inputs if n not in feeds]
    extra = [n for n in feeds if n not in graph.inputs]
    if missing or extra:
        raise DataError(f"graph '{graph.name}': " + "; ".join(
            ([f"no value for input(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown input(s) {', '.join(extra)}"] if extra else [])),
            hint="the graph's inputs are: " + ", ".join(graph.inputs))
    return feeds


def _with_runtime_attrs(op: Op, values: Mapping[str, np.ndarray], gone: Mapping[str, tuple]) -> Op:
    """`op` with its attributes that depend on dynamic extents (2.6.1) evaluated from the
    actual shapes (qsim.skriptnd.compose.dynattr); `gone`: the shapes of values already released."""
    shapes = {**gone, **{n: np.shape(v) for n, v in values.items()}}
    what = f"{op.kind.name} '{op.label}'"
    return dataclasses.replace(op, attrs={k: dynattr.resolve(v, shapes, what) for k, v in op.attrs.items()})


def _store(step: Step, op: Op, outs: list, values: dict) -> None:
    if len(outs) != len(step.outputs):
        raise InvalidGraphError(f"{op.kind.name} '{op.label}' produced {len(outs)} output(s), "
                                f"the graph names {len(step.outputs)}")
    for (name, rank, shape, dtype), value in zip(step.outputs, outs):
        if type(value) is np.ndarray and value.dtype == dtype and value.shape == shape:
            values[name] = value          # the common case: a declared static shape, stored as is
            continue
        if value is None and name in step.unmade:
            continue
        value = np.asarray(value)
        if value.ndim != rank or any(d is not None and d != e for d, e in zip(shape, value.shape)):
            raise MismatchError(f"{op.kind.name} '{op.label}': output '{name}' has shape "
                                f"{list(value.shape)}, the graph declares {list(shape)}")
        values[name] = value.astype(dtype, copy=False)


OnValue = Callable[[str, np.ndarray], None]


def execute(graph: Graph, inputs, backend: str = "kernels", *, keep: Iterable[str] | None = None,
            on_value: OnValue | None = None, stream: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """Runs `graph` on `inputs` (by graph input name, or a list in graph input order).

    keep=None (the default): returns every tensor's value by name (graph inputs, constants and
    every op output), so callers can read intermediates.
    keep=names (e.g. graph.outputs): returns exactly those tensors; every other value is
    dropped right after its last reader, and a conv whose own output nobody reads computes only
    the bounded output of the relu/clamp fused with it, in place (runtime/plan.py; an integer
    conv-like TOSA op only the output of the RESCALE (+ CLAMP) after it, runtime/int_fusion.py):
    a plain inference holds only its live activations and writes each one once. Same bits
    either way.
    An unknown name in keep is a UsageError naming it.

    on_value(name, value), when given, is called for every op output right after its op ran,
    in the graph's op order (a fused conv + relu/clamp: the conv's output, then the bounded one;
    graph inputs and constants are not reported: the caller has them). Every op output is then
    made (no conv output is skipped), and `keep` still decides what stays in the returned dict,
    so a caller can consume each tensor as it comes and let it go. `value` is the array later
    ops read: the callback must not modify it, and the executor never writes into it after the
    call (no value is reused as another op's buffer); it may keep references to it. An
    exception raised by the callback stops the run and propagates.

    stream=names (with on_value): the callback sees only those op outputs; the others are made
    only where an op reads them or keep names them (a fused conv + relu/clamp whose own output
    nobody wants then writes only the bounded one, as without a callback). An unknown name is
    a UsageError naming it."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}", hint="use 'reference' or 'kernels'")
    feeds = _feeds(graph, inputs)
    if on_value is None:
        streamed = None
    else:
        streamed = STREAM_ALL if stream is None else check_stream(graph, stream)
    plan = plan_for(graph, check_keep(graph, keep), streamed)
    constants, given = _constants(graph)
    values: dict[str, np.ndarray] = dict(constants)
    for name in graph.inputs:
        values[name] = _check_input(graph, name, feeds[name])
    gone: dict[str, tuple] = {}          # shapes of released values, for runtime attributes
    context = RunContext(graph, backend, values)
    # the live tensors count against the command's memory budget; a control-flow body's run
    # adds to the inference it runs in
    outer = active_use()
    live = MemoryUse(f"the live tensors of graph '{graph.name}'", outer.held if outer is not None else 0)
    given += sum(values[name].nbytes for name in graph.inputs)
    with pinned_thread_count(), pinned_max_tensor_bytes(), counting(live):
        live.check(given, f"the inputs and constants of graph '{graph.name}'")
        live.add(given)
        _run_steps(plan, values, gone, context, on_value, live)
    if plan.keep is None:
        return values
    return {n: values[n] for n in graph.tensors if n in plan.keep}


# A graph's constants by name and their bytes: the same on every run of the graph (graphs and
# their tensors are immutable), and collecting them took a third of a millisecond a run
# (MobileNetV2's ~260 tensors), a few per cent of a small model's inference.
_graph_constants: "weakref.WeakKeyDictionary[Graph, tuple[dict, int]]" = weakref.WeakKeyDictionary()


def _constants(graph: Graph) -> tuple[dict, int]:
    """(the graph's constant values by name, their bytes), made once per graph; callers copy
    the dict before adding to it."""
    hit = _graph_constants.get(graph)
    if hit is None:
        constants = {n: t.data for n, t in graph.tensors.items() if t.is_constant}
        hit = (constants, sum(np.asarray(v).nbytes for v in constants.values()))
        _graph_constants[graph] = hit
    return hit


def _run_steps(plan, values: dict, gone: dict, context: RunContext, on_value: OnValue | None,
               live: MemoryUse) -> None:
    """execute's op loop (the settings read from the environment pinned around it); `live`
    counts the bytes of `values`, checked before each op against its declared outputs. The
    budget is pinned for the loop, so it is read once; the refusal's message is made only when
    an op's outputs would pass it (formatting it for every op was ~5 % of the loop's own time)."""
    limit = max_memory()
    for step in plan.steps:              # execution_order: a conv and its relu/clamp as one step
        op = step.op
        declared = _declared_bytes(step)
        if live.held + declared > limit:
            live.check(declared, f"the outputs of {op.kind.name} '{op.label}'")
        if step.dynamic:
            op = _with_runtime_attrs(op, values, gone)
        outs = runner_for(op)(op, [values[n] if n else None for n in op.inputs], context)
        _store(step, op, outs, values)
        live.add(sum(values[name].nbytes for name, *_ in step.outputs if name in values))
        if on_value is not None:
            for name in step.streamed:
                on_value(name, values[name])
        for name in step.release:
            if plan.dynamic:
                gone[name] = np.shape(values[name])
            live.remove(values.pop(name).nbytes)


def _declared_bytes(step: Step) -> int:
    """The bytes of a step's outputs whose declared shapes are static (dynamic ones are known
    only once made: the ops check those through check_tensor_size)."""
    total = 0
    for _, _, shape, dtype in step.outputs:
        if all(d is not None for d in shape):
            total += math.prod(shape) * dtype.itemsize
    return total


def run_op(graph: Graph, op: Op, inputs: list, backend: str = "kernels",
           values: Mapping[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Runs one op of `graph` on the given input values (e.g. values another engine computed);
    `values` holds the tensors a control-flow op's subgraphs capture."""
    return runner_for(op)(op, list(inputs), RunContext(graph, backend, values or {}))


def run_graph(graph: Graph, inputs: Sequence[np.ndarray], backend: str = "kernels") -> list[np.ndarray]:
    """Runs `graph` on positional inputs (graph.inputs order); returns its outputs in order."""
    values = execute(graph, list(inputs), backend, keep=graph.outputs)
    return [values[n] for n in graph.outputs]
