"""A small .tflite writer (flatbuffers.Builder, the schema facts of schema.py): what the test
suite and the fuzz generator use to build models in code, without TensorFlow.

    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 8, 8, 3], scale=0.05, zero_point=-3)
    k = w.tensor("k", np.int8, [4, 3, 3, 3], data=..., scale=[...], axis=0)
    y = w.tensor("y", np.int8, [1, 8, 8, 4], scale=0.1, zero_point=2)
    w.operator("CONV_2D", [x, k, b], [y], Options(1, [(0, "i8", 0), (1, "i32", 1), ...]))
    data = w.finish(inputs=[x], outputs=[y])

Options are (union type code, fields): a field is (slot, kind, value) with kind one of i8,
u8, i32, f32, bool or vi32 (a vector of int32). Every field is written, defaults too, so a
model says exactly what a test meant.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import flatbuffers
import numpy as np

from . import schema as S

_TYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.int32): 2, np.dtype(np.uint8): 3, np.dtype(np.int64): 4,
               np.dtype(np.bool_): 6, np.dtype(np.int16): 7, np.dtype(np.int8): 9}


@dataclass(frozen=True)
class Options:
    union_type: int
    fields: Sequence[tuple[int, str, object]] = ()


@dataclass
class _Tensor:
    name: str
    type_code: int
    shape: tuple[int, ...]
    buffer: int
    scale: np.ndarray | None
    zero_point: np.ndarray | None
    axis: int


@dataclass
class ModelWriter:
    tensors: list[_Tensor] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=lambda: [b""])     # buffer 0: the empty sentinel
    opcodes: list[tuple[int, int]] = field(default_factory=list)    # (builtin code, version)
    operators: list[tuple[int, list[int], list[int], Options | None]] = field(default_factory=list)

    def tensor(self, name: str, dtype, shape, data=None, scale=None, zero_point=None, axis: int = 0) -> int:
        dt = np.dtype(dtype)
        buffer = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data, dtype=dt.newbyteorder("<")).reshape(shape).tobytes())
            buffer = len(self.buffers) - 1
        scale_a = None if scale is None else np.atleast_1d(np.asarray(scale, np.float32))
        zp = None
        if scale_a is not None:
            zp = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point, np.int64))
            zp = np.broadcast_to(zp, scale_a.shape).copy()
        self.tensors.append(_Tensor(name, _TYPE_CODES[dt], tuple(int(d) for d in shape), buffer, scale_a, zp, axis))
        return len(self.tensors) - 1

    def operator(self, builtin: str, inputs: Sequence[int], outputs: Sequence[int],
                 options: Options | None = None, version: int = 1) -> None:
        key = (S.builtin_code(builtin), version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        self.operators.append((self.opcodes.index(key), list(inputs), list(outputs), options))

    # ---- serialization

    def finish(self, inputs: Sequence[int], outputs: Sequence[int], external: bool = False) -> bytes:
        """The model's bytes. `external`: constant data after the flatbuffer, found through the
        buffers' offset/size fields (how files over 2 GB store it), 16-byte aligned."""
        if not external:
            return self._serialize(inputs, outputs, None)
        # offsets are fixed-width fields: a first pass with placeholders gives the size
        size = len(self._serialize(inputs, outputs, [0] * len(self.buffers)))
        offsets, at = [], -(-size // 16) * 16
        for data in self.buffers:
            offsets.append(at)
            at = -(-(at + len(data)) // 16) * 16
        head = self._serialize(inputs, outputs, offsets)
        assert len(head) == size
        body = bytearray(head) + bytes(at - size)
        for offset, data in zip(offsets, self.buffers):
            body[offset:offset + len(data)] = data
        return bytes(body)

    def _serialize(self, inputs, outputs, offsets) -> bytes:
        b = flatbuffers.Builder(1024)
        b.ForceDefaults(True)
        buffers = [self._buffer(b, data) if offsets is None else
                   self._table(b, [(S.BUFFER_OFFSET, "u64", offsets[i] if data else 0),
                                   (S.BUFFER_SIZE, "u64", len(data))])
                   for i, data in enumerate(self.buffers)]
        tensors = [self._tensor(b, t) for t in self.tensors]
        operators = [self._operator(b, *op) for op in self.operators]
        codes = [self._table(b, [(S.OPCODE_DEPRECATED_BUILTIN, "i8", min(code, 127)),
                                 (S.OPCODE_VERSION, "i32", version), (S.OPCODE_BUILTIN, "i32", code)])
                 for code, version in self.opcodes]
        name = b.CreateString("main")
        subgraph = self._table(b, [(S.SUBGRAPH_TENSORS, "off", _offsets(b, tensors)),
                                   (S.SUBGRAPH_INPUTS, "off", _ints(b, inputs)),
                                   (S.SUBGRAPH_OUTPUTS, "off", _ints(b, outputs)),
                                   (S.SUBGRAPH_OPERATORS, "off", _offsets(b, operators)),
                                   (S.SUBGRAPH_NAME, "off", name)])
        description = b.CreateString("written by qsim.tflite.writer")
        model = self._table(b, [(S.MODEL_VERSION, "u32", 3), (S.MODEL_OPERATOR_CODES, "off", _offsets(b, codes)),
                                (S.MODEL_SUBGRAPHS, "off", _offsets(b, [subgraph])),
                                (S.MODEL_DESCRIPTION, "off", description),
                                (S.MODEL_BUFFERS, "off", _offsets(b, buffers))])
        b.Finish(model, file_identifier=S.FILE_IDENTIFIER)
        return bytes(b.Output())

    @staticmethod
    def _table(b, fields) -> int:
        b.StartObject(max(slot for slot, _, _ in fields) + 1 if fields else 0)
        for slot, kind, value in fields:
            if kind == "off":
                b.PrependUOffsetTRelativeSlot(slot, value, 0)
            elif kind == "i8":
                b.PrependInt8Slot(slot, int(value), 0)
            elif kind == "u8":
                b.PrependUint8Slot(slot, int(value), 0)
            elif kind == "i32":
                b.PrependInt32Slot(slot, int(value), 0)
            elif kind == "u32":
                b.PrependUint32Slot(slot, int(value), 0)
            elif kind == "u64":
                b.PrependUint64Slot(slot, int(value), 0)
            elif kind == "f32":
                b.PrependFloat32Slot(slot, float(value), 0.0)
            elif kind == "bool":
                b.PrependBoolSlot(slot, bool(value), False)
            else:
                raise ValueError(f"field kind {kind!r}")
        return b.EndObject()

    def _buffer(self, b, data: bytes) -> int:
        fields = []
        if data:
            b.StartVector(1, len(data), 16)       # schema: force_align 16
            b.head = b.head - len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            fields.append((S.BUFFER_DATA, "off", b.EndVector()))
        return self._table(b, fields)

    def _tensor(self, b, t: _Tensor) -> int:
        quant = None
        if t.scale is not None:
            scale = b.CreateNumpyVector(t.scale.astype("<f4"))
            zp = b.CreateNumpyVector(t.zero_point.astype("<i8"))
            quant = self._table(b, [(S.QUANT_SCALE, "off", scale), (S.QUANT_ZERO_POINT, "off", zp),
                                    (S.QUANT_DIMENSION, "i32", t.axis)])
        shape = _ints(b, t.shape)
        name = b.CreateString(t.name)
        fields = [(S.TENSOR_SHAPE, "off", shape), (S.TENSOR_TYPE, "i8", t.type_code),
                  (S.TENSOR_BUFFER, "u32", t.buffer), (S.TENSOR_NAME, "off", name)]
        if quant is not None:
            fields.append((S.TENSOR_QUANTIZATION, "off", quant))
        return self._table(b, fields)

    def _operator(self, b, code_index: int, inputs, outputs, options: Options | None) -> int:
        fields = [(S.OPERATOR_OPCODE_INDEX, "u32", code_index), (S.OPERATOR_INPUTS, "off", _ints(b, inputs)),
                  (S.OPERATOR_OUTPUTS, "off", _ints(b, outputs))]
        if options is not None:
            vectors = {slot: _ints(b, value) for slot, kind, value in options.fields if kind == "vi32"}
            table = self._table(b, [(slot, "off", vectors[slot]) if kind == "vi32" else (slot, kind, value)
                                    for slot, kind, value in options.fields])
            fields += [(S.OPERATOR_OPTIONS_TYPE, "u8", options.union_type), (S.OPERATOR_OPTIONS, "off", table)]
        return self._table(b, fields)


def _ints(b, values) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), dtype="<i4"))


def _offsets(b, offsets) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()
