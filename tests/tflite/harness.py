"""Shared by the TFLite tests: small quantized models written in code (qsim.tflite.writer),
run by qsim (import, quantize on the model's own parameters, integer execution) and by
LiteRT's interpreter with its reference kernels (BUILTIN_REF), compared element for element."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from qsim.quant.pipeline import quantize_graph
from qsim.runtime.executor import execute
from qsim.tflite.context import NCHW_TO_NHWC
from qsim.tflite.load import import_model
from qsim.tflite.model import parse_model
from qsim.tflite.writer import ModelWriter, Options
from qsim.quant.options import QuantizeOptions
from qsim.quant.params import Precision

# TFLite reference kernels round twice (MultiplyByQuantizedMultiplier): TOSA double_round
TFLITE_OPTIONS = QuantizeOptions(show_progress=False, double_round=True, eval_limit=1)

# BuiltinOptions union codes and the option tables' field slots (schema.fbs)
CONV_OPTIONS, DEPTHWISE_OPTIONS, POOL_OPTIONS, FC_OPTIONS, SOFTMAX_OPTIONS = 1, 2, 5, 8, 9
CONCAT_OPTIONS, ADD_OPTIONS, RESHAPE_OPTIONS, MUL_OPTIONS, PAD_OPTIONS = 10, 11, 17, 21, 22
REDUCER_OPTIONS, SUB_OPTIONS, LEAKY_RELU_OPTIONS = 27, 28, 75
RELU, RELU6 = 1, 3


def conv_options(stride=(1, 1), padding=0, act=0, dilation=(1, 1)) -> Options:
    return Options(CONV_OPTIONS, [(0, "i8", padding), (1, "i32", stride[1]), (2, "i32", stride[0]),
                                  (3, "i8", act), (4, "i32", dilation[1]), (5, "i32", dilation[0])])


def depthwise_options(stride=(1, 1), padding=0, act=0, multiplier=1) -> Options:
    return Options(DEPTHWISE_OPTIONS, [(0, "i8", padding), (1, "i32", stride[1]), (2, "i32", stride[0]),
                                       (3, "i32", multiplier), (4, "i8", act), (5, "i32", 1), (6, "i32", 1)])


def pool_options(kernel, stride, padding=1, act=0) -> Options:
    return Options(POOL_OPTIONS, [(0, "i8", padding), (1, "i32", stride[1]), (2, "i32", stride[0]),
                                  (3, "i32", kernel[1]), (4, "i32", kernel[0]), (5, "i8", act)])


def act_options(code: int, act: int = 0) -> Options:
    return Options(code, [(0, "i8", act)])


class Net:
    """A ModelWriter with helpers for quantized layers; `rng` seeds weights."""

    def __init__(self, seed: int = 0):
        self.w = ModelWriter()
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def act(self, shape, scale, zp, dtype=np.int8, name=None) -> int:
        self.count += 1
        return self.w.tensor(name or f"t{self.count}", dtype, shape, scale=scale, zero_point=zp)

    def weights(self, shape, axis=0, per_channel=True) -> int:
        self.count += 1
        data = self.rng.integers(-127, 128, shape).astype(np.int8)
        channels = shape[axis]
        scale = self.rng.uniform(0.002, 0.02, channels if per_channel else 1)
        return self.w.tensor(f"w{self.count}", np.int8, shape, data=data, scale=scale, zero_point=0, axis=axis)

    def bias(self, n, in_scale, w_index) -> int:
        self.count += 1
        w_scale = self.w.tensors[w_index].scale.astype(np.float64)
        scale = (np.float32(in_scale) * w_scale.astype(np.float32)).astype(np.float32)
        data = self.rng.integers(-3000, 3000, n).astype(np.int32)
        return self.w.tensor(f"b{self.count}", np.int32, [n], data=data,
                             scale=np.broadcast_to(scale, (n,)), zero_point=0)

    def const(self, name, dtype, data) -> int:
        data = np.asarray(data, dtype)
        return self.w.tensor(name, dtype, data.shape, data=data)

    def op(self, builtin, inputs, outputs, options=None, version=1):
        self.w.operator(builtin, inputs, outputs, options, version)

    def finish(self, inputs, outputs, external: bool = False) -> bytes:
        return self.w.finish(inputs, outputs, external)


@dataclass
class Parity:
    elements: int
    differing: int
    max_lsb: int


def litert(data: bytes, x: np.ndarray):
    """LiteRT's interpreter with the reference kernels, run on x, every tensor kept."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it


def run_litert(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    it = litert(data, x)
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def options_for(model) -> QuantizeOptions:
    """TFLITE_OPTIONS, at 16x8 for a model with an int16 input."""
    int16 = model.tensors[model.inputs[0]].type_code == 7
    return dataclasses.replace(TFLITE_OPTIONS, precision=Precision.INT16X8) if int16 else TFLITE_OPTIONS


def lower(data: bytes):
    model = parse_model(data)
    graph, _ = import_model(model)
    return graph, quantize_graph(graph, None, None, options_for(model)).model


def run_qsim(lowered, graph, x: np.ndarray, backend: str = "reference") -> list[np.ndarray]:
    feed = {lowered.tensor_map[graph.inputs[0]].name: x}
    out = execute(lowered.graph, feed, backend)
    return [out[lowered.tensor_map[name].name] for name in graph.outputs]


def corner_inputs(shape, zp: int, seed: int = 1, dtype=np.int8, count: int = 4) -> list[np.ndarray]:
    """Seeded inputs, both rails, -128 everywhere and the zero point everywhere."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    feeds = [rng.integers(info.min, info.max + 1, shape).astype(dtype) for _ in range(count)]
    feeds += [np.full(shape, info.min, dtype), np.full(shape, info.max, dtype), np.full(shape, zp, dtype)]
    alternating = np.where(np.indices(shape).sum(axis=0) % 2 == 0, info.min, info.max).astype(dtype)
    return feeds + [alternating]


def parity(data: bytes, feeds, backend: str = "reference") -> Parity:
    graph, lowered = lower(data)
    elements = differing = max_lsb = 0
    for x in feeds:
        for got, want in zip(run_qsim(lowered, graph, x, backend), run_litert(data, x)):
            assert got.shape == want.shape, (got.shape, want.shape)
            diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
            elements += diff.size
            differing += int(np.count_nonzero(diff))
            max_lsb = max(max_lsb, int(diff.max(initial=0)))
    return Parity(elements, differing, max_lsb)


def tensor_parity(data: bytes, feeds, backend: str = "reference") -> dict[str, Parity]:
    """Parity of every computed TFLite tensor that has an integer counterpart, by tensor name."""
    model = parse_model(data)
    graph, values = import_model(model)
    lowered = quantize_graph(graph, None, None, options_for(model)).model
    result: dict[str, Parity] = {}
    for x in feeds:
        feed = {lowered.tensor_map[graph.inputs[0]].name: x}
        ours, theirs = execute(lowered.graph, feed, backend), litert(data, x)
        for index, value in values.items():
            low = lowered.tensor_map.get(value.name)
            if value.data is not None or low is None or low.name not in ours:
                continue
            held = ours[low.name].transpose(np.argsort(low.perm))
            got = held.transpose(NCHW_TO_NHWC) if value.nchw else held
            want = theirs.get_tensor(index)
            diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
            name = model.tensors[index].name
            old = result.get(name, Parity(0, 0, 0))
            result[name] = Parity(old.elements + diff.size, old.differing + int(np.count_nonzero(diff)),
                                  max(old.max_lsb, int(diff.max(initial=0))))
    return result
