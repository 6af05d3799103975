"""TABLE generation: spec tables, error bounds against the float functions, monotonicity."""
import math

import numpy as np
import pytest

from qsim.errors import UnsupportedError
from qsim.ir import QuantInfo
from qsim.quant.tosa.tables import (Int8Table, Int16Table, UnaryFunction, make_table, table_int8,
                               table_int16)

# float oracles written independently of qsim.quant.tosa.tables (plain math module, per element)
ORACLE = {
    UnaryFunction.SIGMOID: lambda x: 1.0 / (1.0 + math.exp(-x)),
    UnaryFunction.TANH: math.tanh,
    UnaryFunction.EXP: math.exp,
    UnaryFunction.GELU: lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    UnaryFunction.SILU: lambda x: x / (1.0 + math.exp(-x)),
    UnaryFunction.ELU: lambda x: math.exp(x) - 1.0 if x < 0 else x,
    UnaryFunction.SOFTPLUS: lambda x: math.log(math.exp(x) + 1.0),
    UnaryFunction.HARD_SWISH: lambda x: x * min(max(x + 3.0, 0.0), 6.0) / 6.0,
}

# the activation functions over the whole real line; the other UnaryFunction members
# (math.log, math.sin, ...) are tested through the lowering in test_lower.py
ALL = list(ORACLE)


def oracle(fn, x):
    return np.array([ORACLE[fn](float(v)) for v in np.ravel(x)]).reshape(np.shape(x))


def int8_quant(lo, hi):
    scale = (hi - lo) / 255
    return QuantInfo(scale=scale, zero_point=int(-128 - math.floor(lo / scale + 0.5)))


def int16_quant(peak):
    return QuantInfo(scale=peak / 32767, zero_point=0, bits=16, symmetric=True)


def output_range(fn, x):
    y = oracle(fn, x)
    return min(y.min(), 0.0), max(y.max(), 0.0)


@pytest.mark.parametrize("fn", ALL)
def test_int8_table_within_half_lsb(fn):
    qin = int8_quant(-6.0, 4.0)
    x = (np.arange(-128, 128) - qin.zero_point) * qin.scale
    lo, hi = output_range(fn, x)
    qout = int8_quant(lo, hi)
    t = make_table(fn, qin, qout)
    assert isinstance(t, Int8Table) and t.table.dtype == np.int8 and t.table.shape == (256,)
    got = (t.lookup(np.arange(-128, 128)).astype(np.float64) - qout.zero_point) * qout.scale
    err = np.abs(got - oracle(fn, x)) / qout.scale
    assert err.max() <= 0.5 + 1e-9
    if fn.monotone:
        assert np.all(np.diff(t.table.astype(int)) >= 0)


def test_int8_table_saturates_outside_output_range():
    qin = int8_quant(-4.0, 4.0)
    qout = int8_quant(-0.5, 0.5)          # tanh reaches +-1: clipped to the grid ends
    t = table_int8(UnaryFunction.TANH, qin, qout)
    assert t.table[0] == -128 and t.table[-1] == 127


def interpolation_slack(fn, qin, qout):
    """|f - piecewise linear interpolation of f on the 9.7 grid| per int16 input, in LSBs."""
    v = np.arange(-32768, 32768)
    i0 = (v + 32768) >> 7
    x0 = (128 * (i0 - 256)) * qin.scale
    x1 = x0 + 128 * qin.scale
    frac = (v & 127) / 128.0
    grid = oracle(fn, (128 * np.arange(-256, 257)) * qin.scale)
    interp = grid[i0] * (1 - frac) + grid[i0 + 1] * frac
    return np.abs(oracle(fn, v * qin.scale) - interp) / qout.scale, x0, x1


@pytest.mark.parametrize("fn", ALL)
def test_int16_table_within_one_lsb_plus_interpolation_error(fn):
    qin = int16_quant(8.0)
    x_all = np.arange(-32768, 32769) * qin.scale
    lo, hi = output_range(fn, x_all[::64])
    qout = int16_quant(max(-lo, hi) * 1.001)
    t = make_table(fn, qin, qout)
    assert isinstance(t, Int16Table) and t.table.dtype == np.int16 and t.table.shape == (513,)
    assert (int(t.output_rescale.multiplier[0]), int(t.output_rescale.shift[0])) == (1 << 14, 21)
    v = np.arange(-32768, 32768)
    got = t.evaluate(v).astype(np.float64) * qout.scale
    slack, _, _ = interpolation_slack(fn, qin, qout)
    err = np.abs(got - oracle(fn, v * qin.scale)) / qout.scale
    assert np.all(err <= 1.0 + slack + 1e-9)
    if fn.monotone:
        assert np.all(np.diff(t.table.astype(int)) >= 0)
        assert np.all(np.diff(t.evaluate(v).astype(int)) >= 0)


def spec_reference_table(f, steps_per_unit):
    """The SIGMOID/TANH tables written out in TOSA 2.4.2/2.4.3, round = floor(x + 0.5)."""
    out = []
    for x in range(-256, 257):
        value = math.floor(32768.0 * f(x / steps_per_unit) + 0.5)
        out.append(min(max(value, -32768), 32767))
    return np.array(out)


def test_sigmoid_table_equals_the_spec_table():
    # sigmoid_reference: x/16 per entry → input scale 1/(16*128), output 1/32768
    qin = QuantInfo(scale=2.0 ** -11, zero_point=0, bits=16)
    qout = QuantInfo(scale=2.0 ** -15, zero_point=0, bits=16)
    t = table_int16(UnaryFunction.SIGMOID, qin, qout)
    expected = spec_reference_table(lambda v: 1.0 / (1.0 + math.exp(-v)), 16)
    assert np.array_equal(t.table.astype(np.int64), expected)


def test_tanh_table_equals_the_spec_table():
    # tanh_reference: x/32 per entry → input scale 1/(32*128)
    qin = QuantInfo(scale=2.0 ** -12, zero_point=0, bits=16)
    qout = QuantInfo(scale=2.0 ** -15, zero_point=0, bits=16)
    t = table_int16(UnaryFunction.TANH, qin, qout)
    expected = spec_reference_table(lambda v: (1 - math.exp(-2 * v)) / (1 + math.exp(-2 * v)), 32)
    assert np.array_equal(t.table.astype(np.int64), expected)


def test_generic_function_and_attributes():
    qin = int8_quant(-4.0, 4.0)
    qout = int8_quant(-4.0, 4.0)
    identity = table_int8(lambda x: x, qin, qin)
    assert np.array_equal(identity.table.astype(int), np.arange(-128, 128))
    e1 = table_int8(UnaryFunction.ELU, qin, qout)
    e2 = table_int8(UnaryFunction.ELU, qin, qout, alpha=2.0)
    assert np.all(e2.table[:60].astype(int) <= e1.table[:60].astype(int))
    assert np.array_equal(e1.table[200:], e2.table[200:])
    g = table_int8(UnaryFunction.GELU, qin, qout, approximate="TANH")
    assert np.max(np.abs(g.table.astype(int) - table_int8(UnaryFunction.GELU, qin, qout).table)) <= 1


def test_errors():
    q8 = int8_quant(-1.0, 1.0)
    per_channel = QuantInfo(scale=np.array([0.1, 0.2]), zero_point=np.zeros(2, int), axis=0)
    with pytest.raises(UnsupportedError, match="act1: a TABLE needs per-tensor input"):
        table_int8(UnaryFunction.EXP, per_channel, q8, what="act1")
    with pytest.raises(UnsupportedError, match="unknown attribute"):
        table_int8(UnaryFunction.TANH, q8, q8, alpha=1.0)
    with pytest.raises(UnsupportedError, match="approximate"):
        table_int8(UnaryFunction.GELU, q8, q8, approximate="CUBIC")
    with pytest.raises(UnsupportedError, match="int8 → int8 and int16 → int16"):
        make_table(UnaryFunction.EXP, q8, int16_quant(1.0))
    with pytest.raises(UnsupportedError, match="NaN"):
        table_int8(np.log, q8, q8)
    # a step from -1 to 1 with a fine output scale: entries jump from -32768 to 32767
    step = lambda x: np.where(x < 0, -1.0, 1.0)
    with pytest.raises(UnsupportedError, match="step1: the function changes by 65535"):
        table_int16(step, int16_quant(1.0), int16_quant(0.5), what="step1")
