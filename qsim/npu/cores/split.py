"""Splitting a layer's GEMMs across N cores by output channels (GEMM columns).

Why columns: every output channel is computed from the whole input and its own weights,
requantization parameters and clamp, so a core that computes a subset of the columns computes
exactly those output values of the single-core run (bit-exact by construction, no partial sums
to combine), and each core loads only its own share of the weights, which dominate the DRAM
traffic of the deep layers of ResNet-18-like networks. The price is that every core reads the
whole input (the input traffic grows N-fold; it dominates the early layers). Splitting rows
(output pixels) would share the input instead but make every core load every weight.

A GEMM of N columns is cut into min(cores, ceil(N / C)) parts of whole array-column tiles
(C = array cols), as even as the tiles allow, so no core computes a partial tile the
single-core run would not. The parts of all the layer's GEMMs, in order, fill rounds of
`cores` slots: a round runs one part on each core at once, sharing DRAM (schedule.py), and
the next round starts when the round's last core is done. A layer with GEMMs of one tile
each (depthwise convolutions) gets one GEMM per core per round.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..array.compile import Gemm


@dataclass(frozen=True)
class Part:
    gemm_index: int         # which of the layer's GEMMs
    columns: slice          # its columns computed by this part
    gemm: Gemm              # the GEMM of those columns alone


def column_parts(gemm: Gemm, cores: int, array_cols: int) -> list[slice]:
    """The columns of each part: whole tiles of `array_cols`, the first parts one tile longer."""
    n = gemm.w.shape[1]
    tiles = -(-n // array_cols)
    parts = max(1, min(cores, tiles))
    spans, start = [], 0
    for i in range(parts):
        count = tiles // parts + (1 if i < tiles % parts else 0)
        stop = min(n, start + count * array_cols)
        spans.append(slice(start, stop))
        start = stop
    return spans


def sub_gemm(gemm: Gemm, columns: slice) -> Gemm:
    """`gemm` restricted to `columns`: their weights and requantization parameters."""
    req = gemm.requant
    if req is not None:
        req = replace(req, bias=np.asarray(req.bias)[columns], multiplier=np.asarray(req.multiplier)[columns],
                      shift=np.asarray(req.shift)[columns])
    return replace(gemm, w=np.ascontiguousarray(gemm.w[:, columns]), requant=req)


def split_rounds(gemms: list[Gemm], cores: int, array_cols: int) -> list[list[Part]]:
    """The layer's parts in rounds of at most `cores` (the last round may be shorter)."""
    parts = [Part(i, cols, sub_gemm(g, cols) if (cols.start, cols.stop) != (0, g.w.shape[1]) else g)
             for i, g in enumerate(gemms) for cols in column_parts(g, cores, array_cols)]
    return [parts[i:i + cores] for i in range(0, len(parts), cores)]
