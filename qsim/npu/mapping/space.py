"""The mappings of one GEMM onto the array: loop orders and tile sizes the buffers allow.

A GEMM out[M, N] = A[M, K] x W[K, N] runs as COMPUTE steps of the array's fixed shape
(hw/README.md): weight-stationary, one step multiplies `rows` rows of A by one fold of R
K-rows of one C-column tile of W; output-stationary, one step adds `klen` K-steps of an R-row
x C-column output tile. What a mapping chooses is everything around the steps:

- the loop order over (M tiles, N tiles, K), which decides which operand is read from DRAM
  once and which one again and again:
  MNK  the fixed rule (qsim/npu/array/compile.py): row tiles outer, then column tiles, the
       reduction inner; A stays in the input buffer across the column tiles when a row tile's
       whole K fits half of it, else A is read again for every column tile.
  MKN  row tiles outer, then the reduction, then every column tile: each piece of A is read
       once, and the partial sums of all column tiles of the row tile stay in the
       accumulators (nN tiles in half the accumulator buffer).
  NMK  column tiles outer: the column tile's whole W stays in the weight buffer (K words in
       half of it) while every row tile streams past; A is read once per column tile.
- the tile size: weight-stationary, the output rows of a row tile (COMPUTE `count`; longer
  amortizes the 2R + C fill of every step, shorter lets A stay resident or lets more column
  tiles' sums fit); output-stationary, the K-steps per COMPUTE (longer amortizes the
  2R + C - 1 skew and drain, shorter halves what one load moves).

int16 operands (qsim/npu/array/wide.py) add byte-plane passes: every (A plane, W plane) pair
is one more sweep of K, so a GEMM's reduction steps are passes x folds (ws) or passes x K
chunks (os). What a pass changes in the space: A resident in the input buffer takes one
copy per A plane, a column tile's resident W one copy per W plane, and an output-stationary
K chunk sums at most wide.MAX_TERMS_PER_COMPUTE products (the PEs' 32-bit sums must not
wrap within one COMPUTE; a weight-stationary fold sums R, which the compiler checks).

Legality is the buffers' halves (double buffering, 16-bit word addresses) and that bound:
`legal` says why not. Every legal mapping computes the same values (int8: the same sums in
the same int32 wrap; int16: the exact int48 sums, each pass's partial sums bounded by the
same K x largest product); only cycles, DRAM traffic and buffer accesses differ, and the
search (search.py) picks by those, measured by the cycle model and the energy events.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ...hw.isa import Plane
from ...hw.params import Dataflow, Geometry
from ..array.wide import MAX_TERMS_PER_COMPUTE


class LoopOrder(enum.Enum):
    """Outer to inner: M (row tiles), N (column tiles), K (the reduction)."""
    MNK = "mnk"     # the fixed rule's order
    MKN = "mkn"     # A read once; a row tile's column tiles accumulate side by side
    NMK = "nmk"     # a column tile's W resident while the row tiles stream


@dataclass(frozen=True)
class Mapping:
    order: LoopOrder
    tile: int | None = None     # ws: output rows per row tile; os: K-steps per COMPUTE; None: largest legal

    @property
    def label(self) -> str:
        return self.order.value + ("" if self.tile is None else f"/{self.tile}")

    @staticmethod
    def parse(text: str) -> "Mapping":
        """`mnk`, `mkn/64`, ... (the label) back to a Mapping."""
        order, _, tile = str(text).partition("/")
        return Mapping(LoopOrder(order), int(tile) if tile else None)


FIXED = Mapping(LoopOrder.MNK)      # the compiler's one rule before mapping search


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Shape:
    """A GEMM on a geometry: the sizes the legality and tiling rules read, and the byte planes
    of its operands (one INT8 plane each for an int8 GEMM; compile.gemm_shape)."""
    M: int
    K: int
    N: int
    geom: Geometry
    a_planes: tuple = (Plane.INT8,)
    w_planes: tuple = (Plane.INT8,)

    @property
    def passes(self) -> int:
        return len(self.a_planes) * len(self.w_planes)

    @property
    def k_cap(self) -> int:
        """The most K indices one output-stationary COMPUTE may sum (module docstring)."""
        return MAX_TERMS_PER_COMPUTE if self.passes > 1 else self.K

    @property
    def ws(self) -> bool:
        return self.geom.dataflow is Dataflow.WEIGHT_STATIONARY

    @property
    def folds(self) -> int:
        return _ceil(self.K, self.geom.rows)

    @property
    def col_tiles(self) -> int:
        return _ceil(self.N, self.geom.cols)

    @property
    def halves(self) -> tuple[int, int, int]:
        """Words in half the input, weight and accumulator buffers."""
        g = self.geom
        return g.input_depth_words // 2, g.weight_depth_words // 2, g.acc_depth_words // 2

    def max_tile(self, order: LoopOrder) -> int:
        """The largest tile `order` allows (0: the order is not legal here)."""
        in_half, w_half, acc_half = self.halves
        R, nw = self.geom.rows, len(self.w_planes)
        if self.ws:
            if order is LoopOrder.MKN:
                return min(self.M, acc_half // self.col_tiles, in_half)
            if order is LoopOrder.NMK and self.folds * R * nw > w_half:
                return 0
            return min(self.M, acc_half, in_half)
        if order is LoopOrder.MKN and self.col_tiles * R > acc_half:
            return 0
        if order is LoopOrder.NMK and self.K * nw > w_half:
            return 0
        return min(self.K, in_half, w_half, self.k_cap)

    def tile(self, mapping: Mapping) -> int:
        """The tile `mapping` runs with (its own, or the largest legal)."""
        if mapping.tile is not None:
            return mapping.tile
        if mapping.order is LoopOrder.MNK:
            return fixed_rows(self) if self.ws else fixed_k_chunk(self)
        return self.max_tile(mapping.order)

    def resident_a(self, mapping: Mapping) -> bool:
        """MNK keeps a row tile's A (every A plane) in the input buffer across the column tiles
        when it fits."""
        if mapping.order is not LoopOrder.MNK:
            return mapping.order is LoopOrder.MKN
        in_half, na = self.halves[0], len(self.a_planes)
        tile = self.tile(mapping)
        return self.folds * na * tile <= in_half if self.ws else tile == self.K and na * tile <= in_half

    def legal(self, mapping: Mapping) -> str | None:
        """Why `mapping` cannot run this GEMM on this geometry, or None when it can."""
        top = self.max_tile(mapping.order)
        if top <= 0:
            in_half, w_half, acc_half = self.halves
            if mapping.order is LoopOrder.NMK:
                need = (self.folds * self.geom.rows if self.ws else self.K) * len(self.w_planes)
                return f"a column tile's weights ({need} words) exceed half the weight buffer ({w_half} words)"
            return (f"{self.col_tiles} column tiles of partial sums exceed half the accumulator "
                    f"buffer ({acc_half} words)")
        tile = self.tile(mapping)
        if not 1 <= tile <= top:
            cap = "" if self.ws or top < self.k_cap else f"; {self.k_cap} terms per COMPUTE of 32-bit PE sums"
            return f"tile {tile} outside 1..{top} for {mapping.order.value} (buffer halves{cap})"
        return None


def array_cycles(shape: Shape, mapping: Mapping) -> int:
    """The compute unit's busy cycles under `mapping` (requantization tails left out): COMPUTEs
    run one after another, so this bounds the program's cycles from below."""
    g, tile = shape.geom, shape.tile(mapping)
    R, C = g.rows, g.cols
    if shape.ws:       # per row tile, column tile and pass, one COMPUTE per fold of 2R + C + rows
        tiles = _ceil(shape.M, tile)
        return shape.passes * shape.col_tiles * shape.folds * (tiles * (2 * R + C) + shape.M)
    steps = _ceil(shape.K, tile)        # per R x C output tile and pass, one COMPUTE per K chunk
    return shape.passes * _ceil(shape.M, R) * shape.col_tiles * (steps * (2 * R + C - 1) + shape.K)


# A candidate whose array time alone exceeds the least one's by this factor is not compiled:
# tiny tiles (thousands of COMPUTEs paying the fill each) never win, and cost the most to time.
PRUNE_FACTOR = 3


def fixed_rows(shape: Shape) -> int:
    """The fixed rule's weight-stationary row tile: as many rows as half the accumulators
    hold, cut to half the input buffer when A (all its planes) cannot stay resident."""
    in_half, _, acc_half = shape.halves
    rows = min(shape.M, acc_half)
    if in_half // (shape.folds * len(shape.a_planes)) < rows:
        rows = min(rows, in_half)
    return rows


def fixed_k_chunk(shape: Shape) -> int:
    """The fixed rule's output-stationary K chunk: the largest legal one, kept to a share of
    the input buffer half that every A plane's copy fits (A resident when the chunk is K)."""
    in_half, w_half, _ = shape.halves
    return max(1, min(shape.K, in_half // len(shape.a_planes), w_half, shape.k_cap))


def _balanced(total: int, top: int) -> int:
    """The tile that cuts `total` into as few pieces as `top` does, of equal size."""
    return _ceil(total, _ceil(total, top))


def candidates(shape: Shape) -> list[Mapping]:
    """The mappings the search compares, the fixed rule first: per legal order as few tiles as
    the largest legal tile gives, of equal size (the largest itself differs from it only in its
    last tile), and for weight-stationary MNK the largest tile that keeps A resident; without
    those whose array time is PRUNE_FACTOR x the least."""
    out = [FIXED]
    for order in LoopOrder:
        top = shape.max_tile(order)
        if top <= 0:
            continue
        total = shape.M if shape.ws else shape.K
        tiles = {_balanced(total, top)}     # as few tiles as the largest, of equal size
        if order is LoopOrder.MNK and shape.ws:
            tiles.add(min(top, shape.halves[0] // (shape.folds * len(shape.a_planes))))
        out.extend(Mapping(order, tile) for tile in sorted(t for t in tiles if t >= 1))
    seen, unique = set(), []
    for m in out:
        key = (m.order, shape.tile(m))
        if key not in seen and shape.legal(m) is None:
            seen.add(key)
            unique.append(m)
    least = min(array_cycles(shape, m) for m in unique)
    return [m for m in unique if m == FIXED or array_cycles(shape, m) <= PRUNE_FACTOR * least]
