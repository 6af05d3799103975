"""Corner-case generator (qsim/npu/corner_cases.py): every case hits its corner (checked from
the TOSA reference values and hand arithmetic), the NPU model engine reproduces the expected
outputs bit-exactly in both dataflows, and generation is reproducible from the seed."""
import numpy as np
import pytest

from qsim.errors import UsageError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu import corner_cases as cc
from qsim.npu.config import load_config

INT32_MAX, INT32_MIN = 2**31 - 1, -2**31


@pytest.fixture(scope="module")
def cases():
    generated = cc.generate(None, seed=7)
    return {case.kind: (case, cc.reference_steps(case)) for case in generated}


def _values(steps):
    acc = steps[0].outputs[0].astype(np.int64)
    rescaled = steps[1].outputs[0].astype(np.int64)
    return acc, rescaled, steps[-1].outputs[0].astype(np.int64)


def _exact_scaled(acc, case):
    """acc * multiplier / 2^shift as exact rationals (numerator, denominator) per element."""
    mult = case.rescale["multiplier"].astype(object)
    shift = case.rescale["shift"].astype(np.int64)
    return acc.astype(object) * mult, np.array([1 << int(s) for s in shift], dtype=object)


def test_one_case_per_kind(cases):
    assert list(cases) == list(cc.KINDS)


def test_saturation_hits_both_rails(cases):
    case, steps = cases["saturation"]
    acc, _, out = _values(steps)
    num, den = _exact_scaled(acc, case)
    real = num / den + case.rescale["output_zp"]
    assert (real > 127).any() and (real < -128).any()          # the scale pushes past both rails
    assert (out == 127).any() and (out == -128).any()


def test_clamp_rails(cases):
    case, steps = cases["clamp_rails"]
    _, rescaled, out = _values(steps)
    lo, hi = case.clamp["min_val"], case.clamp["max_val"]
    assert -128 < lo and hi < 127
    assert (rescaled < lo).any() and (rescaled > hi).any()
    assert (out == lo).any() and (out == hi).any()


def test_neg128_squared(cases):
    case, steps = cases["neg128_squared"]
    acc, _, _ = _values(steps)
    assert (case.inputs[0] == -128).all() and (case.attrs["weight"] == -128).all()
    assert case.attrs["input_zp"] == case.attrs["weight_zp"] == 0
    k = 3 * 3 * case.inputs[0].shape[-1]
    # no padding: every output sums k products (-128)(-128) = 16384, plus the bias
    np.testing.assert_array_equal(acc, np.broadcast_to(k * 16384 + case.attrs["bias"].astype(np.int64), acc.shape))


@pytest.mark.parametrize("kind,value", [("zero_points_min", -128), ("zero_points_max", 127)])
def test_zero_points_at_the_extremes(cases, kind, value):
    case, steps = cases[kind]
    _, _, out = _values(steps)
    assert case.attrs["input_zp"] == case.attrs["weight_zp"] == case.rescale["output_zp"] == value
    assert any(case.attrs["pad"])                     # padded taps read input_zp
    assert len(np.unique(out)) > 20                   # not all saturated on one rail


@pytest.mark.parametrize("kind", ["ties_single", "ties_double"])
def test_rounding_ties(cases, kind):
    case, steps = cases[kind]
    acc, rescaled, _ = _values(steps)
    num, den = _exact_scaled(acc, case)
    ties = np.vectorize(lambda n, d: n % d == d // 2)(num, den)
    assert (ties & (acc > 0)).any() and (ties & (acc < 0)).any()
    if kind == "ties_double":
        assert case.rescale["double_round"] and (case.rescale["shift"] > 31).all()
        from qsim import tosa
        single, = tosa.run("RESCALE", [steps[0].outputs[0]], {**case.rescale, "double_round": False})
        assert (single.astype(np.int64) != rescaled).any()


@pytest.mark.parametrize("kind,limit", [("acc_max", INT32_MAX), ("acc_min", INT32_MIN)])
def test_accumulator_at_the_int32_limits(cases, kind, limit):
    case, steps = cases[kind]
    acc, _, _ = _values(steps)
    assert acc[0, 0] == limit and acc[2, 0] == limit
    # the array's own sums (before the bias) are within 33023 of 2^31: 33025 * 255 * 255
    sums = acc[:, 0] - case.attrs["bias"][0]
    assert abs(abs(int(sums[0])) - 2**31) <= 33023
    assert case.inputs[0].shape[1] == cc.LIMIT_K


def test_k_longer_than_the_array(cases):
    case, _ = cases["k_longer_than_array"]
    oc, kh, kw, ic = case.attrs["weight"].shape
    assert kh * kw * ic > 64 and oc % 16 and oc % 8


def test_transposed_conv_hits_both_rails_with_extreme_zero_points(cases):
    case, steps = cases["transposed_conv"]
    out = steps[-1].outputs[0]
    assert case.op == "TRANSPOSE_CONV2D" and tuple(case.attrs["stride"]) == (3, 2)
    assert (case.attrs["input_zp"], case.attrs["weight_zp"]) == (-128, 127)
    assert (out == -128).any() and (out == 127).any()


GEOMETRIES = [load_config("16x16").geometry, load_config("8x8:os").geometry,
              Geometry(4, 8, Dataflow.WEIGHT_STATIONARY, 4 * 64, 8 * 64, 4 * 8 * 32, 8)]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=["16x16-ws", "8x8-os", "4x8-ws-small-buffers"])
def test_npu_model_engine_reproduces_every_case(cases, geom):
    for kind, (case, steps) in cases.items():
        result = cc.run_on_npu(case, geom, engine="model")
        expected = steps[-1].outputs[0]
        assert result.output.dtype == expected.dtype
        np.testing.assert_array_equal(result.output, expected, err_msg=f"{kind} on {geom}")


def test_seeded_and_reproducible():
    n = len(cc.KINDS)
    a, b, c = cc.generate(n + 2, 3), cc.generate(n + 2, 3), cc.generate(n + 2, 4)
    assert [x.name for x in a] == [x.name for x in b]
    assert a[n].kind == "saturation" and a[n].name == "saturation_v1"
    for x, y in zip(a, b):
        for u, v in zip(x.inputs, y.inputs):
            np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(x.inputs[0], y.inputs[0]) for x, y in zip(a, c))


@pytest.mark.parametrize("count,seed", [(0, 0), (1001, 0), (True, 0), (3, -1)])
def test_bad_count_or_seed(count, seed):
    with pytest.raises(UsageError):
        cc.generate(count, seed)


@pytest.mark.parametrize("kind,dataflow", [("neg128_squared", Dataflow.WEIGHT_STATIONARY),
                                           ("zero_points_max", Dataflow.OUTPUT_STATIONARY),
                                           ("ties_double", Dataflow.WEIGHT_STATIONARY),
                                           ("clamp_rails", Dataflow.OUTPUT_STATIONARY),
                                           ("transposed_conv", Dataflow.WEIGHT_STATIONARY)])
def test_rtl_reproduces_corner_cases_on_a_small_array(cases, kind, dataflow):
    """The Amaranth RTL (4x4 array) on the cheaper corners: values equal the TOSA reference;
    the engine itself checks its cycle count against the model's."""
    case, steps = cases[kind]
    geom = Geometry(4, 4, dataflow, 4 * 64, 4 * 64, 16 * 32, 8)
    result = cc.run_on_npu(case, geom, engine="amaranth")
    np.testing.assert_array_equal(result.output, steps[-1].outputs[0])
