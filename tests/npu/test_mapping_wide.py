"""Mapping search on int16 GEMMs (16x8, 16x16: byte-plane passes, qsim/npu/array/wide.py): every
candidate exact against the TOSA 0.30 int48 oracle and race-free, the legality the planes add,
the search's costs the engines' cycles, and the search's mappings on the RTL."""
import numpy as np
import pytest

from qsim.hw.isa import Opcode, Plane
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, Requant, compile_gemm, gemm_shape
from qsim.npu.array.wide import MAX_TERMS_PER_COMPUTE
from qsim.npu.array.window import Window
from qsim.npu.cycle_model import run_model
from qsim.npu.engines import run_program
from qsim.npu.mapping.policy import MappingPolicy
from qsim.npu.mapping.search import choose, gemm_cycles
from qsim.npu.mapping.space import FIXED, LoopOrder, Mapping, Shape, candidates
from qsim.tosa.arith import apply_scale_16

from .test_mapping import races

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
MNK, MKN, NMK = LoopOrder
WIDE = (Plane.LO, Plane.HI)
# rows 4 read an int16 plane as 7 bytes: ports of 8 bytes (wide.check)
GEOMS = [Geometry(4, 8, WS, 4 * 32, 8 * 16, 32 * 16, 8), Geometry(4, 4, WS, 4 * 16, 4 * 8, 16 * 8, 8),
         Geometry(4, 4, WS, 4 * 64, 4 * 64, 16 * 64, 8), Geometry(4, 8, OS, 4 * 32, 8 * 16, 32 * 16, 8),
         Geometry(4, 4, OS, 4 * 16, 4 * 8, 16 * 8, 8), Geometry(4, 4, OS, 4 * 64, 4 * 64, 16 * 64, 8)]


def _wide_gemm(rng, M, K, N, w16=False, out_bits=16, window=None, a=None):
    """A 16x8 (or 16x16) GEMM at the corners (activations at both int16 rails, weights -128 with
    the weight zero point 127, int48 biases) and its TOSA result: int64 sums, apply_scale_16."""
    if a is None:
        a = rng.integers(-32768, 32768, (M, K)).astype(np.int16)
        a[0, : K // 2], a[-1, K // 2:] = -32768, 32767
    wt = np.int16 if w16 else np.int8
    w = rng.integers(np.iinfo(wt).min, np.iinfo(wt).max + 1, (K, N)).astype(wt)
    w[:, 0] = np.iinfo(wt).min
    w_zp = 0 if w16 else 127
    bias = rng.integers(-(1 << 44), 1 << 44, N)
    acc = _gemm_sums(a, window, w.astype(np.int64) - w_zp) + bias
    need = int(np.abs(acc).max()).bit_length() + 15 - 31       # shift keeping the result in int32
    mult, shift = rng.integers(1 << 14, 1 << 15, N), rng.integers(max(2, need), max(2, need) + 6, N)
    top = (1 << (out_bits - 1)) - 1
    lo, hi = (-1000, 20000) if out_bits == 16 else (-top - 1, top)
    req = Requant(bias, mult.astype(np.int32), shift, 0, lo, hi, False, out_bits)
    want = np.clip(apply_scale_16(acc, mult, shift).astype(np.int64), lo, hi)
    return Gemm(a, w, 0, w_zp, req, window), want.astype(np.int16 if out_bits == 16 else np.int8)


def _gemm_sums(a, window, w64):
    if window is None:
        return a.astype(np.int64) @ w64
    x = a.astype(np.int64)      # [1, H, W, C], a 1x2 window with one column of left padding
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 0)))
    rows = [xp[0, oy, ox:ox + 2].reshape(-1) for oy in range(x.shape[1]) for ox in range(x.shape[2])]
    return np.stack(rows) @ w64


def _mappings(shape):
    """The search's candidates and, per order, the smallest tiles (most passes per buffer half)."""
    out = list(candidates(shape))
    for order in LoopOrder:
        out += [Mapping(order, t) for t in (1, 3) if shape.legal(Mapping(order, t)) is None]
    return out


@pytest.mark.parametrize("geom", GEOMS, ids=[f"{g.dataflow.value}-{g.input_depth_words}" for g in GEOMS])
@pytest.mark.parametrize("shape,w16", [((17, 33, 9), False), ((50, 30, 10), False), ((6, 9, 5), True)])
def test_every_wide_mapping_is_exact_and_race_free(geom, shape, w16):
    rng = np.random.default_rng(sum(shape))
    for out_bits in (16, 8):
        gemm, want = _wide_gemm(rng, *shape, w16=w16, out_bits=out_bits)
        space = gemm_shape(geom, gemm)
        assert space.passes == (4 if w16 else 2)
        for mapping in _mappings(space):
            program = compile_gemm(geom, gemm, mapping)
            dram = program.dram.copy()
            cycles, _ = run_model(geom, program.instrs, dram)
            np.testing.assert_array_equal(program.output(dram), want, err_msg=mapping.label)
            assert races(geom, program) == [], mapping.label
            assert gemm_cycles(geom, program) == cycles, mapping.label
            planes = {(i.get("a_plane"), i.get("w_plane")) for i in program.instrs if i.opcode is Opcode.COMPUTE}
            assert len(planes) == space.passes, mapping.label


def test_planes_shape_the_legality():
    """Resident A takes one copy per A plane, a resident column tile one per W plane, and an
    output-stationary K chunk of a wide GEMM at most MAX_TERMS_PER_COMPUTE terms."""
    geom = Geometry(4, 4, WS, 4 * 64, 4 * 128, 16 * 64, 8)       # halves: 32 input, 64 weight, 32 acc words
    narrow, wide16 = Shape(16, 8, 12, geom), Shape(16, 8, 12, geom, WIDE)
    assert narrow.resident_a(FIXED) and not wide16.resident_a(FIXED)      # 2 folds x 16 rows x 1 or 2 planes
    assert wide16.resident_a(Mapping(MNK, 8))
    deep = Shape(16, 40, 12, geom, WIDE, WIDE)                               # 10 folds: 40 weight words per plane
    assert Shape(16, 40, 12, geom).legal(Mapping(NMK)) is None
    assert "(80 words) exceed half the weight buffer" in deep.legal(Mapping(NMK))
    big = Geometry(4, 4, OS, 4 * 65536, 4 * 65536, 16 * 64, 8)
    long = Shape(4, 40000, 4, big, WIDE)
    assert long.tile(FIXED) == 32768 // 2 and long.max_tile(MKN) == 32768    # half the input per plane
    huge = Geometry(4, 4, OS, 4 * 140000, 4 * 140000, 16 * 64, 8)           # beyond 16-bit addresses: the
    assert Shape(4, 40000, 4, huge, WIDE).max_tile(MNK) == MAX_TERMS_PER_COMPUTE    # PE bound alone
    assert "terms per COMPUTE" in Shape(4, 40000, 4, huge, WIDE).legal(Mapping(MKN, 40000))
    assert Shape(4, 40000, 4, huge).max_tile(MNK) == 40000


def test_wide_mkn_reads_each_a_block_once():
    """MKN runs the W planes innermost: each A block (plane x fold) is read once, and 16x16's
    four passes read A no more often than 16x8's two."""
    geom = Geometry(4, 4, WS, 4 * 64, 4 * 128, 16 * 64, 8)
    rng = np.random.default_rng(4)
    for w16 in (False, True):
        gemm, want = _wide_gemm(rng, 24, 12, 12, w16=w16)
        fixed, mkn = compile_gemm(geom, gemm), compile_gemm(geom, gemm, Mapping(MKN))
        loadws = [i for i in mkn.instrs if i.opcode is Opcode.LOADW]
        assert len(loadws) == 3 * 2 * 3      # 3 row tiles of 10 (32 acc words / 3 column tiles) x 2 planes x 3 folds
        assert mkn.dram_input_bytes < fixed.dram_input_bytes
        np.testing.assert_array_equal(run_program(geom, mkn, "model").output, want)


def test_search_on_16x8_costs_every_candidate_and_keys_on_the_types():
    geom = Geometry(4, 4, OS, 4 * 64, 4 * 64, 16 * 64, 8)
    rng = np.random.default_rng(3)
    gemm, _ = _wide_gemm(rng, 60, 70, 23)
    narrow = Gemm(rng.integers(-128, 128, (60, 70)).astype(np.int8), gemm.w, 0, 127,
                  Requant(np.zeros(23, np.int32), np.full(23, 1 << 30, np.int32), np.full(23, 40), 0, -128, 127, False))
    policy = MappingPolicy.parse("search:cycles")
    choice, other = choose(geom, gemm, policy), choose(geom, narrow, policy)
    assert other.fixed.cycles < choice.fixed.cycles          # the memo keeps int8 and 16x8 apart
    assert choice.candidates == len(candidates(gemm_shape(geom, gemm))) > 1
    for mapping, cost in choice.costs:
        assert run_program(geom, compile_gemm(geom, gemm, mapping), "model").stats.total_cycles == cost.cycles
    assert choice.mapping != FIXED and choice.cost.cycles < choice.fixed.cycles


# the RTL geometries of tests/npu/test_mapping_rtl.py (their 7-8 byte ports take rows 2 as int16)
RTL_GEOMS = {WS: Geometry(2, 3, WS, 2 * 32, 3 * 16, 12 * 32, 8), OS: Geometry(2, 3, OS, 128, 128, 512, 7)}


def _conv16x8():
    """A padded 1x2 convolution of int16 activations (16x8): M = 20 pixels, K = 6, N = 7."""
    rng = np.random.default_rng(31)
    x = rng.integers(-32768, 32768, (1, 4, 5, 3)).astype(np.int16)
    x[0, 0, 0], x[0, 3, 4] = -32768, 32767
    return _wide_gemm(rng, 20, 6, 7, window=Window(x.shape, (1, 2), pad=(0, 0, 1, 0)), a=x)


@pytest.mark.parametrize("engine", ["amaranth", "verilator"])
@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
def test_searched_16x8_mappings_run_on_rtl_with_model_cycles(engine, dataflow):
    """Every mapping the search weighs for a 16x8 convolution runs on the RTL with the oracle's
    values and the cycles the search costed it with (the model's)."""
    geom = RTL_GEOMS[dataflow]
    gemm, want = _conv16x8()
    choice = choose(geom, gemm, MappingPolicy.parse("search:cycles"))
    assert len(choice.costs) > 1 and any(m.order is not MNK for m, _ in choice.costs)
    for mapping, cost in choice.costs:
        program = compile_gemm(geom, gemm, mapping)
        dram = program.dram.copy()
        if engine == "amaranth":
            from qsim.npu.sim_amaranth import run_amaranth
            cycles = run_amaranth(geom, program.instrs, dram)
        else:
            from qsim.npu.sim_verilator import run_verilator
            cycles = run_verilator(geom, program.instrs, dram)
        np.testing.assert_array_equal(program.output(dram), want, err_msg=mapping.label)
        assert cycles == cost.cycles, mapping.label
