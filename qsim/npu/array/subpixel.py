"""TRANSPOSE_CONV2D as stride_y x stride_x ordinary convolutions (sub-pixel decomposition).

TOSA 0.30 2.3.11 adds input[n, iy, ix, :] * weight[oc, ky, kx, :] into output position
oy = iy * stride_y - out_pad_top + ky (likewise across). Output row oy therefore only meets
kernel rows ky = r (mod stride_y) with r = (oy + out_pad_top) mod stride_y: the rows of one
output phase py = oy mod stride_y form a stride-1 convolution of the input with the
sub-kernel of rows r, r + s, r + 2s, ... taken in reverse order (correlation = flipped
convolution). Per axis, with T taps in the phase, c = (py + out_pad - r) / s (exact) and
J output positions py, py + s, ... < OH:

    output j of the phase = sum_t' input[j + c - (T - 1) + t'] * w[r + s (T - 1 - t')]

a convolution with padding before = T - 1 - c and after = J + T - 1 - IH - before. Either
may be negative (the phase starts inside the input, or stops before its end): the window
DMA (qsim/npu/array/window.py) bounds-checks every tap, so a negative pad only moves the
first window. A phase with no tap (kernel shorter than the stride) gets one tap of
weight_zp: (x - input_zp) * (weight_zp - weight_zp) = 0, its output is the bias alone,
still computed (and requantized) by the array.

Nothing is zero-inserted, so the array does the spec's useful MACs plus padding taps, not
stride^2 times as many; the weights are flipped and cut at compile time, and each phase's
output lands on output[:, py::sy, px::sx, :] (the interleave is the layer's placement of
its programs' outputs, as a depthwise layer places its channel groups).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .window import Window


@dataclass(frozen=True)
class AxisPhase:
    taps: tuple                 # kernel index of each tap in convolution order (None: a weight_zp tap)
    pad_before: int
    pad_after: int
    outputs: int                # J: output positions of the phase


def axis_phase(phase: int, stride: int, out_pad: int, kernel: int, in_len: int, out_len: int) -> AxisPhase:
    """One axis of phase `phase` (module docstring)."""
    outputs = len(range(phase, out_len, stride))
    r = (phase + out_pad) % stride
    real = list(range(r, kernel, stride))
    if not real:
        return AxisPhase((None,), 0, outputs - in_len, outputs)
    c = (phase + out_pad - r) // stride
    before = len(real) - 1 - c
    return AxisPhase(tuple(reversed(real)), before, outputs + len(real) - 1 - in_len - before, outputs)


@dataclass(frozen=True)
class Phase:
    """One output phase: a stride-1 CONV2D over the whole input."""
    py: int
    px: int
    stride: tuple               # (sy, sx) of the layer, to place and locate outputs
    rows: int                   # output rows of the phase
    cols: int
    window: Window
    weight: np.ndarray          # [OC, Ty, Tx, IC] int8, weight_zp where a tap is None
    real_taps: int              # taps that hold weights (MACs of the spec)

    def place(self, out: np.ndarray, values: np.ndarray) -> None:
        """Writes the phase's GEMM output [N * rows * cols, OC] into the layer output."""
        sy, sx = self.stride
        out[:, self.py::sy, self.px::sx, :] = values.reshape(out.shape[0], self.rows, self.cols, -1)

    def row_of(self, index: tuple) -> int | None:
        """The GEMM row of layer output element `index` (n, oy, ox, oc), None if another phase's."""
        n, oy, ox, _ = index
        sy, sx = self.stride
        if oy % sy != self.py or ox % sx != self.px:
            return None
        return (n * self.rows + oy // sy) * self.cols + ox // sx


def phases(x_shape: tuple, weight: np.ndarray, attrs: dict) -> list[Phase]:
    """The non-empty output phases of TRANSPOSE_CONV2D (attribute names of qsim.tosa.run)."""
    oc, kh, kw, ic = weight.shape
    sy, sx = (int(s) for s in attrs["stride"])
    top, _, left, _ = (int(p) for p in attrs["out_pad"])
    _, oh, ow, _ = (int(v) for v in attrs["out_shape"])
    w_zp = int(attrs.get("weight_zp", 0))
    out = []
    for py in range(sy):
        ay = axis_phase(py, sy, top, kh, x_shape[1], oh)
        for px in range(sx):
            ax = axis_phase(px, sx, left, kw, x_shape[2], ow)
            if ay.outputs == 0 or ax.outputs == 0:
                continue
            sub = np.full((oc, len(ay.taps), len(ax.taps), ic), w_zp, np.int8)
            for ty, ky in enumerate(ay.taps):
                for tx, kx in enumerate(ax.taps):
                    if ky is not None and kx is not None:
                        sub[:, ty, tx, :] = weight[:, ky, kx, :]
            real = sum(k is not None for k in ay.taps) * sum(k is not None for k in ax.taps)
            window = Window(tuple(x_shape), (len(ay.taps), len(ax.taps)),
                            pad=(ay.pad_before, ay.pad_after, ax.pad_before, ax.pad_after))
            assert window.out_hw == (ay.outputs, ax.outputs), (window.out_hw, ay, ax)
            out.append(Phase(py, px, (sy, sx), ay.outputs, ax.outputs, window, sub, real))
    return out
