"""Parameter choice: hand-worked ranges, the NNEF 4.6 grid, bias scales, 16x8 mode."""
import numpy as np
import pytest

from qsim.errors import DataError, UnsupportedError
from qsim.ir import DType, QuantInfo
from qsim.quant.params import (Granularity, Precision, QuantConfig, QuantScheme, bias_quant,
                               dequantize, params_from_range, quantize, quantize_bias,
                               nnef_round)

INT8_ASYM = QuantScheme(bits=8, signed=True, symmetric=False)
INT8_SYM_AXIS0 = QuantScheme(bits=8, signed=True, symmetric=True, channel_axis=0)


def test_grid_bounds_follow_nnef_zero_point_linear_quantize():
    # r = 2^(b-1)-1 signed / 2^b-1 unsigned; m = 0 unsigned, -r symmetric, -r-1 otherwise
    assert (INT8_ASYM.qmin, INT8_ASYM.qmax) == (-128, 127)
    assert (INT8_SYM_AXIS0.qmin, INT8_SYM_AXIS0.qmax) == (-127, 127)
    u8 = QuantScheme(bits=8, signed=False)
    assert (u8.qmin, u8.qmax, u8.dtype) == (0, 255, DType.U8)
    i16 = QuantScheme(bits=16, symmetric=True)
    assert (i16.qmin, i16.qmax, i16.dtype) == (-32767, 32767, DType.I16)
    with pytest.raises(UnsupportedError):
        QuantScheme(bits=8, signed=False, symmetric=True)
    with pytest.raises(UnsupportedError):
        QuantScheme(bits=4, symmetric=False).dtype


def test_asymmetric_hand_worked():
    # [-1, 3]: scale 4/255; zero point -128 - round(-1 / (4/255)) = -128 + round(63.75) = -64
    q = params_from_range(-1.0, 3.0, INT8_ASYM)
    assert q.scale == pytest.approx(4 / 255, rel=1e-15)
    assert q.zero_point == -64 and q.axis is None and not q.symmetric
    assert quantize([0.0], q).tolist() == [-64]          # real 0 exactly representable
    assert dequantize(quantize([0.0], q), q).tolist() == [0.0]
    assert quantize([-1.0, 3.0, 10.0, -10.0], q).tolist() == [-128, 127, 127, -128]


def test_range_is_widened_to_include_zero():
    # ReLU-like [0.5, 2]: becomes [0, 2], zero point at the bottom of the grid
    q = params_from_range(0.5, 2.0, INT8_ASYM)
    assert q.zero_point == -128 and q.scale == pytest.approx(2 / 255)
    q = params_from_range(-4.0, -1.0, INT8_ASYM)
    assert q.zero_point == 127 and q.scale == pytest.approx(4 / 255)


def test_symmetric_per_channel_weights(rng):
    w = rng.normal(size=(6, 3, 3, 3)) * np.arange(1, 7)[:, None, None, None]
    amax = np.abs(w).reshape(6, -1).max(axis=1)
    q = params_from_range(-amax, amax, INT8_SYM_AXIS0)
    assert q.axis == 0 and np.all(q.zero_points() == 0)
    np.testing.assert_allclose(q.scales(), amax / 127, rtol=1e-15)
    wq = quantize(w, q)
    assert wq.min() >= -127 and wq.max() <= 127
    # every channel uses its full range: its largest magnitude maps to +-127
    assert np.all(np.abs(wq).reshape(6, -1).max(axis=1) == 127)
    # round-trip error at most half a step per channel
    err = np.abs(dequantize(wq, q) - w).reshape(6, -1).max(axis=1)
    assert np.all(err <= q.scales() / 2 * (1 + 1e-12))


def test_degenerate_range_gets_unit_scale():
    q = params_from_range(0.0, 0.0, INT8_ASYM)
    assert q.scale == 1.0
    q = params_from_range([0.0, -1.0], [0.0, 1.0], INT8_SYM_AXIS0)
    assert q.scales().tolist() == [1.0, 1 / 127]


def test_nnef_round_is_floor_of_x_plus_half():
    # NNEF 1.0 4.2.1: round(x) = floor(x + 0.5)
    assert nnef_round(np.array([0.5, -0.5, 1.5, 2.5, -2.5, 0.49, -0.51])).tolist() == \
        [1.0, 0.0, 2.0, 3.0, -2.0, 0.0, -1.0]
    q = QuantInfo(scale=1.0, zero_point=0)
    assert quantize([0.5, -0.5, 2.5], q).tolist() == [1, 0, 3]


def test_bad_ranges_are_errors():
    with pytest.raises(DataError, match="conv2"):
        params_from_range(-np.inf, 1.0, INT8_ASYM, what="conv2")
    with pytest.raises(UnsupportedError):
        params_from_range([-1.0, -1.0], [1.0, 1.0], INT8_ASYM)   # two ranges, per tensor
    with pytest.raises(UnsupportedError):
        params_from_range(1.0, -1.0, INT8_ASYM)


def test_bias_scale_is_input_times_weight_scale():
    inp = params_from_range(-1.0, 3.0, INT8_ASYM)
    wq = params_from_range([-0.5, -2.0], [0.5, 2.0], INT8_SYM_AXIS0)
    bq = bias_quant(inp, wq)
    assert bq.bits == 32 and bq.axis == 0 and np.all(bq.zero_points() == 0)
    np.testing.assert_array_equal(bq.scales(), inp.scale * wq.scales())
    b = np.array([0.1, -0.2])
    qb = quantize_bias(b, bq)
    np.testing.assert_array_equal(qb, np.round(b / (inp.scale * wq.scales())).astype(np.int64))
    with pytest.raises(UnsupportedError, match="fc.bias"):
        quantize_bias(np.array([1e9, 0.0]), bq, what="fc.bias")
    assert bias_quant(inp, wq, DType.I48).bits == 48


def test_config_defaults_and_16x8():
    cfg = QuantConfig()
    assert cfg.activation_scheme() == INT8_ASYM
    assert cfg.weight_scheme(0) == INT8_SYM_AXIS0
    assert QuantConfig(weight_granularity=Granularity.PER_TENSOR).weight_scheme(0).channel_axis is None
    wide = QuantConfig(precision=Precision.INT16X8)
    act = wide.activation_scheme()
    assert (act.bits, act.symmetric, act.dtype) == (16, True, DType.I16)
    assert wide.precision.accumulator_dtype is DType.I48
    q = params_from_range(-3.0, 1.0, act)
    assert q.zero_point == 0 and q.scale == pytest.approx(3 / 32767)


def test_per_channel_quantize_checks_shape():
    q = params_from_range([-1.0] * 3, [1.0] * 3, INT8_SYM_AXIS0)
    with pytest.raises(UnsupportedError, match="axis 0"):
        quantize(np.zeros((4, 2)), q)
