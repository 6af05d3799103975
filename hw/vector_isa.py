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
    # Shifts take the amount from B' (low 5 bits: 0..31; TOSA REQUIREs 0 <= B' < bits of in_out_t).
    ASR = 14          # A' >> s, arithmetic (ARITHMETIC_RIGHT_SHIFT, round false)
    ASR_ROUND = 15    # (A' >> s) + bit s-1 of A' when s > 0 (ARITHMETIC_RIGHT_SHIFT, round true)
    LSL = 16          # (A' << s) low 32 bits (LOGICAL_LEFT_SHIFT; the writer keeps the type's bytes)
    LSR = 17          # (A' zero-extended from mul_shift bits = 8, 16 or 32) >> s (LOGICAL_RIGHT_SHIFT)
    CLZ = 18          # leading zeros of A' as 32 bits (32 for 0)
    INTDIV = 19       # A' / B' truncated toward zero; B' = 0 gives -1, minimum / -1 gives minimum
    GREATER = 20      # 1 if A' > B' else 0
    GREATER_EQUAL = 21
    EQUAL = 22
    SELECT = 23       # B' where A' != 0, else 0 (SELECT is two of these and an OR)
    AND = 24          # bitwise on the 32-bit lanes (BITWISE_*, LOGICAL_* on 0/1 booleans)
    OR = 25
    XOR = 26
    ABS = 27          # |A'| (32-bit wrap: |minimum| is minimum, where TOSA REQUIREs it fits)
    DOT = 28          # per group: sum of A' * B' (low 32 bits; RESIZE's bilinear taps x weights)


REDUCTIONS = frozenset({VectorOp.REDUCE_SUM, VectorOp.REDUCE_MAX, VectorOp.REDUCE_MIN,
                        VectorOp.ARGMAX, VectorOp.AVG, VectorOp.DOT})

# The unit's timing and memory depths, which its drivers and the numpy model (qsim/npu/
# qsim/npu/vector/model.py) rely on; here rather than in vector.py so that they need no amaranth.
VECTOR_LATENCY_CYCLES = 5     # beat accepted in cycle t -> its result valid in cycle t + 5
TABLE_DEPTH = 512             # lo[i] = table[i], hi[i] = table[i + 1]: one read of each per lookup
DEFAULT_MAX_POOL_COUNT = 1024  # reciprocal ROM depth: AVG groups of up to this many beats

# (name, width in bits, signed)
INSTR_FIELDS = (
    ("op", 5, False), ("count", 24, False),
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


# ------------------------------------------------------------------ stream pattern
# The vector DMA (hw/vdma.py) walks STREAM_LEVELS nested loops (level 0 innermost) and
# sends one beat per iteration. Each operand stream has a byte address that starts at its
# base and, when level i is the lowest level that advances, changes by its step_i: the
# compiler folds the rewind of the levels below into the step (step_i = stride_i -
# sum_{j<i} (count_j - 1) stride_j), so the address generator only adds. Lane l of a beat
# is at beat address + l * lane (bytes): lane == bytes is one contiguous read of
# lanes * bytes, lane == 0 one element broadcast to every lane, anything else one read
# per lane (a gather). Elements are `bytes` (1, 2 or 4) wide, sign-extended to int32.
# The output stream advances once per result (every beat, or per `group` beats for
# reductions) over its own loop counts, always contiguous in the lanes (one write of
# lanes * o_bytes); results keep their low o_bytes bytes (the instruction's clamp makes
# them fit). `group` beats form one reduction group (`last` on the final one).
# Indirect mode (`a_indirect`, GATHER with computed indices): each beat first reads B, one
# element broadcast (the row index i, b_lane = 0, b_bytes = 4), then A as one contiguous
# read at the beat address + i * a_lane (a_lane holds the row's bytes; A's lanes are
# contiguous elements of a_bytes). A's read waits for the index: it issues at least two
# cycles after B's (the index is captured the cycle after its read).
STREAM_LEVELS = 6


def _stream_fields(prefix: str) -> tuple:
    return ((f"{prefix}_base", 32, False),
            *((f"{prefix}_step{i}", 32, True) for i in range(STREAM_LEVELS)),
            (f"{prefix}_lane", 32, True), (f"{prefix}_bytes", 3, False))


PATTERN_FIELDS = (
    ("lanes", 16, False), ("group", 24, False),
    *((f"count{i}", 16, False) for i in range(STREAM_LEVELS)),
    *_stream_fields("a"), ("b_on", 1, False), *_stream_fields("b"),
    ("o_base", 32, False), *((f"o_count{i}", 16, False) for i in range(STREAM_LEVELS)),
    *((f"o_step{i}", 32, True) for i in range(STREAM_LEVELS)), ("o_bytes", 3, False),
    ("a_indirect", 1, False),
)
PATTERN_BITS = sum(w for _, w, _ in PATTERN_FIELDS)


def config_bits(lanes: int) -> int:
    """Bits of one vector configuration: the pattern, the instruction, the lane fields."""
    return PATTERN_BITS + INSTR_BITS + LANE_BITS * lanes


def config_words(lanes: int, word_bytes: int) -> int:
    """Words of the vector configuration register file (LOAD ... VCONFIG fills them)."""
    return -(-config_bits(lanes) // (8 * word_bytes))


@dataclass(frozen=True)
class VectorConfig:
    """What a VRUN executes: the vector instruction and the stream pattern feeding it."""
    instr: VectorInstr
    pattern: dict            # PATTERN_FIELDS by name (missing: 0)

    def field(self, name: str) -> int:
        return int(self.pattern.get(name, 0))

    def encode(self, lanes: int) -> int:
        """Pattern bits first (bit 0), then the instruction, then its lane fields."""
        values = {name: self.field(name) for name, _, _ in PATTERN_FIELDS}
        scalar, lane_word = self.instr.encode(lanes)
        return (_pack(PATTERN_FIELDS, values, "VectorConfig")
                | scalar << PATTERN_BITS | lane_word << (PATTERN_BITS + INSTR_BITS))

    def to_bytes(self, lanes: int, word_bytes: int) -> bytes:
        n = config_words(lanes, word_bytes) * word_bytes
        return self.encode(lanes).to_bytes(n, "little")


def _unpack(spec, word: int) -> dict[str, int]:
    out, pos = {}, 0
    for name, width, signed in spec:
        value = (word >> pos) & ((1 << width) - 1)
        if signed and value >> (width - 1):
            value -= 1 << width
        out[name] = value
        pos += width
    return out


def decode_config(blob: bytes, lanes: int) -> VectorConfig:
    """The inverse of VectorConfig.to_bytes (the cycle model reads the register file)."""
    word = int.from_bytes(bytes(blob), "little")
    pattern = _unpack(PATTERN_FIELDS, word)
    scalar = _unpack(INSTR_FIELDS, word >> PATTERN_BITS)
    lane_word = word >> (PATTERN_BITS + INSTR_BITS)
    per_lane = [_unpack(LANE_FIELDS, lane_word >> (c * LANE_BITS)) for c in range(lanes)]
    instr = VectorInstr(op=VectorOp(scalar.pop("op")), **scalar,
                        mult_o=tuple(p["mult_o"] for p in per_lane),
                        shift_o=tuple(p["shift_o"] for p in per_lane))
    return VectorConfig(instr, pattern)
