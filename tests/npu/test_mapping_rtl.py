"""Every kind of mapping choice (loop order x tile size, both dataflows) runs on the RTL, Amaranth's
simulator and Verilator, with the values of the TOSA oracle and the cycle model's cycle count."""
import numpy as np
import pytest

from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, Requant, compile_gemm
from qsim.npu.array.window import Window
from qsim.npu.engines import run_program
from qsim.npu.mapping.space import FIXED, LoopOrder, Mapping, Shape

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
# The geometries tests/npu/test_dram_timing.py builds for verilator too (halves: ws input 16,
# weight 8, accumulator 16 words; os 32, 21, 21 words).
GEOMS = {WS: Geometry(2, 3, WS, 2 * 32, 3 * 16, 12 * 32, 8), OS: Geometry(2, 3, OS, 128, 128, 512, 7)}
MNK, MKN, NMK = LoopOrder
CASES = [(WS, FIXED), (WS, Mapping(MNK, 5)), (WS, Mapping(MNK, 7)), (WS, Mapping(MKN, 5)),
         (WS, Mapping(MKN, 3)), (WS, Mapping(NMK, 16)), (WS, Mapping(NMK, 8)),
         (OS, FIXED), (OS, Mapping(MNK, 4)), (OS, Mapping(MKN, 6)), (OS, Mapping(MKN, 4)),
         (OS, Mapping(NMK, 6)), (OS, Mapping(NMK, 4))]


def _conv_gemm():
    """A padded 1x2 convolution with a fused requantization: M = 20 pixels, K = 6, N = 7 (three
    column tiles of 3), the input zero point at the rail so that padding taps must cancel."""
    rng = np.random.default_rng(30)
    x = rng.integers(-128, 128, (1, 4, 5, 3)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 7)).astype(np.int8)
    window = Window(x.shape, (1, 2), pad=(0, 0, 1, 0))
    req = Requant(bias=rng.integers(-3000, 3000, 7).astype(np.int32),
                  multiplier=rng.integers(1 << 30, 1 << 31, 7).astype(np.int32),
                  shift=rng.integers(36, 40, 7), out_zp=-3, clamp_lo=-128, clamp_hi=127, double_round=True)
    gemm = Gemm(x, w, in_zp=-128, w_zp=3, requant=req, window=window)
    # the oracle: explicit im2col with zero-point padding, int64 sums
    xp = np.pad(x.astype(np.int64) + 128, ((0, 0), (0, 0), (1, 0), (0, 0)))
    a = np.stack([xp[0, oy, ox:ox + 2].reshape(-1) for oy in range(4) for ox in range(5)])
    acc = a @ (w.astype(np.int64) - 3) + req.bias
    return gemm, acc


def _requantized(acc, req):
    from qsim.tosa.arith import apply_scale_32
    scaled = apply_scale_32(acc.astype(np.int32), req.multiplier.astype(np.int64), req.shift.astype(np.int64), True)
    return np.clip(scaled.astype(np.int64) + req.out_zp, req.clamp_lo, req.clamp_hi).astype(np.int8)


@pytest.mark.parametrize("engine", ["amaranth", "verilator"])
@pytest.mark.parametrize("dataflow,mapping", CASES, ids=[f"{d.value}-{m.label}" for d, m in CASES])
def test_mapping_runs_on_rtl_with_model_cycles(engine, dataflow, mapping):
    geom = GEOMS[dataflow]
    gemm, acc = _conv_gemm()
    shape = Shape(*gemm.shape, geom)
    assert shape.legal(mapping) is None
    program = compile_gemm(geom, gemm, mapping)
    model = run_program(geom, program, "model")
    np.testing.assert_array_equal(model.output, _requantized(acc, gemm.requant))
    dram = program.dram.copy()
    if engine == "amaranth":
        from qsim.npu.sim_amaranth import run_amaranth
        cycles = run_amaranth(geom, program.instrs, dram)
    else:
        from qsim.npu.sim_verilator import run_verilator
        cycles = run_verilator(geom, program.instrs, dram)
    np.testing.assert_array_equal(program.output(dram), model.output)
    assert cycles == model.stats.total_cycles
    # the choice is really a different schedule from the fixed rule (except the fixed case)
    fixed = compile_gemm(geom, gemm)
    assert (mapping == FIXED) == ([i.encode() for i in program.instrs] == [i.encode() for i in fixed.instrs])


def test_embedded_model_searched_on_verilator(embedded):
    """A whole network with mapping = search on the RTL: every stage bit-exact with the kernels,
    the same cycles as the model engine, and layers really mapped otherwise than by the fixed
    rule (16x16, cycles: conv2-4 and the classifier take MKN)."""
    import dataclasses

    from qsim.npu.config import load_config
    from qsim.npu.mapping.policy import MappingPolicy
    from qsim.npu.program import Unit, run_graph_on_npu
    graph, feeds, expected = embedded
    config = dataclasses.replace(load_config("16x16"), mapping=MappingPolicy.parse("search:cycles"))
    rtl = run_graph_on_npu(graph, feeds, config, engine="verilator", expected=expected)
    model = run_graph_on_npu(graph, feeds, config, engine="model", expected=expected)
    fixed = run_graph_on_npu(graph, feeds, load_config("16x16"), engine="model", expected=expected)
    assert rtl.verified and rtl.total_cycles == model.total_cycles < fixed.total_cycles
    mapped = [m for s in rtl.stages if s.stage.unit is Unit.ARRAY for m in s.layer.mappings]
    assert sum(m.startswith("mkn") for m in mapped) >= 3
    assert all(s.rtl for s in rtl.stages if s.stage.unit is Unit.ARRAY)
