"""Numpy cycle model: hand-worked schedules, GEMM values vs an independent oracle, tiling limits."""
import numpy as np
import pytest

from qsim.hw import isa
from qsim.hw.isa import LoadBuffer, StoreBuffer
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, compile_gemm
from qsim.npu.cycle_model import compute_duration, dma_duration, run_model, schedule

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY


def test_durations_hand_worked():
    assert dma_duration(3, 8, 3) == 9            # beats at 2, 5, 7; last write at 8
    assert dma_duration(4, 2, 8) == 5            # one word per cycle at most
    g = Geometry(4, 2, WS, 64, 64, 256, 8)
    assert compute_duration(g, 10, False) == 2 * 4 + 2 + 10
    assert compute_duration(g, 10, True) == 2 * 4 + 2 + 10 + 3
    g = Geometry(4, 2, OS, 64, 64, 256, 8)
    assert compute_duration(g, 10, False) == 10 + 2 * 4 + 2 - 1


def test_schedule_overlaps_units_and_honours_wait_flags():
    g = Geometry(2, 2, WS, 64, 64, 256, 2)
    load = isa.load(LoadBuffer.INPUT, 0, 4, 0, 2, 2)                       # D = 5
    comp = isa.compute(count=4, wait_dma=True)                             # D = 2*2+2+4 = 10
    load2 = isa.load(LoadBuffer.WEIGHT, 0, 2, 0, 2, 2)                     # D = 3
    store = isa.store(StoreBuffer.ACCUMULATOR, 0, 1, 0, 8, 8, wait_compute=True)   # D = 5
    dispatch, total = schedule(g, [load, comp, load2, store])
    # load at 1 (free at 7); compute waits for the DMA: 7 (free at 18); load2 overlaps: 8
    # (free at 12); store waits for the compute unit: 18 (free at 24).
    assert dispatch.tolist() == [1, 7, 8, 18]
    assert total == 24


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 9), (64, 5, 40)])
def test_gemm_values_match_oracle(rng, dataflow, shape):
    M, K, N = shape
    g = Geometry(4, 8, dataflow, 4 * 32, 8 * 16, 32 * 16, 8)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    program = compile_gemm(g, Gemm(a, w, in_zp=-128, w_zp=127))
    dram = program.dram.copy()
    run_model(g, program.instrs, dram)
    expected = (a.astype(np.int64) + 128) @ (w.astype(np.int64) - 127)
    np.testing.assert_array_equal(program.output(dram), expected.astype(np.int32))


@pytest.mark.parametrize("dataflow", [WS, OS])
def test_accumulation_wraps_at_int32_limit(dataflow):
    # (-128 - 127) * (-128 - 127) = 65025 per step; 33027 steps pass 2^31 - 1 and wrap.
    K = 33027
    g = Geometry(4, 4, dataflow, 4 * 4096, 4 * 4096, 16 * 16, 64)
    a = np.full((2, K), -128, np.int8)
    w = np.full((K, 1), -128, np.int8)
    program = compile_gemm(g, Gemm(a, w, in_zp=127, w_zp=127))
    dram = program.dram.copy()
    run_model(g, program.instrs, dram)
    exact = K * 65025
    assert exact > 2**31 - 1
    wrapped = (exact + 2**31) % 2**32 - 2**31
    assert program.output(dram).ravel().tolist() == [wrapped, wrapped]


def test_tiling_respects_buffer_sizes(rng):
    g = Geometry(4, 4, WS, 4 * 16, 4 * 8, 16 * 8, 8)      # 16 input, 8 weight, 8 acc words
    a = rng.integers(-128, 128, (50, 30)).astype(np.int8)
    w = rng.integers(-128, 128, (30, 10)).astype(np.int8)
    program = compile_gemm(g, Gemm(a, w))
    depth = {LoadBuffer.INPUT: 16, LoadBuffer.WEIGHT: 8, LoadBuffer.PARAM: 4}
    for i in program.instrs:
        if i.opcode is isa.Opcode.LOAD and i.get("buf") != LoadBuffer.VCONFIG:
            assert i.get("buf_addr") + i.get("count") <= depth[LoadBuffer(i.get("buf"))]
        if i.opcode is isa.Opcode.LOADW:
            assert i.get("buf_addr") + i.get("count") <= depth[LoadBuffer.INPUT]
        if i.opcode is isa.Opcode.COMPUTE:
            assert i.get("acc_addr") + i.get("count") <= 8
    dram = program.dram.copy()
    run_model(g, program.instrs, dram)
    np.testing.assert_array_equal(program.output(dram), a.astype(np.int64) @ w.astype(np.int64))
