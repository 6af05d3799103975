"""The inputs of the model being quantized: one sample's shape per input, the feed dicts the float
and integer graphs run on, and the checks of non-float inputs.

A model may have several inputs (an image and a feature vector; token ids and positions; a
sequence and its padding mask). Every input has a batch axis of extent 1, the first one (the
leading axis for batch-first models, axis 1 of a sequence-first [S, 1, E] input): a sample is
the input without it, in the same element order. Calibration and evaluation data hold one
array of samples [N, *sample shape] per input (calibration/data.py).

Kinds of input and what their samples must be:
- float: any numeric samples, run as float32;
- integer (int64/int32: token ids, positions): integer samples, kept integer (float data cannot
  feed them); where an input indexes an embedding table (a layout.gather reads it as indices,
  directly or through reshapes), every id must address a row: an id outside [0, rows) is a
  DataError naming the input, the sample, the element and the table, before any graph runs;
- bool (padding masks): bool samples (or integers 0 and 1).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import DataError, UsageError

# operators that pass an index tensor on unchanged in value (so the table it reaches bounds it)
_INDEX_CARRIERS = ("layout.reshape", "layout.squeeze", "layout.unsqueeze", "layout.flatten",
                   "layout.unflatten", "layout.cast", "layout.transpose")


def sample_shapes(graph: ir.Graph) -> dict[str, tuple[int, ...]]:
    """Each graph input's sample shape (its static shape without the batch axis), in input order."""
    if not graph.inputs:
        raise UsageError(f"model {graph.name!r} has no inputs; there is nothing to calibrate")
    shapes = {}
    for name in graph.inputs:
        shape = graph.tensor(name).shape
        if any(d is None for d in shape) or 1 not in shape:
            raise UsageError(f"model input {name!r} has shape {list(shape)}; qsim quantize needs a "
                             "static shape with batch 1", hint="declare the input as [1, ...]")
        batch_axis = list(shape).index(1)
        shapes[name] = tuple(int(d) for i, d in enumerate(shape) if i != batch_axis)
    return shapes


def kind_of(dtype: ir.DType) -> str:
    """'bool', 'integer' or 'float': what samples an input of `dtype` takes."""
    if dtype is ir.DType.BOOL:
        return "bool"
    return "integer" if dtype.is_integer else "float"


def check_sample_types(graph: ir.Graph, arrays: dict[str, np.ndarray], where: str) -> None:
    """Refuses samples whose kind does not fit their input (module doc)."""
    for name, array in arrays.items():
        kind = kind_of(graph.tensor(name).dtype)
        got = np.asarray(array).dtype
        if kind == "integer" and got.kind not in "iu":
            declared = graph.tensor(name).dtype.name
            raise DataError(f"{where}: model input {name!r} is {declared} (indices, e.g. token ids); the "
                            f"samples are {got}", hint="store the ids as an integer array (int64)")
        if kind == "bool" and got.kind != "b" and not (got.kind in "iu" and np.isin(array, (0, 1)).all()):
            raise DataError(f"{where}: model input {name!r} is a bool mask; the samples are {got}",
                            hint="store the mask as a bool array (True/False, or integers 0 and 1)")


def as_input(graph: ir.Graph, name: str, sample: np.ndarray) -> np.ndarray:
    """One sample (with its batch axis) in the input's shape and element type."""
    t = graph.tensor(name)
    shape = tuple(int(d) for d in t.shape)
    kind = kind_of(t.dtype)
    sample = np.asarray(sample).reshape(shape)
    if kind == "float":
        return sample.astype(np.float32, copy=False)
    if kind == "bool":
        return sample.astype(bool, copy=False)
    return sample


def index_tables(graph: ir.Graph, name: str) -> list[tuple[str, int]]:
    """(table name, rows) of every layout.gather that reads input `name` as its indices,
    directly or through operators that keep the values (_INDEX_CARRIERS)."""
    found, todo, seen = [], [name], set()
    while todo:
        tensor = todo.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        for op in graph.consumers(tensor):
            if op.kind.name == "layout.gather" and op.inputs[1] == tensor:
                data = graph.tensor(op.inputs[0])
                axis = int(op.attrs.get("axis", 0)) % len(data.shape)
                found.append((op.inputs[0], int(data.shape[axis])))
            elif op.kind.name in _INDEX_CARRIERS:
                todo.extend(op.outputs)
    return found


def check_index_ranges(graph: ir.Graph, arrays: dict[str, np.ndarray], where: str) -> None:
    """Every id of an integer input that indexes an embedding table addresses one of its rows
    (arrays: input name -> samples [N, ...]); DataError naming the first one that does not."""
    for name, array in arrays.items():
        if kind_of(graph.tensor(name).dtype) != "integer":
            continue
        array = np.asarray(array)
        for table, rows in index_tables(graph, name):
            bad = np.argwhere((array < 0) | (array >= rows))
            if bad.size:
                at = tuple(int(i) for i in bad[0])
                raise DataError(f"{where}: input {name!r}, sample {at[0]}, element {list(at[1:])}: id "
                                f"{int(array[at])} is outside the {rows} rows of embedding table {table!r}",
                                hint=f"ids of {name!r} must lie in [0, {rows - 1}]; check the data "
                                     "(a vocabulary or sequence longer than the model's?)")
