"""The blocks of common networks as small ONNX models, built in code with onnx.helper the way
PyTorch's exporter writes them (dynamic batch, NCHW, opset 13-17), for the model-matrix tests
(test_model_matrix.py).

Each builder takes a numpy Generator (weights: Kaiming-normal convolutions, batch norms near
the identity) and returns an onnx.ModelProto with one input 'x'. `Net` collects nodes and
initializers so that a block reads like its PyTorch module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass
class Net:
    rng: np.random.Generator
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    count: int = 0

    def name(self, what: str) -> str:
        self.count += 1
        return f"{what}{self.count}"

    def const(self, what: str, array) -> str:
        name = self.name(what)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, shape, scale: float) -> np.ndarray:
        return (self.rng.normal(size=shape) * scale).astype(np.float32)

    def node(self, op: str, inputs, n_out: int = 1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    # ---- layers

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1,
             bias: bool = False) -> str:
        w = self.const("w", self.normal((cout, cin // groups, k, k), np.sqrt(2.0 / (cin // groups * k * k))))
        inputs = [x, w] + ([self.const("b", self.normal(cout, 0.1))] if bias else [])
        return self.node("Conv", inputs, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2,
                         group=groups)

    def bn(self, x: str, c: int) -> str:
        return self.node("BatchNormalization", [
            x, self.const("gamma", 1 + self.normal(c, 0.1)), self.const("beta", self.normal(c, 0.1)),
            self.const("mean", self.normal(c, 0.1)), self.const("var", 1 + np.abs(self.normal(c, 0.1)))],
            epsilon=1e-5)

    def conv_bn(self, x, cin, cout, k=3, stride=1, groups=1) -> str:
        return self.bn(self.conv(x, cin, cout, k, stride, groups), cout)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def relu6(self, x: str) -> str:
        return self.node("Clip", [x, self.const("zero", np.float32(0)), self.const("six", np.float32(6))])

    def hardswish(self, x: str) -> str:
        return self.node("HardSwish", [x])

    def add(self, a: str, b: str) -> str:
        return self.node("Add", [a, b])

    def linear(self, x: str, cin: int, cout: int) -> str:
        """nn.Linear as PyTorch exports it on a rank-3 input: MatMul by Wᵀ, then Add."""
        w = self.const("W", self.normal((cin, cout), cin ** -0.5))
        return self.add(self.node("MatMul", [x, w]), self.const("bias", self.normal(cout, 0.1)))

    def gemm(self, x: str, cin: int, cout: int) -> str:
        w = self.const("W", self.normal((cout, cin), np.sqrt(2.0 / cin)))
        return self.node("Gemm", [x, w, self.const("bias", self.normal(cout, 0.1))], transB=1)

    def model(self, input_shape, outputs, opset: int = 13, name: str = "block") -> onnx.ModelProto:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *input_shape])
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        graph = helper.make_graph(self.nodes, name, [x], outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = min(model.ir_version, 9)     # onnxruntime reads IR versions up to 9/10
        return model

    def output(self, value: str, name: str) -> str:
        """Renames the last node's output `value` to the graph output `name`."""
        for node in self.nodes:
            for i, out in enumerate(node.output):
                if out == value:
                    node.output[i] = name
            for i, inp in enumerate(node.input):
                if inp == value:
                    node.input[i] = name
        return name


def resnet_basic_blocks(rng, c: int = 8) -> onnx.ModelProto:
    """ResNet-18's two block kinds: an identity block, then a stride-2 block whose shortcut is a
    1x1 convolution + batch norm (torchvision BasicBlock with downsample)."""
    n = Net(rng)
    h = n.relu(n.conv_bn("x", c, c))
    y = n.relu(n.add(n.conv_bn(h, c, c), "x"))
    h = n.relu(n.conv_bn(y, c, 2 * c, stride=2))
    short = n.conv_bn(y, c, 2 * c, k=1, stride=2)
    n.output(n.relu(n.add(n.conv_bn(h, 2 * c, 2 * c), short)), "y")
    return n.model((c, 8, 8), ["y"], name="resnet_basic_blocks")


def inverted_residual(rng, c: int = 8, expand: int = 4) -> onnx.ModelProto:
    """MobileNetV2: 1x1 expansion + ReLU6, 3x3 depthwise + ReLU6, linear 1x1 projection, residual."""
    n = Net(rng)
    h = c * expand
    e = n.relu6(n.conv_bn("x", c, h, k=1))
    d = n.relu6(n.conv_bn(e, h, h, groups=h))
    n.output(n.add("x", n.conv_bn(d, h, c, k=1)), "y")
    return n.model((c, 8, 8), ["y"], name="inverted_residual")


def mobilenetv3_block(rng, c: int = 8, expand: int = 3, squeeze: int = 8) -> onnx.ModelProto:
    """MobileNetV3: 1x1 expansion + HardSwish, 3x3 depthwise + HardSwish, squeeze-and-excitation
    (global average pool, 1x1 conv + ReLU, 1x1 conv + HardSigmoid, channel-wise Mul), linear 1x1
    projection, residual (torchvision InvertedResidual with SqueezeExcitation)."""
    n = Net(rng)
    h = c * expand
    e = n.hardswish(n.conv_bn("x", c, h, k=1))
    d = n.hardswish(n.conv_bn(e, h, h, groups=h))
    pooled = n.node("GlobalAveragePool", [d])
    s = n.relu(n.conv(pooled, h, squeeze, k=1, bias=True))
    gate = n.node("HardSigmoid", [n.conv(s, squeeze, h, k=1, bias=True)], alpha=1 / 6, beta=0.5)
    n.output(n.add(n.conv_bn(n.node("Mul", [d, gate]), h, c, k=1), "x"), "y")
    return n.model((c, 8, 8), ["y"], opset=14, name="mobilenetv3_block")


def shufflenet_unit(rng, c: int = 16) -> onnx.ModelProto:
    """ShuffleNetV2 stride-1 unit: Split in halves, branch (1x1 + ReLU, 3x3 depthwise, 1x1 +
    ReLU) on the second, Concat, channel shuffle (Reshape [N, 2, c/2, H, W], Transpose, Reshape)."""
    n = Net(rng)
    half = c // 2
    a, b = n.node("Split", ["x", n.const("split", np.asarray([half, half], np.int64))], n_out=2, axis=1)
    br = n.relu(n.conv_bn(b, half, half, k=1))
    br = n.conv_bn(br, half, half, groups=half)
    br = n.relu(n.conv_bn(br, half, half, k=1))
    cat = n.node("Concat", [a, br], axis=1)
    grouped = n.node("Reshape", [cat, n.const("shape5", np.asarray([-1, 2, half, 6, 6], np.int64))])
    swapped = n.node("Transpose", [grouped], perm=[0, 2, 1, 3, 4])
    n.output(n.node("Reshape", [swapped, n.const("shape4", np.asarray([-1, c, 6, 6], np.int64))]), "y")
    return n.model((c, 6, 6), ["y"], name="shufflenet_unit")


def squeezenet_fire(rng, c: int = 16, squeeze: int = 4, expand: int = 8) -> onnx.ModelProto:
    """SqueezeNet 1.1 fire module: 1x1 squeeze + ReLU, then 1x1 and 3x3 expansions + ReLU,
    concatenated over channels; a max pool with ceil_mode before it as in the network."""
    n = Net(rng)
    p = n.node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    s = n.relu(n.conv(p, c, squeeze, k=1, bias=True))
    e1 = n.relu(n.conv(s, squeeze, expand, k=1, bias=True))
    e3 = n.relu(n.conv(s, squeeze, expand, k=3, bias=True))
    n.output(n.node("Concat", [e1, e3], axis=1), "y")
    return n.model((c, 9, 9), ["y"], name="squeezenet_fire")


def prelu_cnn(rng) -> onnx.ModelProto:
    """MTCNN RNet in small: conv + PReLU + max pool (ceil_mode), conv + PReLU, flatten, Gemm +
    PReLU, then two heads: box regression [N, 4] first (as facenet-pytorch orders them) and the
    softmax face probability [N, 2]."""
    n = Net(rng)
    h = n.node("PRelu", [n.conv("x", 3, 8, bias=True), n.const("slope", np.abs(n.normal((8, 1, 1), 0.25)))])
    h = n.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    h = n.node("PRelu", [n.conv(h, 8, 12, bias=True), n.const("slope", np.abs(n.normal((12, 1, 1), 0.25)))])
    f = n.node("Flatten", [h])
    f = n.node("PRelu", [n.gemm(f, 12 * 6 * 6, 32), n.const("slope", np.abs(n.normal(32, 0.25)))])
    n.output(n.gemm(f, 32, 4), "box")
    n.output(n.node("Softmax", [n.gemm(f, 32, 2)], axis=1), "prob")
    return n.model((3, 12, 12), ["box", "prob"], name="prelu_cnn")


def transformer_encoder_layer(rng, d: int = 16, heads: int = 2, ff: int = 32, seq: int = 6) -> onnx.ModelProto:
    """torch.nn.TransformerEncoderLayer(batch_first=True, activation='gelu') at opset 17: q/k/v
    projections, heads split by Reshape + Transpose, QKᵀ / sqrt(d_head), Softmax, AV, heads
    merged, output projection, residual + LayerNormalization, feed-forward with the erf GELU
    (Div, Erf, Add, Mul, Mul), residual + LayerNormalization."""
    n = Net(rng)
    hd = d // heads
    split = n.const("split_shape", np.asarray([0, seq, heads, hd], np.int64))
    q, k, v = (n.node("Transpose", [n.node("Reshape", [n.linear("x", d, d), split])], perm=perm)
               for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]))
    scores = n.node("Div", [n.node("MatMul", [q, k]), n.const("sqrt_hd", np.float32(np.sqrt(hd)))])
    av = n.node("MatMul", [n.node("Softmax", [scores], axis=-1), v])
    merged = n.node("Reshape", [n.node("Transpose", [av], perm=[0, 2, 1, 3]),
                                n.const("merge_shape", np.asarray([0, seq, d], np.int64))])
    h1 = layer_norm(n, n.add("x", n.linear(merged, d, d)), d)
    f = n.linear(h1, d, ff)
    erf = n.node("Erf", [n.node("Div", [f, n.const("sqrt2", np.float32(np.sqrt(2.0)))])])
    g = n.node("Mul", [n.node("Mul", [f, n.add(erf, n.const("one", np.float32(1)))]), n.const("half", np.float32(0.5))])
    n.output(layer_norm(n, n.add(h1, n.linear(g, ff, d)), d), "y")
    return n.model((seq, d), ["y"], opset=17, name="transformer_encoder_layer")


def layer_norm(n: Net, x: str, d: int) -> str:
    return n.node("LayerNormalization", [x, n.const("ln_g", 1 + n.normal(d, 0.1)), n.const("ln_b", n.normal(d, 0.1))],
                  axis=-1, epsilon=1e-5)


def conv1d_net(rng, c: int = 8, length: int = 32) -> onnx.ModelProto:
    """A keyword-spotting front end on MFCC frames [10, 32]: Conv1d + BatchNorm1d + ReLU,
    MaxPool1d, a stride-2 Conv1d + BatchNorm1d + ReLU, AvgPool1d, global average pooling and a
    linear head (torch's nn.Conv1d/BatchNorm1d/MaxPool1d/AvgPool1d export: rank-3 nodes)."""
    n = Net(rng)

    def conv1d(x, cin, cout, k, stride=1):
        w = n.const("w", n.normal((cout, cin, k), np.sqrt(2.0 / (cin * k))))
        return n.bn(n.node("Conv", [x, w, n.const("b", n.normal(cout, 0.1))], kernel_shape=[k], pads=[k // 2] * 2,
                           strides=[stride]), cout)
    h = n.relu(conv1d("x", 10, c, 3))
    h = n.node("MaxPool", [h], kernel_shape=[2], strides=[2])
    h = n.relu(conv1d(h, c, 2 * c, 5, stride=2))
    h = n.node("AveragePool", [h], kernel_shape=[2], strides=[2])
    pooled = n.node("Flatten", [n.node("GlobalAveragePool", [h])])
    n.output(n.gemm(pooled, 2 * c, 6), "y")
    return n.model((10, length), ["y"], name="conv1d_net")


def espcn(rng, c: int = 16, scale: int = 2) -> onnx.ModelProto:
    """ESPCN super-resolution: 5x5 conv + Tanh, 3x3 conv + Tanh, 3x3 conv to scale² channels,
    then torch.nn.PixelShuffle (DepthToSpace, mode CRD)."""
    n = Net(rng)
    h = n.node("Tanh", [n.conv("x", 1, c, k=5, bias=True)])
    h = n.node("Tanh", [n.conv(h, c, c // 2, k=3, bias=True)])
    h = n.conv(h, c // 2, scale * scale, k=3, bias=True)
    n.output(n.node("DepthToSpace", [h], blocksize=scale, mode="CRD"), "y")
    return n.model((1, 8, 8), ["y"], name="espcn")


def vit_class_token(rng, d: int = 16, patch: int = 4, image: int = 16) -> onnx.ModelProto:
    """A ViT's stem as torchvision exports it: a patch convolution, flatten + transpose to tokens,
    the learned class token Expanded to the batch (its shape from Shape(x)) and Concatenated in
    front, position embeddings added, LayerNorm, a feed-forward layer, the class token's output
    (Gather 0 on the token axis) into a linear head."""
    n = Net(rng)
    tokens = (image // patch) ** 2
    w = n.const("w", n.normal((d, 3, patch, patch), np.sqrt(2.0 / (3 * patch * patch))))
    p = n.node("Conv", ["x", w, n.const("b", n.normal(d, 0.1))], kernel_shape=[patch, patch], strides=[patch, patch])
    seq = n.node("Transpose", [n.node("Reshape", [p, n.const("shape", np.asarray([0, d, tokens], np.int64))])],
                 perm=[0, 2, 1])
    batch = n.node("Slice", [n.node("Shape", ["x"]), n.const("s0", np.asarray([0], np.int64)),
                             n.const("s1", np.asarray([1], np.int64))])
    shape = n.node("Concat", [batch, n.const("rest", np.asarray([1, d], np.int64))], axis=0)
    cls = n.node("Expand", [n.const("class_token", n.normal((1, 1, d), 0.5)), shape])
    h = n.add(n.node("Concat", [cls, seq], axis=1), n.const("pos_embedding", n.normal((1, tokens + 1, d), 0.5)))
    h = layer_norm(n, h, d)
    h = n.add(h, n.linear(n.relu(n.linear(h, d, 2 * d)), 2 * d, d))
    first = n.node("Gather", [h, n.const("zero", np.asarray(0, np.int64))], axis=1)
    n.output(n.gemm(first, d, 5), "y")
    return n.model((3, image, image), ["y"], opset=17, name="vit_class_token")


def unet_conv_transpose(rng, c: int = 8) -> onnx.ModelProto:
    """A one-level UNet: encoder conv + ReLU, max pool, bottleneck conv + ReLU, a stride-2
    ConvTranspose decoder, skip concatenation, conv + ReLU and a 1x1 output conv."""
    n = Net(rng)
    e = n.relu(n.conv("x", 3, c, bias=True))
    b = n.relu(n.conv(n.node("MaxPool", [e], kernel_shape=[2, 2], strides=[2, 2]), c, 2 * c, bias=True))
    w = n.const("wt", n.normal((2 * c, c, 2, 2), np.sqrt(1.0 / (2 * c))))
    up = n.node("ConvTranspose", [b, w, n.const("bt", n.normal(c, 0.1))], kernel_shape=[2, 2], strides=[2, 2])
    h = n.relu(n.conv(n.node("Concat", [up, e], axis=1), 2 * c, c, bias=True))
    n.output(n.conv(h, c, 2, k=1, bias=True), "y")
    return n.model((3, 8, 8), ["y"], name="unet_conv_transpose")


def decoder_output_padding(rng, c: int = 8) -> onnx.ModelProto:
    """A stride-2 encoder and the decoder PyTorch writes as ConvTranspose2d(k=3, stride=2,
    padding=1, output_padding=1): the output_padding row and column are kept from the end crop."""
    n = Net(rng)
    e = n.relu(n.conv("x", 3, c, bias=True))
    b = n.relu(n.conv(e, c, 2 * c, stride=2, bias=True))                    # 4x4
    w = n.const("wt", n.normal((2 * c, c, 3, 3), np.sqrt(1.0 / (2 * c))))
    up = n.node("ConvTranspose", [b, w, n.const("bt", n.normal(c, 0.1))], kernel_shape=[3, 3],
                strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])     # 8x8
    n.output(n.conv(n.relu(up), c, 2, k=1, bias=True), "y")
    return n.model((3, 8, 8), ["y"], name="decoder_output_padding")


# every block by name
BLOCKS = {
    "resnet_basic_blocks": resnet_basic_blocks,
    "inverted_residual": inverted_residual,
    "mobilenetv3_block": mobilenetv3_block,
    "shufflenet_unit": shufflenet_unit,
    "squeezenet_fire": squeezenet_fire,
    "prelu_cnn": prelu_cnn,
    "transformer_encoder_layer": transformer_encoder_layer,
    "conv1d_net": conv1d_net,
    "espcn": espcn,
    "vit_class_token": vit_class_token,
    "unet_conv_transpose": unet_conv_transpose,
    "decoder_output_padding": decoder_output_padding,
}
