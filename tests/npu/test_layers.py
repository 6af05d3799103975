"""TOSA layers lowered onto the NPU vs the TOSA 0.30 loops in tests/npu/oracle.py."""
import numpy as np
import pytest

from qsim.errors import InvalidGraphError, UnsupportedError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.layers import run_layer

from . import oracle

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY


def _geom(dataflow, rows=4, cols=4):
    return Geometry(rows, cols, dataflow, rows * 32, cols * 16, 4 * cols * 16, 8)


def _rescale(rng, channels):
    return dict(input_zp=0, output_zp=-4, multiplier=rng.integers(1 << 30, 1 << 31, channels),
                shift=rng.integers(30, 38, channels), scale32=True, double_round=True,
                per_channel=True)


def _layer_cases(rng):
    x = rng.integers(-128, 128, (2, 7, 6, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 3, 3, 5)).astype(np.int8)
    conv = dict(weight=w, bias=rng.integers(-2000, 2000, 6), pad=(1, 0, 2, 1), stride=(2, 1),
                dilation=(1, 2), input_zp=-3, weight_zp=2)
    conv_exp = oracle.conv2d(x, w, conv["bias"], conv["pad"], conv["stride"], conv["dilation"], -3, 2)
    wd = rng.integers(-128, 128, (3, 3, 5, 2)).astype(np.int8)
    dw = dict(weight=wd, bias=rng.integers(-2000, 2000, 10), pad=(1, 1, 1, 1), stride=(1, 2),
              dilation=(1, 1), input_zp=5, weight_zp=-1)
    dw_exp = oracle.depthwise(x, wd, dw["bias"], dw["pad"], dw["stride"], dw["dilation"], 5, -1)
    xf = rng.integers(-128, 128, (3, 20)).astype(np.int8)
    wf = rng.integers(-128, 128, (7, 20)).astype(np.int8)
    fc = dict(weight=wf, bias=rng.integers(-2000, 2000, 7), input_zp=1, weight_zp=-128)
    fc_exp = (xf.astype(np.int64) - 1) @ (wf.astype(np.int64) + 128).T + fc["bias"]
    a = rng.integers(-128, 128, (2, 5, 9)).astype(np.int8)
    b = rng.integers(-128, 128, (2, 9, 6)).astype(np.int8)
    mm_exp = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - 3, b.astype(np.int64) + 4)
    return {"CONV2D": ([x], conv, conv_exp, 6), "DEPTHWISE_CONV2D": ([x], dw, dw_exp, 10),
            "FULLY_CONNECTED": ([xf], fc, fc_exp, 7),
            "MATMUL": ([a, b], dict(A_zp=3, B_zp=-4), mm_exp, 6)}


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "MATMUL"])
def test_layer_int32_and_fused_rescale_clamp(rng, dataflow, op):
    inputs, attrs, expected, channels = _layer_cases(rng)[op]
    geom = _geom(dataflow)
    raw = run_layer(geom, op, inputs, attrs)
    np.testing.assert_array_equal(raw.output, expected.astype(np.int32))
    rescale = _rescale(rng, channels)
    clamp = dict(min_val=-60, max_val=100)
    fused = run_layer(geom, op, inputs, attrs, rescale=rescale, clamp=clamp)
    np.testing.assert_array_equal(
        fused.output, oracle.rescale_clamp(expected, rescale["multiplier"], rescale["shift"], -4,
                                           True, -60, 100))
    assert fused.macs > 0 and 0 < fused.utilization <= 1
    assert fused.cycles == fused.compute_cycles + fused.fill_drain_cycles + fused.stall_cycles
    assert fused.dram_bytes["output"] == expected.size


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "MATMUL"])
def test_layer_on_amaranth_engine_equals_model(rng, op, dataflow):
    inputs, attrs, expected, channels = _layer_cases(np.random.default_rng(7))[op]
    # keep the RTL run small: one image / batch element
    inputs = [i[:1] for i in inputs]
    if op in ("CONV2D", "DEPTHWISE_CONV2D"):
        inputs = [inputs[0][:, :4, :4]]
    geom = Geometry(2, 3, dataflow, 2 * 32, 3 * 16, 12 * 32, 8)
    rescale = _rescale(rng, channels)
    model = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="model")
    rtl = run_layer(geom, op, inputs, attrs, rescale=rescale, engine="amaranth")
    np.testing.assert_array_equal(rtl.output, model.output)
    assert rtl.cycles == model.cycles


def test_layer_errors_are_actionable(rng):
    geom = _geom(WS)
    x = rng.integers(-128, 128, (1, 4, 4, 2)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 2, 2, 2)).astype(np.int8)
    with pytest.raises(UnsupportedError, match="tosa.AVG_POOL2D does not run on the NPU"):
        run_layer(geom, "AVG_POOL2D", [x], {})
    with pytest.raises(UnsupportedError, match="int48 sums are not stored"):
        run_layer(geom, "CONV2D", [x.astype(np.int16)], dict(weight=w))
    with pytest.raises(InvalidGraphError, match="input_zp = 0"):
        run_layer(geom, "CONV2D", [x], dict(weight=w), rescale=dict(input_zp=3, multiplier=1, shift=2))
    with pytest.raises(UnsupportedError, match="scale32"):
        run_layer(geom, "CONV2D", [x], dict(weight=w),
                  rescale=dict(input_zp=0, multiplier=1, shift=2, scale32=False))
    with pytest.raises(UnsupportedError, match="shift"):
        run_layer(geom, "CONV2D", [x], dict(weight=w), rescale=dict(input_zp=0, multiplier=1, shift=1))
    with pytest.raises(UnsupportedError, match="CLAMP fuses only after a RESCALE"):
        run_layer(geom, "CONV2D", [x], dict(weight=w), clamp=dict(min_val=0, max_val=5))


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D", "FULLY_CONNECTED", "MATMUL"])
def test_layer_on_verilator_engine_equals_model_and_oracle(rng, op):
    """The verilator engine on the 16x16 preset (the build the embedded-model test uses):
    same values and cycles as the model, values as the oracle, raw and requantized."""
    from qsim.npu.config import load_config
    inputs, attrs, expected, channels = _layer_cases(rng)[op]
    geom = load_config("16x16").geometry
    rescale = _rescale(rng, channels)
    for fused in (None, rescale):
        model = run_layer(geom, op, inputs, attrs, rescale=fused, engine="model")
        rtl = run_layer(geom, op, inputs, attrs, rescale=fused, engine="verilator")
        np.testing.assert_array_equal(rtl.output, model.output)
        assert rtl.cycles == model.cycles
        want = expected.astype(np.int32) if fused is None else oracle.rescale_clamp(
            expected, rescale["multiplier"], rescale["shift"], -4, True)
        np.testing.assert_array_equal(rtl.output, want)
