"""The whole NPU (dispatcher, DMA, buffers, array, requantization) under the Amaranth simulator,
against the numpy cycle model (values AND cycle counts) and an independent oracle (values)."""
import numpy as np
import pytest

from qsim.hw import isa
from qsim.hw.isa import LoadBuffer, StoreBuffer
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, Requant, compile_gemm
from qsim.npu.cycle_model import cycle_stats, run_model
from qsim.npu.sim_amaranth import run_amaranth

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY


def _geom(rows, cols, dataflow, input_words=32, weight_words=None, acc_words=None, bandwidth=8):
    return Geometry(rows, cols, dataflow, rows * input_words, cols * (weight_words or 4 * rows),
                    4 * cols * (acc_words or 4 * rows), bandwidth)


def _oracle(a, w, in_zp, w_zp, req):
    acc = (a.astype(np.int64) - in_zp) @ (w.astype(np.int64) - w_zp)
    if req is None:
        return acc.astype(np.int32)
    from tests.npu.oracle import rescale_clamp
    total = (acc + req.bias).astype(np.uint32).astype(np.int32)
    return rescale_clamp(total, req.multiplier, req.shift, req.out_zp, req.double_round,
                         req.clamp_lo, req.clamp_hi)


def _both_engines(geom, program):
    d_model, d_rtl = program.dram.copy(), program.dram.copy()
    cycles_model, _ = run_model(geom, program.instrs, d_model)
    cycles_rtl = run_amaranth(geom, program.instrs, d_rtl)
    return cycles_model, cycles_rtl, program.output(d_model), program.output(d_rtl)


@pytest.mark.parametrize("rows,cols,dataflow,mkn", [
    (2, 2, WS, (5, 7, 3)),      # K = 7 > R: four folds, N not a multiple of C
    (3, 2, WS, (4, 8, 5)),
    (2, 3, OS, (5, 9, 4)),      # M not a multiple of R, K streamed
    (3, 3, OS, (3, 4, 7)),
])
def test_gemm_rtl_equals_model_and_oracle(rng, rows, cols, dataflow, mkn):
    M, K, N = mkn
    geom = _geom(rows, cols, dataflow)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    req = Requant(bias=rng.integers(-3000, 3000, N).astype(np.int32),
                  multiplier=rng.integers(1 << 29, 1 << 31, N).astype(np.int32),
                  shift=rng.integers(33, 40, N), out_zp=-5, clamp_lo=-100, clamp_hi=90,
                  double_round=True)
    program = compile_gemm(geom, Gemm(a, w, in_zp=7, w_zp=-3, requant=req))
    cm, cr, om, orr = _both_engines(geom, program)
    assert cm == cr
    np.testing.assert_array_equal(orr, om)
    np.testing.assert_array_equal(orr, _oracle(a, w, 7, -3, req))


@pytest.mark.parametrize("dataflow", [WS, OS])
def test_minus128_squared_raw_accumulators(dataflow):
    geom = _geom(2, 2, dataflow)
    M, K, N = 3, 5, 2
    a = np.full((M, K), -128, np.int8)
    w = np.full((K, N), -128, np.int8)
    program = compile_gemm(geom, Gemm(a, w))
    cm, cr, om, orr = _both_engines(geom, program)
    assert cm == cr
    assert orr.tolist() == [[5 * 16384] * N] * M          # hand-worked: K * (-128)^2
    np.testing.assert_array_equal(om, orr)


@pytest.mark.parametrize("dataflow", [WS, OS])
def test_small_buffers_force_streaming_and_k_chunks(rng, dataflow):
    # input buffer of 8 words: A cannot stay resident (WS) and K = 11 is cut into chunks (OS)
    geom = _geom(2, 2, dataflow, input_words=8, weight_words=8, acc_words=8, bandwidth=3)
    a = rng.integers(-128, 128, (6, 11)).astype(np.int8)
    w = rng.integers(-128, 128, (11, 3)).astype(np.int8)
    program = compile_gemm(geom, Gemm(a, w, in_zp=-128, w_zp=127))
    assert max(i.get("buf_addr") + i.get("count") for i in program.instrs
               if i.opcode is isa.Opcode.LOADW) <= 8
    cm, cr, om, orr = _both_engines(geom, program)
    assert cm == cr
    np.testing.assert_array_equal(orr, _oracle(a, w, -128, 127, None))
    np.testing.assert_array_equal(om, orr)


@pytest.mark.parametrize("word_bytes,bandwidth,expected", [
    # One LOAD of 3 words: beat j issues at busy cycle max(j, ceil((j+1)W/B) - 1), the last
    # write lands one cycle later, busy = s_2 + 2; dispatched at cycle 1, idle at 1 + busy + 1.
    (8, 3, 1 + (7 + 2) + 1),     # s = 2, 5, 7
    (2, 8, 1 + (2 + 2) + 1),     # one beat per cycle at most: s = 0, 1, 2
    (4, 4, 1 + (2 + 2) + 1),
])
def test_dma_bandwidth_cycles_hand_worked(word_bytes, bandwidth, expected):
    geom = Geometry(8, 2, WS, 8 * 4, 2 * 16, 4 * 2 * 16, bandwidth)
    dram = np.arange(256, dtype=np.uint8)
    program = [isa.load(LoadBuffer.INPUT, 0, 3, 10, 20, word_bytes),
               isa.store(StoreBuffer.OUTPUT, 0, 1, 200, 2, 2, wait_dma=True)]
    store_busy = max(0, -(-2 // bandwidth) - 1) + 2
    total = expected + store_busy + 1            # the STORE dispatches when the DMA frees
    d_model, d_rtl = dram.copy(), dram.copy()
    assert run_model(geom, program, d_model)[0] == total
    assert run_amaranth(geom, program, d_rtl) == total
    np.testing.assert_array_equal(d_model, d_rtl)


def test_double_buffering_overlaps_dma_with_compute(rng):
    geom = _geom(2, 2, WS, bandwidth=2)
    a = rng.integers(-128, 128, (8, 8)).astype(np.int8)
    w = rng.integers(-128, 128, (8, 4)).astype(np.int8)
    program = compile_gemm(geom, Gemm(a, w))
    stats = cycle_stats(geom, program.instrs, program.dram)
    # Overlap: the run is shorter than DMA and compute busy times laid end to end.
    assert stats.total_cycles < stats.dma_busy_cycles + stats.compute_cycles + stats.fill_drain_cycles
    assert stats.compute_cycles + stats.fill_drain_cycles + stats.stall_cycles == stats.total_cycles
    cm, cr, om, orr = _both_engines(geom, program)
    assert cm == cr == stats.total_cycles
    np.testing.assert_array_equal(orr, _oracle(a, w, 0, 0, None))
