"""The quantized model and the inputs the NPU commands (`qsim simulate`, `qsim export-vectors`)
hand the NPU: a folder written by `qsim quantize`, a model file that carries its own quantization
(a .tflite or QDQ ONNX model) quantized in memory, or the embedded model quantized in memory;
the integer inputs from `--input` options, or the first embedded test image. The NPU modules
take the model and its inputs as arguments and load neither."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .. import zoo
from ..errors import UsageError
from ..quant.lowering.float_side import LoweredModel
from ..quant.pipeline import embedded_quantized_model, model_name_of
from ..loader import load, model_kind
from ..quant.options import QuantizeOptions
from ..quant.params import Precision
from ..tflite import activation_bits
from ..quant.pipeline import quantize_graph
from ..quant.qmodel import integer_inputs, is_quantized_model, load_quantized_model
from ..quant.target import TargetKind
from ..userdata import read_inputs as read_input_arrays


@dataclass(frozen=True)
class LoadedModel:
    model: LoweredModel
    name: str                 # for the report and the default output folder
    source: str               # for the golden vectors' manifest


def load_npu_model(path: str | None) -> LoadedModel:
    """A TOSA folder written by `qsim quantize`, a model file carrying its own quantization
    (quantized in memory on it, as `qsim quantize` without --calib does; a .tflite model with
    TFLite's double rounding), or (None) the embedded model quantized in memory."""
    if path is None:
        return LoadedModel(embedded_quantized_model(), "fashion_cnn",
                           "embedded Fashion-MNIST CNN (quantized in memory)")
    if os.path.isfile(path) and not is_quantized_model(path):
        tflite = model_kind(path) == "tflite"
        precision = Precision.INT16X8 if tflite and activation_bits(path) == 16 else Precision.INT8
        options = QuantizeOptions(show_progress=False, double_round=tflite, eval_limit=1, precision=precision)
        lowered = quantize_graph(load(path), None, None, options).model
        return LoadedModel(lowered, model_name_of(path), f"{path} (quantized in memory on its own parameters)")
    return LoadedModel(load_quantized_model(path, expect=TargetKind.TOSA), model_name_of(path), str(path))


def default_input(model) -> dict:
    """The first embedded Fashion-MNIST test image, quantized with the model's input_quant."""
    if len(model.graph.inputs) != 1:
        raise UsageError(f"model {model.graph.name!r} has {len(model.graph.inputs)} inputs",
                         hint="pass --input NAME=x.npy for each input")
    name = model.graph.inputs[0]
    images, _ = zoo.test_subset()
    shape = tuple(model.graph.tensor(name).shape)
    if tuple(images[:1].shape) != shape:
        raise UsageError(f"the embedded test image [1, 1, 28, 28] does not fit input {name!r} "
                         f"{list(shape)}", hint="pass --input x.npy")
    return integer_inputs(model, {name: images[:1]})


def read_inputs(model, specs: list[str] | None) -> tuple[dict, str]:
    """The integer inputs from `--input [NAME=]x.npy` (float arrays are quantized with the
    model's input_quant, integer arrays must have the input's dtype); default: the first
    embedded test image. Returns the inputs and a description for the manifest."""
    if not specs:
        return default_input(model), "the first embedded Fashion-MNIST test image"
    return integer_inputs(model, read_input_arrays(model.graph.inputs, specs)), ", ".join(specs)
