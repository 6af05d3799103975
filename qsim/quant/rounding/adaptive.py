"""Adaptive weight rounding: choose, for every int8 weight, the floor or the ceiling of
w / scale so that the layer's output error over the calibration data is smallest.

Rounding each weight to nearest minimizes each weight's own error, but a layer adds K
products: its output error is e . x, with e the K rounding errors (in real units) of one
output channel and x one input patch. Over the calibration patches the mean squared error is

    E[(e . x)^2] = e^T H e,      H = E[x x^T]   (K x K, per group of a grouped convolution)

and inputs of neighbouring taps are strongly correlated in natural images, so errors that
cancel in the sum matter much less than errors that add up. With bias correction on, the
mean error is corrected afterwards and H is the covariance E[x x^T] - E[x] E[x]^T.

The search (greedy coordinate descent, each weight restricted to {floor, floor + 1} of
w / scale and to the weight range) starts at round-to-nearest and accepts only moves that
lower e^T H e: the result is never worse than nearest on the calibration data, and every
weight stays within one step of its real value. Only the integers change: scales, the
integer graph and its bit-exactness contract are as with nearest rounding.

This module holds the moments calibration collects (PatchMoments per layer, InputMoments for
the model), the search itself (adaptive_round on H, round_from_rows on a few kept rows) and the
drivers (watch_layers before calibration, round_layer in the lowering). A convolution's patch
geometry and gather are in conv_geometry.py, the moments summed by tap offset without a gather
in offset_moments.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import ir
from ...numerics import nnef_round
from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...threads import single_thread_blas, split_rows
from .conv_geometry import (ConvGeometry, conv_output_size, conv_patch_shape, conv_patches,
                            depthwise_direct, sample_stride)
from ..lowering.float_patterns import packed_ints, spatial_padding
from .offset_moments import assemble_offsets, offset_products, offsets_direct

FLUSH_ROWS = 1024              # patch rows buffered per float32 GEMM of PatchMoments
KEEP_BUFFER_BYTES = 2 << 20   # PatchMoments keeps a pending-row buffer up to this size
MOMENT_ROWS = 256              # rows of E[x] E[x]^T formed at a time by second_moment
MAX_PASSES = 8                 # passes over the K weights of every channel (converges in 2-4)
STOP_FRACTION = 1e-2           # a channel stops after a pass that lowers its objective by less
                               # than this fraction of its objective at nearest rounding
BLOCK_COLUMNS = 64             # weights per gradient GEMM of round_from_rows
ROUNDING_MODES = ("nearest", "adaptive")

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


@dataclass
class PatchMoments:
    """Running sums over every input patch a layer reads: x and x x^T per group.

    A wide layer (one group, K > FLUSH_ROWS) that has seen no more than K rows keeps its rows
    instead (`held_rows`): its K x K second moment has rank <= rows, and adaptive rounding
    works on the rows themselves (round_from_rows), which is cheaper than forming H (a
    rows x K^2 GEMM) and then reading K x K doubles per moved weight. Once a held layer sees
    more than K rows, the held rows are summed in exactly the blocks the flushes would have
    summed (so the totals have the bits of a layer that never held), and it goes on as usual.
    """
    groups: int
    patch: int                                  # K = input channels per group x taps
    sum_outer: np.ndarray = None                # [groups, K, K]
    sum_x: np.ndarray = None                    # [groups, K]
    count: int = 0

    def __post_init__(self):
        self.sum_outer = np.zeros((self.groups, self.patch, self.patch))
        self.sum_x = np.zeros((self.groups, self.patch))
        self._rows = self._no_rows()                  # pending rows
        self._pending_rows = 0
        self._holding = self.groups == 1 and self.patch > FLUSH_ROWS
        self._flush_points: list[int] = []            # held: where the flushes would have been
        self._offset_inputs: list[np.ndarray] = []    # add_offsets: inputs not yet summed
        self._offset_geometry: ConvGeometry | None = None
        self._offset_rows = 0
        self._offset_totals: tuple[np.ndarray, list[np.ndarray]] | None = None
        self._offset_shape: tuple[int, ...] | None = None
        # add_depthwise: the running totals in lane-interleaved blocks ([blocks, K*K, lanes],
        # [blocks, K, lanes]) while samples come; sum_outer / sum_x are stale until stored
        self._depthwise: tuple[np.ndarray, np.ndarray] | None = None

    def never_hold(self) -> None:
        """Sums every row from the start (a layer that will see more than K rows anyway, or
        is summed by add_offsets, which keeps no rows)."""
        if self.count:
            raise ValueError("PatchMoments.never_hold: rows were added already")
        self._holding = False

    def _no_rows(self) -> np.ndarray:
        """An empty pending buffer (a fresh array: a zero-row view would keep its base alive)."""
        return self._buffer(0)

    def _buffer(self, rows: int, flat: np.ndarray | None = None) -> np.ndarray:
        """A [groups, rows, K] float32 view of row-major [rows, groups, K] memory (a new array,
        or the front of `flat`): one sample's patches of every group are written side by side
        into the pages that follow the previous sample's, instead of into `groups` regions a
        whole flush's rows apart (a fresh buffer's first sample then faulted in every page of
        it: 0.35 s for EfficientNet's 1152-group layer). Each group's rows keep a constant
        row stride, which BLAS reads as the contiguous rows it would be given otherwise."""
        self._on_scratch = False
        shape = (rows, self.groups, self.patch)
        a = np.empty(shape, dtype=np.float32) if flat is None else flat[:np.prod(shape)].reshape(shape)
        return a.transpose(1, 0, 2)

    @property
    def holding(self) -> bool:
        """Whether the layer keeps its rows (one group, K > FLUSH_ROWS, at most K rows seen)."""
        return self._holding

    def held_rows(self) -> np.ndarray:
        """[rows, K] float32: every row seen, while `holding`."""
        if not self._holding:
            raise ValueError("PatchMoments.held_rows: the rows were summed (more than K of them)")
        return self._rows[0, :self._pending_rows]

    def consume_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(held rows [rows, K], E[x] [groups, K]) of a holding layer; the layer lets its rows
        go (means() stays valid, second_moment is spent)."""
        rows, mean = self.held_rows(), self.means()
        self.sum_x = mean * max(self.count, 1)
        self.sum_outer = None
        self._holding = False
        self._rows, self._pending_rows, self._flush_points = self._no_rows(), 0, []
        return rows, mean

    def add(self, patches: np.ndarray) -> None:
        """patches: [groups, P, K] (one row per output position and sample)."""
        self.reserve(patches.shape[1])[...] = patches
        self.commit(patches.shape[1])

    def reserve(self, rows: int, scratch: np.ndarray | None = None) -> np.ndarray:
        """The float32 [groups, rows, K] place of the next `rows` patch rows, for the caller to
        fill before commit(rows): the patches go straight into the pending buffer.

        Rows are buffered until FLUSH_ROWS are pending (a layer with few output positions,
        like a late convolution or a linear layer, would otherwise pay a K x K float64
        accumulation per sample), then their products are summed by one float32 GEMM (BLAS
        syrk; the activations are float32 already) and added to float64 totals: the moments
        carry a relative error of about sqrt(FLUSH_ROWS) * 2^-24, far below what moves a
        rounding decision except at exact ties of the objective.

        `scratch` (float32, flat): a buffer shared by all layers, used for `rows` >= FLUSH_ROWS
        when nothing is pending, as commit sums those rows at once (no fresh pages per layer and
        sample). Fewer rows are buffered with room for FLUSH_ROWS + rows from the start, so the
        buffer is allocated once per flush (untouched room costs no memory) and never copied.
        The rows summed by each GEMM are the same either way. A holding layer never uses the
        scratch (its rows must outlive the sample) and doubles its buffer as it grows."""
        need = self._pending_rows + rows
        size = self.groups * rows * self.patch
        if (scratch is not None and self._pending_rows == 0 and rows >= FLUSH_ROWS
                and scratch.size >= size and not self._holding):
            self._rows, self._on_scratch = self._buffer(rows, scratch), True
            return self._rows
        if need > self._rows.shape[1]:
            room = (max(need, min(2 * self._rows.shape[1], self.patch)) if self._holding
                    else max(need, FLUSH_ROWS + rows))
            grown = self._buffer(room)
            grown[:, :self._pending_rows] = self._rows[:, :self._pending_rows]
            self._rows = grown
        return self._rows[:, self._pending_rows:need]

    def commit(self, rows: int) -> None:
        self._pending_rows += rows
        self.count += rows
        if self._holding:
            last = self._flush_points[-1] if self._flush_points else 0
            if self._pending_rows - last >= FLUSH_ROWS:
                self._flush_points.append(self._pending_rows)
            if self.count > self.patch:
                self._release()
            return
        if self._pending_rows >= FLUSH_ROWS:
            self._flush()

    def _release(self) -> None:
        """Stops holding: sums the held rows block by block where the flushes would have been,
        and keeps the rest pending (the state of a layer that never held)."""
        self._holding = False
        begin = 0
        for end in self._flush_points:
            self._add_rows(self._rows[:, begin:end])
            begin = end
        rest = self._rows[:, begin:self._pending_rows]
        self._rows = self._buffer(FLUSH_ROWS + rest.shape[1])
        self._rows[:, :rest.shape[1]] = rest
        self._pending_rows = rest.shape[1]
        self._flush_points = []

    def add_depthwise(self, x: np.ndarray, g: ConvGeometry) -> None:
        """Adds the patches of a depthwise convolution (dilation 1) of the float32 NCHW input
        x straight from x (kernels/quant_ops.pyx depthwise_moments_f32): no gathered rows,
        float64 sums of exact products in a fixed order per channel, channel blocks split over
        threads (same bits for any thread count). Same totals as add(conv_patches(x, g)) up
        to the rounding of the sums (there: float32 GEMMs per flush of rows).

        The totals run on in the kernel's lane-interleaved layout from the first such sample
        to the next _flush (which stores them into sum_outer / sum_x): a per-sample copy in
        and out of the [C, K, K] sums cost as much as the sums themselves (EfficientNet-Lite0's
        1152-channel 5x5 layer: 5.8 MB each way). Each channel's running sums are those an
        in-place update would make: the same bits."""
        if not depthwise_direct(x.shape, g) or self.groups != x.shape[1] or self._holding:
            raise ValueError("PatchMoments.add_depthwise: not a depthwise layer of this shape")
        if self._depthwise is None or self._pending_rows or self._offset_inputs:
            self._flush()
            self._depthwise = self._depthwise_blocks()
        so, s1 = self._depthwise
        n, c, h, w = x.shape
        oh, ow = conv_output_size(x.shape, g)
        x = x[:, :, :h - g.crop[0], :w - g.crop[1]]
        (kh, kw), (sh, sw) = g.kernel, g.stride
        isa = current_isa().code
        split_rows(so.shape[0], lambda lo, hi: _quant_ops.depthwise_moments_f32(
            isa, x, so, s1, kh, kw, sh, sw, g.begins[0], g.begins[1], oh, ow, lo, hi), min_rows=1)
        self.count += n * oh * ow

    def _depthwise_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """sum_outer / sum_x copied into add_depthwise's [blocks, K*K, lanes] / [blocks, K,
        lanes] layout (channels past the last as zeros)."""
        lanes = _quant_ops.DEPTHWISE_LANES
        blocks = -(-self.groups // lanes)
        so = np.zeros((blocks * lanes, self.patch, self.patch))
        s1 = np.zeros((blocks * lanes, self.patch))
        so[:self.groups], s1[:self.groups] = self.sum_outer, self.sum_x
        return (np.ascontiguousarray(so.reshape(blocks, lanes, -1).transpose(0, 2, 1)),
                np.ascontiguousarray(s1.reshape(blocks, lanes, -1).transpose(0, 2, 1)))

    def _store_depthwise(self) -> None:
        """add_depthwise's totals back into sum_outer / sum_x: the upper triangle (a <= b, the
        entries the kernel sums) and its mirror, so each [K, K] total is exactly symmetric."""
        if self._depthwise is None:
            return
        so, s1 = self._depthwise
        self._depthwise = None
        k, c = self.patch, self.groups
        full = so.transpose(0, 2, 1).reshape(-1, k, k)[:c]
        upper = np.triu(np.ones((k, k), bool))
        self.sum_outer[...] = np.where(upper, full, full.transpose(0, 2, 1))
        self.sum_x[...] = s1.transpose(0, 2, 1).reshape(-1, k)[:c]

    def add_offsets(self, x: np.ndarray, g: ConvGeometry) -> None:
        """Adds the patches of a stride-1, dilation-1, one-group convolution of the float32
        NCHW input x without gathering them (offset_products: per tap offset, one C x C GEMM of
        the input with itself shifted). Inputs are buffered until FLUSH_ROWS output positions
        are pending, as add() buffers rows; same totals as add(conv_patches(x, g)) up to the
        rounding of float32 GEMMs of about FLUSH_ROWS products each (tested)."""
        if not offsets_direct(x.shape, g) or self.groups != 1 or self._holding or self._pending_rows:
            raise ValueError("PatchMoments.add_offsets: not a layer summed by tap offsets")
        if self._offset_geometry not in (None, g):
            raise ValueError("PatchMoments.add_offsets: another geometry than the earlier samples'")
        self._offset_geometry = g
        h, w = x.shape[2] - g.crop[0], x.shape[3] - g.crop[1]
        if self._offset_shape is not None and self._offset_shape[1:] != (x.shape[1], h, w):
            self._assemble_offsets()         # another input size: its own cells and totals
        self._offset_shape = (x.shape[0], x.shape[1], h, w)
        self._offset_inputs.append(np.ascontiguousarray(x[:, :, :h, :w], dtype=np.float32))
        oh, ow = conv_output_size(x.shape, g)
        rows = x.shape[0] * oh * ow
        self._offset_rows += rows
        self.count += rows
        if self._offset_rows >= FLUSH_ROWS:
            self._flush_offsets()

    def _flush_offsets(self) -> None:
        """Sums the pending inputs' offset products (float32 GEMMs) into float64 totals; the
        K x K moments are assembled from them once, by _assemble_offsets."""
        if not self._offset_inputs:
            return
        x = np.concatenate(self._offset_inputs) if len(self._offset_inputs) > 1 else self._offset_inputs[0]
        self._offset_inputs, self._offset_rows = [], 0
        core, cells, sums = offset_products(x, self._offset_geometry)
        if self._offset_totals is None:
            self._offset_totals = (np.zeros(core.shape), [np.zeros(s.shape) for s in cells])
        for total, part in zip((self._offset_totals[0], *self._offset_totals[1]), (core, *cells)):
            total += part
        self.sum_x[0] += sums.reshape(-1)

    def _assemble_offsets(self) -> None:
        self._flush_offsets()
        if self._offset_totals is not None:
            assemble_offsets(*self._offset_totals, self._offset_shape, self._offset_geometry,
                             self.sum_outer[0])
            self._offset_totals = None

    def _add_rows(self, p: np.ndarray) -> None:
        # each group's [rows, K] block is C-contiguous (row stride K) wherever it sits in the
        # buffer: BLAS gets the operands a contiguous copy would give it, so the same sums.
        # One BLAS thread: the same bits for any QSIM_THREADS, and no OpenBLAS worker
        # spinning on a loaded machine (qsim/threads.py; measured: ResNet-18's calibration at 2
        # threads took 1.4-1.8x the wall time of 1 thread under load 10)
        with single_thread_blas():
            self.sum_outer += np.matmul(p.transpose(0, 2, 1), p)
        self.sum_x += _column_sums(p)

    def _flush(self) -> None:
        self._store_depthwise()
        self._assemble_offsets()
        if not self._pending_rows or self._holding:
            return
        p = self._rows[:, :self._pending_rows]
        self._pending_rows = 0
        self._add_rows(p)
        if self._rows.nbytes > KEEP_BUFFER_BYTES or self._on_scratch:
            self._rows = self._no_rows()     # bounded memory between samples; scratch let go

    def means(self) -> np.ndarray:
        """[groups, K]: E[x] over the rows seen (valid after second_moment consumed the
        K x K totals: the sums of x are kept). A holding layer sums its rows' x in the
        flushes' blocks (the bits a layer that never held has)."""
        if self._holding:
            total = np.zeros((self.groups, self.patch))
            begin = 0
            for end in self._flush_points + [self._pending_rows]:
                if end > begin:
                    total += _column_sums(self._rows[:, begin:end])
                begin = end
            return total / max(self.count, 1)
        self._flush()
        return self.sum_x / max(self.count, 1)

    def second_moment(self, centered: bool, consume: bool = False) -> np.ndarray:
        """[groups, K, K]: E[x x^T], minus E[x] E[x]^T when `centered`. With `consume`, the
        totals become the result (no second K x K float64 array: a wide layer's is 170 MB)
        and this PatchMoments is spent. Either way each element is (sum / n) - m_i m_j,
        rounded as numpy's `sum_outer / n - m[:, None] * m[None, :]` rounds it."""
        if self._holding:
            self._release()
        self._flush()
        self._rows = self._no_rows()                    # calibration is over: free the buffer
        if self.sum_outer is None:
            raise ValueError("PatchMoments.second_moment: the moments were consumed already")
        n = max(self.count, 1)
        if consume:
            h, self.sum_outer = self.sum_outer, None
            h /= n
        else:
            h = self.sum_outer / n
        if centered:
            m = self.sum_x / n
            # the outer product in row blocks of MOMENT_ROWS: no K x K temporary
            for g in range(self.groups):
                for r in range(0, self.patch, MOMENT_ROWS):
                    h[g, r:r + MOMENT_ROWS] -= m[g, r:r + MOMENT_ROWS, None] * m[g, None, :]
        return h


def _column_sums(p: np.ndarray) -> np.ndarray:
    """p.sum(axis=1, dtype=np.float64) of float32 [g, P, K] (made contiguous), with numpy's
    bits: compiled for K >= 2, where numpy adds the rows in order (kernels/quant_ops.pyx)."""
    if p.shape[2] < 2:
        return np.ascontiguousarray(p).sum(axis=1, dtype=np.float64)
    out = np.empty((p.shape[0], p.shape[2]), dtype=np.float64)
    _quant_ops.row_sums_f64(p, out)
    return out


@dataclass
class InputMoments:
    """Patch moments of every convolution / linear layer's input, filled during calibration
    (`update` per float execution) and read by the lowering rules. Keyed by the layer's
    float output tensor name. `rounded` caches each layer's result, so lowering the same
    model again (the batched evaluation graph) gives the same integers without new work."""
    layers: dict[str, tuple[str, ConvGeometry | None]] = field(default_factory=dict)
    moments: dict[str, PatchMoments] = field(default_factory=dict)
    rounded: dict[str, np.ndarray] = field(default_factory=dict)
    _geometries: dict[str, ConvGeometry] = field(default_factory=dict, repr=False)
    _samples: int | None = None
    _scratch: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32), repr=False)

    def calibration_done(self) -> None:
        """Frees the shared gather buffer (the largest layer's patches of one execution)."""
        self._scratch = np.empty(0, np.float32)

    def watch_conv(self, key: str, input_name: str, geometry: ConvGeometry) -> None:
        self.layers[key] = (input_name, geometry)

    def watch_linear(self, key: str, input_name: str) -> None:
        self.layers[key] = (input_name, None)

    def expect_samples(self, samples: int | None) -> None:
        """The number of executions calibration will run (None: unknown, every row is read)."""
        self._samples = samples

    def _sampled(self, key: str, x_shape, geometry: ConvGeometry) -> ConvGeometry:
        """The geometry whose patches update() sums for layer `key`, fixed at its first
        sample: the layer's own, or (sample_stride) one reading a sub-lattice of its outputs."""
        chosen = self._geometries.get(key)
        if chosen is None:
            chosen = self._geometries[key] = sample_stride(
                x_shape, geometry, self._samples)
        return chosen

    def input_names(self) -> set[str]:
        """The tensors whose values update_from() takes: the watched layers' inputs."""
        return {name for name, _ in self.layers.values()}

    def update(self, values: dict[str, np.ndarray]) -> None:
        """Adds one sample: `values` holds every watched layer's input."""
        for key, (name, geometry) in self.layers.items():
            self._update_layer(key, geometry, values[name])

    def update_from(self, name: str, value: np.ndarray) -> None:
        """Adds one sample's value of tensor `name` to the layers that read it (calibration
        streams tensors as the executor makes them). Each layer's sums depend only on its own
        input, so taking the layers in tensor order gives update()'s totals bit for bit."""
        for key, (input_name, geometry) in self.layers.items():
            if input_name == name:
                self._update_layer(key, geometry, value)

    def _update_layer(self, key: str, geometry: ConvGeometry | None, value: np.ndarray) -> None:
        x = np.asarray(value, dtype=np.float32)
        if geometry is not None:
            geometry = self._sampled(key, x.shape, geometry)
        # a depthwise layer is summed straight from x, sampled or not (a sampled lattice is
        # the kernel's stride times the sampling step: no patch gather either way)
        direct = geometry is not None and depthwise_direct(x.shape, geometry)
        if geometry is None:
            rows, groups, patch = x.size // x.shape[-1], 1, x.shape[-1]
        else:
            rows, groups, patch = conv_patch_shape(x.shape, geometry)
        stats = self.moments.get(key)
        by_offsets = (geometry is not None and offsets_direct(x.shape, geometry)
                      and (patch <= FLUSH_ROWS or (self._samples is not None
                                                   and self._samples * rows > patch)))
        if stats is None:
            stats = self.moments[key] = PatchMoments(groups, patch)
            if by_offsets:
                stats.never_hold()       # more than K rows in the end: it would not hold them
        if direct:
            stats.add_depthwise(x, geometry)
            return
        if by_offsets:
            stats.add_offsets(x, geometry)
            return
        if rows >= FLUSH_ROWS and self._scratch.size < groups * rows * patch:
            self._scratch = np.empty(groups * rows * patch, np.float32)   # the largest layer's
        place = stats.reserve(rows, self._scratch)
        if geometry is None:
            place[0] = x.reshape(rows, patch)
        else:
            conv_patches(x, geometry, place)
        stats.commit(rows)


def adaptive_round(w: np.ndarray, scales: np.ndarray, h: np.ndarray,
                   qmin: int = -127, qmax: int = 127, stop_fraction: float | None = None) -> np.ndarray:
    """Integers q [OC, K] (int64) with q - w/scale in (-1, 1) minimizing, per output
    channel o, e_o^T H_g(o) e_o for e_o = q_o * scale_o - w_o.

    w: [OC, K] real weights; scales: [OC] (per channel) or [1]; h: [groups, K, K] with
    output channel o in group o // (OC / groups). Starts from round-to-nearest (NNEF's
    round, floor(x + 0.5), as params.quantize) and only takes moves that lower the objective.
    A channel's search ends after a pass with no move, after MAX_PASSES, or after a pass
    that lowered its objective by less than `stop_fraction` (default STOP_FRACTION) of its
    objective at nearest rounding: later passes buy little on the calibration data and
    nothing measurable on held-out data (docs/quantize.md)."""
    oc, k = w.shape
    groups = h.shape[0]
    stop_fraction = STOP_FRACTION if stop_fraction is None else stop_fraction
    e, q, floor, ceil = _candidates(w, scales, qmin, qmax)
    # per-channel objective in step units: (q - v)^T (s^2 H) (q - v) (v = w / s); s^2 > 0
    # changes no decision, so H alone is used.
    if groups == 1:
        hk = h[0]
        grad = e @ hk                                              # [OC, K]: (H e)_k
        diag = np.broadcast_to(np.diag(hk), (oc, k))
    else:
        hg = h[np.arange(oc) // (oc // groups)]                    # [OC, K, K]
        grad = np.einsum("ok,okl->ol", e, hg)
        diag = np.einsum("okk->ok", hg)
    tol = 1e-12 * float(np.max(np.abs(diag))) if diag.size else 0.0
    objective = np.einsum("ok,ok->o", e, grad)                     # e^T H e per channel
    kernel = _round_passes_kernel()
    if kernel is not None and oc and k:
        group_of = (np.arange(oc, dtype=np.int64) // (oc // groups)) if groups > 1 \
            else np.zeros(oc, np.int64)
        hc = np.ascontiguousarray(h, dtype=np.float64)
        q, grad = np.ascontiguousarray(q), np.ascontiguousarray(grad, dtype=np.float64)
        floor, ceil = np.ascontiguousarray(floor), np.ascontiguousarray(ceil)
        passes = np.zeros(oc, np.int64)
        # channels are independent: rows of q and grad split over threads, same integers
        isa = current_isa().code
        split_rows(oc, lambda lo, hi: kernel(isa, q, floor, ceil, grad, hc, group_of, tol, MAX_PASSES,
                                             lo, hi, stop_fraction, objective, passes), min_rows=1)
        return q.astype(np.int64)
    return _round_passes_numpy(q, floor, ceil, grad, diag, h if groups == 1 else hg, groups, tol,
                               objective, stop_fraction)


def _candidates(w: np.ndarray, scales, qmin: int, qmax: int):
    """(e = q - w / scale, q = round-to-nearest start, floor, floor + 1), float64 [OC, K], in
    the range: one compiled pass (kernels/quant_ops.pyx rounding_candidates) with the doubles
    of _candidates_numpy."""
    oc = w.shape[0]
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(scales, np.float64).reshape(-1), (oc,)))
    if w.dtype not in (np.float32, np.float64):
        w = w.astype(np.float64)
    w = np.ascontiguousarray(w)
    e, q, floor, ceil = (np.empty(w.shape) for _ in range(4))
    _quant_ops.rounding_candidates(w, s, float(qmin), float(qmax), e, q, floor, ceil)
    return e, q, floor, ceil


def _candidates_numpy(w: np.ndarray, scales, qmin: int, qmax: int):
    """_candidates in numpy (the reference the compiled pass is tested against)."""
    oc = w.shape[0]
    s = np.broadcast_to(np.asarray(scales, np.float64).reshape(-1), (oc,))
    v = w / s[:, None]                                             # weights in steps
    q = np.clip(nnef_round(v), qmin, qmax)
    floor = np.clip(np.floor(v), qmin, qmax)
    ceil = np.clip(floor + 1, qmin, qmax)
    return q - v, q, floor, ceil


def round_from_rows(w: np.ndarray, scales: np.ndarray, rows: np.ndarray, mean: np.ndarray | None,
                    qmin: int = -127, qmax: int = 127, stop_fraction: float | None = None) -> np.ndarray:
    """See _round_from_rows; its GEMMs run on one BLAS thread (the channels' moves are split
    over qsim's threads): the same integers for any thread count, and no OpenBLAS worker
    spinning between the many block GEMMs (measured under load 10: the lowering of
    ResNet-18 took 3.5x the wall time at 2 threads than at 1 with BLAS on 2 threads)."""
    with single_thread_blas():
        return _round_from_rows(w, scales, rows, mean, qmin, qmax, stop_fraction)


def _round_from_rows(w, scales, rows, mean, qmin, qmax, stop_fraction) -> np.ndarray:
    """adaptive_round's integers for a layer of one group whose H = X^T X / P comes from few
    rows X [P, K] (P <= K; minus the mean row `mean` first when given: the covariance), without
    forming H. Per channel the residual r = X e (P values) replaces the gradient H e (K values):
    a move of weight j costs P multiply-adds on r instead of K on a K x K matrix's row, and
    the gradient X^T r is formed a block of BLOCK_COLUMNS weights at a time by one GEMM over
    all channels. Same search (start at nearest, weights in order, a move taken when it lowers
    e^T H e by more than the tolerance, up to MAX_PASSES passes; a pass without moves, or one
    that lowers the objective by less than stop_fraction of its value at nearest, ends a
    channel's search); the objective is the same quadratic form, rounded otherwise, so only
    near-ties can go the other way. The gradient GEMM covers only the channels still
    searching. Channels are split over threads (same integers)."""
    oc, k = w.shape
    stop_fraction = STOP_FRACTION if stop_fraction is None else stop_fraction
    e, q, floor, ceil = _candidates(w, scales, qmin, qmax)
    xt = np.array(rows.T, dtype=np.float64, order="C")            # [K, P], one transposing cast
    if mean is not None:
        xt -= mean.reshape(-1, 1)
    diag = np.einsum("kp,kp->k", xt, xt)                           # X^T X's diagonal
    tol = 1e-12 * float(np.max(diag)) if diag.size else 0.0
    q, floor, ceil = (np.ascontiguousarray(a) for a in (q, floor, ceil))
    starts = range(0, k, BLOCK_COLUMNS)
    grams = [np.ascontiguousarray(xt[j0:j0 + BLOCK_COLUMNS] @ xt[j0:j0 + BLOCK_COLUMNS].T)
             for j0 in starts]                                     # each block's X^T X
    xt32 = xt.astype(np.float32)
    del xt
    # the residual X e per channel [OC, P] in float32, as the gradient GEMMs read it: each
    # move adds +-x_j to it in float32 (the moments themselves carry float32 GEMM rounding;
    # on ResNet-18's layer4, 405 of 2.36M integers differ from a float64 residual's, at
    # near-ties, and the kernel moves half the bytes)
    r32 = e.astype(np.float32) @ xt32
    active = np.ones(oc, np.int8)
    objective = np.einsum("op,op->o", r32, r32, dtype=np.float64)   # e^T X^T X e per channel
    kernel = _quant_ops.round_block_from_rows
    isa = current_isa().code
    for _ in range(MAX_PASSES):
        moved = np.zeros(oc, np.int64)
        drop = np.zeros(oc)
        live = np.flatnonzero(active)
        some = live.size < oc
        for j0, hb in zip(starts, grams):
            # [OC, b]: X^T r on the block, a float32 GEMM (twice float64's speed); rows of
            # the channels still searching only (the others' rows are never read)
            if some:
                g = np.zeros((oc, min(BLOCK_COLUMNS, k - j0)))
                g[live] = r32[live] @ xt32[j0:j0 + BLOCK_COLUMNS].T
            else:
                g = (r32 @ xt32[j0:j0 + BLOCK_COLUMNS].T).astype(np.float64)
            split_rows(oc, lambda lo, hi: kernel(isa, q, floor, ceil, r32, xt32, g, hb, diag, tol, j0,
                                                 active, moved, drop, lo, hi), min_rows=1)
        active &= ((moved > 0) & ~(drop < stop_fraction * objective)).astype(np.int8)
        if not active.any():
            break
    return q.astype(np.int64)


def _round_passes_kernel():
    """The compiled pass loop (kernels/quant_ops.pyx). A missing or broken build is an error
    (KernelsUnavailableError, with the rebuild hint), never a silent switch to the numpy loop
    below, which stays as the reference the compiled loop is tested against."""
    return _quant_ops.round_passes


def _round_passes_numpy(q, floor, ceil, grad, diag, hmat, groups, tol, objective, stop_fraction):
    """The greedy passes over all channels at once (reference for the compiled loop)."""
    k = q.shape[1]
    hk = hmat[0] if groups == 1 else None
    hg = hmat if groups != 1 else None
    active = np.ones(q.shape[0], bool)
    for _ in range(MAX_PASSES):
        moved = np.zeros(q.shape[0], np.int64)
        drop = np.zeros(q.shape[0])
        for j in range(k):
            other = np.where(q[:, j] == floor[:, j], ceil[:, j], floor[:, j])
            delta = other - q[:, j]
            gain = 2.0 * delta * grad[:, j] + delta * delta * diag[:, j]
            take = np.nonzero(active & (delta != 0) & (gain < -tol))[0]
            if take.size == 0:
                continue
            d = delta[take]
            q[take, j] = other[take]
            grad[take] += d[:, None] * (hk[j][None, :] if groups == 1 else hg[take, j, :])
            moved[take] += 1
            drop[take] -= gain[take]
        active &= (moved > 0) & ~(drop < stop_fraction * objective)
        if not active.any():
            break
    return q.astype(np.int64)


def round_layer(moments: InputMoments | None, key: str, w: np.ndarray, wq: np.ndarray,
                quant: ir.QuantInfo, centered: bool) -> np.ndarray:
    """The int8 weights of layer `key` (w and wq in their float layout, output channels
    first) rounded adaptively when calibration collected its input moments, else wq."""
    if moments is None:
        return wq
    if key in moments.rounded:
        return moments.rounded[key]
    stats = moments.moments.get(key)
    flat = w.reshape(w.shape[0], -1)
    if stats is None or flat.shape[1] != stats.patch or w.shape[0] % stats.groups:
        return wq
    if stats.holding:
        # few rows (<= K): round on the rows themselves, no K x K matrix
        rows, mean = stats.consume_rows()
        q = round_from_rows(flat, quant.scales(), rows, mean[0] if centered else None)
        del rows
    else:
        # the layer's integers are cached below, so its moments are needed no more: consumed
        # (each layer's K x K totals freed as it is rounded bounds the lowering's peak memory)
        q = adaptive_round(flat, quant.scales(), stats.second_moment(centered, consume=True))
    out = q.reshape(w.shape).astype(wq.dtype)
    moments.rounded[key] = out
    return out


class _GeometryProbe:
    """Stands in for the lowering context when reading a convolution's padding before
    lowering: a layer whose geometry the lowering would refuse is simply not watched
    (the lowering reports it)."""
    op = None

    def unsupported(self, what: str, hint: str | None = None) -> Exception:
        return ValueError(what)


def watch_layers(graph: ir.Graph) -> InputMoments:
    """InputMoments watching every nn.conv (2-D, NCX, static shapes), nn.linear and
    constant-B linalg.matmul of the float `graph`, the layers whose weights the lowering
    rounds (keyed by their float output, as tosa/rules_linear.py looks them up)."""
    moments = InputMoments()
    probe = _GeometryProbe()
    for op in graph.ops:
        kind = op.kind.name
        if kind == "nn.conv":
            x, w = graph.tensor(op.inputs[0]), graph.tensor(op.inputs[1])
            if (w.data is None or not x.is_static or len(x.shape) != 4
                    or op.attrs.get("data_format", "NCX") != "NCX"):
                continue
            try:
                kernel = tuple(int(d) for d in w.shape[2:])
                stride = packed_ints(op.attrs.get("stride", 1), 2, "stride", probe)
                dilation = packed_ints(op.attrs.get("dilation", 1), 2, "dilation", probe)
                begins, ends, crop = spatial_padding(probe, op, tuple(x.shape[2:]), kernel,
                                                     stride, dilation)
            except ValueError:
                continue
            groups = int(op.attrs.get("groups", 1)) or int(x.shape[1])
            moments.watch_conv(op.outputs[0], op.inputs[0], ConvGeometry(
                groups, kernel, stride, dilation, tuple(begins), tuple(ends), tuple(crop)))
        elif kind == "nn.linear" and graph.tensor(op.inputs[1]).data is not None:
            moments.watch_linear(op.outputs[0], op.inputs[0])
        elif (kind == "linalg.matmul" and (len(op.inputs) == 2 or not op.inputs[2])
              and graph.tensor(op.inputs[1]).data is not None
              and len(graph.tensor(op.inputs[0]).shape) >= 2 and not op.attrs.get("transA", False)
              and all(d == 1 for d in graph.tensor(op.inputs[1]).shape[:-2])):
            moments.watch_linear(op.outputs[0], op.inputs[0])
    return moments
