"""`qsim simulate`: the report files, inputs, sweeps, waveforms on a mismatch, and error cases."""
import csv
import dataclasses
import json

import numpy as np
import pytest

from qsim import ir
from qsim.cli import main
from qsim.npu.config import load_config, parse_config
from qsim.npu.engines import Engine
from qsim.npu.program import run_graph_on_npu
from qsim.npu.simulate import dump_vcd, parse_sweep
from qsim.runtime.executor import execute

REQUIRED_LAYER_FIELDS = {"name", "op", "macs", "cycles", "utilization", "dram_bytes", "verified"}


def _run(capsys, *argv):
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_writes_report_with_required_fields(tmp_path, capsys):
    out = tmp_path / "rep"
    code, text, _ = _run(capsys, "--engine", "model", "-o", str(out), "-q")
    assert code == 0, text
    assert "every layer bit-exact" in text and "relu1" in text and "inferences/s" in text
    doc = json.loads((out / "report.json").read_text())
    assert doc["engine"] == "model" and doc["config"]["rows"] == 16 and doc["all_verified"] is True
    assert doc["total_cycles"] == sum(layer["cycles"] for layer in doc["layers"]) > 0
    for layer in doc["layers"]:
        assert REQUIRED_LAYER_FIELDS <= set(layer)
        assert layer["cycles"] == layer["compute_cycles"] + layer["fill_drain_cycles"] + layer["stall_cycles"]
        assert layer["unit"] in ("array", "vector", "host")
    conv = next(layer for layer in doc["layers"] if layer["name"] == "relu2")
    assert conv["op"] == "CONV2D+RESCALE+CLAMP" and conv["macs"] == 14 * 14 * 32 * 9 * 16
    assert conv["utilization"] == pytest.approx(conv["macs"] / (256 * conv["cycles"]))
    with open(out / "compute_report.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][:2] == ["LayerID", "Total Cycles"] and len(rows) == 1 + len(doc["layers"])
    for name in ("cycles.png", "utilization.png", "roofline.png", "report.html"):
        assert (out / name).stat().st_size > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]     # no leftovers


def test_float_and_int8_inputs(tmp_path, capsys):
    from qsim import zoo
    from qsim.commands.quantized_model import default_input
    from qsim.quant.pipeline import embedded_quantized_model
    images, _ = zoo.test_subset()
    model = embedded_quantized_model()
    as_int8 = default_input(model)["input"]
    np.save(tmp_path / "f.npy", images[:1])
    np.save(tmp_path / "i.npy", as_int8)
    reports = []
    for name in ("f.npy", "i.npy"):
        out = tmp_path / f"out-{name}"
        code, _, _ = _run(capsys, "--engine", "model", "--input", str(tmp_path / name), "-o", str(out), "-q")
        assert code == 0
        reports.append(json.loads((out / "report.json").read_text()))
    assert reports[0]["layers"] == reports[1]["layers"]
    # a different int8 image changes the values but stays bit-exact
    np.save(tmp_path / "z.npy", np.zeros_like(as_int8))
    code, text, _ = _run(capsys, "--engine", "model", "--input", str(tmp_path / "z.npy"), "-o",
                         str(tmp_path / "z"), "-q")
    assert code == 0 and "every layer bit-exact" in text


@pytest.mark.parametrize("argv,message", [
    (["--config", "7x7"], "no NPU configuration '7x7'"),
    (["--config", "16x16:xs"], "unknown dataflow 'xs'"),
    (["--engine", "gpu"], "unknown engine 'gpu'"),
    (["--engine", "model", "--vcd", "w.vcd"], "--vcd needs an RTL engine"),
    (["--engine", "model", "--sweep", "rows"], "--sweep term 'rows' is not KEY=V1,V2"),
    (["--engine", "model", "--sweep", "rows=8,"], "is not KEY=V1,V2"),
    (["--engine", "model", "--sweep", "banks=2,4"], "--sweep key 'banks' is not a configuration key"),
    (["--engine", "model", "--sweep", "rows=8,x"], "--sweep rows='x': not a number"),
    (["--engine", "model", "--sweep", "rows=8", "rows=16"], "given twice"),
    (["--engine", "model", "--sweep", "size=128"], "key 'rows' = 128 is out of range"),
    (["--engine", "model", "no/such/model"], "no quantized model 'no/such/model'"),
])
def test_cli_errors_are_clear(tmp_path, capsys, argv, message):
    code, _, err = _run(capsys, *argv, "-o", str(tmp_path / "o"), "-q")
    assert code == 2
    assert message in err
    assert not (tmp_path / "o").exists()


def test_bad_input_shape(tmp_path, capsys):
    np.save(tmp_path / "s.npy", np.zeros((1, 1, 27, 28), np.float32))
    code, _, err = _run(capsys, "--engine", "model", "--input", str(tmp_path / "s.npy"), "-q",
                        "-o", str(tmp_path / "o"))
    assert code == 2 and "shape [1, 1, 27, 28]" in err and "[1, 1, 28, 28]" in err
    assert not (tmp_path / "o").exists()


def test_parse_sweep_product_and_names():
    configs = parse_sweep(["size=8,16", "dataflow=ws,os"], load_config("16x16"))
    assert [c.name for c in configs] == ["8x8-ws", "8x8-os", "16x16-ws", "16x16-os"]
    assert [(c.rows, c.cols, c.dataflow.value) for c in configs] == [
        (8, 8, "ws"), (8, 8, "os"), (16, 16, "ws"), (16, 16, "os")]
    bw = parse_sweep(["dram_bytes_per_cycle=4,64"], load_config("8x8"))
    assert [c.dram_bytes_per_cycle for c in bw] == [4, 64] and bw[0].name == "8x8-ws-dram_bytes_per_cycle4"


def test_sweep_runs_configurations_in_parallel_and_plots(tmp_path, capsys):
    out = tmp_path / "sweep"
    code, text, _ = _run(capsys, "--engine", "model", "--sweep", "size=8,16", "dataflow=ws,os",
                         "-o", str(out), "-q")
    assert code == 0, text
    doc = json.loads((out / "sweep.json").read_text())
    names = [p["config"]["name"] for p in doc["points"]]
    assert names == ["8x8-ws", "8x8-os", "16x16-ws", "16x16-os"]
    for point in doc["points"]:
        report = json.loads((out / point["report"]).read_text())
        assert report["total_cycles"] == point["total_cycles"] and point["all_verified"]
        assert report["config"]["dataflow"] == point["config"]["dataflow"]
        # energy travels beside cycles: the point's figures are its report's
        assert point["energy_per_inference_pj"] == report["energy_per_inference_pj"] > 0
        assert point["energy_by_component_pj"] == report["energy_by_component_pj"]
        assert point["tech"] == "45nm"
    assert "nJ/inference" in text
    assert (out / "sweep.png").stat().st_size > 0
    # a larger array needs fewer cycles for this model
    cycles = {p["config"]["name"]: p["total_cycles"] for p in doc["points"]}
    assert cycles["16x16-ws"] < cycles["8x8-ws"]


# -- waveforms on a mismatch, on a graph small enough for the RTL simulators -------------------

def _tiny_graph(rng):
    """x[1, 6] -> FULLY_CONNECTED (4 outputs) -> RESCALE to int8."""
    fc_kind, rs_kind = ir.OpKind.get("tosa.FULLY_CONNECTED"), ir.OpKind.get("tosa.RESCALE")
    tensors = {"x": ir.Tensor("x", ir.DType.I8, (1, 6)), "acc": ir.Tensor("acc", ir.DType.I32, (1, 4)),
               "y": ir.Tensor("y", ir.DType.I8, (1, 4))}
    fc = ir.Op(fc_kind, ("x",), ("acc",), {
        "weight": rng.integers(-128, 128, (4, 6)).astype(np.int8),
        "bias": rng.integers(-500, 500, 4).astype(np.int32), "input_zp": 5, "weight_zp": 0}, name="fc")
    rs = ir.Op(rs_kind, ("acc",), ("y",), {
        "input_zp": 0, "output_zp": -3, "multiplier": np.full(4, 1 << 30, np.int32),
        "shift": np.full(4, 38, np.int32), "scale32": True, "double_round": False, "per_channel": True,
        "out_t": "int8"}, name="fc")
    return ir.Graph("tiny", ("x",), ("y",), (fc, rs), tensors).verify()


def _tiny_fault(rng):
    graph = _tiny_graph(rng)
    feeds = {"x": rng.integers(-128, 128, (1, 6)).astype(np.int8)}
    expected = execute(graph, feeds, backend="kernels")
    rs = graph.ops[1]
    bad = dataclasses.replace(rs, attrs={**rs.attrs, "output_zp": 9})
    faulty = dataclasses.replace(graph, ops=(graph.ops[0], bad))
    config = parse_config("[npu]\nrows = 2\ncols = 2\ndataflow = 'ws'\ninput_buffer_bytes = 64\n"
                          "weight_buffer_bytes = 32\naccumulator_buffer_bytes = 128\n"
                          "dram_bytes_per_cycle = 4\n")
    return faulty, feeds, expected, config


def test_vcd_of_first_mismatch_amaranth(rng, tmp_path):
    faulty, feeds, expected, config = _tiny_fault(rng)
    run = run_graph_on_npu(faulty, feeds, config, engine="amaranth", expected=expected)
    found = run.first_mismatch
    assert (found.stage, found.index, found.actual - found.expected) == ("y", (0, 0), 12)
    note = dump_vcd(run, str(tmp_path / "w.vcd"))
    text = (tmp_path / "w.vcd").read_text()
    assert "whole program" in note and "$enddefinitions" in text and "dram_we" in text


@pytest.mark.parametrize("fault", ["array", "vector"])
def test_vcd_of_first_mismatch_verilator_window(rng, tmp_path, fault):
    faulty, feeds, expected, config = (_tiny_fault if fault == "array" else _tiny_vector_fault)(rng)
    run = run_graph_on_npu(faulty, feeds, config, engine="model", expected=expected)
    found = run.first_mismatch
    assert found.program_cycle is not None
    note = dump_vcd(run, str(tmp_path / "w.vcd"), engine=Engine.VERILATOR)
    text = (tmp_path / "w.vcd").read_text()
    assert "$enddefinitions" in text and "dram_we" in text
    times = [int(line[1:]) for line in text.splitlines() if line.startswith("#")]
    # the window ends VCD_AFTER cycles after the write or at the program's end, and holds the write
    assert times[0] == 0 and 10 * found.program_cycle + 5 in times
    assert f"the write is in cycle {found.program_cycle}" in note


def test_simulate_a_quantized_model_folder(tmp_path, capsys):
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.quant.qmodel import save_quantized_model
    from qsim.quant.tosa.target import TosaTarget
    folder = tmp_path / "fashion-int8"
    save_quantized_model(embedded_quantized_model(), TosaTarget(), folder)
    code, text, _ = _run(capsys, str(folder), "--engine", "model", "--config", "8x8", "-q",
                         "-o", str(tmp_path / "rep"))
    assert code == 0, text
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["model"] == "fashion-int8" and doc["config"]["rows"] == 8 and doc["all_verified"]
    (tmp_path / "plain").mkdir()
    code, _, err = _run(capsys, str(tmp_path / "plain"), "--engine", "model", "-q",
                        "-o", str(tmp_path / "rep2"))
    assert code == 2 and "not a quantized model folder" in err


def test_int16_activations_run_on_the_array():
    """16x8: the convolutions read int16 activations as byte planes and write int16 (docs/npu.md)."""
    from qsim.npu.program import Unit, plan
    from qsim.commands.quantized_model import default_input
    from qsim.quant.params import Precision
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.pipeline import embedded_quantized_model
    model = embedded_quantized_model(QuantizeOptions(precision=Precision("16x8"), show_progress=False))
    stages = plan(model.graph)
    convs = [s for s in stages if s.ops[0].kind.short_name == "CONV2D"]
    assert convs and all(s.unit is Unit.ARRAY and s.out_bits == 16 and len(s.ops) == 3 for s in convs)
    run = run_graph_on_npu(model.graph, default_input(model), load_config("16x16"), engine="model")
    assert run.verified
    conv_runs = [r for r in run.stages if r.stage.ops[0].kind.short_name == "CONV2D"]
    assert all(r.cycles > 0 and r.output.dtype == np.int16 for r in conv_runs)


def _tiny_vector_fault(rng):
    """x[1, 5, 8] -> CLAMP (a vector-unit stage); the run's CLAMP bound is off by one from the
    graph the expected values come from (an injected fault)."""
    clamp_kind = ir.OpKind.get("tosa.CLAMP")
    tensors = {"x": ir.Tensor("x", ir.DType.I8, (1, 5, 8)), "z": ir.Tensor("z", ir.DType.I8, (1, 5, 8))}
    clamp = ir.Op(clamp_kind, ("x",), ("z",), {"min_val": -100, "max_val": 90}, name="clip")
    graph = ir.Graph("tinyv", ("x",), ("z",), (clamp,), tensors).verify()
    feeds = {"x": np.arange(-20, 20, dtype=np.int8).reshape(1, 5, 8) * 5}     # -100 .. 95
    expected = execute(graph, feeds, backend="kernels")
    bad = dataclasses.replace(clamp, attrs={**clamp.attrs, "max_val": 89})
    _, _, _, config = _tiny_fault(rng)
    return dataclasses.replace(graph, ops=(bad,)), feeds, expected, config


def test_vector_stage_mismatch_is_located_and_dumped_amaranth(rng, tmp_path):
    """A vector-stage mismatch carries the cycle of the VRUN's DRAM write of that element
    (checked against the RTL's own write log), and --vcd writes the program's waveform."""
    from qsim.npu.sim_amaranth import run_amaranth
    faulty, feeds, expected, config = _tiny_vector_fault(rng)
    run = run_graph_on_npu(faulty, feeds, config, engine="amaranth", expected=expected)
    found = run.first_mismatch
    # 90 and 95 are clamped to 89 instead of 90: elements 38 and 39, the first is [0, 4, 6]
    assert (found.stage, found.index, found.expected, found.actual, found.differing) == ("z", (0, 4, 6), 90, 89, 2)
    program = run.stages[0].program
    log = []
    run_amaranth(config.geometry, program.instrs, program.dram.copy(), write_log=log)
    addr = program.out_addr + 38
    assert found.program_cycle == [c for c, a, n in log if a <= addr < a + n][-1]
    assert found.program == 0 and f"cycle {found.program_cycle} of program 0" in found.message()
    note = dump_vcd(run, str(tmp_path / "v.vcd"))
    text = (tmp_path / "v.vcd").read_text()
    assert "whole program" in note and "$enddefinitions" in text and "dram_we" in text


def test_verified_vector_stage_keeps_no_program(embedded):
    from qsim.npu.config import load_config
    graph, feeds, expected = embedded
    run = run_graph_on_npu(graph, feeds, load_config("16x16"), engine="model", expected=expected)
    vector = [s for s in run.stages if s.stage.unit.value == "vector"]
    assert vector and all(s.verified and s.program is None for s in vector)


def test_a_cold_build_runs_in_the_background_until_needed(rng, tmp_path, monkeypatch):
    """A cold build (no Verilog cached) starts in a child process and completes the cache
    entry there: the parent's later build() finds it without compiling; a warm one starts
    nothing."""
    from qsim.npu import sim_verilator
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sim_verilator, "_BUILT", {})
    geom = _tiny_fault(rng)[3].geometry
    children = sim_verilator.build_in_background(geom)
    assert len(children) == 2           # the array-side and the vector-side model, side by side
    for child in children:
        child.join()
        assert child.exitcode == 0

    def no_second_build(*args, **kw):
        raise AssertionError("the parent compiled the NPU again")
    monkeypatch.setattr(sim_verilator, "_build_into", no_second_build)
    for units in sim_verilator.SPLIT:
        assert sim_verilator.build(geom, units=units).is_file()
    assert sim_verilator.build_in_background(geom) == []


def test_prepare_engine_builds_the_sides_the_stages_use(monkeypatch):
    """Both NPU sides without a plan; with one, only those its stages run on (a model
    without vector stages compiles no vector side)."""
    from types import SimpleNamespace
    from qsim.hw.params import Units
    from qsim.npu import sim_verilator
    from qsim.npu.engines import Engine
    from qsim.npu.program import Unit
    from qsim.npu.simulate import prepare_engine
    built = []
    monkeypatch.setattr(sim_verilator, "build", lambda geom, units: built.append(units))
    config = load_config("16x16")
    stages = lambda *units: SimpleNamespace(stages=[SimpleNamespace(unit=u) for u in units])  # noqa: E731
    prepare_engine(config, Engine.VERILATOR, prepared=stages(Unit.ARRAY, Unit.HOST, Unit.ARRAY))
    assert built == [Units.ARRAY]
    built.clear()
    prepare_engine(config, Engine.VERILATOR, prepared=stages(Unit.VECTOR, Unit.ARRAY))
    assert built == [Units.ARRAY, Units.VECTOR]
    built.clear()
    prepare_engine(config, Engine.VERILATOR)
    assert built == [Units.ARRAY, Units.VECTOR]
    built.clear()
    prepare_engine(config, Engine.MODEL, prepared=stages(Unit.ARRAY))
    assert built == []
