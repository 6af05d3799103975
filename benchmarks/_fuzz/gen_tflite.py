"""The `tflite` fuzz target: small quantized .tflite models written with qsim.tflite.writer (a
conv, depthwise or dense layer; an add, max or average pooling, MEAN, LEAKY_RELU, a bilinear
resize or a softmax), then mutated where the TFLite
reader (qsim/tflite/model.py, flatbuf.py) and importer decide: quantization scales (0,
negative, NaN, inf, huge) and zero points, per-channel axes, shapes (0, negative, huge, rank
9), buffer data (short, long, offset/size past the file), tensor and opcode indices, builtin
codes (unsupported, out of the enum), option fields, and raw patches of offsets, vtable entries
and vector lengths, or a truncation. Run as `qsim check m.tflite`, `qsim run m.tflite --input
x.npy`, `qsim quantize m.tflite -o q` or `qsim export-vectors m.tflite --out v`."""
from __future__ import annotations

import random
import struct

import numpy as np

from qsim.tflite.writer import ModelWriter, Options

from .gen_onnx import model_command
from .runner import Case

INPUT_SHAPE = [1, 6, 6, 3]
_SCALES = (0.0, -0.1, float("nan"), float("inf"), 1e-45, 1e38, 2.0 ** -30, 0.05)
_ZERO_POINTS = (-129, -128, 0, 127, 128, 2 ** 31 - 1, -(2 ** 31))
_DIMS = (0, -1, 1 << 20, 1 << 31 - 1, 7)


def _model(rng: random.Random, w: ModelWriter) -> tuple[list[int], list[int]]:
    nrng = np.random.default_rng(rng.randrange(2 ** 32))
    x = w.tensor("x", np.int8, INPUT_SHAPE, scale=0.05, zero_point=rng.choice((-3, -128, 0)))
    layer = rng.choice(("conv", "depthwise", "dense"))
    if layer == "conv":
        k = w.tensor("k", np.int8, [4, 3, 3, 3], data=nrng.integers(-127, 128, (4, 3, 3, 3)),
                     scale=nrng.uniform(0.001, 0.02, 4), axis=0)
        b = w.tensor("b", np.int32, [4], data=nrng.integers(-999, 999, 4), scale=np.full(4, 1e-4))
        y = w.tensor("y", np.int8, [1, 6, 6, 4], scale=0.1, zero_point=1)
        w.operator("CONV_2D", [x, k, b], [y], Options(1, [(0, "i8", 0), (1, "i32", 1), (2, "i32", 1),
                                                          (3, "i8", rng.choice((0, 1, 3)))]))
    elif layer == "depthwise":
        k = w.tensor("k", np.int8, [1, 3, 3, 3], data=nrng.integers(-127, 128, (1, 3, 3, 3)),
                     scale=nrng.uniform(0.001, 0.02, 3), axis=3)
        y = w.tensor("y", np.int8, [1, 6, 6, 3], scale=0.1, zero_point=1)
        w.operator("DEPTHWISE_CONV_2D", [x, k, -1], [y], Options(2, [(0, "i8", 0), (1, "i32", 1), (2, "i32", 1),
                                                                     (3, "i32", 1), (4, "i8", 3)]), version=2)
    else:
        k = w.tensor("k", np.int8, [5, 108], data=nrng.integers(-127, 128, (5, 108)), scale=0.01)
        y = w.tensor("y", np.int8, [1, 5], scale=0.2, zero_point=0)
        w.operator("FULLY_CONNECTED", [x, k, -1], [y], Options(8, [(0, "i8", 0)]))
    tail = rng.choice(("none", "add", "pool", "softmax", "mean", "average", "leaky", "resize"))
    shape = list(w.tensors[y].shape)
    if tail == "add":
        z = w.tensor("z", np.int8, shape, scale=0.15, zero_point=-2)
        w.operator("ADD", [y, y], [z], Options(11, [(0, "i8", 0)]))
        y = z
    elif tail == "pool" and len(shape) == 4:
        z = w.tensor("z", np.int8, [1, 3, 3, shape[3]], scale=0.1, zero_point=1)
        w.operator("MAX_POOL_2D", [y], [z], Options(5, [(0, "i8", 1), (1, "i32", 2), (2, "i32", 2), (3, "i32", 2),
                                                        (4, "i32", 2)]))
        y = z
    elif tail == "mean" and len(shape) == 4:
        axes = w.tensor("axes", np.int32, [2], data=[1, 2])
        z = w.tensor("z", np.int8, [1, shape[3]], scale=0.05, zero_point=-1)
        w.operator("MEAN", [y, axes], [z], Options(27, [(0, "bool", False)]))
        y = z
    elif tail == "average" and len(shape) == 4:
        q = w.tensors[y]
        z = w.tensor("z", np.int8, [1, 6, 6, shape[3]], scale=q.scale, zero_point=q.zero_point)
        w.operator("AVERAGE_POOL_2D", [y], [z], Options(5, [(0, "i8", 0), (1, "i32", 1), (2, "i32", 1),
                                                            (3, "i32", 3), (4, "i32", 3)]))
        y = z
    elif tail == "leaky":
        z = w.tensor("z", np.int8, shape, scale=0.05, zero_point=-20)
        w.operator("LEAKY_RELU", [y], [z], Options(75, [(0, "f32", rng.choice((0.1, 0.0, 1.0, -0.5)))]))
        y = z
    elif tail == "resize" and len(shape) == 4:
        q = w.tensors[y]
        size = w.tensor("size", np.int32, [2], data=[12, 12])
        z = w.tensor("z", np.int8, [1, 12, 12, shape[3]], scale=q.scale, zero_point=q.zero_point)
        w.operator("RESIZE_BILINEAR", [y, size], [z], Options(15, [(2, "bool", False), (3, "bool", rng.random() < 0.5)]))
        y = z
    elif tail == "softmax" and len(shape) == 2:
        z = w.tensor("z", np.int8, shape, scale=1 / 256, zero_point=-128)
        w.operator("SOFTMAX", [y], [z], Options(9, [(0, "f32", 1.0)]))
        y = z
    return [x], [y]


def _mutate_structure(rng: random.Random, w: ModelWriter) -> str:
    t = rng.choice(w.tensors)
    kind = rng.choice(("scale", "zero_point", "axis", "shape", "buffer", "builtin", "index", "version"))
    if kind == "scale" and t.scale is not None:
        t.scale = np.full(t.scale.shape, rng.choice(_SCALES), np.float32)
    elif kind == "zero_point" and t.zero_point is not None:
        t.zero_point = np.full(t.zero_point.shape, rng.choice(_ZERO_POINTS), np.int64)
    elif kind == "axis":
        t.axis = rng.choice((-1, 1, 2, 3, 9, 1 << 20))
    elif kind == "shape":
        dims = list(t.shape) or [1]
        dims[rng.randrange(len(dims))] = rng.choice(_DIMS)
        t.shape = tuple(dims) if rng.random() < 0.9 else tuple([2] * 9)
    elif kind == "buffer" and t.buffer:
        data = w.buffers[t.buffer]
        w.buffers[t.buffer] = rng.choice((data[:-1], data + b"\0" * 5, b"", data * 3))
    elif kind == "builtin":
        code, version = rng.choice(w.opcodes)
        w.opcodes[w.opcodes.index((code, version))] = (rng.choice((16, 32, 118, 150, 209, 255, 1 << 20)), version)
    elif kind == "index":
        op = rng.randrange(len(w.operators))
        index, ins, outs, options = w.operators[op]
        target = rng.choice((ins, outs))
        if target:
            target[rng.randrange(len(target))] = rng.choice((-1, len(w.tensors), 1 << 30))
    else:
        code, version = rng.choice(w.opcodes)
        w.opcodes[w.opcodes.index((code, version))] = (code, rng.choice((0, 7, 99, -1)))
    return kind


def _patch(rng: random.Random, blob: bytes) -> bytes:
    data = bytearray(blob)
    for _ in range(rng.randint(1, 4)):
        fmt = rng.choice(("<I", "<H", "<B", "<Q"))
        width = struct.calcsize(fmt)
        at = rng.randrange(max(len(data) - width, 1))
        value = rng.choice((0, 1, 4, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, rng.getrandbits(32)))
        if at + width <= len(data):
            struct.pack_into(fmt, data, at, value & ((1 << (8 * width)) - 1))
    return bytes(data)


def gen_tflite(rng: random.Random, corpus) -> Case:
    w = ModelWriter()
    inputs, outputs = _model(rng, w)
    pick = rng.random()
    kind = "valid"
    if pick < 0.5:
        kind = "structured:" + "+".join(_mutate_structure(rng, w) for _ in range(rng.randint(1, 2)))
    try:
        blob = w.finish(inputs, outputs, external=rng.random() < 0.2)
    except (OverflowError, ValueError, KeyError, struct.error):
        w = ModelWriter()
        inputs, outputs = _model(rng, w)
        blob, kind = w.finish(inputs, outputs), "valid"
    if 0.5 <= pick < 0.8:
        blob, kind = _patch(rng, blob), "bytes"
    elif 0.8 <= pick < 0.9:
        blob, kind = blob[:rng.randrange(len(blob))], "truncated"
    files = {"m.tflite": blob}
    argv = model_command(rng, files, "m.tflite", INPUT_SHAPE,
                         ((0.4, "check"), (0.65, "run"), (0.9, "quantize"), (1.0, "export-vectors")))
    return Case("tflite", kind, files, argv=argv, timeout_s=90)
