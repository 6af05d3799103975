"""Python entry points: run one CVM operator on numpy arrays.

    qsim.cvm.run(op, inputs, attrs, backend="kernels", precisions=None) -> list[np.ndarray]
    qsim.cvm.run_with_precision(...) -> CvmResult(outputs, precisions)
    qsim.cvm.infer(op, shapes, attrs, precisions) -> (output shapes, output precisions)

`op` is the formalization's name ("conv2d", also "cvm.conv2d"); `inputs` the
formalization's inputs in its order (int8 or int32 arrays; None or a shorter list for
an omitted optional bias; concatenate takes any number). `precisions` gives each
input's declared precision (an int in (0, 32], or None = undefined, inferred as the
tightest precision of the data); data outside a declared precision is a DataError
naming the input, the first offending index and its value. Outputs are int32 arrays;
their precisions (by each operator's rule) are in CvmResult.precisions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InvalidGraphError, MismatchError, UsageError
from ..kernels.backend import BACKENDS
from .opdef import Checker, OpDef, lookup
from .precision import (MAX_PRECISION, check_data, check_precision_value, first_violation,
                        infer_data_precision)



@dataclass(frozen=True)
class CvmResult:
    outputs: list          # int32 arrays, in the operator's output order
    precisions: list       # the inferred precision of each output


def _spec_names(opdef: OpDef, count: int) -> list[str]:
    if opdef.variadic:
        return [f"{opdef.inputs[0]}{i}" for i in range(count)]
    return list(opdef.inputs)


def _prepare(opdef: OpDef, inputs: Sequence, where: str):
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        raise UsageError(f"{where}: inputs must be a list of arrays", hint="e.g. run('relu', [x])")
    inputs = list(inputs)
    names = _spec_names(opdef, len(inputs))
    if opdef.variadic:
        if not inputs:
            raise UsageError(f"{where}: needs at least one input")
    else:
        if len(inputs) > len(names):
            raise UsageError(f"{where}: takes inputs {', '.join(names)}; got {len(inputs)} arrays")
        inputs += [None] * (len(names) - len(inputs))
    for name, x in zip(names, inputs):
        if x is None:
            if name not in opdef.optional:
                raise UsageError(f"{where}: input {name} is missing",
                                 hint=f"inputs are, in order: {', '.join(names)}")
            continue
        if not isinstance(x, np.ndarray):
            raise UsageError(f"{where}: input {name} is a {type(x).__name__}, not a numpy array")
        if x.dtype not in (np.int8, np.int32):
            raise UsageError(f"{where}: input {name} has dtype {x.dtype}; CVM tensors are INT8 or INT32",
                             hint="convert with .astype(np.int32) after checking the values fit")
        if x.ndim == 0 or 0 in x.shape:
            raise UsageError(f"{where}: input {name} has shape {list(x.shape)}; CVM tensors have rank >= 1 "
                             "and positive extents")
    return names, inputs


def _analyse(opdef: OpDef, names, shapes, attrs, in_precs, where, labels=None):
    chk = Checker(opdef.name, names, labels)
    chk.op = where
    attrs = opdef.normalize_attrs(attrs)
    out_shapes = opdef.infer(chk, shapes, attrs)
    attrs.update(chk.values)          # normalized forms: padding=1 -> (1, 1)
    out_precs = opdef.precision(chk, in_precs, shapes, attrs)
    for name, p in zip(opdef.outputs, out_precs):
        if p > MAX_PRECISION:
            raise InvalidGraphError(
                f"{where}: output {name} would need precision {p}, more than the 32 a CVM tensor has "
                f"(input precisions {[q for q in in_precs if q is not None]})",
                hint="reduce the input precisions first (cvm_right_shift / cvm_clip)")
    return attrs, out_shapes, out_precs


def infer(op: str, shapes: Sequence, attrs: Mapping[str, Any] | None = None,
          precisions: Sequence[int] | None = None):
    """Static checks without data: (output shapes, output precisions or None)."""
    opdef = lookup(op)
    where = f"cvm.{opdef.name}"
    names = _spec_names(opdef, len(shapes))
    shapes = [None if s is None else tuple(int(d) for d in s) for s in shapes]
    shapes += [None] * (len(names) - len(shapes))
    if precisions is None:
        chk = Checker(opdef.name, names)
        return opdef.infer(chk, shapes, opdef.normalize_attrs(attrs)), None
    precs = [None if p is None else check_precision_value(where, f"input {n}", p)
             for n, p in zip(names, list(precisions) + [None] * (len(names) - len(precisions)))]
    _, out_shapes, out_precs = _analyse(opdef, names, shapes, attrs, precs, where)
    return out_shapes, out_precs


def run_with_precision(op: str, inputs: Sequence, attrs: Mapping[str, Any] | None = None,
                       backend: str = "kernels", precisions: Sequence | None = None,
                       where: str | None = None, labels: Mapping[str, str] | None = None) -> CvmResult:
    """Like run(), with output precisions. `where` / `labels` (input name -> graph tensor
    name) only shape error messages (the executor passes the op label and tensor names)."""
    opdef = lookup(op)
    where = where or f"cvm.{opdef.name}"
    if backend not in BACKENDS:
        raise UsageError(f"{where}: unknown backend {backend!r}", hint="use 'kernels' or 'reference'")
    names, inputs = _prepare(opdef, inputs, where)
    if precisions is None:
        precisions = [None] * len(inputs)
    precisions = list(precisions)
    if len(precisions) != len(inputs) and not (len(precisions) < len(inputs) and
                                                all(x is None for x in inputs[len(precisions):])):
        raise UsageError(f"{where}: {len(precisions)} precisions for {len(inputs)} inputs",
                         hint="give one precision (or None) per input")
    precisions += [None] * (len(inputs) - len(precisions))
    labels = dict(labels or {})
    in_precs = []
    for name, x, p in zip(names, inputs, precisions):
        what = f"input {name}" + (f" (tensor {labels[name]!r})" if labels.get(name) else "")
        if x is None:
            in_precs.append(None)
        elif p is None:
            in_precs.append(infer_data_precision(where, what, x))
        else:
            p = check_precision_value(where, what, p)
            check_data(where, what, x, p)
            in_precs.append(p)
    shapes = [None if x is None else tuple(x.shape) for x in inputs]
    attrs, out_shapes, out_precs = _analyse(opdef, names, shapes, attrs, in_precs, where, labels)
    if backend == "kernels" and opdef.kernel is not None:
        outputs = opdef.kernel(inputs, attrs)
    else:
        outputs = opdef.reference([None if x is None else x.astype(np.int64) for x in inputs], attrs)
    result = []
    for name, y, shape, p in zip(opdef.outputs, outputs, out_shapes, out_precs):
        y = np.asarray(y)
        if tuple(y.shape) != tuple(shape) or first_violation(y, p) is not None:
            raise MismatchError(f"{where} ({backend}): output {name} breaks its own contract "
                                f"(shape {list(y.shape)} vs {list(shape)}, precision {p}); this is a qsim bug")
        result.append(np.ascontiguousarray(y, dtype=np.int32))
    return CvmResult(result, list(out_precs))


def run(op: str, inputs: Sequence, attrs: Mapping[str, Any] | None = None, backend: str = "kernels",
        precisions: Sequence | None = None) -> list[np.ndarray]:
    """Runs one operator; see the module doc. Output precisions: run_with_precision."""
    return run_with_precision(op, inputs, attrs, backend=backend, precisions=precisions).outputs
