"""rsqrt and reciprocal of positive int32 tensors with TOSA 0.30 integer operators only: a
CLZ normalization, a TABLE seed and one Newton step in MUL-with-shift arithmetic (the
integer-only recipe of I-BERT and its successors, with TOSA's interpolated int16 TABLE as the
seed instead of a bit-length guess).

    c   = CLZ(w)                                   w in [1, 2^30): c in [2, 31]
    m   = LOGICAL_LEFT_SHIFT(w, k)                 m in [2^28, 2^30) for rsqrt (k = 2e, even),
                                                   [2^29, 2^30) for the reciprocal (k = c - 2)
    t   = CAST16(m >> 15)                          the table input, in [2^13, 2^15)
    r0  = TABLE(t) << 9                            Q29 seed: entry i (v = 128 i - 32768) holds
                                                   2^13 f(v / 2^15), interpolated (2.5.17)
    rsqrt:       r = r0 (3 - mu r0^2) / 2          MUL(r0, r0, 30), MUL(m, ., 30), SUB(3 << 28, .),
                                                   MUL(r0, ., 29)          mu = m / 2^30
    reciprocal:  r = r0 (2 - mu r0)                MUL(m, r0, 30), SUB(2^30, .), MUL(r0, ., 29)

Results: 1/sqrt(w) = r 2^(e - 44) with e = (c - 2) >> 1; 1/w = r 2^(c - 61). The seeds are
within about 2^-13 relative (the reciprocal's 9.7e-5), one Newton step squares that: measured
within 1.3e-8 (rsqrt) and 1.1e-8 (reciprocal) relative over 2.2 million values of w including
every power of two, every 2^k - 1 and every w < 200000. Every intermediate stays below 2^31:
r <= 2 in Q29 is 2^30, r0^2 <= 4 in Q28 is 2^30.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...numerics import nnef_round
from .context import TosaContext

TABLE_INPUT_SHIFT = 15          # t = m >> 15 indexes the int16 table
SEED_SHIFT = 9                  # 16.7 TABLE result (2^20 f) << 9 = Q29
MAX_RSQRT_EXPONENT = 14         # e = (CLZ(w) - 2) >> 1 <= (31 - 2) >> 1


def seed_table(f, lowest: int) -> np.ndarray:
    """513 int16 entries: entry i (table input v = 128 i - 32768) holds round(2^13 f(v / 2^15))
    for v >= `lowest`; below it (never read) the value at `lowest`, so every slope stays within
    int16 (apply_lookup's REQUIRE)."""
    v = 128 * np.arange(513, dtype=np.float64) - 32768.0
    return nnef_round(8192.0 * f(np.maximum(v, float(lowest)) / 32768.0)).astype(np.int16)


def rsqrt_seed_table() -> np.ndarray:
    return seed_table(lambda mu: 1.0 / np.sqrt(mu), 1 << 13)


def reciprocal_seed_table() -> np.ndarray:
    return seed_table(lambda mu: 1.0 / mu, 1 << 14)


class Emitter:
    """Emits one rule's integer operators: names `<base>.<hint>`, one label, rank-matched
    int32 constants."""
    def __init__(self, ctx: TosaContext, base: str, rank: int):
        self.ctx, self.base, self.rank, self.label = ctx, base, rank, ctx.f.where()

    def __call__(self, op: str, inputs, attrs: dict, hint: str, **kw) -> str:
        return self.ctx.emit(op, list(inputs), attrs, hint=f"{self.base}.{hint}", label=self.label, **kw)

    def const(self, hint: str, value: int) -> str:
        return self.ctx.constant_tensor(f"{self.base}.{hint}", np.full((1,) * self.rank, value), ir.DType.I32)


def _seed(emit: Emitter, m: str, table: np.ndarray, hint: str) -> str:
    t = emit("ARITHMETIC_RIGHT_SHIFT", [m, emit.const("k15", TABLE_INPUT_SHIFT)], {"round": False},
             f"{hint}_t")
    t16 = emit("CAST", [t], {}, f"{hint}_t16", out_dtype=ir.DType.I16)
    seed = emit("TABLE", [t16], {"table": table}, f"{hint}_seed")
    return emit("LOGICAL_LEFT_SHIFT", [seed, emit.const("k9", SEED_SHIFT)], {}, f"{hint}_r0")


def rsqrt(emit: Emitter, w: str) -> tuple[str, str]:
    """(r, e) with 1 / sqrt(w) = r 2^(e - 44), for int32 w in [1, 2^30)."""
    c = emit("CLZ", [w], {}, "clz")
    e = emit("ARITHMETIC_RIGHT_SHIFT", [emit("SUB", [c, emit.const("two", 2)], {}, "clz2"),
                                        emit.const("one_bit", 1)], {"round": False}, "exp")
    m = emit("LOGICAL_LEFT_SHIFT", [w, emit("ADD", [e, e], {}, "exp2")], {}, "mant")
    r0 = _seed(emit, m, rsqrt_seed_table(), "rsqrt")
    sq = emit("MUL", [r0, r0], {"shift": 30}, "r0sq")
    prod = emit("MUL", [m, sq], {"shift": 30}, "mr0sq")
    corr = emit("SUB", [emit.const("three", 3 << 28), prod], {}, "newton")
    return emit("MUL", [r0, corr], {"shift": 29}, "rsqrt"), e


def reciprocal(emit: Emitter, w: str) -> tuple[str, str]:
    """(r, c) with 1 / w = r 2^(c - 61), for int32 w in [1, 2^30)."""
    c = emit("CLZ", [w], {}, "clz")
    m = emit("LOGICAL_LEFT_SHIFT", [w, emit("SUB", [c, emit.const("two", 2)], {}, "clz2")], {}, "mant")
    r0 = _seed(emit, m, reciprocal_seed_table(), "rcp")
    prod = emit("MUL", [m, r0], {"shift": 30}, "mr0")
    corr = emit("SUB", [emit.const("two_q29", 1 << 30), prod], {}, "newton")
    return emit("MUL", [r0, corr], {"shift": 29}, "rcp"), c
