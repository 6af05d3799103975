"""NPU geometry: everything the RTL needs, derived once from a configuration.

Word widths follow the dataflow-independent buffer layout (README.md):
input buffer words hold R int8 lanes, weight and output buffer words C int8
lanes, accumulator words C int32 lanes, parameter words C lanes of
(bias int32, multiplier int32, shift uint8) = 9 bytes each.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

PARAM_LANE_BYTES = 9        # bias (4) + multiplier (4) + shift (1), little-endian
PARAM_DEPTH_WORDS = 4       # two banks of two words: one word per output-column tile
REQUANT_LATENCY_CYCLES = 3  # bias add | multiply + round | shift, zero point, clamp
# Accumulator lanes hold int48 sums (TOSA 16x8 / 16x16 accumulators); int8 layers use their low
# 32 bits. The buffer's depth is still counted in int32 words (acc_word_bytes): the lanes'
# upper 16 bits are extra storage, which the area (synthesized from this RTL) includes.
ACC_LANE_BITS = 48
# Output buffer words hold C lanes of 16 bits (int16 results, COMPUTE out16); int8 results
# are packed into the word's low C bytes, so a STORE of int8 lanes reads bytes 0..C-1.
OUTPUT_LANE_BITS = 16


class Units(enum.Flag):
    """Which execution units an NPU instance has (hw/top.py): the whole NPU, or one side."""
    ARRAY = 1       # compute unit (systolic array + requantization), window DMA, buffers
    VECTOR = 2      # vector DMA + vector unit
    ALL = ARRAY | VECTOR


class Dataflow(enum.Enum):
    WEIGHT_STATIONARY = "ws"
    OUTPUT_STATIONARY = "os"


@dataclass(frozen=True)
class Geometry:
    rows: int
    cols: int
    dataflow: Dataflow
    input_buffer_bytes: int
    weight_buffer_bytes: int
    accumulator_buffer_bytes: int
    dram_bytes_per_cycle: int
    # The testbench memory's timing (qsim/npu/dram/timing.py DramTiming; None: the ideal memory).
    # Not part of the RTL: left out of the repr (the Verilator build key) and of equality.
    dram: object = field(default=None, repr=False, compare=False)

    @property
    def input_word_bytes(self) -> int:
        return self.rows

    @property
    def weight_word_bytes(self) -> int:
        return self.cols

    @property
    def output_word_bytes(self) -> int:
        return self.cols

    @property
    def output_buffer_word_bytes(self) -> int:
        """Physical output buffer word: C lanes of OUTPUT_LANE_BITS."""
        return OUTPUT_LANE_BITS // 8 * self.cols

    @property
    def acc_word_bytes(self) -> int:
        return 4 * self.cols

    @property
    def param_word_bytes(self) -> int:
        return PARAM_LANE_BYTES * self.cols

    @property
    def input_depth_words(self) -> int:
        return self.input_buffer_bytes // self.input_word_bytes

    @property
    def weight_depth_words(self) -> int:
        return self.weight_buffer_bytes // self.weight_word_bytes

    @property
    def acc_depth_words(self) -> int:
        # The output (int8) buffer mirrors the accumulator buffer's depth.
        return self.accumulator_buffer_bytes // self.acc_word_bytes

    @property
    def dram_port_bytes(self) -> int:
        """Width of the DRAM data port: the widest word any buffer exchanges with DRAM."""
        return max(self.input_word_bytes, self.weight_word_bytes,
                   self.param_word_bytes, self.acc_word_bytes)

