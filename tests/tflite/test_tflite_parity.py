"""qsim's integer execution of TFLite models equals LiteRT's reference kernels (BUILTIN_REF),
element for element: per operator on seeded inputs and corners (both rails, -128 everywhere,
the zero point everywhere, alternating rails), every tensor of the issue's small CNN, and the
arithmetic pieces (multiplier derivation, double rounding, the fixed-point softmax) against
TFLite's formulas."""
from __future__ import annotations

import numpy as np
import pytest

from qsim.quant.tosa.tflite.arith import activation_bound, add_multipliers, quantize_multiplier
from qsim.quant.tosa.tflite.fixedpoint import rounding_divide_by_pot, softmax_int8, srdhm
from qsim.tosa import arith
from tests.tflite import op_models
from tests.tflite.harness import corner_inputs, parity, run_litert, tensor_parity



@pytest.mark.parametrize("backend", ["reference", "kernels"])
@pytest.mark.parametrize("name", sorted(op_models.OPERATORS))
def test_operator_equals_litert_reference(name, backend):
    data, shape, zp = op_models.OPERATORS[name]()
    result = parity(data, corner_inputs(tuple(shape), zp, count=6), backend)
    assert result.elements > 0
    assert result.differing == 0, result


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_16x8_conv_and_add_equal_litert(backend):
    """int16 activations, int8 weights, int64 bias (int48 accumulator in TOSA), seeded int16
    inputs and the int16 rails."""
    data, shape, zp = op_models.conv_16x8()
    result = parity(data, corner_inputs(tuple(shape), zp, dtype=np.int16, count=6), backend)
    assert result.elements == 10 * 144 and result.differing == 0, result


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_small_cnn_equals_litert_on_every_tensor(backend):
    data, shape, zp = op_models.small_cnn()
    result = tensor_parity(data, corner_inputs(tuple(shape), zp, count=8), backend)
    assert {"conv1", "dw", "pw", "residual", "pool", "gap", "logits", "probabilities"} <= set(result)
    for name, p in result.items():
        assert p.differing == 0, (name, p)


@pytest.mark.parametrize("scale", [0.004, 0.02, 0.1, 0.25, 0.5, 1.3])
def test_softmax_reference_is_tflite_arithmetic(scale):
    """The numpy transcription of TFLite's int8 softmax (the tables' source) equals LiteRT,
    on seeded rows, constant rows (every exp 1), one-hot rows (sum a power of two)."""
    data, _, _ = op_models.softmax(scale)
    rng = np.random.default_rng(11)
    rows = [rng.integers(-128, 128, (1, 10)).astype(np.int8) for _ in range(40)]
    rows += [np.full((1, 10), v, np.int8) for v in (-128, 0, 127)]
    one_hot = np.full((1, 10), -128, np.int8)
    one_hot[0, 4] = 127
    rows.append(one_hot)
    for x in rows:
        np.testing.assert_array_equal(softmax_int8(x, np.float32(scale)), run_litert(data, x)[0])


def tflite_multiply_by_quantized_multiplier(x, multiplier: int, exponent: int):
    """TFLite's reference MultiplyByQuantizedMultiplier (double rounding), in int64 numpy."""
    left, right = max(exponent, 0), max(-exponent, 0)
    return rounding_divide_by_pot(srdhm(np.asarray(x, np.int64) * (1 << left), multiplier), right)


@pytest.mark.parametrize("real", [2.0 ** -31, 1e-9, 0.000123, 0.0078125, 0.3, 0.5, 0.7071, 0.999999, 1.0, 1.5,
                                  3.9])
def test_tosa_double_round_is_tflite_multiply_by_quantized_multiplier(real):
    """apply_scale_32(double_round) equals SaturatingRoundingDoublingHighMul then
    RoundingDivideByPOT on seeded values, the int32 rails' neighbourhood and every tie of the
    two roundings (x such that x * multiplier is an odd multiple of 2^30 or 2^(shift - 1))."""
    multiplier, shift = quantize_multiplier(real)
    exponent = 31 - shift
    assert multiplier == 0 or 1 << 30 <= multiplier < 1 << 31
    rng = np.random.default_rng(5)
    bound = 1 << (shift - 2) if shift < 33 else 1 << 31
    bound = min(bound, (1 << 31) >> max(exponent, 0))    # TFLite's x * 2^exponent stays in int32
    x = np.concatenate([rng.integers(-bound, bound, 20000), np.arange(-600, 600),
                        [-bound, bound - 1, -bound + 1, bound - 2]])
    if multiplier:
        ties = [k for k in range(-64, 64)]
        x = np.concatenate([x, np.round(np.array(ties) * 2.0 ** (shift - 1) / multiplier).astype(np.int64)])
        x = x[(x >= -bound) & (x < bound)]
    got = arith.apply_scale_32(x, multiplier, shift, True)
    want = tflite_multiply_by_quantized_multiplier(x, multiplier, exponent)
    np.testing.assert_array_equal(got, want)


def test_quantize_multiplier_matches_frexp_rounding():
    """QuantizeMultiplier: frexp, round(q * 2^31) half away from zero, 2^31 carried into the
    exponent; a scale just below a power of two rounds up to it."""
    assert quantize_multiplier(0.5) == (1 << 30, 31)
    assert quantize_multiplier(1.0) == (1 << 30, 30)
    assert quantize_multiplier(np.nextafter(1.0, 0.0)) == (1 << 30, 30)
    assert quantize_multiplier(0.0) == (0, 31)
    assert quantize_multiplier(2.0 ** -40) == (0, 31)


def test_add_multipliers_are_tflites():
    """ADD int8: twice the larger input scale, 20-bit left shift (add.cc)."""
    (m1, s1), (m2, s2), (mo, so) = add_multipliers(0.05, 0.1, 0.2, 20)
    assert (m1, s1) == quantize_multiplier(0.05 / 0.2) and (m2, s2) == quantize_multiplier(0.5)
    assert (mo, so) == quantize_multiplier(0.2 / (2 ** 20 * 0.2))


@pytest.mark.parametrize("value, scale, zp, expected", [(6.0, 0.03, -128, 72), (6.0, 6.0 / 255, -128, 127),
                                                         (6.0, 0.048, -128, -3), (0.0, 0.1, 5, 5),
                                                         (-1.0, 0.008, 0, -125), (1.0, 0.016, 0, 62),
                                                         (0.625, 0.25, 0, 3), (-0.625, 0.25, 1, -2)])
def test_activation_bounds_round_to_nearest(value, scale, zp, expected):
    """zero point + round(bound / scale) with the quotient in float32, half away from zero:
    6 / 0.048 = 125 -> -3; 1 / float32(0.016) = 62.49999... -> 62; ties 2.5 -> 3, -2.5 -> -3."""
    assert activation_bound(value, scale, zp) == expected


@pytest.mark.parametrize("builtin", ["LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU"])
def test_int8_activations_equal_litert_on_every_code_at_random_grids(builtin):
    """All 256 input codes at 8 seeded (input scale, zero point, output grid) choices; LOGISTIC
    and TANH on TFLite's fixed output grids (1/256, -128) and (1/128, 0)."""
    from qsim.tflite.writer import Options
    from tests.tflite.harness import LEAKY_RELU_OPTIONS, Net
    rng = np.random.default_rng(21)
    codes = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    for _ in range(8):
        n = Net(0)
        x = n.act([1, 256], float(rng.uniform(0.005, 0.3)), int(rng.integers(-128, 128)), name="x")
        grid = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}.get(
            builtin, (float(rng.uniform(0.005, 0.1)), int(rng.integers(-128, 0))))
        y = n.act([1, 256], *grid, name="y")
        options = Options(LEAKY_RELU_OPTIONS, [(0, "f32", float(rng.uniform(0.01, 0.9)))]) \
            if builtin == "LEAKY_RELU" else None
        n.op(builtin, [x], [y], options)
        result = parity(n.finish([x], [y]), [codes])
        assert result.elements == 256 and result.differing == 0, (builtin, result)


def test_float_io_model_keeps_names_and_equals_litert():
    """QUANTIZE of the float input becomes the input's parameters, DEQUANTIZE keeps the output's
    TFLite name; fed LiteRT's own quantized input, qsim's integer output dequantizes to LiteRT's
    float output exactly."""
    from tests.tflite.harness import lower, litert, run_qsim
    data = op_models.float_io()
    graph, lowered = lower(data)
    assert graph.inputs == ("image",) and graph.outputs == ("scores",)
    assert lowered.input_quant[lowered.graph.inputs[0]].zero_point == 4
    rng = np.random.default_rng(8)
    for _ in range(4):
        x = (rng.normal(size=(1, 8, 8, 3)) * 2).astype(np.float32)
        it = litert(data, x)
        codes = it.get_tensor(1)                                  # image_q, LiteRT's QUANTIZE
        ours = run_qsim(lowered, graph, codes)[0]
        want = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_array_equal((ours.astype(np.float32) + 9) * np.float32(0.07), want)


def test_tflite_tensors_round_twice_whatever_the_run_option():
    """quantize_graph with the default options (single rounding) still rescales a .tflite
    model's tensors as TFLite does: the small CNN's output equals LiteRT's."""
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.pipeline import quantize_graph
    from qsim.tflite.load import convert_model
    from qsim.tflite.model import parse_model
    from tests.tflite.harness import run_qsim
    data, shape, zp = op_models.small_cnn()
    graph = convert_model(parse_model(data))
    lowered = quantize_graph(graph, None, None, QuantizeOptions(show_progress=False, eval_limit=1)).model
    rescales = [op for op in lowered.graph.ops if op.kind.name == "tosa.RESCALE" and int(op.attrs["shift"].max()) > 31]
    # LiteRT's int8 FULLY_CONNECTED rounds once (docs/tflite.md), every other kernel twice
    linear = [op for op in rescales if op.name.startswith("nn.linear")]
    assert linear and not any(op.attrs["double_round"] for op in linear)
    assert len(rescales) > len(linear) and all(op.attrs["double_round"] for op in rescales if op not in linear)
    for x in corner_inputs(tuple(shape), zp, count=4):
        np.testing.assert_array_equal(run_qsim(lowered, graph, x)[0], run_litert(data, x)[0])
