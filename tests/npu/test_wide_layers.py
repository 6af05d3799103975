"""int16 operands on the array (TOSA 16x8 and 16x16; qsim/npu/array/wide.py): byte-plane passes
into int48 accumulators and the int48 RESCALE of the requantization unit, against the TOSA 0.30
loops of tests/npu/oracle.py (int64 sums, apply_scale_16), on every engine."""
import json

import numpy as np
import pytest

from qsim.errors import InvalidGraphError, UnsupportedError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.layers import run_layer
from qsim.tosa.arith import apply_scale_16

from . import oracle

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
I16_MIN, I16_MAX = -32768, 32767


def _geom(dataflow):
    return Geometry(4, 4, dataflow, 512, 256, 1024, 16)


def _rescale16(acc, mult, shift, out_bits=16, lo=None, hi=None):
    """TOSA 0.30 RESCALE of int48 (scale32 = false) + CLAMP, written from the spec."""
    top = (1 << (out_bits - 1)) - 1
    lo, hi = -top - 1 if lo is None else lo, top if hi is None else hi
    scaled = apply_scale_16(acc, mult, shift).astype(np.int64)
    return np.clip(np.clip(scaled, -top - 1, top), lo, hi).astype(np.int16 if out_bits == 16 else np.int8)


def _wide_cases(rng):
    """(op, inputs, attrs, exact int64 sums incl. bias) with the sharp corners in every case:
    activations at both int16 rails, weights -128, weight zero points at their limits."""
    x = rng.integers(I16_MIN, I16_MAX + 1, (2, 6, 5, 5)).astype(np.int16)
    x[0, 0, 0], x[0, 1, 1], x[1, 2, 3] = I16_MIN, I16_MAX, [I16_MIN, I16_MAX, -1, 0, 255][:5]
    w = rng.integers(-128, 128, (6, 3, 3, 5)).astype(np.int8)
    w[0] = -128
    conv = dict(weight=w, bias=rng.integers(-(1 << 40), 1 << 40, 6), pad=(1, 0, 2, 1), stride=(2, 1),
                dilation=(1, 2), weight_zp=127)
    conv_exp = oracle.conv2d(x, w, conv["bias"], conv["pad"], conv["stride"], conv["dilation"], 0, 127)
    wd = rng.integers(-128, 128, (3, 3, 5, 2)).astype(np.int8)
    dw = dict(weight=wd, bias=rng.integers(-(1 << 40), 1 << 40, 10), pad=(1, 1, 1, 1), stride=(1, 2),
              dilation=(1, 1), weight_zp=-128)
    dw_exp = oracle.depthwise(x, wd, dw["bias"], dw["pad"], dw["stride"], dw["dilation"], 0, -128)
    # a long reduction: every product near 2^22, sums far beyond 32 bits
    xf = np.full((3, 300), I16_MAX, np.int16)
    xf[1] = I16_MIN
    xf[2] = rng.integers(I16_MIN, I16_MAX + 1, 300)
    wf = np.full((7, 300), 127, np.int8)
    wf[1:] = rng.integers(-128, 128, (6, 300))
    fc = dict(weight=wf, bias=rng.integers(-(1 << 46), 1 << 46, 7), weight_zp=-128)
    fc_exp = xf.astype(np.int64) @ (wf.astype(np.int64) + 128).T + fc["bias"]
    a = rng.integers(I16_MIN, I16_MAX + 1, (2, 5, 9)).astype(np.int16)
    b = rng.integers(I16_MIN, I16_MAX + 1, (2, 9, 6)).astype(np.int16)
    a[0, 0], b[0, :, 0] = I16_MIN, I16_MIN
    mm_exp = np.einsum("nhc,ncw->nhw", a.astype(np.int64), b.astype(np.int64))
    return {"CONV2D": ([x], conv, conv_exp), "DEPTHWISE_CONV2D": ([x], dw, dw_exp),
            "FULLY_CONNECTED": ([xf], fc, fc_exp), "MATMUL": ([a, b], {}, mm_exp)}


def _scales(acc, channels, rng):
    """Per-channel 16-bit multipliers and shifts that keep the result within int32 (REQUIRE)."""
    mult = rng.integers(1 << 14, 1 << 15, channels)
    need = int(np.abs(acc).max()).bit_length() + 15 - 31     # shift keeping |acc * m| >> s < 2^31
    shift = np.clip(rng.integers(max(2, need), max(2, need) + 8, channels), 2, 62)
    return mult, shift


@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "MATMUL"])
def test_wide_layer_equals_tosa_oracle(rng, dataflow, op):
    inputs, attrs, acc = _wide_cases(rng)[op]
    channels = acc.shape[-1]
    mult, shift = _scales(acc, channels, rng)
    rescale = dict(multiplier=mult, shift=shift, scale32=False, per_channel=True)
    for out_bits in (16, 8):
        clamp = dict(min_val=-1000, max_val=20000) if out_bits == 16 else dict(min_val=0, max_val=127)
        got = run_layer(_geom(dataflow), op, inputs, attrs, rescale, clamp, out_bits=out_bits)
        want = _rescale16(acc, mult, shift, out_bits, clamp["min_val"], clamp["max_val"])
        np.testing.assert_array_equal(got.output, want)
        assert got.output.dtype == want.dtype
    if op == "FULLY_CONNECTED":
        assert np.abs(acc).max() > 1 << 40       # the 48-bit path carries the sums
    assert np.abs(acc).max() > 1 << 31


def test_rescale_shift_limits_and_rounding_ties(rng):
    """apply_scale_16 at shift 2 (ties of value * m = +-2 mod 4 round up) and shift 62 (a value near
    2^47 times the largest multiplier); bias at the int48 limits."""
    geom = _geom(WS)
    x = np.array([[2, -2, 6, -6, 1, -1, 0, 3]], np.int16).T          # [8, 1]: one input feature
    w = np.ones((1, 1), np.int8)
    tie = run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w, bias=np.zeros(1, np.int64)),
                    dict(multiplier=1, shift=2, scale32=False), out_bits=16)
    np.testing.assert_array_equal(tie.output[:, 0], [1, 0, 2, -1, 0, 0, 0, 1])   # round half up
    big = np.array([[I16_MAX], [I16_MIN], [0]], np.int16)
    bias = np.array([(1 << 47) - 1 - 127 * I16_MAX], np.int64)       # acc + bias = 2^47 - 1 for row 0
    top = run_layer(geom, "FULLY_CONNECTED", [big], dict(weight=np.full((1, 1), 127, np.int8), bias=bias),
                    dict(multiplier=(1 << 15) - 1, shift=62, scale32=False), out_bits=16)
    acc = big.astype(np.int64) * 127 + bias
    np.testing.assert_array_equal(top.output[:, 0], apply_scale_16(acc[:, 0], (1 << 15) - 1, 62))
    low = run_layer(geom, "FULLY_CONNECTED", [big], dict(weight=np.full((1, 1), -128, np.int8),
                                                         bias=np.array([-(1 << 47) + (1 << 23)], np.int64)),
                    dict(multiplier=(1 << 15) - 1, shift=62, scale32=False), out_bits=8)
    np.testing.assert_array_equal(low.output[:, 0], [-1, -1, -1])


@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
@pytest.mark.parametrize("op", ["CONV2D", "MATMUL"])
def test_amaranth_equals_model_values_and_cycles(rng, dataflow, op):
    inputs, attrs, acc = _wide_cases(rng)[op]
    if op == "CONV2D":          # one image keeps the RTL simulation short
        inputs = [inputs[0][:1]]
        acc = acc[:1]
    mult, shift = _scales(acc, acc.shape[-1], rng)
    rescale = dict(multiplier=mult, shift=shift, scale32=False, per_channel=True)
    model = run_layer(_geom(dataflow), op, inputs, attrs, rescale, out_bits=16)
    rtl = run_layer(_geom(dataflow), op, inputs, attrs, rescale, out_bits=16, engine="amaranth")
    np.testing.assert_array_equal(rtl.output, model.output)
    np.testing.assert_array_equal(model.output, _rescale16(acc, mult, shift))
    assert rtl.cycles == model.cycles > 0


def test_verilator_equals_model_on_a_16x8_convolution(rng):
    inputs, attrs, acc = _wide_cases(rng)["CONV2D"]
    mult, shift = _scales(acc, acc.shape[-1], rng)
    rescale = dict(multiplier=mult, shift=shift, scale32=False, per_channel=True)
    geom = _geom(WS)
    model = run_layer(geom, "CONV2D", inputs, attrs, rescale, out_bits=16)
    rtl = run_layer(geom, "CONV2D", inputs, attrs, rescale, out_bits=16, engine="verilator")
    np.testing.assert_array_equal(rtl.output, _rescale16(acc, mult, shift))
    assert rtl.cycles == model.cycles


def test_two_plane_passes_cost_about_twice_int8(rng):
    """Same layer, int8 vs int16 activations: the array streams every fold twice."""
    geom = _geom(WS)
    w = rng.integers(-128, 128, (8, 3, 3, 8)).astype(np.int8)
    x16 = rng.integers(I16_MIN, I16_MAX + 1, (1, 8, 8, 8)).astype(np.int16)
    r8 = run_layer(geom, "CONV2D", [(x16 >> 8).astype(np.int8)], dict(weight=w),
                   dict(multiplier=1 << 30, shift=40), out_bits=8)
    r16 = run_layer(geom, "CONV2D", [x16], dict(weight=w), dict(multiplier=1 << 14, shift=30, scale32=False))
    assert r16.compute_cycles == 2 * r8.compute_cycles
    assert 1.5 * r8.cycles < r16.cycles < 2.5 * r8.cycles


def test_wide_errors_follow_tosa_rules(rng):
    geom = _geom(WS)
    x = rng.integers(-5, 5, (2, 4)).astype(np.int16)
    w = rng.integers(-5, 5, (3, 4)).astype(np.int8)
    ok = dict(multiplier=1 << 14, shift=14, scale32=False)
    with pytest.raises(InvalidGraphError, match="requires 0 for non-int8"):
        run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w, input_zp=1), ok)
    with pytest.raises(InvalidGraphError, match="scale32 = true"):
        run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w), dict(ok, scale32=True))
    with pytest.raises(InvalidGraphError, match="16-bit multipliers"):
        run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w), dict(ok, multiplier=1 << 15))
    with pytest.raises(InvalidGraphError, match="output_zp"):
        run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w), dict(ok, output_zp=3), out_bits=16)
    with pytest.raises(UnsupportedError, match="int48 sums are not stored"):
        run_layer(geom, "FULLY_CONNECTED", [x], dict(weight=w))
    b = rng.integers(-5, 5, (1, 4, 3)).astype(np.int16)
    with pytest.raises(InvalidGraphError, match="weight zero point"):
        run_layer(geom, "MATMUL", [x[None], b], dict(B_zp=2), ok)


@pytest.mark.parametrize("op, frames", [("LSTM", 5), ("GRU", 4)])
def test_16x8_recurrent_gate_matmuls_run_on_the_array(tmp_path, op, frames):
    """`qsim quantize --precision 16x8` of a keyword-spotting LSTM / GRU, then `qsim simulate`:
    every gate and recurrent product (FULLY_CONNECTED, int16 x int8) on the array, the gates
    (TABLE) on the vector unit, only reshapes on the host, every layer verified."""
    import sys
    from pathlib import Path

    import onnx
    sys.path.insert(0, str(Path(__file__).parents[1] / "onnx"))
    from recurrent_models import keyword_spotting
    from qsim.commands.quantize import quantize_to_folder
    from qsim.commands.simulate import simulate_command
    from qsim.npu.engines import Engine
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.params import Precision
    from qsim.quant.qmodel import load_quantized_model

    rng = np.random.default_rng(41)
    x = rng.normal(size=(16, frames, 10)).astype(np.float32)
    onnx.save(keyword_spotting(op, rng, frames=frames), tmp_path / "kws.onnx")
    np.save(tmp_path / "calib.npy", x)
    folder = tmp_path / "kws-16x8"
    quantize_to_folder(str(tmp_path / "kws.onnx"), str(tmp_path / "calib.npy"), str(folder),
                       QuantizeOptions(show_progress=False, precision=Precision.INT16X8))
    graph = load_quantized_model(folder).graph
    np.save(tmp_path / "x1.npy", x[:1].reshape(graph.tensors[graph.inputs[0]].shape))
    sim = simulate_command(str(folder), "8x8", Engine.MODEL, str(tmp_path / "x1.npy"), str(tmp_path / "npu"),
                           show_progress=False, workers=1)
    assert sim.verified, sim.messages
    layers = sim.reports[0].layers
    assert all(la.verified for la in layers if la.verified is not None)
    fcs = [la for la in layers if la.op.startswith("FULLY_CONNECTED")]
    wide_inputs = [op_ for op_ in graph.ops if op_.kind.short_name == "FULLY_CONNECTED"
                   and graph.tensor(op_.inputs[0]).dtype.name == "I16"]
    assert fcs and len(wide_inputs) == len(fcs) and all(la.unit == "array" for la in fcs)
    assert {la.op for la in layers if la.unit == "host"} <= {"RESHAPE", "IDENTITY", "CONST"}
    assert any(la.op.startswith("TABLE") and la.unit == "vector" for la in layers)


def test_16x8_cnn_simulates_verified_and_its_cocotb_programs_reproduce_the_golden_vectors(tmp_path):
    """`qsim quantize --precision 16x8` of the embedded CNN, then `qsim simulate` (every layer
    verified, nothing but reshapes on the host) and `qsim export-vectors --cocotb`: the
    exported programs, decoded from their instruction words (per hw/README.md's fields, the
    plane fields included) and run on the cycle model, give the int16 golden tensors in the
    exported cycle counts."""
    from qsim.cli import main
    from qsim.npu.config import load_config

    from .test_cocotb_export import replay_golden_layers
    assert main(["quantize", "--precision", "16x8", "--eval-limit", "20", "-o", str(tmp_path / "q"), "-q"]) == 0
    assert main(["simulate", str(tmp_path / "q"), "--config", "8x8", "--engine", "model", "-o", str(tmp_path / "s"),
                 "-q"]) == 0
    sim = json.loads((tmp_path / "s" / "report.json").read_text())
    assert sim["all_verified"] and sim["host_arithmetic_layers"] == [] and "WARNING" not in sim["summary"]
    assert {la["op"] for la in sim["layers"] if la["unit"] == "host"} <= {"RESHAPE", "IDENTITY", "CONST"}
    assert main(["export-vectors", str(tmp_path / "q"), "--config", "8x8", "--cocotb", str(tmp_path / "tb")]) == 0
    checked = [(layer.op.split("+")[0], expected.dtype)
               for layer, expected in replay_golden_layers(tmp_path / "tb", load_config("8x8").geometry)]
    assert checked.count(("CONV2D", np.dtype(np.int16))) == 4 and ("FULLY_CONNECTED", np.dtype(np.int16)) in checked


@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
def test_16x8_transpose_conv_equals_the_tosa_reference(rng, dataflow):
    """TRANSPOSE_CONV2D of int16 activations: its sub-pixel phases are 16x8 convolutions, each
    two plane passes; sums against qsim.tosa's reference (int48), then the int48 RESCALE."""
    from qsim.tosa.run import run as tosa_run
    x = rng.integers(I16_MIN, I16_MAX + 1, (1, 3, 4, 3)).astype(np.int16)
    x[0, 0, 0] = I16_MIN
    w = rng.integers(-128, 128, (5, 3, 2, 3)).astype(np.int8)
    attrs = dict(weight=w, bias=rng.integers(-(1 << 40), 1 << 40, 5), out_pad=(0, 1, 1, 0), stride=(2, 3),
                 out_shape=(1, 6, 10, 5), input_zp=0, weight_zp=-128)
    acc = tosa_run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")[0].astype(np.int64)
    mult, shift = _scales(acc, 5, rng)
    got = run_layer(_geom(dataflow), "TRANSPOSE_CONV2D", [x], attrs,
                    dict(multiplier=mult, shift=shift, scale32=False, per_channel=True), out_bits=16)
    np.testing.assert_array_equal(got.output, _rescale16(acc, mult, shift))
    assert np.abs(acc).max() > 1 << 31
