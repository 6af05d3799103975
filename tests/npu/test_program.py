"""Whole quantized graphs on the NPU: the plan, bit-exact runs against the kernels on the
model and verilator engines, and mismatch reports from an injected fault."""
import dataclasses
import re

import numpy as np
import pytest

from qsim.npu.config import load_config
from qsim.npu.program import Unit, plan, run_graph_on_npu
from qsim.runtime.executor import execute


def test_plan_fuses_rescale_and_clamp_into_array_layers(embedded):
    graph, _, _ = embedded
    stages = plan(graph)
    summary = [(s.op_text, s.unit) for s in stages]
    assert summary == [("TRANSPOSE", Unit.VECTOR)] + [("CONV2D+RESCALE+CLAMP", Unit.ARRAY)] * 4 + [
        ("AVG_POOL2D", Unit.VECTOR), ("RESHAPE", Unit.HOST), ("FULLY_CONNECTED+RESCALE", Unit.ARRAY)]
    # every operator of the graph is covered exactly once, in order
    assert [op for s in stages for op in s.ops] == list(graph.ops)


def _check_bit_exact(run, graph, values):
    stages = plan(graph)
    assert [r.stage.output for r in run.stages] == [s.output for s in stages]
    for result in run.stages:
        want = values[result.stage.output]
        assert result.output.dtype == want.dtype
        np.testing.assert_array_equal(result.output, want, err_msg=result.stage.name)
        assert result.verified is True
    assert run.verified and run.first_mismatch is None


def test_embedded_model_bit_exact_on_model_engine(embedded):
    graph, feeds, values = embedded
    run = run_graph_on_npu(graph, feeds, load_config("16x16"), engine="model")
    _check_bit_exact(run, graph, values)
    array = [r for r in run.stages if r.stage.unit is Unit.ARRAY]
    # MACs of each array layer, worked from the shapes: OH*OW*OC*KH*KW*IC
    assert [r.macs for r in array] == [28 * 28 * 16 * 9, 14 * 14 * 32 * 9 * 16, 7 * 7 * 64 * 9 * 32,
                                       4 * 4 * 64 * 9 * 64, 64 * 10]
    assert run.total_cycles == sum(r.cycles for r in run.stages)
    for result in run.stages:
        assert result.cycles == result.compute_cycles + result.fill_drain_cycles + result.stall_cycles


def test_embedded_model_bit_exact_on_verilator_equals_model_cycles(embedded):
    graph, feeds, values = embedded
    config = load_config("16x16")
    run = run_graph_on_npu(graph, feeds, config, engine="verilator")
    _check_bit_exact(run, graph, values)
    model = run_graph_on_npu(graph, feeds, config, engine="model")
    assert [r.cycles for r in run.stages] == [r.cycles for r in model.stages]


def test_output_stationary_small_array_bit_exact(embedded):
    graph, feeds, values = embedded
    run = run_graph_on_npu(graph, feeds, load_config("8x8:os"), engine="model")
    _check_bit_exact(run, graph, values)


def _faulty(graph, layer="conv2", channel=5):
    """A copy of `graph` whose RESCALE of `layer` has a wrong multiplier in one channel."""
    ops = []
    for op in graph.ops:
        if f"'{layer}'" in op.name and op.kind.short_name == "RESCALE":
            mult = np.array(op.attrs["multiplier"]).copy()
            mult[channel] = mult[channel] // 2 + 12345
            op = dataclasses.replace(op, attrs={**op.attrs, "multiplier": mult})
        ops.append(op)
    return dataclasses.replace(graph, ops=tuple(ops))


def test_injected_fault_is_reported_with_layer_tensor_index_values_and_cycle(embedded):
    graph, feeds, values = embedded
    faulty = _faulty(graph)
    # The oracle for the fault: the kernels themselves on the faulty graph.
    wrong = execute(faulty, feeds, backend="kernels")["relu2"]
    diff = np.argwhere(wrong != values["relu2"])
    assert len(diff)
    index = tuple(int(i) for i in diff[0])
    assert index[-1] == 5

    run = run_graph_on_npu(faulty, feeds, load_config("16x16"), engine="model", expected=values)
    assert not run.verified
    verdicts = {r.stage.name: r.verified for r in run.stages}
    assert verdicts.pop("relu2") is False
    assert all(verdicts.values())            # later layers are checked on the kernels' values
    found = run.first_mismatch
    assert (found.stage, found.tensor, found.index) == ("relu2", "relu2", index)
    assert (found.expected, found.actual) == (int(values["relu2"][index]), int(wrong[index]))
    assert found.differing == len(diff) and found.size == wrong.size
    stage = next(r for r in run.stages if r.stage.name == "relu2")
    assert stage.start_cycle <= found.cycle < stage.start_cycle + stage.cycles
    message = found.message()
    for text in ("'relu2'", "CONV2D+RESCALE+CLAMP", str(list(index)), f"expected {found.expected}",
                 f"({found.expected & 0xff:#04x})", f"NPU {found.actual}", f"({found.actual & 0xff:#04x})",
                 f"cycle {found.cycle}"):
        assert text in message, (text, message)


def test_write_cycle_is_the_dram_write_on_the_rtl(rng):
    """The cycle a mismatch report names is the one in which the RTL writes that element
    (checked by watching the DRAM port of the Amaranth simulation)."""
    from qsim.hw.params import Dataflow, Geometry
    from qsim.npu.layers import run_layer
    from qsim.npu.sim_amaranth import run_amaranth

    geom = Geometry(2, 2, Dataflow.WEIGHT_STATIONARY, 2 * 32, 2 * 8, 8 * 8, 3)
    x = rng.integers(-128, 128, (3, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 5)).astype(np.int8)
    layer = run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w))
    record, row, col = layer.locate((2, 1))
    assert (row, col) == (2, 1)
    addr = record.program.out_addr + (row * 3 + col) * 4           # int32 sums, 3 columns
    log = []
    run_amaranth(geom, record.program.instrs, record.program.dram.copy(), write_log=log)
    writes = [cycle for cycle, start, n in log if start <= addr < start + n]
    assert writes == [record.write_cycle(geom, row, col)]


def test_vector_stage_cycles_hand_worked(embedded):
    """AVG_POOL2D 4x4 on [1, 4, 4, 64] int8 on the 16x16 preset (16 lanes, 16 B/cycle): 4 lane
    tiles x 16 window beats = 64 beats, one contiguous 16-byte read each; the last beat of
    each window also pays for its 16-byte result, so read j issues at cycle j + (windows
    closed up to j): the last at 63 + 4 = 67, and VRUN is busy 67 + 9 = 76 cycles. Before
    it, LOAD VCONFIG of 2 words of 144 B takes max(1, 288/16 - 1) + 2 = 19 cycles,
    dispatched at cycle 1: VRUN dispatches at 21 and the program ends at 21 + 76 + 1 = 98.
    compute = 64 beats, fill/drain = 8 (the fixed part of 9), stall = 98 - 72 = 26."""
    graph, feeds, values = embedded
    run = run_graph_on_npu(graph, feeds, load_config("16x16"), engine="model")
    pool = next(s for s in run.stages if s.stage.op_text == "AVG_POOL2D")
    assert pool.stage.unit is Unit.VECTOR
    assert (pool.compute_cycles, pool.fill_drain_cycles, pool.stall_cycles) == (64, 8, 26)
    assert (pool.dram_input_bytes, pool.dram_output_bytes) == (1024, 64)
    assert pool.dram_weight_bytes == 2 * 144          # the configuration words
    assert pool.events.vector_ops == 64 * 16


def test_mismatch_report_names_sizes_when_shapes_differ(embedded):
    graph, feeds, values = embedded
    bad = dict(values)
    bad["pool.pooled"] = values["pool.pooled"][..., :10]
    with pytest.raises(Exception, match=re.escape("layer 'pool.pooled': NPU output int8 [1, 1, 1, 64]")):
        run_graph_on_npu(graph, feeds, load_config("16x16"), engine="model", expected=bad)
