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


def _quantize_and_simulate(tmp_path, capsys, model, calib, sample):
    onnx.save(model, tmp_path / "model.onnx")
    np.save(tmp_path / "calib.npy", calib)
    np.save(tmp_path / "x.npy", sample)
    assert main(["quantize", str(tmp_path / "model.onnx"), "--calib", str(tmp_path / "calib.npy"),
                 "-o", str(tmp_path / "q"), "-q"]) == 0
    code = main(["simulate", str(tmp_path / "q"), "--engine", "model", "--workers", "1",
                 "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "sim"), "-q"])
    text = capsys.readouterr().out
    assert code == 0, text
    return json.loads((tmp_path / "sim" / "report.json").read_text()), text


def _no_host_arithmetic(doc, text):
    host = [layer["op"] for layer in doc["layers"] if layer["unit"] == "host"]
    assert set(host) <= RESHAPES, host
    assert doc["all_verified"] and doc["host_arithmetic_layers"] == []
    assert "WARNING" not in doc["summary"] and doc["summary"] in text


def test_unet_with_conv_transpose_runs_every_layer_on_the_npu(tmp_path, capsys):
    rng = np.random.default_rng(0)
    doc, text = _quantize_and_simulate(tmp_path, capsys, unet(rng),
                                       rng.normal(size=(8, 3, 16, 16)).astype(np.float32),
                                       rng.normal(size=(1, 3, 16, 16)).astype(np.float32))
    _no_host_arithmetic(doc, text)
    ups = [layer for layer in doc["layers"] if layer["op"].startswith("TRANSPOSE_CONV2D")]
    assert len(ups) == 2 and all(layer["unit"] == "array" and layer["cycles"] > 0 for layer in ups)
    # the two decoder layers' MACs: 4x4 -> 8x8 (k2 s2: one tap per output) 18 -> 12 channels, and
    # 8x8 -> 16x16 (k4 s2 pad 1: 2x2 taps per output phase) 12 -> 6 channels
    assert [layer["macs"] for layer in ups] == [8 * 8 * 18 * 12, 16 * 16 * 4 * 12 * 6]
    assert all(layer["energy_pj"] > 0 and layer["events"]["macs"] >= layer["macs"] for layer in ups)


def test_embedding_gather_of_token_ids_runs_on_the_vector_unit(tmp_path, capsys):
    rng = np.random.default_rng(1)
    calib = rng.integers(0, 20, (16, 6))
    sample = np.array([[0, 19, 5, 5, 19, 0]])                     # first and last row, repeats
    doc, text = _quantize_and_simulate(tmp_path, capsys, embedding(rng), calib, sample)
    _no_host_arithmetic(doc, text)
    gather, = [layer for layer in doc["layers"] if layer["op"] == "GATHER"]
    assert gather["unit"] == "vector" and gather["cycles"] > 0 and gather["events"]["vector_ops"] == 6 * 8
    assert gather["dram_input_bytes"] == 6 * (4 + 8)                # per row: its int32 index, 8 values


def test_arithmetic_left_on_the_host_is_in_the_summary_line(tmp_path):
    """16x8 activations: the array multiplies int8 only, so the convolutions run on the host."""
    from qsim.commands.quantized_model import default_input
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.params import Precision
    from qsim.quant.pipeline import embedded_quantized_model
    model = embedded_quantized_model(QuantizeOptions(precision=Precision("16x8"), show_progress=False))
    host = [s.name for s in plan(model.graph) if s.unit is Unit.HOST and s.ops[0].kind.short_name not in RESHAPES]
    assert any(s.ops[0].kind.short_name == "CONV2D" for s in plan(model.graph) if s.name in host)
    run = run_graph_on_npu(model.graph, default_input(model), load_config("16x16"), engine="model")
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
