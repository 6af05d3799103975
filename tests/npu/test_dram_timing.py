"""DRAM timing (qsim/npu/dram/timing.py): the row-buffer costs against their formula, the same cycles
on the model, amaranth and verilator engines with timing on, the configuration keys and their
errors, and the default (no key) leaving every cycle count as it was."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.errors import DataError, UsageError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.config import DRAM_KEYS, load_config, parse_config
from qsim.npu.dram import DramTiming, RowBuffers, ns_to_cycles, profile_timing, stall_cycles
from qsim.npu.engines import run_program
from qsim.npu.layers import run_layer
from qsim.npu.vector.ops import compile_vector_op

from .test_layers import _layer_cases, _rescale
from .vector_cases import cases, reference

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
# Small rows and few banks so that a small layer both hits and misses.
TIMING = DramTiming(trcd=3, trp=2, tcl=4, banks=2, row_bytes=16, burst_bytes=8)
BASE = """[npu]
rows = 4
cols = 4
dataflow = "ws"
input_buffer_bytes = 128
weight_buffer_bytes = 128
accumulator_buffer_bytes = 512
dram_bytes_per_cycle = 4
clock_mhz = 800
"""


def _small_case(op):
    inputs, attrs, _, channels = _layer_cases(np.random.default_rng(7))[op]
    inputs = [i[:1] for i in inputs]
    if op in ("CONV2D", "DEPTHWISE_CONV2D"):
        inputs = [inputs[0][:, :4, :4]]
    return inputs, attrs, _rescale(np.random.default_rng(3), channels)


def test_row_buffer_hit_miss_conflict_costs_follow_the_formula():
    rows = RowBuffers(TIMING)
    # bank = (a // 16) % 2, row = a // 32
    assert rows.cost(0) == 3 + 4            # bank 0 closed: tRCD + tCL
    assert rows.cost(8) == 0                # bank 0, row 0 open: a hit
    assert rows.cost(16) == 3 + 4           # bank 1 closed
    assert rows.cost(32) == 2 + 3 + 4       # bank 0 holds row 0, row 1 wanted: tRP + tRCD + tCL
    assert rows.cost(20) == 0               # bank 1 still holds row 0
    assert rows.cost(0) == 9                # back to row 0 of bank 0: a conflict again
    addrs = [0, 8, 16, 32, 20, 0]
    assert stall_cycles(np.array(addrs), TIMING) == 7 + 0 + 7 + 9 + 0 + 9


def test_stall_sum_equals_request_by_request_replay(rng):
    addrs = rng.integers(0, 4096, 2000)
    rows = RowBuffers(TIMING)
    assert stall_cycles(addrs, TIMING) == sum(rows.cost(int(a)) for a in addrs)


def test_row_hits_are_cheaper_than_misses_on_the_model_by_the_formula():
    """A LOAD of 8 words walking one row, against one jumping rows in the same bank: the
    difference is the conflicts' cost exactly, on the RTL (amaranth) as on the model."""
    from qsim.hw.isa import Instr, LoadBuffer, Opcode
    from qsim.npu.array.compile import Program
    geom = Geometry(4, 4, WS, 128, 128, 512, 4)
    dram = np.zeros(1024, np.uint8)

    def cycles(stride, timing):
        load = Instr(Opcode.LOAD, fields=dict(buf=int(LoadBuffer.INPUT), buf_addr=0, count=8, dram_addr=0,
                                              dram_stride=stride, word_bytes=4))
        program = Program([load], dram, 0, (0,), np.int8, 0, 0, 0, 0)
        # the amaranth run raises MismatchError unless its cycles are the model's
        return run_program(dataclasses.replace(geom, dram=timing), program, "amaranth").stats.total_cycles

    ideal = cycles(4, None)
    hits = cycles(4, TIMING)             # 32 bytes: bank 0 row 0, bank 1 row 0
    misses = cycles(32, TIMING)          # rows 0..7 of bank 0: one miss, seven conflicts
    assert hits - ideal == 2 * 7
    assert misses - ideal == 7 + 7 * 9
    assert cycles(32, None) == ideal     # the ideal memory does not care where the bytes are


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED"])
def test_layer_with_dram_timing_same_cycles_on_amaranth_and_model(op, dataflow):
    inputs, attrs, rescale = _small_case(op)
    ideal_geom = Geometry(2, 3, dataflow, 2 * 32, 3 * 16, 12 * 32, 8)
    geom = dataclasses.replace(ideal_geom, dram=TIMING)
    ideal = run_layer(ideal_geom, op, inputs, attrs, rescale=rescale, engine="model")
    model = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="model")
    rtl = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="amaranth")
    np.testing.assert_array_equal(rtl.output, model.output)
    np.testing.assert_array_equal(model.output, ideal.output)
    assert rtl.cycles == model.cycles > ideal.cycles
    assert model.cycles == model.compute_cycles + model.fill_drain_cycles + model.stall_cycles


_VECTOR = {c[0]: c for c in cases()}


@pytest.mark.parametrize("name", ["gather constant indices", "avg pool padded zp extremes",
                                  "select int8 broadcast", "tile"])
def test_vector_op_with_dram_timing_same_cycles_on_amaranth_and_model(name):
    _, op, inputs, attrs = _VECTOR[name]
    want = reference(op, inputs, attrs)
    ideal_geom = Geometry(2, 3, OS, 128, 128, 512, 7)
    program = compile_vector_op(ideal_geom, op, attrs, inputs, want.shape, want.dtype)
    geom = dataclasses.replace(ideal_geom, dram=TIMING)
    ideal = run_program(ideal_geom, program, "model")
    rtl = run_program(geom, program, "amaranth")    # raises MismatchError if the model disagrees
    assert np.array_equal(rtl.output, want)
    assert rtl.stats.total_cycles > ideal.stats.total_cycles


@pytest.mark.slow
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED"])
def test_layer_with_dram_timing_same_cycles_on_verilator(op):
    inputs, attrs, rescale = _small_case(op)
    geom = Geometry(2, 3, WS, 2 * 32, 3 * 16, 12 * 32, 8, dram=TIMING)
    model = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="model")
    rtl = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="verilator")
    np.testing.assert_array_equal(rtl.output, model.output)
    assert rtl.cycles == model.cycles


@pytest.mark.slow
def test_vector_op_with_dram_timing_same_cycles_on_verilator():
    _, op, inputs, attrs = _VECTOR["avg pool padded zp extremes"]
    want = reference(op, inputs, attrs)
    geom = Geometry(2, 3, OS, 128, 128, 512, 7, dram=TIMING)
    program = compile_vector_op(geom, op, attrs, inputs, want.shape, want.dtype)
    assert np.array_equal(run_program(geom, program, "verilator").output, want)


def test_default_off_leaves_cycles_as_without_the_key():
    inputs, attrs, rescale = _small_case("CONV2D")
    plain = parse_config(BASE)
    off = parse_config(BASE + 'dram = "off"\n')
    assert plain.dram is None and off.dram is None and plain == off
    a = run_layer(plain.geometry, "CONV2D", inputs, attrs, rescale=rescale)
    b = run_layer(off.geometry, "CONV2D", inputs, attrs, rescale=rescale)
    on = run_layer(parse_config(BASE + 'dram = "ddr4-3200"\n').geometry, "CONV2D", inputs, attrs,
                   rescale=rescale)
    assert a.cycles == b.cycles < on.cycles


def test_profiles_convert_nanoseconds_to_cycles_at_the_clock():
    ddr4 = parse_config(BASE + 'dram = "ddr4-3200"\n').dram
    assert (ddr4.trcd, ddr4.trp, ddr4.tcl) == (11, 11, 11)     # 13.75 ns at 800 MHz = 11 cycles
    assert (ddr4.banks, ddr4.row_bytes, ddr4.burst_bytes) == (16, 8192, 64)
    lp = profile_timing("LPDDR4-4266", 1000.0)
    assert (lp.trcd, lp.trp, lp.tcl) == (18, 18, 17)           # 16.85 ns rounds up
    assert ns_to_cycles(13.75, 1000) == 14 and ns_to_cycles(0, 1000) == 0
    assert load_config("8x8:os:lpddr4-4266").dram == profile_timing("lpddr4-4266", 1000.0)
    explicit = BASE + "".join(f"dram_{k} = {v}\n" for k, v in
                              dict(trcd=1, trp=2, tcl=3, banks=4, row_bytes=64, burst_bytes=8).items())
    config = parse_config(explicit)
    assert config.dram == DramTiming(1, 2, 3, 4, 64, 8)
    assert parse_config(config.to_toml()).dram == config.dram


@pytest.mark.parametrize("extra,words", [
    ('dram = "ddr5-9000"\n', ["dram", "ddr5-9000", "ddr4-3200"]),
    ("dram = 3\n", ["dram", "not a DRAM profile"]),
    ("dram_trcd = -1\ndram_trp = 1\ndram_tcl = 1\ndram_banks = 1\ndram_row_bytes = 8\n"
     "dram_burst_bytes = 8\n", ["dram_trcd", "-1", "negative"]),
    ("dram_trcd = 1\n", ["missing", "dram_trp"]),
    ('dram = "ddr4-3200"\ndram_tcl = 1\n', ["dram_tcl", "both"]),
    ("dram_trcd = 1\ndram_trp = 1\ndram_tcl = 1\ndram_banks = 0\ndram_row_bytes = 8\n"
     "dram_burst_bytes = 8\n", ["dram_banks", "[1,"]),
])
def test_config_errors_are_clear(extra, words):
    with pytest.raises(DataError) as err:
        parse_config(BASE + extra, file="npu.toml")
    text = str(err.value) + " " + (err.value.hint or "")
    assert "npu.toml" in text and all(w in text for w in words), text


def test_unknown_preset_profile_and_negative_timing_are_usage_errors():
    with pytest.raises(UsageError, match="ddr9"):
        load_config("8x8:ddr9")
    with pytest.raises(UsageError, match="negative"):
        DramTiming(trcd=-1, trp=0, tcl=0, banks=1, row_bytes=8, burst_bytes=8)
    with pytest.raises(UsageError, match="unknown DRAM profile"):
        profile_timing("hbm9", 1000.0)


_VALUES = st.one_of(st.integers(-(1 << 22), 1 << 22), st.booleans(), st.floats(allow_nan=True),
                    st.sampled_from(['"ddr4-3200"', '"LPDDR4-4266"', '"off"', '"x"', '""', "[]", "{}"]))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(("dram",) + DRAM_KEYS), _VALUES, max_size=8))
def test_any_dram_keys_give_a_config_or_a_data_error(table):
    text = BASE + "".join(f"{k} = {v if isinstance(v, str) else str(v).lower()}\n" for k, v in table.items())
    try:
        config = parse_config(text, file="npu.toml")
    except DataError as err:
        assert "npu.toml" in str(err)
        return
    if config.dram is not None:
        assert min(config.dram.trcd, config.dram.trp, config.dram.tcl) >= 0
        assert min(config.dram.banks, config.dram.row_bytes, config.dram.burst_bytes) >= 1
        assert parse_config(config.to_toml()).dram == config.dram
