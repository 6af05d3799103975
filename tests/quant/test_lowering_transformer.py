"""Integer lowerings a transformer encoder needs: batched MatMul (constant and computed operands),
layer norm, softmax over attention scores, gather; replayed on the TOSA reference and the kernels
(bit for bit, `_run_both`), checked against independent integer/float formulas, corners included."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
import qsim.onnx
from qsim import ir
from qsim.cli import main
from qsim.errors import UnsupportedError
from qsim.quant.calibration.data import Samples
from qsim.quant.params import Precision, QuantConfig, dequantize, quantize
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph
from qsim.quant.tosa.integer_newton import reciprocal_seed_table, rsqrt_seed_table
from qsim.quant.tosa.target import lower_graph
from qsim.runtime.executor import execute

from .lowering_models import FloatGraph, calibrate_minmax

TORCH_EXPORTS = Path(__file__).resolve().parents[1] / "onnx" / "torch_exports"
TRAINED = Path(__file__).resolve().parent / "transformer"      # make_encoder_classifier.py
from .test_target_tosa import _run_both, sqnr_db


def _kinds(model) -> list[str]:
    return [op.kind.name for op in model.graph.ops]


def _acc_of(model, values, kind="tosa.MATMUL"):
    """(inputs, output) integer arrays of the first op of `kind` in a run."""
    op = next(op for op in model.graph.ops if op.kind.name == kind)
    return [values[n] for n in op.inputs], values[op.outputs[0]], op


# ---------------------------------------------------------------- batched MatMul, constant B

@pytest.mark.parametrize("a_shape", [(1, 4, 64), (1, 2, 3, 16), (1, 16)])
def test_constant_b_of_any_a_rank_is_fully_connected_with_the_bias_folded(rng, a_shape):
    g = FloatGraph(rng)
    x = g.input("x", a_shape)
    k = a_shape[-1]
    m = g.op("linalg.matmul", [x, g.weights("w", (k, 24), 0.2)], "m", a_shape[:-1] + (24,))
    g.op("math.add", [m, g.weights("b", (24,), 0.3)], "y", a_shape[:-1] + (24,))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, a_shape).astype(np.float32) for _ in range(6)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    kinds = _kinds(model)
    assert kinds.count("tosa.FULLY_CONNECTED") == 1 and "tosa.MATMUL" not in kinds
    assert "tosa.ADD" not in kinds                      # the bias went into FULLY_CONNECTED
    for x_in in calib[:2]:
        ints = _run_both(model, x_in)
        got = dequantize(ints["y"], model.output_quant["y"])
        assert got.shape == a_shape[:-1] + (24,)
        assert sqnr_db(execute(graph, {"x": x_in})["y"], got) > 30.0


def test_constant_b_with_batch_axes_is_a_matmul_per_output_channel(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 5, 8))
    g.op("linalg.matmul", [x, g.weights("w", (3, 8, 6), 0.3)], "y", (1, 3, 5, 6))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 3, 5, 8)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.MATMUL" in _kinds(model)
    matmul = next(op for op in model.graph.ops if op.kind.name == "tosa.MATMUL")
    rescale = next(op for op in model.graph.ops if op.kind.name == "tosa.RESCALE" and op.inputs[0] == matmul.outputs[0])
    assert rescale.attrs["per_channel"] and len(rescale.attrs["multiplier"]) == 6
    ints = _run_both(model, calib[0])
    assert sqnr_db(execute(graph, {"x": calib[0]})["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


# ---------------------------------------------------------------- MATMUL of computed operands

def _attention_scores(rng, heads: int, seq: int, dim: int):
    """q, k from one input (heads split as torch does); scores = q @ kᵀ with kᵀ a lazy transpose."""
    g = FloatGraph(rng)
    x = g.input("x", (1, heads, seq, dim))
    q = g.op("nn.relu", [x], "q", (1, heads, seq, dim))
    k = g.op("math.tanh", [x], "k", (1, heads, seq, dim))
    kt = g.op("layout.transpose", [k], "kt", (1, heads, dim, seq), perm=(0, 1, 3, 2))
    s = g.op("linalg.matmul", [q, kt], "s", (1, heads, seq, seq))
    p = g.op("nn.softmax", [s], "p", (1, heads, seq, seq), axes=(3,))
    g.op("linalg.matmul", [p, x], "y", (1, heads, seq, dim))
    return g.graph(["s", "p", "y"])


@pytest.mark.parametrize("heads, seq, dim", [(1, 5, 8), (2, 5, 8), (4, 7, 16)])
def test_attention_qk_and_av_are_matmuls_matching_integer_products(rng, heads, seq, dim):
    graph = _attention_scores(rng, heads, seq, dim)
    calib = [rng.normal(0, 1, (1, heads, seq, dim)).astype(np.float32) for _ in range(6)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert _kinds(model).count("tosa.MATMUL") == 2
    x_in = calib[1]
    ints = _run_both(model, x_in)
    (a, b), acc, op = _acc_of(model, ints)
    assert a.shape == (heads, seq, dim) and b.shape == (heads, dim, seq)
    expected = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - op.attrs["A_zp"],
                         b.astype(np.int64) - op.attrs["B_zp"])
    assert np.array_equal(acc, expected)
    floats = execute(graph, {"x": x_in})
    for name in ("s", "y"):
        assert sqnr_db(floats[name], dequantize(ints[name], model.output_quant[name])) > 25.0


def test_batch_axes_broadcast_by_tile(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 4, 5))
    a = g.op("nn.relu", [x], "a", (1, 3, 4, 5))
    b = g.op("layout.reshape", [g.op("math.tanh", [x], "t", (1, 3, 4, 5))], "b", (3, 5, 4), shape=(3, 5, 4))
    g.op("linalg.matmul", [a, b], "y", (1, 3, 4, 4))
    bt = g.op("layout.slice", [b], "b1", (1, 5, 4), axes=(0,), begin=(0,), end=(1,))
    g.op("linalg.matmul", [a, bt], "z", (1, 3, 4, 4))
    graph = g.graph(["y", "z"])
    calib = [rng.normal(0, 1, (1, 3, 4, 5)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.TILE" in _kinds(model)
    ints = _run_both(model, calib[2])
    floats = execute(graph, {"x": calib[2]})
    for name in ("y", "z"):
        assert sqnr_db(floats[name], dequantize(ints[name], model.output_quant[name])) > 25.0


def _two_operand_graph(rng, shape_a):
    """y = relu(x) @ xᵀ: two computed operands with their own grids."""
    g = FloatGraph(rng)
    x = g.input("x", shape_a)
    a = g.op("nn.relu", [x], "a", shape_a)
    b = g.op("layout.transpose", [x], "b", shape_a[:-2] + shape_a[-1:] + shape_a[-2:-1],
             perm=tuple(range(len(shape_a) - 2)) + (len(shape_a) - 1, len(shape_a) - 2))
    out = shape_a[:-1] + (shape_a[-2],)
    g.op("linalg.matmul", [a, b], "y", out)
    return g.graph(["y"])


@pytest.mark.parametrize("zp_a, zp_b", [(-128, -128), (127, 127), (-128, 127), (0, 0)])
@pytest.mark.parametrize("fill", [-128, 127])
def test_matmul_corners_rails_zero_points_and_long_sums(rng, zp_a, zp_b, fill):
    """Every element on one rail, operand zero points at their extremes, K = 4096: the
    accumulators reach 4096 * 255^2 (2^28) and must equal the int64 product exactly."""
    k = 4096
    graph = _two_operand_graph(rng, (1, 2, k))
    calib = [rng.normal(0, 1, (1, 2, k)).astype(np.float32)]
    qp = calibrate_minmax(graph, calib)
    qp["a"] = ir.QuantInfo(scale=0.01, zero_point=zp_a)
    qp["x"] = ir.QuantInfo(scale=0.02, zero_point=zp_b)
    qp["b"] = qp["x"]
    model = lower_graph(graph, qp)
    q = np.full((1, 2, k), fill, np.int8)
    x_real = dequantize(q, qp["x"]).astype(np.float32)
    ints = _run_both(model, x_real)
    assert np.array_equal(ints["x"], q)
    (a, b), acc, op = _acc_of(model, ints)
    assert (op.attrs["A_zp"], op.attrs["B_zp"]) == (zp_a, zp_b)
    expected = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - zp_a, b.astype(np.int64) - zp_b)
    assert np.array_equal(acc, expected)


def test_matmul_16x8_is_int16_times_int16_into_int48(rng):
    graph = _two_operand_graph(rng, (1, 2, 5, 8))
    calib = [rng.normal(0, 1, (1, 2, 5, 8)).astype(np.float32) for _ in range(4)]
    config = QuantConfig(precision=Precision.INT16X8)
    model = lower_graph(graph, calibrate_minmax(graph, calib, config), config)
    ops = [op for op in model.graph.ops if op.kind.name == "tosa.MATMUL"]
    assert ops and all(model.graph.tensors[op.outputs[0]].dtype is ir.DType.I48 for op in ops)
    ints = _run_both(model, calib[0])
    (a, b), acc, _ = _acc_of(model, ints)
    assert a.dtype == np.int16
    assert np.array_equal(acc, np.einsum("nhc,ncw->nhw", a.astype(np.int64), b.astype(np.int64)))
    floats = execute(graph, {"x": calib[0]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 50.0


def test_matmul_too_long_for_the_accumulator_is_refused(rng):
    k = 33100                        # 33100 * 255^2 > 2^31 - 1
    graph = _two_operand_graph(rng, (1, 1, k))
    qp = calibrate_minmax(graph, [rng.normal(0, 1, (1, 1, k)).astype(np.float32)])
    with pytest.raises(UnsupportedError) as err:
        lower_graph(graph, qp)
    assert "linalg.matmul 'y'" in err.value.message and "K = 33100" in err.value.message
    assert "accumulator" in err.value.message and err.value.hint


def test_matrix_vector_product_is_refused_with_a_hint(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 6))
    a = g.op("nn.relu", [x], "a", (1, 6))
    v = g.op("layout.reshape", [x], "v", (6,), shape=(6,))
    g.op("linalg.matmul", [a, v], "y", (1,))
    graph = g.graph(["y"])
    qp = {n: ir.QuantInfo(scale=0.05, zero_point=0) for n in ("x", "a", "v", "y")}
    with pytest.raises(UnsupportedError, match="matrix-vector") as err:
        lower_graph(graph, qp)
    assert "'y'" in err.value.message and "reshape" in err.value.hint


# ---------------------------------------------------------------- layer norm

def _layer_norm_graph(rng, shape, axes, eps=1e-5, gamma=True, beta=True, form="sqrt_div", perm=None):
    """A composed layer norm of x over `axes`; with `perm`, of a lazy transpose of the input
    (the normalized axes sit elsewhere in the integer layout)."""
    g = FloatGraph(rng)
    if perm is None:
        x = g.input("x", shape)
    else:
        src = g.input("x_in", tuple(shape[p] for p in np.argsort(perm)))
        x = g.op("layout.transpose", [src], "x", shape, perm=tuple(perm))
    red = tuple(1 if i in axes else e for i, e in enumerate(shape))
    mean = g.op("math.mean_reduce", [x], "mean", red, axes=axes)
    d = g.op("math.sub", [x, mean], "d", shape)
    if form == "pow":
        sq = g.op("math.pow", [d, g.const("two", 2.0)], "sq", shape)
    elif form == "mul":
        sq = g.op("math.mul", [d, d], "sq", shape)
    else:
        sq = g.op("math.sqr", [d], "sq", shape)
    var = g.op("math.mean_reduce", [sq], "var", red, axes=axes)
    v = g.op("math.add", [var, g.const("eps", eps)], "v", red)
    if form == "rsqrt":
        r = g.op("math.rsqrt", [v], "r", red)
        n = g.op("math.mul", [r, d], "n", shape)
    else:
        s = g.op("math.sqrt", [v], "s", red)
        n = g.op("math.div", [d, s], "n", shape)
    out = n
    norm_shape = tuple(shape[a] for a in axes)
    if gamma:
        out = g.op("math.mul", [out, g.const("gamma", rng.normal(0, 1, norm_shape))], "gy", shape)
    if beta:
        out = g.op("math.add", [out, g.const("beta", rng.normal(0, 0.5, norm_shape))], "y", shape)
    return g.graph([out]), out


def _exact_layer_norm(q_in, in_quant, axes, eps, gamma, beta, out_quant):
    """The layer norm of the dequantized input in float64, on the output grid (the best an
    integer implementation can give)."""
    x = dequantize(q_in, in_quant)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * np.asarray(gamma, np.float64)
    if beta is not None:
        y = y + np.asarray(beta, np.float64)
    zp, s = int(out_quant.zero_points()[0]), float(out_quant.scales()[0])
    bits = out_quant.bits
    return np.clip(np.floor(y / s + 0.5) + zp, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _affine_of(graph):
    data = {n: None if n not in graph.tensors else graph.tensors[n].data for n in ("gamma", "beta")}
    return float(graph.tensors["eps"].data), data["gamma"], data["beta"]


def _check_layer_norm(model, q_in, axes, out, affine, x="x"):
    x_real = dequantize(q_in, model.input_quant[x]).astype(np.float32)
    ints = _run_both(model, x_real)
    assert np.array_equal(ints[x], q_in)
    exact = _exact_layer_norm(q_in, model.input_quant[x], axes, *affine, model.output_quant[out])
    diff = np.abs(ints[out].astype(np.int64) - exact)
    assert diff.max() <= 1, f"max error {diff.max()} output steps"
    return ints, diff


@pytest.mark.parametrize("form", ["sqrt_div", "rsqrt", "pow", "mul"])
@pytest.mark.parametrize("shape, axes", [((1, 5, 16), (2,)), ((1, 3, 4, 6), (2, 3)), ((1, 7, 768), (2,))])
def test_layer_norm_is_integer_and_within_one_step_of_exact(rng, form, shape, axes):
    graph, out = _layer_norm_graph(rng, shape, axes, form=form)
    calib = [(rng.normal(0, 2, shape) + rng.normal(0, 1, shape[:-1] + (1,))).astype(np.float32)
             for _ in range(6)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    kinds = _kinds(model)
    assert all(k.startswith("tosa.") for k in kinds)
    assert {"tosa.CLZ", "tosa.TABLE", "tosa.REDUCE_SUM"} <= set(kinds) and "tosa.INTDIV" not in kinds
    q_in = quantize(calib[3], model.input_quant["x"]).astype(np.int8)
    _, diff = _check_layer_norm(model, q_in, axes, out, _affine_of(graph))
    assert (diff == 0).mean() > 0.9


@pytest.mark.parametrize("zp", [-128, 127, 0])
def test_layer_norm_corners(rng, zp):
    """Rows on the rails (the largest variance), constant rows (variance 0: the output is beta),
    one outlier per row, input zero points at both extremes."""
    shape, axes = (1, 6, 16), (2,)
    graph, out = _layer_norm_graph(rng, shape, axes)
    qp = calibrate_minmax(graph, [rng.normal(0, 1, shape).astype(np.float32) for _ in range(4)])
    qp["x"] = ir.QuantInfo(scale=0.05, zero_point=zp)
    model = lower_graph(graph, qp)
    q = np.zeros(shape, np.int64)
    q[0, 0] = np.where(np.arange(16) % 2, 127, -128)          # alternating rails
    q[0, 1] = -128                                            # constant rows at both rails
    q[0, 2] = 127
    q[0, 3] = zp                                              # real zero everywhere
    q[0, 4] = -128
    q[0, 4, 5] = 127                                          # one outlier: y = sqrt(L - 1)
    q[0, 5] = np.arange(16) * 17 - 128
    ints, _ = _check_layer_norm(model, q.astype(np.int8), axes, out, _affine_of(graph))
    beta_q = _exact_layer_norm(np.full(shape, zp, np.int8), model.input_quant["x"], axes,
                               *_affine_of(graph), model.output_quant[out])
    assert np.array_equal(ints[out][0, 1:4], beta_q[0, 1:4])


def test_layer_norm_of_a_lazy_transpose(rng):
    """The input arrives transposed (seq-first exports): the reduction axes, gamma and beta
    follow the integer layout."""
    shape, axes = (1, 5, 16), (2,)
    graph, out = _layer_norm_graph(rng, shape, axes, perm=(0, 2, 1))
    calib = [rng.normal(0, 1.5, (1, 16, 5)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    v = model.tensor_map["x"]
    assert v.perm != (0, 1, 2)                     # the transpose stayed lazy
    ints = _run_both(model, calib[0])
    q = ints[v.name].transpose(np.argsort(v.perm))
    got = ints[model.tensor_map[out].name].transpose(np.argsort(model.tensor_map[out].perm))
    exact = _exact_layer_norm(q, v.quant, axes, *_affine_of(graph), model.tensor_map[out].quant)
    assert np.abs(got.astype(np.int64) - exact).max() <= 1


def test_layer_norm_without_affine_and_large_epsilon(rng):
    shape, axes = (1, 4, 32), (2,)
    graph, out = _layer_norm_graph(rng, shape, axes, eps=0.5, gamma=False, beta=False)
    calib = [rng.normal(0, 0.5, shape).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    q_in = quantize(calib[0], model.input_quant["x"]).astype(np.int8)
    _check_layer_norm(model, q_in, axes, out, _affine_of(graph))


def test_layer_norm_16x8(rng):
    shape, axes = (1, 5, 64), (2,)
    graph, out = _layer_norm_graph(rng, shape, axes)
    calib = [rng.normal(0, 1, shape).astype(np.float32) for _ in range(4)]
    config = QuantConfig(precision=Precision.INT16X8)
    model = lower_graph(graph, calibrate_minmax(graph, calib, config), config)
    assert model.graph.tensors[out].dtype is ir.DType.I16
    q_in = quantize(calib[1], model.input_quant["x"]).astype(np.int16)
    _check_layer_norm(model, q_in, axes, out, _affine_of(graph))


def test_layer_norm_row_too_long_is_refused(rng):
    shape, axes = (1, 1, 1 << 15), (2,)                 # int16: L * 2^16 > 2^30
    graph, out = _layer_norm_graph(rng, shape, axes, gamma=False, beta=False)
    config = QuantConfig(precision=Precision.INT16X8)
    qp = calibrate_minmax(graph, [rng.normal(0, 1, shape).astype(np.float32)], config)
    with pytest.raises(UnsupportedError) as err:
        lower_graph(graph, qp, config)
    assert "math.mean_reduce 'mean'" in err.value.message and "32768 int16 values" in err.value.message


def test_mean_reduce_outside_a_layer_norm_stays_a_mean(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 5, 16))
    mean = g.op("math.mean_reduce", [x], "mean", (1, 5, 1), axes=(2,))
    g.op("math.sub", [x, mean], "y", (1, 5, 16))       # centring only: no variance follows
    graph = g.graph(["y", "mean"])
    calib = [rng.normal(0, 1, (1, 5, 16)).astype(np.float32) for _ in range(3)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.CLZ" not in _kinds(model)
    ints = _run_both(model, calib[0])
    assert sqnr_db(execute(graph, {"x": calib[0]})["y"], dequantize(ints["y"], model.output_quant["y"])) > 30


def test_rsqrt_seed_table_holds_rsqrt_in_q13():
    table = rsqrt_seed_table().astype(np.int64)
    v = 128 * np.arange(513) - 32768
    used = v >= 1 << 13
    assert np.all(np.abs(table[used] - 8192 / np.sqrt(v[used] / 32768)) <= 0.5)
    assert np.all(np.abs(np.diff(table)) <= 32767)        # apply_lookup's slope REQUIRE


# ---------------------------------------------------------------- gather

@pytest.mark.parametrize("axis, index, out_shape", [
    (1, [2, 0, 2, 1], (1, 4, 6)),                 # a permutation with a repeat: no slice
    (2, [[5, 0], [1, 1]], (1, 3, 2, 2)),          # 2-D indices on the last axis
    (1, 2, (1, 6)),                               # a scalar index drops the axis
])
def test_gather_with_constant_indices_is_tosa_gather(rng, axis, index, out_shape):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 6))
    t = g.op("math.tanh", [x], "t", (1, 3, 6))
    idx = np.asarray(index, np.int64)
    g.tensors["idx"] = ir.Tensor("idx", ir.DType.I64, idx.shape, data=idx)
    g.op("layout.gather", [t, "idx"], "y", out_shape, axis=axis)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 3, 6)).astype(np.float32) for _ in range(3)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.GATHER" in _kinds(model)
    ints = _run_both(model, calib[0])
    expected = np.take(ints["t"], idx, axis=axis)
    assert np.array_equal(ints["y"], expected)            # values move without arithmetic
    assert model.output_quant["y"] == model.tensor_map["t"].quant


def test_gather_by_indices_computed_from_quantized_values_is_refused(rng):
    """Only integer model inputs (token ids, tests/quant/test_embedding_gather.py) index at run
    time; a float tensor's quantized codes are no indices."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 4))
    g.op("layout.gather", [g.const("table", rng.normal(size=(10, 3))), x], "y", (1, 4, 3), axis=0)
    graph = g.graph(["y"])
    qp = {n: ir.QuantInfo(scale=0.05, zero_point=0) for n in ("x", "y")}
    with pytest.raises(UnsupportedError) as err:
        lower_graph(graph, qp)
    assert "layout.gather 'y'" in err.value.message and "computed from quantized values" in err.value.message
    assert "integer model input" in err.value.hint
    assert err.value.hint


def test_gather_index_out_of_range_is_refused(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 6))
    t = g.op("math.tanh", [x], "t", (1, 3, 6))
    g.tensors["idx"] = ir.Tensor("idx", ir.DType.I64, (2,), data=np.array([0, 3], np.int64))
    g.op("layout.gather", [t, "idx"], "y", (1, 2, 6), axis=1)
    graph = g.graph(["y"])
    qp = {n: ir.QuantInfo(scale=0.05, zero_point=0) for n in ("x", "t", "y")}
    with pytest.raises(UnsupportedError, match=r"outside \[0, 3\) on axis 1"):
        lower_graph(graph, qp)


# ---------------------------------------------------------------- ONNX forms and the torch export

def _onnx_layer_norm(tmp_path, rng, form: str):
    """x [1, 5, 16] → layer norm over the last axis, as opset 17's LayerNormalization or as the
    opset 16 export writes it (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add)."""
    gamma, beta = rng.normal(0, 1, 16).astype(np.float32), rng.normal(0, 0.5, 16).astype(np.float32)
    inits = [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")]
    n = helper.make_node
    if form == "opset17":
        nodes, opset = [n("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)], 17
    else:
        inits += [numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-5), "eps")]
        nodes = [n("ReduceMean", ["x"], ["m"], axes=[-1]), n("Sub", ["x", "m"], ["d"]),
                 n("Pow", ["d", "two"], ["p"]), n("ReduceMean", ["p"], ["v"], axes=[-1]),
                 n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]), n("Div", ["d", "s"], ["q"]),
                 n("Mul", ["q", "gamma"], ["g"]), n("Add", ["g", "beta"], ["y"])]
        opset = 16
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"ln_{form}.onnx"
    onnx.save(model, path)
    return qsim.onnx.load(str(path)), (1e-5, gamma, beta)


@pytest.mark.parametrize("form", ["opset17", "opset16"])
def test_onnx_layer_norm_forms_lower_to_the_integer_layer_norm(tmp_path, rng, form):
    graph, affine = _onnx_layer_norm(tmp_path, rng, form)
    calib = Samples((rng.normal(0, 2, (16, 5, 16)) + rng.normal(0, 1, (16, 5, 1))).astype(np.float32))
    result = quantize_graph(graph, calib, options=QuantizeOptions(show_progress=False))
    model = result.model
    kinds = _kinds(model)
    assert all(k.startswith("tosa.") for k in kinds) and "tosa.CLZ" in kinds
    q_in = quantize(calib.inputs[:1], model.input_quant["x"]).astype(np.int8)
    _, diff = _check_layer_norm(model, q_in, (2,), "y", affine)
    assert (diff == 0).mean() > 0.9


def test_torch_transformer_encoder_export_lowers_and_tracks_float(rng):
    """tests/onnx/torch_exports/encoder_opset17.onnx (torch.nn.TransformerEncoder, GELU, 2 heads):
    every operator becomes TOSA (attention MATMULs, integer softmax and layer norms), both
    backends agree bit for bit, and the output follows float."""
    graph = qsim.onnx.load(str(TORCH_EXPORTS / "encoder_opset17.onnx"))
    calib = Samples(rng.normal(0, 1, (32, 5, 16)).astype(np.float32))
    result = quantize_graph(graph, calib, options=QuantizeOptions(show_progress=False))
    model = result.model
    kinds = _kinds(model)
    assert all(k.startswith("tosa.") for k in kinds)
    assert kinds.count("tosa.MATMUL") == 2 and kinds.count("tosa.CLZ") == 2
    assert kinds.count("tosa.FULLY_CONNECTED") == 4            # in-proj, out-proj, two feed-forward
    out = graph.outputs[0]
    x = rng.normal(0, 1, (1, 5, 16)).astype(np.float32)
    ints = _run_both(model, x)
    v = model.tensor_map[out]
    got = dequantize(ints[v.name], v.quant)
    assert sqnr_db(execute(graph, {"x": x})[out], got) > 25.0


# ---------------------------------------------------------------- softmax over attention scores

@pytest.mark.parametrize("shape, perm", [((1, 6, 9), None), ((1, 2, 5, 7), None), ((1, 2, 5, 7), (0, 1, 3, 2))])
def test_softmax_over_the_last_axis_of_attention_scores(rng, shape, perm):
    """Rank 3 and 4 scores, softmax over the last axis; with `perm` the scores arrive as a lazy
    transpose (the softmax axis is not last in the integer layout). Oracle: the exact softmax
    of the quantized scores on the 1/255 grid, within one step (docs/quantize.md)."""
    g = FloatGraph(rng)
    x = g.input("x", shape if perm is None else tuple(shape[p] for p in perm))
    t = g.op("math.tanh", [x], "t", g.tensors[x].shape)
    s = t if perm is None else g.op("layout.transpose", [t], "s", shape, perm=perm)
    s = g.op("math.mul", [s, g.const("k", 3.0)], "scores", shape)
    g.op("nn.softmax", [s], "p", shape, axes=(len(shape) - 1,))
    graph = g.graph(["p"])
    calib = [rng.normal(0, 1.5, g.tensors[x].shape).astype(np.float32) for _ in range(5)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    for xs in calib[:3]:
        ints = _run_both(model, xs)
        v = model.tensor_map["scores"]
        q = ints[v.name].transpose(np.argsort(v.perm))         # the scores in the float layout
        xq = dequantize(q, v.quant)
        p = np.exp(xq - xq.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        want = np.floor(p * 255 + 0.5) - 128          # 1/255 grid: p = 1 is 127
        assert np.abs(ints["p"].astype(int) - want).max() <= 1


# ---------------------------------------------------------------- a trained encoder classifier

def test_trained_encoder_classifier_int8_within_one_point_of_float():
    """tests/quant/transformer/encoder_classifier.onnx (2-layer TransformerEncoder trained by
    make_encoder_classifier.py): int8 top-1 on the 400 committed sequences within 1 point of
    float (on 10000 sequences: float 87.14 %, int8 87.09 %, agreement 99.55 %)."""
    graph = qsim.onnx.load(str(TRAINED / "encoder_classifier.onnx"))
    calib = Samples(np.load(TRAINED / "encoder_calib.npz")["x"])
    data = np.load(TRAINED / "encoder_eval.npz")
    evaluation = Samples(data["x"], data["y"])
    result = quantize_graph(graph, calib, evaluation, QuantizeOptions(show_progress=False))
    report = result.report
    assert report.eval_samples == 400
    assert report.float_top1 > 0.8                          # the model learnt the task
    assert report.int8_top1 >= report.float_top1 - 0.01
    assert report.top1_agreement >= 0.98
    kinds = _kinds(result.model)
    assert kinds.count("tosa.MATMUL") == 4 and kinds.count("tosa.CLZ") == 4   # 2 layers


@pytest.mark.parametrize("model", ["trained", "torch_export"])
def test_encoder_quantize_then_simulate_verifies_every_layer(tmp_path, capsys, model):
    """The README route: qsim quantize model.onnx --calib … && qsim simulate (every NPU layer,
    the attention MATMULs with their zero points included, bit-exact with the kernels), on the
    trained classifier and on the stock torch.nn.TransformerEncoder export (GELU)."""
    x1 = tmp_path / "x1.npy"
    if model == "trained":
        path, calib = TRAINED / "encoder_classifier.onnx", TRAINED / "encoder_calib.npz"
        np.save(x1, np.load(TRAINED / "encoder_eval.npz")["x"][:1])
    else:
        rng = np.random.default_rng(7)
        path, calib = TORCH_EXPORTS / "encoder_opset17.onnx", tmp_path / "calib.npy"
        np.save(calib, rng.normal(0, 1, (16, 5, 16)).astype(np.float32))
        np.save(x1, rng.normal(0, 1, (1, 5, 16)).astype(np.float32))
    out = tmp_path / "q"
    assert main(["quantize", str(path), "--calib", str(calib), "--eval-limit", "4", "-o", str(out), "-q"]) == 0
    assert main(["simulate", str(out), "--input", str(x1), "--engine", "model", "-o",
                 str(tmp_path / "sim")]) == 0
    assert "every layer bit-exact with the kernels" in capsys.readouterr().out


# ---------------------------------------------------------------- division by a computed tensor

def _division_graph(rng, shape):
    g = FloatGraph(rng)
    x = g.input("x", shape)
    a = g.op("math.tanh", [x], "a", shape)
    b = g.op("math.mul", [x, g.const("k", 1.5)], "b", shape)
    g.op("math.div", [a, b], "y", shape)
    return g.graph(["y"])


def _exact_quotient(ints, model, rails):
    qa, qb = ints["a"].astype(np.int64), ints["b"].astype(np.int64)
    va, vb = model.tensor_map["a"].quant, model.tensor_map["b"].quant
    oq = model.output_quant["y"]
    num = (qa - int(va.zero_points()[0])) * float(va.scales()[0])
    den = (qb - int(vb.zero_points()[0])) * float(vb.scales()[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(den != 0, num / np.where(den != 0, den, 1.0), np.sign(num) * np.inf)
    y = np.nan_to_num(y, nan=0.0, posinf=1e30, neginf=-1e30)
    return np.clip(np.floor(y / float(oq.scales()[0]) + 0.5) + int(oq.zero_points()[0]), *rails)


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.INT16X8])
def test_division_by_a_computed_tensor_is_the_exact_quotient_within_one_step(rng, precision):
    """a / b with b crossing 0 (its quantized value hits 0 exactly: a / 0 goes to the rail of
    a's sign, 0 / 0 to 0), every other element within one output step of the exact quotient
    of the quantized operands."""
    shape = (1, 3, 40)
    graph = _division_graph(rng, shape)
    config = QuantConfig(precision=precision)
    calib = [rng.normal(0, 2, shape).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib, config), config)
    kinds = _kinds(model)
    assert "tosa.CLZ" in kinds and "tosa.TABLE" in kinds and "tosa.INTDIV" not in kinds
    dt = model.graph.tensors["y"].dtype.numpy
    rails = (np.iinfo(dt).min, np.iinfo(dt).max)
    zero_divisors = 0
    sweep = np.linspace(-3, 3, 120, dtype=np.float32).reshape(shape)
    sweep[0, 0, :3] = 0.0                                         # 0 / 0 and a / 0
    for xs in calib[:2] + [sweep]:
        ints = _run_both(model, xs)
        exact = _exact_quotient(ints, model, rails)
        assert np.abs(ints["y"].astype(np.int64) - exact).max() <= 1
        zero_divisors += int((ints["b"] == int(model.tensor_map["b"].quant.zero_points()[0])).sum())
    assert zero_divisors > 0


def test_reciprocal_seed_table_holds_the_reciprocal_in_q13():
    table = reciprocal_seed_table().astype(np.int64)
    v = 128 * np.arange(513) - 32768
    used = v >= 1 << 14
    assert np.all(np.abs(table[used] - 8192 * 32768 / v[used]) <= 0.5)
    assert np.all(np.abs(np.diff(table)) <= 32767)
