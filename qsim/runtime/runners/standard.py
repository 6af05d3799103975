"""Runner of the SkriptND standard operators (dialects layout, math, linalg, nn, image, quant,
algo): float numpy paths of qsim.runtime.float_ops.

Flat op inputs map onto the operator's declared inputs: an omitted optional input is the
empty name "", and the one packed input of concat/stack/*_n takes all remaining names;
packed outputs (split, unstack) are the op's outputs in order (the pack signatures below are
those of the stdlib modules; tests hold the two together).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import InvalidGraphError, QsimError
from ..float_ops import OPS, run_op

STANDARD_DIALECTS = ("layout", "math", "linalg", "nn", "image", "quant", "algo")

# Operators with a packed input: (index of the packed input, number of declared inputs).
PACKED_INPUTS = {
    "layout.concat": (0, 1), "layout.stack": (0, 1),
    **{f"math.{n}": (0, 1) for n in ("sum_n", "prod_n", "min_n", "max_n", "argmin_n",
                                     "argmax_n", "any_n", "all_n")},
}


def register_standard_kinds() -> None:
    """Registers an ir.OpKind for every standard operator (idempotent), so that graphs can be
    built from kind names (ir.OpKind.get) without composing a model first."""
    for name in OPS:
        ir.register_op_kind(name, doc="NNEF 2.0 standard operator (stdlib/"
                            f"{name.split('.')[0]}.sknd)")


def group_inputs(kind: str, values: list) -> list:
    """Flat input values → the operator's declared inputs (a packed one becomes a list)."""
    spec = PACKED_INPUTS.get(kind)
    if spec is None:
        return values
    index, declared = spec
    extra = len(values) - declared + 1
    return values[:index] + [list(values[index:index + extra])] + values[index + extra:]


def run_standard(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    """Executes one standard op (float; the backend does not matter)."""
    # the op's own attribute mapping, not a copy: the implementations only read it (base.run_op),
    # and nn.conv keeps what it works out from the attributes by the mapping's identity
    attrs = op.attrs if type(op.attrs) is dict else dict(op.attrs)
    try:
        return run_op(op.kind.name, group_inputs(op.kind.name, list(inputs)), attrs)
    except QsimError as err:
        prefix = f"{op.kind.name}: "
        text = err.message[len(prefix):] if err.message.startswith(prefix) else err.message
        raise type(err)(f"{op.kind.name} '{op.label}': {text}", hint=err.hint,
                        location=err.location) from None
    except (ValueError, IndexError, TypeError, KeyError) as err:
        if _statically_checked(op, context):
            # every input has the static shape the verified graph declares (the executor checked
            # the graph inputs and every op output): the front end accepted this op, so numpy
            # failing on it is qsim's bug, reported as one (exit 1), not dressed as the user's
            raise
        raise InvalidGraphError(f"{op.kind.name} '{op.label}': cannot execute with input shapes "
                                f"{[list(np.shape(v)) if v is not None else None for v in inputs]} "
                                f"and attributes {dict(op.attrs)}: {err}") from None


def _statically_checked(op: ir.Op, context) -> bool:
    """Whether every input of `op` has a static declared shape in the graph being run: then the
    shapes were checked when the graph was composed and verified, and only dynamic extents
    (known when the graph runs, 2.6.1) can make the inputs disagree with each other."""
    graph = getattr(context, "graph", None)
    if graph is None:
        return False
    for name in op.inputs:
        if not name:
            continue
        tensor = graph.tensors.get(name)
        if tensor is None or any(d is None for d in tensor.shape):
            return False
    return True


register_standard_kinds()
