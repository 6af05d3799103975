"""The moments calibration collects for adaptive weight rounding (adaptive.py): for every
watched layer the running sums over the input patches it reads, x and x x^T per group
(PatchMoments), for the whole model in InputMoments, whose layers watch_layers picks from the
float graph before calibration. A convolution's patch geometry and gather are in
conv_geometry.py, the moments summed by tap offset without a gather in offset_moments.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import ir
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
