"""The instruction stream of a GEMM under a Mapping (space.py): loads, COMPUTEs and stores in the
mapping's loop order, with the buffer hazards checked as the stream is written.

Both dataflows share one shape of schedule: output tiles of (row tile, column tile), each
reduced over K steps. Weight-stationary: a row tile is `tile` output rows, a K step one fold
of R lanes, a COMPUTE streams the tile's rows (count = rows); output-stationary: a row tile is
R output pixels, a K step `tile` K indices, a COMPUTE streams them (count = klen). A step's A
occupies `count` input words, its W `klen` weight words; an output tile holds rows (ws) or R
(os) accumulator words. int16 operands (qsim/npu/array/wide.py) repeat the K steps once per
pass (A plane, W plane): a Step names its planes, the A block it reads (`slot`: one per A
plane and K step, the input words a resident A keeps) and the weight plane image (`wi`).
The fixed rule's MNK runs the passes outermost (A plane, W plane, K step: the order the int16
compiler began with); MKN and NMK run the W planes innermost, so a loaded A block serves
all of its passes before the next one replaces it.

Safety comes from the in-order dispatcher (hw/README.md) alone, as in compile.py's fixed
emitter: every COMPUTE waits for the DMA unit (its operands, and the stores of the tile it
overwrites); a COMPUTE dispatches only when the previous one is done, so once a COMPUTE is in
the stream every COMPUTE before the one before it has finished. The `Stream` below therefore
lets a LOAD overwrite buffer words only when their last reader is not the latest COMPUTE
(else the LOAD waits for the compute unit), and emits a tile's STORE after the next COMPUTE
(which implies the tile's last one is done) or, at the end, with a wait for the compute unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...hw.isa import Plane
from .space import LoopOrder, Mapping, Shape


@dataclass(frozen=True)
class Step:
    """One reduction step of an output tile: K indices [k0, k0 + klen) of one pass (operand
    planes pa, pw); `slot` numbers the step's A block, `wi` its weight plane image."""
    k0: int
    klen: int
    pa: Plane = Plane.INT8
    pw: Plane = Plane.INT8
    slot: int = 0
    wi: int = 0


@dataclass(frozen=True)
class Operands:
    """Instruction makers of one GEMM, from the compiler (they know the DRAM image)."""
    a_load: Callable        # (m0, rows, step, buf_addr) -> [Instr]: descriptor + LOADW of step's A block
    w_load: Callable        # (j, k0, klen, wi, buf_addr) -> Instr: LOAD of klen words of weight plane wi
    param_load: Callable    # (j, word) -> Instr
    compute: Callable       # (a_addr, w_addr, acc_addr, param_word, count, accumulate, requant, step) -> Instr
    store: Callable         # (acc_addr, rows, m0, j) -> Instr


@dataclass
class Stream:
    """Instructions in order, with the readers of every buffer region (module docstring)."""
    ops: Operands
    instrs: list = field(default_factory=list)
    computes: int = 0
    readers: dict = field(default_factory=lambda: {"input": [], "weight": [], "param": []})
    pending: list = field(default_factory=list)     # (store, acc range, writer) not yet emitted

    def _write(self, buffer: str, lo: int, hi: int, instrs: list) -> None:
        """LOADs into words [lo, hi) of `buffer`: safe once the last reader of any of those words
        is older than the latest COMPUTE; otherwise the first one waits for the compute unit."""
        latest = self.computes - 1
        hazard = any(r_lo < hi and lo < r_hi and idx >= latest for r_lo, r_hi, idx in self.readers[buffer])
        self.readers[buffer] = [r for r in self.readers[buffer] if r[2] >= latest]
        if hazard:
            first = instrs[0]
            instrs = [type(first)(first.opcode, first.wait_dma, True, first.fields), *instrs[1:]]
        self.instrs.extend(instrs)

    def load_a(self, m0: int, rows: int, step: Step, addr: int, words: int) -> None:
        self._write("input", addr, addr + words, list(self.ops.a_load(m0, rows, step, addr)))

    def load_w(self, j: int, k0: int, klen: int, wi: int, addr: int) -> None:
        self._write("weight", addr, addr + klen, [self.ops.w_load(j, k0, klen, wi, addr)])

    def load_param(self, j: int, word: int) -> None:
        self._write("param", word, word + 1, [self.ops.param_load(j, word)])

    def compute(self, a: tuple, w: tuple, acc: tuple, param_word: int, accumulate: bool, requant: bool,
                store: tuple | None, step: Step) -> None:
        """a, w: (first word, words) read; acc: (first word, words) written; `store`: the
        (rows, m0, j) of the output tile this COMPUTE completes; `step` its planes."""
        acc_lo, acc_hi = acc[0], acc[0] + acc[1]
        if any(lo < acc_hi and acc_lo < hi for _, (lo, hi), _ in self.pending):
            self.flush(wait=True)       # never overwrite sums not yet stored
        self.instrs.append(self.ops.compute(a[0], w[0], acc[0], param_word, a[1], accumulate, requant, step))
        index = self.computes
        self.computes += 1
        self.readers["input"].append((a[0], a[0] + a[1], index))
        self.readers["weight"].append((w[0], w[0] + w[1], index))
        if requant:
            self.readers["param"].append((param_word, param_word + 1, index))
        self.flush(wait=False)
        if store is not None:
            rows, m0, j = store
            self.pending.append((self.ops.store(acc[0], rows, m0, j), (acc_lo, acc_hi), index))

    def flush(self, wait: bool) -> None:
        """Emits the pending stores whose tiles' last COMPUTE is done by the dispatch rule (all
        of them with `wait`: the first then waits for the compute unit)."""
        latest = self.computes - 1
        keep = []
        for store, span, writer in self.pending:
            if writer < latest or wait:
                if writer >= latest:
                    store = type(store)(store.opcode, store.wait_dma, True, store.fields)
                    wait = False        # one wait covers the rest
                self.instrs.append(store)
            else:
                keep.append((store, span, writer))
        self.pending = keep


@dataclass(frozen=True)
class _Plan:
    """The tiles of one GEMM under one mapping (module docstring)."""
    row_tiles: list         # (m0, rows)
    k_steps: list           # Step, in the order the mapping runs them
    col_tiles: int
    ws: bool
    R: int
    halves: tuple           # input, weight, accumulator words
    k_words: int            # weight words of one plane of one column tile (ws: folds x R, os: K)

    def count(self, rows: int, klen: int) -> int:
        return rows if self.ws else klen

    def acc_words(self, rows: int) -> int:
        return rows if self.ws else self.R


def _plan(shape: Shape, mapping: Mapping) -> _Plan:
    R, tile = shape.geom.rows, shape.tile(mapping)
    if shape.ws:
        rows = [(m0, min(tile, shape.M - m0)) for m0 in range(0, shape.M, tile)]
        chunks = [(f * R, R) for f in range(shape.folds)]
    else:
        rows = [(m0, min(R, shape.M - m0)) for m0 in range(0, shape.M, R)]
        chunks = [(k0, min(tile, shape.K - k0)) for k0 in range(0, shape.K, tile)]
    passes_outer = mapping.order is LoopOrder.MNK       # module docstring
    steps = [Step(k0, klen, pa, pw, ia * len(chunks) + ci, iw)
             for ia, pa in enumerate(shape.a_planes)
             for ci, (k0, klen), iw, pw in _inner(chunks, shape.w_planes, passes_outer)]
    return _Plan(rows, steps, shape.col_tiles, shape.ws, R, shape.halves, shape.folds * R if shape.ws else shape.K)


def _inner(chunks: list, w_planes: tuple, passes_outer: bool) -> list:
    """(chunk index, chunk, W plane index, W plane) within one A plane: W planes outer or inner."""
    pairs = [(ci, iw) for iw in range(len(w_planes)) for ci in range(len(chunks))] if passes_outer else \
        [(ci, iw) for ci in range(len(chunks)) for iw in range(len(w_planes))]
    return [(ci, chunks[ci], iw, w_planes[iw]) for ci, iw in pairs]


def emit(shape: Shape, mapping: Mapping, ops: Operands) -> list:
    """The instruction stream of `mapping` (which must be legal: Shape.legal)."""
    why = shape.legal(mapping)
    if why is not None:
        raise ValueError(f"mapping {mapping.label} does not fit: {why}")
    plan = _plan(shape, mapping)
    stream = Stream(ops)
    {LoopOrder.MNK: _mnk, LoopOrder.MKN: _mkn, LoopOrder.NMK: _nmk}[mapping.order](
        plan, stream, shape.resident_a(mapping))
    stream.flush(wait=True)
    return stream.instrs


def _mnk(plan: _Plan, s: Stream, resident: bool) -> None:
    """Row tiles, column tiles, K: A (every block of the row tile) resident across the column
    tiles when it fits."""
    in_half, w_half, acc_half = plan.halves
    step = 0
    for t, (m0, rows) in enumerate(plan.row_tiles):
        block = plan.count(rows, plan.k_steps[0].klen)      # words of one A block
        if resident:
            loaded = set()
            for st in plan.k_steps:
                if st.slot not in loaded:
                    loaded.add(st.slot)
                    s.load_a(m0, rows, st, (t % 2) * in_half + st.slot * block, plan.count(rows, st.klen))
        for j in range(plan.col_tiles):
            g = t * plan.col_tiles + j
            s.load_param(j, g % 2)
            for i, st in enumerate(plan.k_steps):
                words = plan.count(rows, st.klen)
                a_addr = (t % 2) * in_half + st.slot * block if resident else (step % 2) * in_half
                if not resident:
                    s.load_a(m0, rows, st, a_addr, words)
                w_addr = (step % 2) * w_half
                s.load_w(j, st.k0, st.klen, st.wi, w_addr)
                last = i == len(plan.k_steps) - 1
                s.compute((a_addr, words), (w_addr, st.klen), ((g % 2) * acc_half, plan.acc_words(rows)),
                          g % 2, i > 0, last, (rows, m0, j) if last else None, st)
                step += 1


def _mkn(plan: _Plan, s: Stream, resident: bool) -> None:
    """Row tiles, K, column tiles: each A block read once; the row tile's column tiles
    accumulate side by side in one accumulator half."""
    in_half, w_half, acc_half = plan.halves
    step = a_step = requants = 0
    for t, (m0, rows) in enumerate(plan.row_tiles):
        tile_words = plan.acc_words(rows)
        a_addr, slot = 0, None
        for i, st in enumerate(plan.k_steps):
            words = plan.count(rows, st.klen)
            if st.slot != slot:         # the block's passes follow one another (module docstring)
                slot, a_addr = st.slot, (a_step % 2) * in_half
                s.load_a(m0, rows, st, a_addr, words)
                a_step += 1
            last = i == len(plan.k_steps) - 1
            for j in range(plan.col_tiles):
                if last:
                    s.load_param(j, requants % 2)
                w_addr = (step % 2) * w_half
                s.load_w(j, st.k0, st.klen, st.wi, w_addr)
                s.compute((a_addr, words), (w_addr, st.klen), ((t % 2) * acc_half + j * tile_words, tile_words),
                          requants % 2, i > 0, last, (rows, m0, j) if last else None, st)
                requants += int(last)
                step += 1


def _nmk(plan: _Plan, s: Stream, resident: bool) -> None:
    """Column tiles, row tiles, K: the column tile's W (every plane) resident in one weight half."""
    in_half, w_half, acc_half = plan.halves
    planes = sorted({st.wi for st in plan.k_steps})
    g = a_step = 0
    for j in range(plan.col_tiles):
        w_base = (j % 2) * w_half
        for wi in planes:
            s.load_w(j, 0, plan.k_words, wi, w_base + wi * plan.k_words)
        for m0, rows in plan.row_tiles:
            s.load_param(j, g % 2)
            a_addr, slot = 0, None
            for i, st in enumerate(plan.k_steps):
                words = plan.count(rows, st.klen)
                if st.slot != slot:
                    slot, a_addr = st.slot, (a_step % 2) * in_half
                    s.load_a(m0, rows, st, a_addr, words)
                    a_step += 1
                last = i == len(plan.k_steps) - 1
                s.compute((a_addr, words), (w_base + st.wi * plan.k_words + st.k0, st.klen),
                          ((g % 2) * acc_half, plan.acc_words(rows)), g % 2, i > 0, last,
                          (rows, m0, j) if last else None, st)
            g += 1
