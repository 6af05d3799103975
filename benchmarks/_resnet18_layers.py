"""The 20 convolutions of ResNet-18 at 224x224 (He et al. 2016, table 1) as TOSA 0.30 CONV2D
layers with seeded synthetic int8 data, for benchmarks/npu.py (and ResNet-50's 53 convolutions,
built the same way, for benchmarks/sweep_scale.py).

conv1 7x7/2 64; four stages of two basic blocks (two 3x3 convs each): 64, 128, 256, 512
channels at 56, 28, 14, 7; the first conv of stages 2-4 has stride 2 and each of those stages
has a 1x1/2 downsample conv on its input: 1 + 4*4 + 3 = 20 layers (the FC is omitted).

TOSA 0.30 CONV2D requires (IH - 1 + pad_top + pad_bottom - (KH - 1)) to be a multiple of the
stride (ERROR_IF, 2.3.3), so stride-2 layers pad like TensorFlow's SAME, extra padding at the
bottom/right: conv1 pads (3, 2, 3, 2), the 3x3/2 convs (1, 0, 1, 0). A 1x1/2 conv never reads
the last row and column of an even-sized input, so the downsample convs take the first
IH-1 rows and columns (55, 27, 13), which gives the same outputs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConvLayer:
    name: str
    size: int            # input height = width (after the downsample slice)
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    pad: tuple           # top, bottom, left, right

    @property
    def out_size(self) -> int:
        return (self.size - 1 + self.pad[0] + self.pad[1] - (self.kernel - 1)) // self.stride + 1

    @property
    def gemm(self) -> tuple[int, int, int]:
        """(M, K, N) of the implicit GEMM: output pixels, taps x input channels, filters."""
        return self.out_size ** 2, self.kernel ** 2 * self.in_channels, self.out_channels

    @property
    def macs(self) -> int:
        m, k, n = self.gemm
        return m * k * n


def resnet18_convs() -> list[ConvLayer]:
    layers = [ConvLayer("conv1", 224, 3, 64, 7, 2, (3, 2, 3, 2))]
    size, channels = 56, 64
    for stage, width in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            first = block == 0 and stage > 1
            stride = 2 if first else 1
            pad = (1, 0, 1, 0) if first else (1, 1, 1, 1)
            layers.append(ConvLayer(f"layer{stage}.{block}.conv1", size, channels, width, 3, stride, pad))
            out = layers[-1].out_size
            layers.append(ConvLayer(f"layer{stage}.{block}.conv2", out, width, width, 3, 1, (1, 1, 1, 1)))
            if first:
                layers.append(ConvLayer(f"layer{stage}.0.downsample", size - 1, channels, width, 1, 2,
                                        (0, 0, 0, 0)))
            size, channels = out, width
    assert len(layers) == 20
    return layers


def resnet50_convs(input_size: int = 224) -> list[ConvLayer]:
    """The 53 convolutions of ResNet-50 (v1.5: the stride is in the 3x3 conv of a bottleneck)
    on an `input_size` square image (224 for ImageNet, 32 for CIFAR-size inputs: stages at
    8, 4, 2, 1 pixels), padded as resnet18_convs pads: conv1 7x7/2, a 3x3/2 max pool; four
    stages of 3, 4, 6, 3 bottlenecks (1x1 -> 3x3 -> 1x1 x4), widths 64, 128, 256, 512; the
    first block of every stage has a 1x1 downsample conv (stride 1 in stage 1, 2 after)."""
    layers = [ConvLayer("conv1", input_size, 3, 64, 7, 2, (3, 2, 3, 2))]
    size, channels = layers[0].out_size // 2, 64
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3)), start=1):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 1 else 1
            name = f"layer{stage}.{block}"
            layers.append(ConvLayer(f"{name}.conv1", size, channels, width, 1, 1, (0, 0, 0, 0)))
            pad = (1, 0, 1, 0) if stride == 2 else (1, 1, 1, 1)
            layers.append(ConvLayer(f"{name}.conv2", size, width, width, 3, stride, pad))
            out = layers[-1].out_size
            layers.append(ConvLayer(f"{name}.conv3", out, width, 4 * width, 1, 1, (0, 0, 0, 0)))
            if block == 0:
                layers.append(ConvLayer(f"{name}.downsample", size - (stride - 1), channels, 4 * width, 1,
                                        stride, (0, 0, 0, 0)))
            size, channels = out, 4 * width
    assert len(layers) == 53
    return layers


def synthetic(layer: ConvLayer, seed: int = 0):
    """Seeded int8 input [1, H, W, IC], CONV2D attributes, RESCALE and CLAMP (ReLU) attributes.
    The shift puts the typical |accumulator| (~sqrt(K) * 74^2 for uniform int8) near 32."""
    rng = np.random.default_rng([seed, layer.size, layer.in_channels, layer.out_channels,
                                 layer.kernel, layer.stride])
    x = rng.integers(-128, 128, (1, layer.size, layer.size, layer.in_channels)).astype(np.int8)
    w = rng.integers(-128, 128, (layer.out_channels, layer.kernel, layer.kernel,
                                 layer.in_channels)).astype(np.int8)
    in_zp = int(rng.integers(-8, 9))
    conv = dict(weight=w, bias=rng.integers(-4096, 4096, layer.out_channels).astype(np.int32),
                pad=layer.pad, stride=(layer.stride, layer.stride), dilation=(1, 1),
                input_zp=in_zp, weight_zp=0)
    k = layer.gemm[1]
    shift = 30 + int(round(np.log2(np.sqrt(k) * 74 * 74 / 32)))
    out_zp = int(rng.integers(-128, -100))
    rescale = dict(input_zp=0, output_zp=out_zp,
                   multiplier=rng.integers(1 << 30, 1 << 31, layer.out_channels).astype(np.int32),
                   shift=np.full(layer.out_channels, shift, np.int8), scale32=True,
                   double_round=bool(rng.integers(0, 2)), per_channel=True, out_t="int8")
    clamp = dict(min_val=out_zp, max_val=127)
    return x, conv, rescale, clamp


def expected_outputs(layers, seed):
    """Every layer's data (synthetic), its kernels-backend output (CONV2D -> RESCALE -> CLAMP)
    and the seconds the kernels took."""
    from qsim.tosa import run as kernels_run
    data, outputs, start = [], [], time.perf_counter()
    for layer in layers:
        x, conv, rescale, clamp = synthetic(layer, seed)
        acc, = kernels_run("CONV2D", [x], conv, backend="kernels")
        out, = kernels_run("RESCALE", [acc], rescale, backend="kernels")
        out, = kernels_run("CLAMP", [out], clamp, backend="kernels")
        data.append((x, conv, rescale, clamp))
        outputs.append(out)
    return data, outputs, time.perf_counter() - start
