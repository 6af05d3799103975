"""`load_tflite(path)`: a .tflite model as a float ir.Graph of NNEF 2.0 standard operators.

A quantized model's parameters come with it as annotations (context.py), so `qsim quantize`
needs no calibration data, as for a QDQ ONNX model; a float model is quantized from
calibration data. Every operator is converted in the stored order (TFLite's converter writes
an execution order); a builtin without a converter is refused, naming it, its version and
where it is.
"""
from __future__ import annotations

import os

from .. import ir
from ..errors import UnsupportedError
# each operator family registers its converters when imported
from . import convert_elementwise, convert_image, convert_layout, convert_nn, convert_slice  # noqa: F401
from .context import CONVERTERS, NCHW_TO_NHWC, Builder, OpContext, Value, quant_info
from .model import ModelDef, read_model
from . import schema as S

# tensor types a graph input may have: float data, or integers qsim's input quantization reads
_INPUT_TYPES = (S.FLOAT32, S.INT8, S.INT16, S.UINT8)


def load_tflite(path: str) -> ir.Graph:
    return convert_model(read_model(os.fspath(path)))


def convert_model(model: ModelDef) -> ir.Graph:
    return import_model(model)[0]


def import_model(model: ModelDef) -> tuple[ir.Graph, dict[int, Value]]:
    """The float graph and, by TFLite tensor index, the Value standing for each tensor (its
    ir name and whether it is held NCHW): what a per-tensor comparison with LiteRT reads."""
    b = Builder(model)
    inputs = []
    for index in model.inputs:
        t = model.tensors[index]
        if t.type_code not in _INPUT_TYPES:
            raise UnsupportedError(f"graph input {t.describe()} has element type {t.type_name}",
                                   location=b.location, hint="qsim reads float32, int8, int16 and uint8 inputs")
        if t.data is not None:
            raise UnsupportedError(f"graph input {t.describe()} holds constant data", location=b.location)
        b.add(t.name, t.shape, quant_info(t.quant, t.type_code))
        b.values[index] = Value(t.name, t.shape, False, quant_info(t.quant, t.type_code))
        inputs.append(t.name)
    for op in model.operators:
        ctx = OpContext(b, op)
        fn = CONVERTERS.get(op.builtin)
        if fn is None:
            what = f"custom operator '{op.custom_code}'" if op.builtin == "CUSTOM" else f"builtin {op.builtin}"
            ctx.fail(f"{what} (version {op.version}) is not supported", unsupported=True,
                     hint="qsim converts " + ", ".join(sorted(CONVERTERS)))
        fn(ctx)
        for k in range(len(op.outputs)):
            if ctx.out_def(k).index not in b.values:
                ctx.fail(f"internal: output {k} was not produced")
    outputs = [_graph_output(b, model, index) for index in model.outputs]
    return b.finish(inputs, outputs).verify(), dict(b.values)


def _graph_output(b: Builder, model: ModelDef, index: int) -> str:
    """The ir name of graph output `index`, in TFLite's layout, named as in the model."""
    v = b.values.get(index)
    t = model.tensors[index]
    if v is None:
        raise UnsupportedError(f"graph output {t.describe()} is computed by no operator", location=b.location)
    if not v.nchw:
        return v.name
    # the NCHW value was given the TFLite name: rename it, the transpose back takes the name
    held = b.tensors.pop(v.name)
    inner = b.fresh(f"{t.name}.nchw")
    b.tensors[inner] = ir.Tensor(inner, held.dtype, held.shape, data=None, quant=held.quant)
    b.ops = [_renamed(op, v.name, inner) for op in b.ops]
    b.add(t.name, t.shape, held.quant)
    b.emit("layout.transpose", [inner], t.name, {"axis": 0, "perm": NCHW_TO_NHWC}, f"output_{t.name}")
    b.values[index] = Value(t.name, t.shape, False, held.quant)
    return t.name


def _renamed(op: ir.Op, old: str, new: str) -> ir.Op:
    if old not in op.inputs and old not in op.outputs:
        return op
    swap = lambda names: tuple(new if n == old else n for n in names)  # noqa: E731
    return ir.Op(op.kind, swap(op.inputs), swap(op.outputs), op.attrs, name=op.name)
