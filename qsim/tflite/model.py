"""`read_model(path)`: a .tflite file as plain dataclasses (tensors, operators, buffers'
data), checked against the file's bounds and the schema's rules before any converter sees
it. Only the first subgraph is read (the main one; others belong to control flow, which
qsim does not convert: an operator using one is refused by its builtin name).

Tensor data: a tensor's buffer index 0 is the schema's empty sentinel (no data: a computed
tensor or graph input). A buffer's bytes are `data` inside the flatbuffer or, in files over
2 GB (newer schemas), `offset`/`size` from the start of the file, past the flatbuffer; both
are checked to lie in the file and to hold exactly the bytes the shape and type need.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

import numpy as np

from ..errors import Location, UnsupportedError, UsageError
from ..limits import check_tensor_size
from . import schema as S
from .flatbuf import INT8, INT32, UINT8, UINT32, UINT64, Buffer, Table

# a rank above this is no real network's: refused before shapes are multiplied out
MAX_RANK = 8


@dataclass(frozen=True)
class QuantParams:
    """real = scale * (q - zero_point); per channel along `axis` when scale has several values."""
    scale: np.ndarray            # float32 [1] or [C]
    zero_point: np.ndarray       # int64, the shape of scale
    axis: int | None             # quantized_dimension for per-channel parameters, else None


@dataclass(frozen=True)
class TensorDef:
    index: int
    name: str
    type_code: int
    shape: tuple[int, ...]
    data: np.ndarray | None      # constant values (shape `shape`), None for computed tensors
    quant: QuantParams | None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def type_name(self) -> str:
        return S.type_name(self.type_code)

    def describe(self) -> str:
        return f"tensor {self.index} '{self.name}' ({self.type_name} {list(self.shape)})"


@dataclass(frozen=True)
class OperatorDef:
    index: int
    builtin: str                 # BuiltinOperator name (CUSTOM for custom operators)
    custom_code: str | None
    version: int
    inputs: tuple[int, ...]      # tensor indices; -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: Table | None        # the builtin options table (layout given by `builtin`)


@dataclass(frozen=True)
class ModelDef:
    path: str
    schema_version: int
    description: str
    tensors: tuple[TensorDef, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: tuple[OperatorDef, ...]

    @property
    def location(self) -> Location:
        return Location(self.path)


def is_tflite(path: str) -> bool:
    """True when bytes 4..8 of the file are the TFLite file identifier."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == S.FILE_IDENTIFIER


def activation_bits(path: str) -> int:
    """16 for a 16x8 model (its first input int16), else 8: the precision `qsim quantize` takes
    for a .tflite file by default."""
    model = read_model(path)
    first = model.tensors[model.inputs[0]] if model.inputs else None
    return 16 if first is not None and first.type_code == S.INT16 else 8


def read_model(path: str) -> ModelDef:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_model(data, path)


def parse_model(data, path: str = "<tflite>") -> ModelDef:
    """The model held by the bytes `data` (a file's contents)."""
    buf = Buffer(data, Location(path))
    if buf.size < 8 or bytes(data[4:8]) != S.FILE_IDENTIFIER:
        buf.fail(f"not a TFLite flatbuffer: bytes 4..8 are {bytes(data[4:8])!r}, expected {S.FILE_IDENTIFIER!r}",
                 hint="give a .tflite file written by a TFLite converter")
    root = buf.root("Model")
    version = root.scalar(S.MODEL_VERSION, UINT32, 0)
    if version != 3:
        buf.fail(f"schema version {version}; qsim reads version 3 (TFL3)", hint="convert the model again")
    codes = [_opcode(t) for t in root.tables(S.MODEL_OPERATOR_CODES, "Model.operator_codes")]
    buffers = root.tables(S.MODEL_BUFFERS, "Model.buffers")
    subgraphs = root.tables(S.MODEL_SUBGRAPHS, "Model.subgraphs")
    if not subgraphs:
        buf.fail("the model has no subgraph")
    sg = subgraphs[0]
    tensors = tuple(_tensor(buf, t, i, buffers) for i, t in enumerate(sg.tables(S.SUBGRAPH_TENSORS,
                                                                                 "SubGraph.tensors")))
    n = len(tensors)

    def indices(table: Table, slot: int, what: str, optional: bool = False) -> tuple[int, ...]:
        values = table.array(slot, "i4", what)
        values = () if values is None else tuple(int(v) for v in values)
        for v in values:
            if not (0 <= v < n or (optional and v == -1)):
                buf.fail(f"{what} names tensor {v}; the subgraph has {n} tensors (0..{n - 1})")
        return values

    operators = []
    for i, op in enumerate(sg.tables(S.SUBGRAPH_OPERATORS, "SubGraph.operators")):
        where = f"operator {i}"
        code_index = op.scalar(S.OPERATOR_OPCODE_INDEX, UINT32, 0)
        if code_index >= len(codes):
            buf.fail(f"{where}: opcode_index {code_index} outside the model's {len(codes)} operator codes")
        builtin, custom, op_version = codes[code_index]
        operators.append(OperatorDef(i, builtin, custom, op_version,
                                     indices(op, S.OPERATOR_INPUTS, f"{where} inputs", optional=True),
                                     indices(op, S.OPERATOR_OUTPUTS, f"{where} outputs"),
                                     op.table(S.OPERATOR_OPTIONS, f"{where} ({builtin}) options")))
    description = root.string(S.MODEL_DESCRIPTION, "Model.description") or ""
    return ModelDef(path, version, description, tensors,
                    indices(sg, S.SUBGRAPH_INPUTS, "SubGraph.inputs"),
                    indices(sg, S.SUBGRAPH_OUTPUTS, "SubGraph.outputs"), tuple(operators))


def _opcode(t: Table) -> tuple[str, str | None, int]:
    deprecated = t.scalar(S.OPCODE_DEPRECATED_BUILTIN, INT8, 0)
    code = max(int(deprecated), int(t.scalar(S.OPCODE_BUILTIN, INT32, 0)))
    custom = t.string(S.OPCODE_CUSTOM, "OperatorCode.custom_code")
    return S.builtin_name(code), custom, int(t.scalar(S.OPCODE_VERSION, INT32, 1))


def _tensor(buf: Buffer, t: Table, index: int, buffers: list[Table]) -> TensorDef:
    name = t.string(S.TENSOR_NAME, f"tensor {index} name") or f"tensor_{index}"
    where = f"tensor {index} '{name}'"
    raw_shape = t.array(S.TENSOR_SHAPE, "i4", f"{where} shape")
    shape = () if raw_shape is None else tuple(int(d) for d in raw_shape)
    if len(shape) > MAX_RANK:
        buf.fail(f"{where} has rank {len(shape)}; qsim reads tensors of rank up to {MAX_RANK}")
    if any(d == 0 for d in shape):
        raise UnsupportedError(f"{where} is empty (shape {list(shape)})", location=buf.location,
                               hint="qsim graphs have no empty tensors")
    if any(d < 0 for d in shape):
        raise UnsupportedError(f"{where} has a dynamic shape {list(shape)}", location=buf.location,
                               hint="convert the model with a fixed input shape (batch 1)")
    type_code = t.scalar(S.TENSOR_TYPE, INT8, 0)
    if type_code not in S.TENSOR_TYPES:
        buf.fail(f"{where} has element type {type_code}, which the schema does not define")
    if t.table(S.TENSOR_SPARSITY, f"{where} sparsity") is not None:
        raise UnsupportedError(f"{where} is stored sparse", location=buf.location,
                               hint="convert the model without sparsification")
    buffer_index = t.scalar(S.TENSOR_BUFFER, UINT32, 0)
    if buffer_index >= max(len(buffers), 1) and buffer_index != 0:
        buf.fail(f"{where} names buffer {buffer_index}; the model has {len(buffers)} buffers")
    data = _tensor_data(buf, buffers[buffer_index], where, type_code, shape) if buffer_index else None
    quant = _quant(buf, t.table(S.TENSOR_QUANTIZATION, f"{where} quantization"), where, shape)
    return TensorDef(index, name, int(type_code), shape, data, quant)


def _tensor_data(buf: Buffer, b: Table, where: str, type_code: int, shape) -> np.ndarray | None:
    view = b.bytes_view(S.BUFFER_DATA, f"{where} buffer data")
    offset = int(b.scalar(S.BUFFER_OFFSET, UINT64, 0))
    if view is not None and view[1]:
        start, nbytes = view
    elif offset > 1:
        # offset/size are from the start of the file (1 marks "none" in the schema's writer)
        start, nbytes = offset, int(b.scalar(S.BUFFER_SIZE, UINT64, 0))
        buf.check(start, nbytes, f"{where} buffer (offset {offset}, size {nbytes})")
    else:
        return None
    name, dtype = S.TENSOR_TYPES[type_code]
    if dtype is None:
        raise UnsupportedError(f"{where} holds {name} constants", location=buf.location,
                               hint="qsim reads float, integer and bool tensors")
    itemsize = np.dtype(dtype).itemsize
    count = check_tensor_size(shape, itemsize, where, buf.location) // itemsize
    if nbytes != count * itemsize:
        buf.fail(f"{where}: its buffer holds {nbytes} bytes, the shape {list(shape)} of {name} needs "
                 f"{count * itemsize}")
    array = np.frombuffer(buf.data, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=start)
    return array.astype(np.dtype(dtype)).reshape(shape)


def _quant(buf: Buffer, q: Table | None, where: str, shape) -> QuantParams | None:
    if q is None:
        return None
    if q.scalar(S.QUANT_DETAILS_TYPE, UINT8, 0):
        raise UnsupportedError(f"{where} uses custom quantization details", location=buf.location,
                               hint="qsim reads affine (scale, zero point) quantization")
    scale = q.array(S.QUANT_SCALE, "f4", f"{where} quantization scale")
    if scale is None or scale.size == 0:
        return None                       # min/max only: a float tensor's recorded range
    zp = q.array(S.QUANT_ZERO_POINT, "i8", f"{where} quantization zero point")
    zp = np.zeros(scale.shape, np.int64) if zp is None or zp.size == 0 else zp.astype(np.int64)
    if zp.size != scale.size:
        buf.fail(f"{where}: {scale.size} scales but {zp.size} zero points")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        buf.fail(f"{where}: quantization scales {scale.tolist()[:4]} are not all positive and finite")
    axis = None
    if scale.size > 1:
        axis = int(q.scalar(S.QUANT_DIMENSION, INT32, 0))
        if not 0 <= axis < len(shape) or shape[axis] != scale.size:
            buf.fail(f"{where}: {scale.size} per-channel scales along quantized_dimension {axis} do not fit "
                     f"shape {list(shape)}")
    return QuantParams(scale.astype(np.float32), zp, axis)


