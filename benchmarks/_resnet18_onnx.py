"""ResNet-18 (torchvision's architecture, He et al. 2016) with seeded random weights as an ONNX
model and as an NNEF 1.0 folder, for benchmarks/quantize_speed.py.

Built with onnx.helper (no torch needed): conv1 7x7/2 + BatchNorm folded into the conv (as
onnxruntime's basic optimizations and nnef-tools' route do for the exported model), ReLU,
MaxPool 3x3/2, four stages of two basic blocks, global average pool, Flatten, Gemm 512->1000.
Random He-initialised weights: the model is for timing, not for accuracy. The NNEF folder is
written by nnef-tools (`python -m nnef_tools.convert --input-format onnx --output-format nnef`),
today's route of an ONNX model into qsim.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

INPUT = "input"
OUTPUT = "logits"


def _resnet18_graph(rng: np.random.Generator):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    counter = iter(range(10_000))

    def const(name, value):
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv(x, cin, cout, k, stride, relu=True):
        i = next(counter)
        fan_in = cin * k * k
        w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)
        b = rng.standard_normal(cout) * 0.05
        y = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, const(f"w{i}", w), const(f"b{i}", b)], [y],
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [y], [y + "_relu"]))
            return y + "_relu"
        return y

    x = conv(INPUT, 3, 64, 7, 2)
    nodes.append(helper.make_node("MaxPool", [x], ["pool0"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    x, cin = "pool0", 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if block == 0 and stage > 0 else 1
            h = conv(x, cin, width, 3, stride)
            h = conv(h, width, width, 3, 1, relu=False)
            skip = conv(x, cin, width, 1, stride, relu=False) if stride != 1 or cin != width else x
            s = f"add{next(counter)}"
            nodes.append(helper.make_node("Add", [h, skip], [s]))
            nodes.append(helper.make_node("Relu", [s], [s + "_relu"]))
            x, cin = s + "_relu", width
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    fc_w = rng.standard_normal((1000, 512)) * np.sqrt(1.0 / 512)
    nodes.append(helper.make_node("Gemm", ["flat", const("fc_w", fc_w), const("fc_b", np.zeros(1000))],
                                  [OUTPUT], transB=1))
    graph = helper.make_graph(
        nodes, "resnet18",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [1, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def build_onnx(folder: Path, seed: int = 0) -> Path:
    """Writes folder/resnet18.onnx (reused when present); returns its path."""
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    onnx_path = folder / "resnet18.onnx"
    if not onnx_path.exists():
        model = _resnet18_graph(np.random.default_rng(seed))
        onnx.checker.check_model(model)
        onnx.save(model, str(onnx_path))
    return onnx_path


def build(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """Writes folder/resnet18.onnx and the NNEF 1.0 folder folder/resnet18.nnef (reused when
    present); returns their paths."""
    onnx_path, nnef_path = build_onnx(folder, seed), folder / "resnet18.nnef"
    if not (nnef_path / "graph.nnef").exists():
        subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-format", "onnx",
                        "--output-format", "nnef", "--input-model", str(onnx_path),
                        "--output-model", str(nnef_path), "--keep-io-names"],
                       check=True, capture_output=True)
    return onnx_path, nnef_path
