"""The instruction stream of a GEMM under a Mapping (space.py): loads, COMPUTEs and stores in the
mapping's loop order, with the buffer hazards checked as the stream is written.

Both dataflows share one shape of schedule: output tiles of (row tile, column tile), each
reduced over K steps. Weight-stationary: a row tile is `tile` output rows, a K step one fold
of R lanes, a COMPUTE streams the tile's rows (count = rows); output-stationary: a row tile is
R output pixels, a K step `tile` K indices, a COMPUTE streams them (count = klen). A step's A
occupies `count` input words, its W `klen` weight words; an output tile holds rows (ws) or R
(os) accumulator words.

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

from .space import LoopOrder, Mapping, Shape


@dataclass(frozen=True)
class Operands:
    """Instruction makers of one GEMM, from the compiler (they know the DRAM image)."""
    a_load: Callable        # (m0, rows, k0, klen, buf_addr) -> [Instr]: descriptor + LOADW
    w_load: Callable        # (j, k0, klen, buf_addr) -> Instr: LOAD of klen weight words
    param_load: Callable    # (j, word) -> Instr
    compute: Callable       # (a_addr, w_addr, acc_addr, param_word, count, accumulate, requant) -> Instr
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

    def load_a(self, m0: int, rows: int, k0: int, klen: int, addr: int, words: int) -> None:
        self._write("input", addr, addr + words, list(self.ops.a_load(m0, rows, k0, klen, addr)))

    def load_w(self, j: int, k0: int, klen: int, addr: int) -> None:
        self._write("weight", addr, addr + klen, [self.ops.w_load(j, k0, klen, addr)])

    def load_param(self, j: int, word: int) -> None:
        self._write("param", word, word + 1, [self.ops.param_load(j, word)])

    def compute(self, a: tuple, w: tuple, acc: tuple, param_word: int, accumulate: bool, requant: bool,
                store: tuple | None) -> None:
        """a, w: (first word, words) read; acc: (first word, words) written; `store`: the
        (rows, m0, j) of the output tile this COMPUTE completes."""
        acc_lo, acc_hi = acc[0], acc[0] + acc[1]
        if any(lo < acc_hi and acc_lo < hi for _, (lo, hi), _ in self.pending):
            self.flush(wait=True)       # never overwrite sums not yet stored
        self.instrs.append(self.ops.compute(a[0], w[0], acc[0], param_word, a[1], accumulate, requant))
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
    k_steps: list           # (k0, klen)
    col_tiles: int
    ws: bool
    R: int
    halves: tuple           # input, weight, accumulator words

    def count(self, rows: int, klen: int) -> int:
        return rows if self.ws else klen

    def acc_words(self, rows: int) -> int:
        return rows if self.ws else self.R


def _plan(shape: Shape, mapping: Mapping) -> _Plan:
    R, tile = shape.geom.rows, shape.tile(mapping)
    if shape.ws:
        rows = [(m0, min(tile, shape.M - m0)) for m0 in range(0, shape.M, tile)]
        steps = [(f * R, R) for f in range(shape.folds)]
    else:
        rows = [(m0, min(R, shape.M - m0)) for m0 in range(0, shape.M, R)]
        steps = [(k0, min(tile, shape.K - k0)) for k0 in range(0, shape.K, tile)]
    return _Plan(rows, steps, shape.col_tiles, shape.ws, R, shape.halves)


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
    """Row tiles, column tiles, K: A resident across the column tiles when it fits."""
    in_half, w_half, acc_half = plan.halves
    step = 0
    for t, (m0, rows) in enumerate(plan.row_tiles):
        offsets, offset = [], 0
        for k0, klen in plan.k_steps:
            offsets.append(offset)
            if resident:
                s.load_a(m0, rows, k0, klen, (t % 2) * in_half + offset, plan.count(rows, klen))
            offset += plan.count(rows, klen)
        for j in range(plan.col_tiles):
            g = t * plan.col_tiles + j
            s.load_param(j, g % 2)
            for i, (k0, klen) in enumerate(plan.k_steps):
                words = plan.count(rows, klen)
                a_addr = (t % 2) * in_half + offsets[i] if resident else (step % 2) * in_half
                if not resident:
                    s.load_a(m0, rows, k0, klen, a_addr, words)
                w_addr = (step % 2) * w_half
                s.load_w(j, k0, klen, w_addr)
                last = i == len(plan.k_steps) - 1
                s.compute((a_addr, words), (w_addr, klen), ((g % 2) * acc_half, plan.acc_words(rows)),
                          g % 2, i > 0, last, (rows, m0, j) if last else None)
                step += 1


def _mkn(plan: _Plan, s: Stream, resident: bool) -> None:
    """Row tiles, K, column tiles: each piece of A read once; the row tile's column tiles
    accumulate side by side in one accumulator half."""
    in_half, w_half, acc_half = plan.halves
    step = a_step = requants = 0
    for t, (m0, rows) in enumerate(plan.row_tiles):
        tile_words = plan.acc_words(rows)
        for i, (k0, klen) in enumerate(plan.k_steps):
            words = plan.count(rows, klen)
            a_addr = (a_step % 2) * in_half
            s.load_a(m0, rows, k0, klen, a_addr, words)
            a_step += 1
            last = i == len(plan.k_steps) - 1
            for j in range(plan.col_tiles):
                if last:
                    s.load_param(j, requants % 2)
                w_addr = (step % 2) * w_half
                s.load_w(j, k0, klen, w_addr)
                s.compute((a_addr, words), (w_addr, klen), ((t % 2) * acc_half + j * tile_words, tile_words),
                          requants % 2, i > 0, last, (rows, m0, j) if last else None)
                requants += int(last)
                step += 1


def _nmk(plan: _Plan, s: Stream, resident: bool) -> None:
    """Column tiles, row tiles, K: the column tile's W resident in one weight half."""
    in_half, w_half, acc_half = plan.halves
    k_total = sum(klen for _, klen in plan.k_steps)
    step = g = 0
    for j in range(plan.col_tiles):
        w_base = (j % 2) * w_half
        s.load_w(j, 0, k_total, w_base)
        for m0, rows in plan.row_tiles:
            s.load_param(j, g % 2)
            for i, (k0, klen) in enumerate(plan.k_steps):
                words = plan.count(rows, klen)
                a_addr = (step % 2) * in_half
                s.load_a(m0, rows, k0, klen, a_addr, words)
                last = i == len(plan.k_steps) - 1
                s.compute((a_addr, words), (w_base + k0, klen), ((g % 2) * acc_half, plan.acc_words(rows)),
                          g % 2, i > 0, last, (rows, m0, j) if last else None)
                step += 1
            g += 1
