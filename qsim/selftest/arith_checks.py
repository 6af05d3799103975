"""Self check of TOSA's scaling helpers (apply_scale_32/16, TOSA 0.30 section 1.9.2) against the
same formula on unbounded Python integers."""
from __future__ import annotations

import numpy as np

from ..tosa.arith import apply_scale_16, apply_scale_32
from .compare import assert_equal_arrays


def check_apply_scale(rng: np.random.Generator) -> int:
    n = 0
    for _ in range(200):
        shift = int(rng.integers(2, 63))
        multiplier = int(rng.integers(0, 1 << 31))
        bound = 1 << (shift - 2)
        lim = min(bound, 1 << 31)
        values = rng.integers(-lim, lim, size=64, dtype=np.int64)
        values = np.clip(values, -(1 << 31), (1 << 31) - 1)
        for double_round in (False, True):
            got = apply_scale_32(values, multiplier, shift, double_round)
            want = []
            for v in values.tolist():
                r = 1 << (shift - 1)
                if double_round and shift > 31:
                    r += (1 << 30) if v >= 0 else -(1 << 30)
                want.append((v * multiplier + r) >> shift)   # unbounded Python ints
            n += assert_equal_arrays(f"apply_scale_32(shift={shift}, double_round={double_round})",
                                     np.array(want, dtype=np.int64), got.astype(np.int64))
        m16 = int(rng.integers(0, 1 << 15))
        s16 = int(rng.integers(32, 63))  # keeps |result| < 2^31 for |value| < 2^47
        v48 = rng.integers(-(1 << 47), 1 << 47, size=64, dtype=np.int64)
        want16 = [(v * m16 + (1 << (s16 - 1))) >> s16 for v in v48.tolist()]
        n += assert_equal_arrays(f"apply_scale_16(shift={s16})", np.array(want16, dtype=np.int64),
                                 apply_scale_16(v48, m16, s16).astype(np.int64))
    return n
