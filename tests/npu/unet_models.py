"""Two small ONNX networks built in code for the end-to-end NPU tests (test_every_layer_on_npu.py):
a UNet-like encoder/decoder whose decoder upsamples by ConvTranspose (stride 2, kernels 2 and
4) and concatenates the skip path, and an embedding model whose Gather takes token
ids (an integer model input: indices computed at run time, not constants)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Net:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def _name(self, what):
        self.count += 1
        return f"{what}{self.count}"

    def const(self, array):
        name = self._name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def weight(self, shape, fan_in):
        return self.const(self.rng.normal(size=shape) * np.sqrt(2.0 / fan_in))

    def conv(self, x, cin, cout, k=3, stride=1):
        return self.node("Relu", [self.node("Conv", [x, self.weight((cout, cin, k, k), cin * k * k),
                                                     self.const(self.rng.normal(size=cout) * 0.1)],
                                            kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2)])

    def up(self, x, cin, cout, k, stride, pads, output_padding):
        return self.node("ConvTranspose", [x, self.weight((cin, cout, k, k), cin * k * k / stride ** 2),
                                           self.const(self.rng.normal(size=cout) * 0.1)],
                         kernel_shape=[k, k], strides=[stride] * 2, pads=pads, output_padding=output_padding)

    def model(self, inputs, output, name):
        graph = helper.make_graph(self.nodes, name, inputs,
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = min(model.ir_version, 9)
        return model

    def rename_last(self, name):
        self.nodes[-1].output[0] = name
        return name


def unet(rng, c: int = 6) -> onnx.ModelProto:
    """x [N, 3, 16, 16] -> two encoder levels -> decoder: ConvTranspose k2 s2 (exact doubling)
    and ConvTranspose k4 s2 pads 1 (the overlapping doubling of DCGAN/pix2pix decoders), each
    concatenated with its skip. (ONNX output_padding is not lowered by qsim's quantizer today.)"""
    n = _Net(rng)
    e1 = n.conv("x", 3, c)                                  # 16x16
    e2 = n.conv(e1, c, 2 * c, stride=2)                     # 8x8
    b = n.conv(e2, 2 * c, 3 * c, stride=2)                  # 4x4
    u2 = n.node("Relu", [n.up(b, 3 * c, 2 * c, 2, 2, [0, 0, 0, 0], [0, 0])])          # 8x8
    d2 = n.conv(n.node("Concat", [u2, e2], axis=1), 4 * c, 2 * c)
    u1 = n.node("Relu", [n.up(d2, 2 * c, c, 4, 2, [1, 1, 1, 1], [0, 0])])             # 16x16
    d1 = n.conv(n.node("Concat", [u1, e1], axis=1), 2 * c, c)
    n.node("Conv", [d1, n.weight((2, c, 1, 1), c), n.const(np.zeros(2))], kernel_shape=[1, 1])
    out = n.rename_last("y")
    return n.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])], out, "unet")


def embedding(rng, vocab: int = 20, dim: int = 8, seq: int = 6, classes: int = 4) -> onnx.ModelProto:
    """tokens [N, seq] int64 -> Gather(table [vocab, dim]) -> ReLU -> Flatten -> Gemm -> [N, classes]."""
    n = _Net(rng)
    table = n.const(rng.normal(size=(vocab, dim)))
    e = n.node("Relu", [n.node("Gather", [table, "tokens"], axis=0)])
    f = n.node("Flatten", [e], axis=1)
    n.node("Gemm", [f, n.weight((classes, seq * dim), seq * dim), n.const(rng.normal(size=classes) * 0.1)],
           transB=1)
    out = n.rename_last("y")
    return n.model([helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", seq])], out, "embedding")
