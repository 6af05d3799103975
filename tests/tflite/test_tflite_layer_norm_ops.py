"""The builtins of TFLite's int8 LayerNormalization (what TensorFlow's converter writes for a
Keras transformer encoder): RSQRT, SQUARED_DIFFERENCE, NEG (int8, and the float NEG between
DEQUANTIZE and QUANTIZE), each against LiteRT's reference kernels (BUILTIN_REF) element for
element: every input code at seeded grids for the unary ones, seeded inputs and the corners
(rails, -128 everywhere, the zero point, alternating rails) for SQUARED_DIFFERENCE, with
output grids narrow enough that both int8 rails saturate."""
from __future__ import annotations

import numpy as np
import pytest

from qsim.quant.tosa.tflite.rules_unary import inv_sqrt_multiplier
from qsim.tflite.writer import Options
from tests.tflite.harness import REDUCER_OPTIONS, Net, corner_inputs, parity, run_litert, tensor_parity

CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


def _unary_model(builtin, in_grid, out_grid, version=1) -> bytes:
    n = Net(0)
    x = n.act([1, 256], *in_grid, name="x")
    y = n.act([1, 256], *out_grid, name="y")
    n.op(builtin, [x], [y], None, version)
    return n.finish([x], [y])


def _grids(seed: int, count: int = 8):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (float(rng.uniform(0.0005, 0.3)), int(rng.integers(-128, 128)),
               float(rng.uniform(0.002, 0.2)), int(rng.integers(-128, 128)))


def test_rsqrt_equals_litert_on_every_defined_code():
    """Every code at or above the input zero point (below it LiteRT stops: a negative real
    input), including zp itself (v = 0 gives 127) and v = 1 (TFLite's special case), at
    seeded grids, some of whose outputs saturate at 127 (rsqrt is positive: the low rail is
    the output zero point)."""
    saturated = set()
    for s_in, zp_in, s_out, zp_out in _grids(31, 12):
        codes = np.maximum(CODES, zp_in).astype(np.int8)
        result = parity(_unary_model("RSQRT", (s_in, zp_in), (s_out, zp_out), version=2), [codes])
        assert result.elements == 256 and result.differing == 0, (s_in, zp_in, s_out, zp_out, result)
        out = run_litert(_unary_model("RSQRT", (s_in, zp_in), (s_out, zp_out), version=2), codes)[0]
        saturated |= {int(v) for v in (out.min(), out.max()) if v in (-128, 127)}
    assert 127 in saturated


def test_inv_sqrt_multiplier_is_one_over_sqrt():
    """The fixed-point 1/sqrt(v) = multiplier 2^shift / 2^31 within 2e-6 relative (TFLite's
    five Newton steps from 1 on a normalised input in [1/4, 1) leave about 1.2e-6 where the
    root is near 2; a wrong step or normalisation is off by far more), over v = 2 .. 4095
    and the values around every bit-pair normalisation step."""
    values = list(range(2, 4096)) + [(1 << k) + d for k in range(12, 31) for d in (-1, 0, 1)]
    for v in values:
        m, shift = inv_sqrt_multiplier(v)
        got = m * 2.0 ** shift / 2.0 ** 31
        assert abs(got * np.sqrt(v) - 1.0) < 2e-6, v
    assert inv_sqrt_multiplier(1) == (2**31 - 1, 0)


def test_int8_neg_equals_litert_on_every_code():
    """NEG int8 (equal scales, any zero points) as LiteRT computes it: the code negated,
    -128 wrapping to -128, the zero points unread."""
    for s_in, zp_in, _, zp_out in _grids(32):
        result = parity(_unary_model("NEG", (s_in, zp_in), (s_in, zp_out)), [CODES])
        assert result.elements == 256 and result.differing == 0, (s_in, zp_in, zp_out, result)


def _float_neg_model(s, zp_in, zp_out) -> bytes:
    """x -> DEQUANTIZE -> NEG (float32) -> QUANTIZE -> y: the converter's form of -mean."""
    n = Net(0)
    x = n.act([1, 256], s, zp_in, name="x")
    xf = n.w.tensor("xf", np.float32, [1, 256])
    nf = n.w.tensor("neg", np.float32, [1, 256])
    y = n.act([1, 256], s, zp_out, name="y")
    n.op("DEQUANTIZE", [x], [xf], None, 2)
    n.op("NEG", [xf], [nf])
    n.op("QUANTIZE", [nf], [y])
    return n.finish([x], [y])


def test_float_neg_between_dequantize_and_quantize_equals_litert():
    for s, zp_in, _, zp_out in _grids(33):
        result = parity(_float_neg_model(s, zp_in, zp_out), [CODES])
        assert result.elements == 256 and result.differing == 0, (s, zp_in, zp_out, result)


def _squared_difference_model(seed: int, broadcast: bool) -> tuple[bytes, tuple]:
    """x [1, 8, 16]; y = MEAN(x, last axis, kept) (broadcast) or a seeded int8 constant on its
    own grid; out = SQUARED_DIFFERENCE(x, y) on a seeded grid."""
    rng = np.random.default_rng(seed)
    n = Net(seed)
    shape = (1, 8, 16)
    s_x, zp_x = float(rng.uniform(0.01, 0.1)), int(rng.integers(-100, 100))
    x = n.act(list(shape), s_x, zp_x, name="x")
    if broadcast:
        y = n.act([1, 8, 1], float(rng.uniform(0.001, 0.05)), int(rng.integers(-100, 100)), name="mean")
        n.op("MEAN", [x, n.const("axis", np.int32, [2])], [y], Options(REDUCER_OPTIONS, [(0, "bool", True)]), 2)
    else:
        y = n.w.tensor("other", np.int8, list(shape), data=rng.integers(-128, 128, shape).astype(np.int8),
                       scale=float(rng.uniform(0.005, 0.2)), zero_point=int(rng.integers(-50, 50)))
    # an output grid narrow enough that large squares saturate at 127
    out = n.act(list(shape), float(rng.uniform(0.005, 0.05)), -128, name="out")
    n.op("SQUARED_DIFFERENCE", [x, y], [out], None, 2)
    return n.finish([x], [out]), (shape, zp_x)


@pytest.mark.parametrize("broadcast", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_squared_difference_equals_litert(seed, broadcast):
    data, (shape, zp) = _squared_difference_model(seed, broadcast)
    result = tensor_parity(data, corner_inputs(shape, zp, seed=seed, count=6))
    assert result["out"].elements == 10 * 128
    for name, p in result.items():
        assert p.differing == 0, (name, p)


def _fc_model(seed: int, per_channel: bool, act: int = 0) -> tuple[bytes, tuple]:
    """FULLY_CONNECTED keep_num_dims on [1, 64, 128] tokens (the encoder's projections),
    no bias, per-channel or per-tensor weights, optionally a fused RELU."""
    from tests.tflite.harness import FC_OPTIONS
    rng = np.random.default_rng(seed)
    n = Net(seed)
    zp = int(rng.integers(-20, 20))
    x = n.act([1, 64, 128], float(rng.uniform(0.02, 0.05)), zp, name="x")
    k = n.weights([96, 128], per_channel=per_channel)
    y = n.act([1, 64, 96], float(rng.uniform(0.02, 0.05)), int(rng.integers(-10, 10)), name="y")
    n.op("FULLY_CONNECTED", [x, k, -1], [y],
         Options(FC_OPTIONS, [(0, "i8", act), (1, "i8", 0), (2, "bool", True)]), 5)
    return n.finish([x], [y]), ((1, 64, 128), zp)


@pytest.mark.parametrize("per_channel, act", [(True, 0), (False, 0), (True, 1)])
def test_token_fully_connected_equals_litert(per_channel, act):
    """LiteRT rounds an int8 FULLY_CONNECTED's accumulator once (64-bit), per-tensor or
    per-channel, where its convolutions round twice: seeded token batches put accumulators
    near the ties where the two differ (double rounding differed on 47 of 61,440 elements
    here, and on 2 of 8,192 in the encoder's first projection)."""
    for seed in range(3):
        data, (shape, zp) = _fc_model(seed, per_channel, act)
        result = parity(data, corner_inputs(shape, zp, seed=seed, count=6))
        assert result.elements == 10 * 64 * 96 and result.differing == 0, (seed, result)
