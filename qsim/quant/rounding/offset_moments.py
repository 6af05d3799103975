"""The input moments of a convolution summed by tap offset, without gathering its patches: for
a stride-1, dilation-1, one-group layer (offsets_direct), the sum over every patch x of
x x^T [K, K] and of x [K], from C x C products of the input with itself shifted.

Block (a, b) of the patch second moment (taps a <= b) is the sum over the input positions q
that tap a reads of x(q) x(q + d)^T, d = b - a. The positions split into cells (per axis, the
intervals between the ends of the taps' boxes): the core cell, which every tap reads, gives one
C x C GEMM per offset (13 for 3x3), the border cells small GEMMs of their own; each block is the
core's part plus its box's border cells, and block (b, a) is block (a, b)^T.

Invariants:
- Every part is a sum of products over its own positions and the blocks are sums of parts,
  never differences: no cancellation, the relative error of a float32 GEMM (as with the
  gathered patches' syrk), and the assembled moment is exactly symmetric.
- The K index is conv_patches' ((c*KH + ky)*KW + kx): the moments are those of the gathered
  patches up to float32 rounding (tests/quant/test_offset_moments.py).
- The GEMMs run on one BLAS thread each, split over qsim's threads by part: the same bits for
  any thread count.

It exists because for a 3x3 layer this is about a third of the multiply-adds of the 9C x 9C
syrk of the gathered patches, and no gather. The functions keep no state:
PatchMoments.add_offsets (adaptive.py) buffers the inputs, keeps the float64 totals of
offset_products and assembles them into the moments once (assemble_offsets).
"""
from __future__ import annotations

import numpy as np

from ...threads import single_thread_blas, split_rows
from .conv_geometry import ConvGeometry, conv_output_size


def offsets_direct(x_shape, g: ConvGeometry) -> bool:
    """Whether PatchMoments.add_offsets takes this layer: one group, stride and dilation 1,
    a kernel of at least 2 taps (a 1x1 kernel's patches are the input itself), an output."""
    oh, ow = conv_output_size(x_shape, g)
    return (len(x_shape) == 4 and g.groups == 1 and g.stride == (1, 1) and g.dilation == (1, 1)
            and g.kernel[0] * g.kernel[1] > 1 and oh > 0 and ow > 0)


def _offsets(kernel: tuple[int, int]) -> list[tuple[int, int]]:
    """The tap offsets d = b - a of the blocks a <= b (flattened taps): dy > 0, or dy = 0 and
    dx >= 0."""
    kh, kw = kernel
    return [(dy, dx) for dy in range(kh) for dx in range(-kw + 1, kw) if dy > 0 or dx >= 0]


def _tap_cells(x_shape, g: ConvGeometry):
    """How the input positions split for offset_products: per axis, the boxes [lo, hi) of
    input indices that tap row ay (column ax) reads over all outputs, the atoms (the intervals
    between consecutive box ends, a partition of the axis) and the core atom, inside every box
    (None when the boxes share no index). The positions a tap reads are the cells (row atom x
    column atom) inside its box."""
    h, w = x_shape[2], x_shape[3]
    oh, ow = conv_output_size((0, 0, h + g.crop[0], w + g.crop[1]), g)
    axes = []
    for extent, taps, pad, out in ((h, g.kernel[0], g.begins[0], oh), (w, g.kernel[1], g.begins[1], ow)):
        boxes = [(min(max(t - pad, 0), extent), min(max(t - pad + out, 0), extent)) for t in range(taps)]
        points = sorted({0, extent, *(lo for lo, _ in boxes), *(hi for _, hi in boxes)})
        atoms = [(p0, p1) for p0, p1 in zip(points, points[1:]) if p1 > p0]
        lo, hi = max(b[0] for b in boxes), min(b[1] for b in boxes)
        axes.append((boxes, atoms, (lo, hi) if hi > lo else None))
    return axes


def _cell_keys(x_shape, g: ConvGeometry) -> list[tuple]:
    """(row atom, column atom, d) of every cell sum offset_products forms: each cell but the
    core one inside the box of a tap a that has a partner b = a + d, whose positions q have
    a partner q + d inside x."""
    kh, kw = g.kernel
    (rboxes, ratoms, rcore), (cboxes, catoms, ccore) = _tap_cells(x_shape, g)
    keys = []
    for a in range(kh * kw):
        ay, ax = divmod(a, kw)
        for b in range(a, kh * kw):
            d = (b // kw - ay, b % kw - ax)
            for key in _box_cells(ay, ax, d, rboxes, ratoms, cboxes, catoms):
                if (key[0], key[1]) != (rcore, ccore) and key not in keys and _cell_area(key, x_shape):
                    keys.append(key)
    return keys


def _box_cells(ay, ax, d, rboxes, ratoms, cboxes, catoms) -> list[tuple]:
    """The cells (row atom, column atom, d) inside the box of tap (ay, ax), in a fixed order."""
    (r0, r1), (c0, c1) = rboxes[ay], cboxes[ax]
    return [(ra, ca, d) for ra in ratoms if r0 <= ra[0] and ra[1] <= r1
            for ca in catoms if c0 <= ca[0] and ca[1] <= c1]


def _cell_area(key, x_shape) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The row and column ranges of the cell's positions q whose partner q + d is inside x
    (the others pair with zeros), None when there are none."""
    (r0, r1), (c0, c1), (dy, dx) = key
    rows = (max(r0, -dy), min(r1, x_shape[2] - dy))
    cols = (max(c0, -dx), min(c1, x_shape[3] - dx))
    return (rows, cols) if rows[1] > rows[0] and cols[1] > cols[0] else None


def offset_products(x: np.ndarray, g: ConvGeometry) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """The sums assemble_offsets turns into the patch moments, for the float32 NCHW input x
    (cropped already) of a stride-1, dilation-1, one-group convolution (offsets_direct):
    (core [offsets, C, C] float32: F_d = sum over the positions q of the core cell of
    x(q) x(q + d)^T, d in _offsets order; cells: float32 [C, C] per _cell_keys entry, the same
    sum over that cell's positions; sums [C, KH KW] float64: each tap's sum of x over its box).

    F_d is one GEMM of the core's [C, positions] matrix (x with every position outside the
    core cell zeroed) with x shifted by d: strided views of zero-margined buffers (a row of x
    followed by KW - 1 zeros, an image by KH - 1 zero rows), so a shift by d reads x(q + d) or
    a zero, never a wrong pixel. Every part is a sum of products over its own positions, so
    the moments are sums of parts, never differences (no cancellation: the relative error is
    a float32 GEMM's, as with the gathered patches' syrk). The GEMMs run on one BLAS thread
    each, split over qsim's threads by part: the same bits for any thread count."""
    n, c, h, w = x.shape
    kh, kw = g.kernel
    wb = w + kw - 1                                   # buffer row: x's row, then kw - 1 zeros
    m = n * (h + kh - 1) * wb                         # positions of every image and its zero rows
    buf = np.zeros((c, m + kw - 1), np.float32)
    planes = buf[:, :m].reshape(c, n, h + kh - 1, wb)
    planes[:, :, :h, :w] = x.transpose(1, 0, 2, 3)
    (_, _, rcore), (_, _, ccore) = _tap_cells(x.shape, g)
    offsets = _offsets(g.kernel)
    core = np.zeros((len(offsets), c, c), np.float32)
    mq = m - (kh - 1) * wb              # the last image's zero rows need not be q (x(q) = 0)
    inner = None                        # the core cell's positions of buf, zeros elsewhere
    if rcore is not None and ccore is not None:
        inner = np.zeros((c, m), np.float32)
        (r0, r1), (c0, c1) = rcore, ccore
        inner.reshape(c, n, h + kh - 1, wb)[:, :, r0:r1, c0:c1] = planes[:, :, r0:r1, c0:c1]
        inner = inner[:, :mq]
    keys = _cell_keys(x.shape, g)
    cells: list[np.ndarray] = [None] * len(keys)

    def cell(key) -> np.ndarray:
        (y0, y1), (x0, x1) = _cell_area(key, x.shape)
        dy, dx = key[2]
        u = x[:, :, y0:y1, x0:x1].transpose(1, 0, 2, 3).reshape(c, -1)
        if (dy, dx) == (0, 0):
            return u @ u.T                            # numpy's syrk: exactly symmetric
        v = x[:, :, y0 + dy:y1 + dy, x0 + dx:x1 + dx].transpose(1, 0, 2, 3).reshape(c, -1)
        return u @ v.T

    def work(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            if i < len(offsets):
                if inner is not None:
                    dy, dx = offsets[i]
                    off = dy * wb + dx                # <= (kh - 1) wb + kw - 1: inside buf
                    np.matmul(inner, (inner if off == 0 else buf[:, off:off + mq]).T, out=core[i])
            else:
                cells[i - len(offsets)] = cell(keys[i - len(offsets)])
    with single_thread_blas():
        split_rows(len(offsets) + len(keys), work, min_rows=1)
    oh, ow = conv_output_size((n, c, h + g.crop[0], w + g.crop[1]), g)
    sums = np.empty((c, kh * kw))
    for a in range(kh * kw):
        ay, ax = divmod(a, kw)
        y0, x0 = ay - g.begins[0], ax - g.begins[1]
        sums[:, a] = x[:, :, max(y0, 0):max(min(y0 + oh, h), 0), max(x0, 0):max(min(x0 + ow, w), 0)].sum(
            axis=(0, 2, 3), dtype=np.float64)
    return core, cells, sums


def offset_moments(x: np.ndarray, g: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """(sum of x x^T [K, K], sum of x [K]) float64 over the patches of one input (the
    formulation PatchMoments.add_offsets sums per flush; tests compare it with conv_patches)."""
    core, cells, sums = offset_products(x, g)
    k = sums.size
    out = np.zeros((k, k))
    assemble_offsets(core.astype(np.float64), [s.astype(np.float64) for s in cells], x.shape, g, out)
    return out, sums.reshape(-1)


def assemble_offsets(core: np.ndarray, cells: list[np.ndarray], x_shape, g: ConvGeometry,
                     out: np.ndarray) -> None:
    """out [K, K] += the patch second moment from offset_products' (totals of) core and cells.

    Block (a, b) of taps is the C x C sum over the output positions p of
    x(p + a - pad) x(p + b - pad)^T, i.e. over the input positions q in tap a's box of
    x(q) x(q + d)^T (d = b - a): the core cell's F_d plus the box's other cells, added in a
    fixed order. Block (b, a) is block (a, b)^T. For 3x3 this is 12 GEMMs and one syrk of
    C x C over the positions, and small ones over the border cells, instead of a syrk of
    9C x 9C: about a third of the multiply-adds, and no patch gather."""
    kh, kw = g.kernel
    c, taps = core.shape[1], kh * kw
    (rboxes, ratoms, _), (cboxes, catoms, _) = _tap_cells(x_shape, g)
    index = {d: i for i, d in enumerate(_offsets(g.kernel))}
    where = {key: i for i, key in enumerate(_cell_keys(x_shape, g))}
    blocks = np.empty((taps, taps, c, c))
    for a in range(taps):
        ay, ax = divmod(a, kw)
        for b in range(a, taps):
            d = (b // kw - ay, b % kw - ax)
            block = blocks[a, b]
            block[...] = core[index[d]]
            for key in _box_cells(ay, ax, d, rboxes, ratoms, cboxes, catoms):
                if key in where:
                    block += cells[where[key]]
            if b != a:
                blocks[b, a] = block.T
    # one transposing pass into the [c, a, c', b] layout (blocks written in place into it
    # would touch every cache line of out once per block)
    out += blocks.transpose(2, 0, 3, 1).reshape(c * taps, c * taps)
