"""Energy: event counts of hand-worked programs, energy = sum of count x entry, the table
loader's errors, and the energy fields of the reports (`qsim simulate --tech`)."""
import json
import math

import numpy as np
import pytest

from qsim.cli import main
from qsim.errors import DataError
from qsim.hw.isa import Opcode
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, Requant, compile_gemm
from qsim.npu.energy import (COMPONENTS, EventCounts, energy_by_component, load_tech, parse_tech,
                             program_events)
from qsim.npu.engines import run_program

# 4x4 array, 256-byte buffers: input 64 words of 4 B, weight 64 words of 4 B, accumulators 16
# words of 16 B (halves of 8), output buffer 16 words of 4 B, parameter words 4 x 9 = 36 B.
GEOM_WS = Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 256, 4)
GEOM_OS = Geometry(4, 4, Dataflow.OUTPUT_STATIONARY, 256, 256, 256, 4)


def _gemm(rng, m, k, n, requant):
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    req = None
    if requant:
        req = Requant(bias=np.zeros(n, np.int32), multiplier=np.full(n, 1 << 30, np.int32),
                      shift=np.full(n, 40, np.int64), out_zp=0, clamp_lo=-128, clamp_hi=127,
                      double_round=False)
    return Gemm(a, w, 3, 0, req)


def test_ws_gemm_events_worked_by_hand(rng):
    # M=3, K=8, N=4 on 4x4 WS: two folds of K (R=4), one group of 3 rows, A resident.
    # Program: per fold a window descriptor (3 register words of P = 36 B) and LOADW of A
    # (3 words x 4 B moved), LOAD param (1 word, 36 B), LOAD W fold 0 (4 words x 4 B),
    # COMPUTE (3 rows), LOAD W fold 1, COMPUTE (3 rows, accumulate, requant), STORE output
    # (3 words x 4 B).
    program = compile_gemm(GEOM_WS, _gemm(rng, 3, 8, 4, requant=True))
    assert [i.opcode for i in program.instrs] == [Opcode.LOAD, Opcode.LOADW] * 2 + [
        Opcode.LOAD, Opcode.LOAD, Opcode.COMPUTE, Opcode.LOAD, Opcode.COMPUTE, Opcode.STORE]
    assert program.dram_input_bytes == 3 * 8            # A once, as the tensor holds it
    events = program_events(GEOM_WS, program.instrs, program.dram_input_bytes)
    assert events == EventCounts(
        macs=4 * 4 * 3 * 2,                       # R x C PEs x 3 streaming cycles x 2 computes
        input_write_bytes=2 * 3 * 4, input_read_bytes=2 * 3 * 4,
        weight_write_bytes=2 * 4 * 4, weight_read_bytes=2 * 4 * 4,     # R words preloaded twice
        param_write_bytes=36, param_read_bytes=36,                     # read by the requant COMPUTE
        accumulator_write_bytes=2 * 3 * 16, accumulator_read_bytes=3 * 16,   # only fold 1 reads
        output_write_bytes=3 * 4, output_read_bytes=3 * 4,
        dram_read_bytes=2 * 3 * 36 + 12 + 12 + 36 + 16 + 16, dram_write_bytes=3 * 4)
    assert events.macs == 3 * 8 * 4          # no padding here: every PE slot is a useful MAC


def test_os_gemm_events_worked_by_hand(rng):
    # M=4, K=6, N=4 on 4x4 OS without requant: one tile, one K chunk of 6. Program: window
    # descriptor (3 words of 36 B), LOADW of A (6 words x 4 B), LOAD param (36 B), LOAD W
    # (6 words x 4 B), COMPUTE (K = 6), STORE the int32 accumulators (4 words x 16 B).
    gemm = _gemm(rng, 4, 6, 4, requant=False)
    program = compile_gemm(GEOM_OS, gemm)
    assert program.dram_input_bytes == 24
    events = program_events(GEOM_OS, program.instrs, program.dram_input_bytes)
    assert events == EventCounts(
        macs=4 * 4 * 6, input_write_bytes=24, input_read_bytes=24, weight_write_bytes=24,
        weight_read_bytes=24, param_write_bytes=36, accumulator_write_bytes=4 * 16,
        accumulator_read_bytes=4 * 16, dram_read_bytes=3 * 36 + 24 + 36 + 24, dram_write_bytes=4 * 16)
    # the program is the one the engine runs: its output is the GEMM
    run = run_program(GEOM_OS, program, "model")
    expected = (gemm.a.astype(np.int64) - 3) @ gemm.w.astype(np.int64)
    assert np.array_equal(run.output, expected)


def test_padded_lanes_count_as_pe_slots(rng):
    # K=5 on R=4: two folds, the second holds 1 real row and 3 padding rows of zero point.
    events = program_events(GEOM_WS, compile_gemm(GEOM_WS, _gemm(rng, 2, 5, 3, True)).instrs)
    assert events.macs == 4 * 4 * 2 * 2 > 2 * 5 * 3


UNIT_TABLE = """[tech]
name = "unit"
[energy_pj]
mac = 1.0
vector_op = 2.0
register_byte = 3.0
dram_byte = 5.0
[sram_pj_per_64bit]
8192 = 8.0
32768 = 32.0
"""


def test_energy_is_sum_of_count_times_entry():
    table = parse_tech(UNIT_TABLE)
    # every 256-byte buffer is below the smallest point: 8 pJ / 8 bytes = 1 pJ per byte
    events = EventCounts(macs=96, input_read_bytes=24, input_write_bytes=24, weight_read_bytes=32,
                         weight_write_bytes=32, param_read_bytes=36, param_write_bytes=36,
                         accumulator_read_bytes=48, accumulator_write_bytes=96, output_read_bytes=12,
                         output_write_bytes=12, dram_read_bytes=92, dram_write_bytes=12, vector_ops=7,
                         arbiter_grants=4, arbiter_mux_bytes=100)
    got = energy_by_component(events, table, GEOM_WS)
    assert list(got) == list(COMPONENTS)
    # the arbiter: 4 grants x register_byte; the table has no mux_byte (an optional key): 0 per byte
    assert got == {"mac": 96.0, "input_buffer": 48.0, "weight_buffer": 64.0, "param_buffer": 216.0,
                   "accumulator_buffer": 144.0, "output_buffer": 24.0, "dram": 520.0, "vector": 14.0,
                   "arbiter": 12.0}
    with_mux = parse_tech(UNIT_TABLE.replace("dram_byte = 5.0", "dram_byte = 5.0\nmux_byte = 0.5"))
    assert energy_by_component(events, with_mux, GEOM_WS)["arbiter"] == 12.0 + 50.0


def test_sram_energy_interpolates_log_log_and_clamps():
    table = parse_tech(UNIT_TABLE)
    assert table.sram_pj_per_byte(1) == 1.0 and table.sram_pj_per_byte(8192) == 1.0
    assert table.sram_pj_per_byte(16384) == pytest.approx(math.sqrt(8 * 32) / 8)   # geometric mean
    assert table.sram_pj_per_byte(32768) == 4.0 and table.sram_pj_per_byte(1 << 30) == 4.0
    t45 = load_tech("45nm")
    assert [t45.sram_pj_per_byte(s) for s in (8192, 32768, 1 << 20)] == [10 / 8, 20 / 8, 100 / 8]


def test_packaged_tables_hold_the_documented_figures():
    t45, t7 = load_tech(None), load_tech("7nm")
    assert t45.name == "45nm" and t7.name == "7nm"
    # Horowitz ISSCC 2014: 8-bit mult 0.2 + 32-bit add 0.1; DRAM 1.3 nJ / 64 bits
    assert t45.energy_pj == {"mac": 0.3, "vector_op": 0.1, "register_byte": 0.15, "dram_byte": 162.5,
                             "vector_mul": 3.1, "vector_div": 3.2, "mux_byte": 0.03}
    assert t7.energy_pj["mux_byte"] == 0.007        # Jouppi et al. ISCA 2021: 8-bit add at 7 nm
    assert t45.sram_pj_per_64bit == ((8192, 10.0), (32768, 20.0), (1 << 20, 100.0))
    assert t7.sram_pj_per_64bit == tuple((s, 0.75 * e) for s, e in t45.sram_pj_per_64bit)
    assert t7.energy_pj["mac"] == pytest.approx(0.07 + 0.03) and t7.energy_pj["dram_byte"] == 162.5


@pytest.mark.parametrize("text, message, line", [
    ("[tech\n", "not valid TOML", None),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\n[sram_pj_per_64bit]\n8192 = 1\n",
     "missing key 'dram_byte' in [energy_pj]", None),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = -0.5\nregister_byte = 1\ndram_byte = 1\n"
     "[sram_pj_per_64bit]\n8192 = 1\n", "vector_op = -0.5 is negative", 4),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\nfoo = 2\n"
     "[sram_pj_per_64bit]\n8192 = 1\n", "unknown key 'foo'", 7),
    ("[tech]\n[energy_pj]\nmac = 'x'\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n"
     "[sram_pj_per_64bit]\n8192 = 1\n", "mac = 'x' must be a number", 3),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n"
     "[sram_pj_per_64bit]\n8k = 1\n", "'8k' is not a size in bytes", 8),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n"
     "[sram_pj_per_64bit]\n8192 = -1\n", "8192 = -1 is negative", 8),
    ("[tech]\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n",
     "missing table [sram_pj_per_64bit]", None),    ("[tech]\nname = 'x'\n[energy]\nmac = 1\n", "unknown table [energy]", 3),
    ("[tech]\nname = 3\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n"
     "[sram_pj_per_64bit]\n8192 = 1\n", "[tech] name = 3 must be a string", 2),
])
def test_table_errors(text, message, line):
    with pytest.raises(DataError) as err:
        parse_tech(text, "t.toml")
    assert message in str(err.value) and err.value.hint
    assert err.value.location.file == "t.toml" and err.value.location.line == line


def test_unknown_tech_names_the_packaged_ones(tmp_path):
    with pytest.raises(DataError) as err:
        load_tech("3nm")
    assert "no energy table '3nm'" in str(err.value) and "45nm, 7nm" in err.value.hint
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[tech]\nname = \"\xff\"\n")
    with pytest.raises(DataError, match="not UTF-8"):
        load_tech(str(bad))
    with pytest.raises(DataError, match="File name too long") as err:
        load_tech("a" * 5000)
    assert "energy table" in str(err.value) and len(str(err.value)) < 300


# -- reports of the embedded model ------------------------------------------------------------

@pytest.fixture(scope="module")
def embedded_run():
    from qsim.npu.config import load_config
    from qsim.npu.program import run_graph_on_npu
    from qsim.commands.quantized_model import load_npu_model, read_inputs
    loaded = load_npu_model(None)
    feeds, _ = read_inputs(loaded.model, None)
    return run_graph_on_npu(loaded.model.graph, feeds, load_config("16x16"), engine="model")


def _only(key: str) -> str:
    """A table in which only `key` costs 1 pJ (per event, or per byte of SRAM/DRAM)."""
    values = {"mac": 0, "vector_op": 0, "register_byte": 0, "dram_byte": 0, key: 1}
    return ("[tech]\nname = 'only'\n[energy_pj]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
            + "[sram_pj_per_64bit]\n8192 = 0\n")


def test_counts_agree_with_the_cycle_model(embedded_run):
    """MAC events = R x C x streaming cycles and DRAM events = the DMA bytes, per layer."""
    from qsim.report.throughput import throughput_report
    macs = throughput_report("m", embedded_run, parse_tech(_only("mac"))).to_json()
    dram = throughput_report("m", embedded_run, parse_tech(_only("dram_byte"))).to_json()
    vec = throughput_report("m", embedded_run, parse_tech(_only("vector_op"))).to_json()
    for m, d, v in zip(macs["layers"], dram["layers"], vec["layers"]):
        if m["unit"] == "array":
            assert m["energy_pj"] == 256 * m["compute_cycles"] >= m["macs"] > 0
            assert v["energy_pj"] == 0
        else:
            assert m["energy_pj"] == 0
        assert d["energy_pj"] == d["dram_bytes"]
        assert (v["energy_pj"] > 0) == (v["unit"] == "vector")


def test_every_layer_has_unit_rtl_and_energy(embedded_run):
    from qsim.report.throughput import throughput_report
    doc = throughput_report("m", embedded_run).to_json()
    units = {layer["op"].split("+")[0]: layer["unit"] for layer in doc["layers"]}
    assert units == {"TRANSPOSE": "vector", "CONV2D": "array", "AVG_POOL2D": "vector",
                     "RESHAPE": "host", "FULLY_CONNECTED": "array"}
    for layer in doc["layers"]:
        assert layer["rtl"] is False                     # the model engine ran every layer
        assert layer["energy_pj"] == pytest.approx(sum(layer["energy_by_component_pj"].values()))
        assert (layer["energy_pj"] > 0) == (layer["unit"] != "host")
    assert doc["total_energy_pj"] == pytest.approx(sum(l["energy_pj"] for l in doc["layers"]))
    assert doc["energy_per_inference_pj"] == doc["total_energy_pj"]
    assert doc["total_energy_pj"] == pytest.approx(sum(doc["energy_by_component_pj"].values()))
    assert doc["tech"]["name"] == "45nm"
    seven = throughput_report("m", embedded_run, load_tech("7nm")).to_json()
    assert seven["total_energy_pj"] < doc["total_energy_pj"]
    assert seven["energy_by_component_pj"]["dram"] == doc["energy_by_component_pj"]["dram"]


def test_rtl_engine_layers_say_rtl(rng):
    from tests.npu.test_simulate import _tiny_graph
    from qsim.npu.config import parse_config
    from qsim.npu.program import run_graph_on_npu
    from qsim.report.throughput import throughput_report
    config = parse_config("[npu]\nrows = 2\ncols = 2\ndataflow = 'ws'\ninput_buffer_bytes = 64\n"
                          "weight_buffer_bytes = 32\naccumulator_buffer_bytes = 128\n"
                          "dram_bytes_per_cycle = 4\n")
    feeds = {"x": rng.integers(-128, 128, (1, 6)).astype(np.int8)}
    run = run_graph_on_npu(_tiny_graph(rng), feeds, config, engine="amaranth")
    (layer,) = throughput_report("tiny", run).to_json()["layers"]
    assert layer["unit"] == "array" and layer["rtl"] is True and layer["energy_pj"] > 0


def test_cli_tech_option(tmp_path, capsys):
    table = tmp_path / "only-mac.toml"
    table.write_text(_only("mac"))
    out = tmp_path / "rep"
    code = main(["simulate", "--engine", "model", "-q", "--tech", str(table), "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "energy (only)" in text
    doc = json.loads((out / "report.json").read_text())
    assert doc["tech"]["source"] == str(table)
    assert doc["total_energy_pj"] == 256 * sum(l["compute_cycles"] for l in doc["layers"] if l["unit"] == "array")
    assert (out / "energy.png").read_bytes()[:4] == b"\x89PNG"
    assert "Energy by component" in (out / "report.html").read_text()
    code = main(["simulate", "--engine", "model", "-q", "--tech", "9nm", "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "no energy table '9nm'" in err and not (tmp_path / "x").exists()


# Published per-operation figures (pJ) the packaged tables derive from: Horowitz, ISSCC 2014
# (45 nm, 0.9 V) and Jouppi et al., ISCA 2021, Table 2 (7 nm); docs/npu.md, Energy.
PUBLISHED = {"45nm": {"mult8": 0.2, "add32": 0.1, "mult32": 3.1, "dram_64bit": 1300.0,
                      "sram_64bit": {8192: 10.0, 32768: 20.0, 1048576: 100.0}},
             "7nm": {"mult8": 0.07, "add32": 0.03, "mult32": 1.48, "dram_64bit": 1300.0, "sram_8kb": 7.5}}


@pytest.mark.parametrize("name", ["45nm", "7nm"])
def test_packaged_tables_follow_the_stated_derivations(name):
    """Every entry is a published figure or the documented formula applied to them."""
    table, src = load_tech(name), PUBLISHED[name]
    pj = table.energy_pj
    assert pj["mac"] == pytest.approx(src["mult8"] + src["add32"])
    assert pj["vector_op"] == pytest.approx(src["add32"])
    assert pj["vector_mul"] == pytest.approx(src["mult32"])
    assert pj["vector_div"] == pytest.approx(32 * src["add32"])          # one subtract per quotient bit
    assert pj["register_byte"] == pytest.approx(pj["mac"] / 2)
    assert pj["dram_byte"] == pytest.approx(src["dram_64bit"] / 8)
    sram_45 = PUBLISHED["45nm"]["sram_64bit"]
    scale = 1.0 if name == "45nm" else src["sram_8kb"] / sram_45[8192]
    assert dict(table.sram_pj_per_64bit) == pytest.approx({s: scale * e for s, e in sram_45.items()})


def test_vector_multiplies_and_divisions_are_their_own_events(tmp_path):
    """MUL and DOT lanes count `vector_mul`, INTDIV lanes `vector_div` (beats x lanes each), on top
    of their `vector_op`; a table without the optional entries costs them 0 (tables written
    before they existed keep their figures)."""
    from qsim.npu.cycle_model import cycle_stats
    from qsim.npu.vector.ops import compile_vector_op
    geom = Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 1024, 4)
    x = np.arange(1, 31, dtype=np.int32).reshape(5, 6)             # 5 rows x (4 + 2 lanes): 10 beats
    counts = {}
    for op in ("MUL", "INTDIV", "ADD"):
        program = compile_vector_op(geom, op, {"shift": 0} if op == "MUL" else {}, [x, x], x.shape, np.int32)
        st = cycle_stats(geom, program.instrs, program.dram)
        counts[op] = (st.vector_ops, st.vector_mul_ops, st.vector_div_ops)
    assert counts == {"MUL": (30, 30, 0), "INTDIV": (30, 0, 30), "ADD": (30, 0, 0)}
    events = EventCounts(vector_ops=30, vector_mul_ops=10, vector_div_ops=5)
    pj = energy_by_component(events, load_tech("45nm"), geom)["vector"]
    assert pj == pytest.approx(30 * 0.1 + 10 * 3.1 + 5 * 3.2)
    old = parse_tech("[tech]\n[energy_pj]\nmac = 1\nvector_op = 2\nregister_byte = 1\ndram_byte = 1\n"
                     "[sram_pj_per_64bit]\n8192 = 1\n")
    assert energy_by_component(events, old, geom)["vector"] == 60
