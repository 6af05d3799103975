"""`qsim.tosa.run`: one TOSA operator on numpy arrays, validated first (ERROR_IF), then computed
by a backend: the compiled kernels (backend="kernels", the default) or the numpy reference
(backend="reference"), the same bits either way. See docs/tosa.md for the calling convention.

`prepare` (validation) and `execute_call(call, arrays, fn)` (computation with REQUIRE failures
labelled) are the two halves. The dependency goes one way: qsim.kernels implements this
package's operators with its validation, reference and arithmetic helpers, and registers its
backend here when it is imported (qsim's package import does that, so `import qsim.tosa` always
has both); nothing here imports the kernels.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnpredictableError, UsageError
from .signature import OPERATORS, OperatorDef
from .validate import bind, contiguous, dtype_of_array, parse_type_name

def operator(name: str) -> OperatorDef:
    """The definition of TOSA operator `name` (spec name, e.g. "CONV2D")."""
    opdef = OPERATORS.get(str(name).upper()) if isinstance(name, str) else None
    if opdef is None:
        raise UsageError(f"unknown TOSA operator {name!r}",
                         hint="use a TOSA 0.30 spec name: " + ", ".join(sorted(OPERATORS)))
    return opdef


# backend name -> (validated call -> the function that computes it). "reference" is this
# package's own; "kernels" is registered by qsim.kernels.dispatch.
_BACKENDS: dict[str, Callable] = {"reference": lambda call: call.opdef.ref}


def register_backend(name: str, implementation: Callable) -> None:
    """Makes `run(..., backend=name)` compute a validated call with `implementation(call)`."""
    _BACKENDS[name] = implementation


def run(op: str, inputs: list, attrs: dict | None = None, backend: str = "kernels") -> list[np.ndarray]:
    """Runs TOSA operator `op` on `inputs` (the spec's Input rows in table order).

    `attrs` holds every Attribute row by spec name, plus `out_t` where the inputs
    do not imply the output type (RESCALE, CAST) and `weight_t="int4"` for int4
    weights (held in int8 arrays). `backend`: "kernels" (compiled, the default) or
    "reference" (the numpy transcription of the spec), the same bits. Returns the
    outputs (spec Output rows) as arrays; int48_t values are held in int64 arrays.
    """
    implementation = _BACKENDS.get(backend) if isinstance(backend, str) else None
    if implementation is None:
        raise UsageError(f"{op}: unknown backend {backend!r}",
                         hint="use " + " or ".join(repr(name) for name in sorted(_BACKENDS)))
    call, arrays = prepare(op, inputs, attrs)
    return execute_call(call, arrays, implementation(call))


def prepare(op: str, inputs: list, attrs: dict | None = None):
    """Validates a call of TOSA operator `op` (ERROR_IF); returns the bound call and the arrays."""
    opdef = operator(op)
    label = opdef.name
    if not isinstance(inputs, (list, tuple)):
        raise UsageError(f"{label}: inputs must be a list of numpy arrays, got {type(inputs).__name__}")
    attrs = {} if attrs is None else attrs
    arrays = []
    for i, x in enumerate(inputs):
        if not isinstance(x, np.ndarray):
            raise UsageError(f"{label}: input {i} is a {type(x).__name__}, not a numpy array",
                             hint="pass every input tensor as a numpy array (np.asarray(x, dtype=...))")
        arrays.append(x)
    types = [dtype_of_array(x, f"input {i}", label) for i, x in enumerate(arrays)]
    for i, (x, dt) in enumerate(zip(arrays, types)):
        if dt.bits == 48 and x.size and not dt.check_range(x):
            raise UsageError(f"{label}: input {i} is an int64 array (int48_t) with values outside "
                             "[-2^47, 2^47-1]")
    out_type = parse_type_name(attrs["out_t"], "out_t", label) if isinstance(attrs, dict) and "out_t" in attrs else None
    call = bind(opdef, types, [x.shape for x in arrays], attrs, label, out_type=out_type)
    return call, arrays


def execute_call(call, arrays: list[np.ndarray], fn) -> list[np.ndarray]:
    """Computes a validated call with `fn(arrays, attrs)` (the reference `call.opdef.ref`, or a
    kernel); REQUIRE failures are reported with the call's label."""
    arrays = [contiguous(x) for x in arrays]
    try:
        # numpy turns rank-0 results into scalars: hand back arrays of every rank
        return [np.asarray(out) for out in fn(arrays, call.attrs)]
    except UnpredictableError as err:
        raise UnpredictableError(f"{call.label}: {err.message}",
                                 hint=err.hint or "the spec leaves this result unpredictable: "
                                      "change the inputs or attributes (scale, shift, zero points) "
                                      "so the condition holds") from None
