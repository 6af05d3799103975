"""The vector unit's instruction (configuration word): one definition for the RTL and its drivers.

An instruction has scalar fields (INSTR_FIELDS, packed little-endian from bit 0 in
the order listed) and per-lane fields (LANE_FIELDS, one group per lane, lane 0
first): the output scaler's multiplier and shift, so a per-channel RESCALE gives
each of the C channels in flight its own scale. README.md renders the same tables.

`count` is the number of input beats the instruction consumes; the unit accepts
the next instruction once the last of them has left the pipeline.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, fields

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class VectorOp(enum.IntEnum):
    PASS = 0          # value = A' (RESCALE, CLAMP: all work in the output stage)
    ADD = 1           # A' + B' (wraps at 32 bits; TOSA REQUIREs no overflow)
    SUB = 2           # A' - B'
    MUL = 3           # (A' * B' + round) >> mul_shift (TOSA MUL 2.5.14)
    MAXIMUM = 4
    MINIMUM = 5
    TABLE8 = 6        # table[A' + 128] (256 int8 entries)
    TABLE16 = 7       # apply_lookup(table, A') (513 int16 entries, 7-bit interpolation)
    LOAD_TABLE = 8    # beat k writes lane 0's value (low 16 bits) as table entry k; no output
    REDUCE_SUM = 9    # per group (beats up to one with `last`): sum of A', wraps at 32 bits
    REDUCE_MAX = 10   # maximum of A' (also MAX_POOL2D: the feeder skips padding)
    REDUCE_MIN = 11
    ARGMAX = 12       # index (beat position in the group) of the first maximum of A'
    AVG = 13          # AVG_POOL2D: sum of A', then apply_scale_32 by reciprocal_scale(count)


REDUCTIONS = frozenset({VectorOp.REDUCE_SUM, VectorOp.REDUCE_MAX, VectorOp.REDUCE_MIN,
                        VectorOp.ARGMAX, VectorOp.AVG})

# (name, width in bits, signed)
INSTR_FIELDS = (
    ("op", 4, False), ("count", 24, False),
    # operand A: A' = scale_a ? apply_scale_32(a - zp_a, mult_a, shift_a, dr_a) : a - zp_a
    ("zp_a", 17, True), ("scale_a", 1, False), ("mult_a", 31, False), ("shift_a", 6, False),
    ("dr_a", 1, False),
    ("zp_b", 17, True), ("scale_b", 1, False), ("mult_b", 31, False), ("shift_b", 6, False),
    ("dr_b", 1, False),
    ("mul_shift", 6, False),
    # output: clamp((scale_o ? apply_scale_32(v, mult_o[c], shift_o[c], dr_o) : v) + zp_o)
    ("scale_o", 1, False), ("dr_o", 1, False), ("zp_o", 17, True),
    ("clamp_lo", 32, True), ("clamp_hi", 32, True),
)
LANE_FIELDS = (("mult_o", 31, False), ("shift_o", 6, False))

INSTR_BITS = sum(w for _, w, _ in INSTR_FIELDS)
LANE_BITS = sum(w for _, w, _ in LANE_FIELDS)


def _bounds(width: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)


def _pack(spec, values: dict, what: str) -> int:
    word, pos = 0, 0
    for name, width, signed in spec:
        value = int(values[name])
        low, high = _bounds(width, signed)
        if not low <= value <= high:
            raise ValueError(f"{what}.{name} = {value} outside [{low}, {high}]")
        word |= (value & ((1 << width) - 1)) << pos
        pos += width
    return word


@dataclass(frozen=True)
class VectorInstr:
    """One vector-unit instruction. `mult_o`/`shift_o` hold one value per lane, or one
    value for all lanes (per-tensor scale)."""
    op: VectorOp
    count: int
    zp_a: int = 0
    scale_a: bool = False
    mult_a: int = 0
    shift_a: int = 0
    dr_a: bool = False
    zp_b: int = 0
    scale_b: bool = False
    mult_b: int = 0
    shift_b: int = 0
    dr_b: bool = False
    mul_shift: int = 0
    scale_o: bool = False
    dr_o: bool = False
    zp_o: int = 0
    clamp_lo: int = INT32_MIN
    clamp_hi: int = INT32_MAX
    mult_o: tuple = (0,)
    shift_o: tuple = (0,)

    def scalar_fields(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)
                if f.name not in ("mult_o", "shift_o")}

    def lane_fields(self, lanes: int) -> list[dict[str, int]]:
        """Per-lane fields, a single value broadcast to every lane."""
        out = []
        for name in ("mult_o", "shift_o"):
            values = tuple(int(v) for v in getattr(self, name))
            if len(values) not in (1, lanes):
                raise ValueError(f"{name} has {len(values)} values for {lanes} lanes")
            out.append(values * lanes if len(values) == 1 else values)
        return [{"mult_o": m, "shift_o": s} for m, s in zip(*out)]

    def encode(self, lanes: int) -> tuple[int, int]:
        """(scalar word, lane word): INSTR_BITS and lanes * LANE_BITS bits."""
        scalar = _pack(INSTR_FIELDS, self.scalar_fields(), "VectorInstr")
        lane_word = 0
        for c, values in enumerate(self.lane_fields(lanes)):
            lane_word |= _pack(LANE_FIELDS, values, f"VectorInstr lane {c}") << (c * LANE_BITS)
        return scalar, lane_word
