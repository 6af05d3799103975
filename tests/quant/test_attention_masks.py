"""Attention masks in front of softmax (qsim/quant/lowering/softmax_mask.py, tosa/rules_softmax.py):
torch's causal exports (tests/onnx/torch_exports: the mask argument, is_causal=True) and
attention cores built with onnx.helper whose mask is an additive 0/-inf, 0/-1e9 or
0/finfo.min constant or a masked_fill (Where) with a constant bool mask.

Checked: float vs onnxruntime; the integer graph on the TOSA reference equal to the kernels on
every tensor; masked positions' integer probabilities exactly 0 (q = -128 on the 1/255 grid)
and the kept ones within one step of the exact masked softmax of the quantized scores;
`qsim simulate` verified; unsupported mask forms refused naming the op.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import qsim.onnx
from qsim.cli import main
from qsim.errors import UnsupportedError
from qsim.quant.calibration.data import Samples
from qsim.quant.params import dequantize
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph
from qsim.quant.lowering.softmax_mask import masked_tensors
from qsim.runtime.executor import execute

from .test_target_tosa import _run_both, sqnr_db

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import EPS32, init, make_model, run_ort, save  # noqa: E402

EXPORTS = Path(__file__).resolve().parents[1] / "onnx" / "torch_exports"
SEQ, EMBED = 6, 8
CAUSAL = np.triu(np.ones((SEQ, SEQ), bool), 1)        # True: masked (a later position)


def _attention(mask_form: str, fill: float = -np.inf, rows_all_masked: bool = False) -> onnx.ModelProto:
    """x [1, S, E] → q, k, v projections → p = softmax(q kᵀ / √E masked) → p v, output p too."""
    rng = np.random.default_rng(11)
    w = {n: rng.normal(0, 0.5, (EMBED, EMBED)).astype(np.float32) for n in ("wq", "wk", "wv")}
    masked = CAUSAL.copy()
    if rows_all_masked:
        masked[2] = True
    nodes = [helper.make_node("MatMul", ["x", n], [n[1]]) for n in ("wq", "wk", "wv")]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "kt"], ["qk"]),
              helper.make_node("Mul", ["qk", "scale"], ["scores"])]
    inits = [init(n, a) for n, a in w.items()] + [init("scale", np.float32(1 / np.sqrt(EMBED)))]
    if mask_form == "add":
        inits.append(init("mask", np.where(masked, np.float32(fill), np.float32(0))))
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["masked"]))
    elif mask_form == "add_first":
        inits.append(init("mask", np.where(masked, np.float32(fill), np.float32(0))[None]))
        nodes.append(helper.make_node("Add", ["mask", "scores"], ["masked"]))
    elif mask_form == "where":           # masked_fill(mask, fill)
        inits += [init("cond", masked), init("fill", np.float32(fill))]
        nodes.append(helper.make_node("Where", ["cond", "fill", "scores"], ["masked"]))
    elif mask_form == "where_keep":      # where(keep, scores, fill)
        inits += [init("cond", ~masked), init("fill", np.float32(fill))]
        nodes.append(helper.make_node("Where", ["cond", "scores", "fill"], ["masked"]))
    elif mask_form == "bias":            # an additive bias with -inf: no mask form qsim lowers
        bias = np.where(masked, np.float32(fill), rng.normal(0, 1, (SEQ, SEQ)).astype(np.float32))
        inits.append(init("mask", bias))
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["masked"]))
    nodes += [helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    return make_model(nodes, [("x", (1, SEQ, EMBED))], [("y", None), ("p", None)], inits)


def _quantized(model: onnx.ModelProto, tmp_path, n: int = 24):
    path = save(model, tmp_path)
    graph = qsim.onnx.load(path)
    rng = np.random.default_rng(5)
    calib = Samples(rng.normal(0, 1, (n, SEQ, EMBED)).astype(np.float32))
    result = quantize_graph(graph, calib, options=QuantizeOptions(show_progress=False))
    return graph, result


def _check_probabilities(model, graph, x, masked: np.ndarray):
    """Integer p: exactly 0 (-128) where masked, within one 1/255 step of the exact masked
    softmax of the quantized scores elsewhere (the bound of tosa/rules_softmax.py's doc)."""
    ints = _run_both(model, x)
    p = ints["p"].astype(int)
    assert np.all(p[np.broadcast_to(masked, p.shape)] == -128)
    v = model.tensor_map["scores"]
    s = dequantize(ints[v.name].transpose(np.argsort(v.perm)), v.quant)
    s = np.where(masked, -np.inf, s)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        want = np.floor(e / e.sum(axis=-1, keepdims=True) * 255 + 0.5) - 128
    full = ~np.all(masked, axis=-1)
    assert np.abs(p - want)[np.broadcast_to(full[..., None], p.shape)].max() <= 1
    return ints


@pytest.mark.parametrize("form, fill", [("add", -np.inf), ("add", -1e9), ("add", float(np.finfo(np.float32).min)),
                                        ("add_first", -np.inf), ("where", -np.inf), ("where_keep", -1e4)])
def test_masked_positions_get_probability_exactly_zero(tmp_path, form, fill):
    model = _attention(form, fill)
    graph, result = _quantized(model, tmp_path)
    assert masked_tensors(graph) == {"masked"}
    qmodel = result.model
    assert "masked" not in qmodel.tensor_map                   # never calibrated, never an integer tensor
    kinds = [op.kind.name for op in qmodel.graph.ops]
    assert kinds.count("tosa.SELECT") == 2 and "tosa.MAXIMUM" not in kinds     # no fully masked row
    x = np.random.default_rng(9).normal(0, 1, (1, SEQ, EMBED)).astype(np.float32)
    _check_probabilities(qmodel, graph, x, CAUSAL)
    # float: qsim's execution is onnxruntime's, and masked probabilities are exactly 0 in both
    ref = run_ort(model, {"x": x})
    got = execute(graph, {"x": x})
    assert np.all(ref["p"][0][CAUSAL] == 0) and np.all(got["p"][0][CAUSAL] == 0)
    assert np.abs(got["p"] - ref["p"]).max() <= 64 * EPS32
    by_name = {o.name: o for o in result.report.outputs}
    assert by_name["y"].sqnr_db > 30 and by_name["p"].sqnr_db > 30


def test_a_fully_masked_row_gets_all_zeros_not_a_division_by_zero(tmp_path):
    """Finite fill: float gives that row a uniform 1/S; the integer softmax cannot tell a row
    with nothing kept from one kept everywhere, so its sum is made at least 1 (MAXIMUM) and
    every probability of the row is 0 (docs/quantize.md)."""
    masked = CAUSAL.copy()
    masked[2] = True
    graph, result = _quantized(_attention("add", -1e9, rows_all_masked=True), tmp_path)
    kinds = [op.kind.name for op in result.model.graph.ops]
    assert "tosa.MAXIMUM" in kinds
    x = np.random.default_rng(3).normal(0, 1, (1, SEQ, EMBED)).astype(np.float32)
    ints = _check_probabilities(result.model, graph, x, masked)
    assert np.all(ints["p"][0, 2] == -128)


def test_an_additive_bias_with_minus_infinity_is_refused_naming_the_op(tmp_path):
    path = save(_attention("bias"), tmp_path)
    graph = qsim.onnx.load(path)
    with pytest.raises(UnsupportedError) as err:
        masked_tensors(graph)
    assert "math.add 'Add_6' applies an attention mask" in str(err.value) and "'Softmax_7'" in str(err.value)
    assert "0 and -inf" in err.value.hint
    calib = Samples(np.zeros((2, SEQ, EMBED), np.float32))
    with pytest.raises(UnsupportedError):
        quantize_graph(graph, calib, options=QuantizeOptions(show_progress=False))


def test_a_computed_trilu_is_refused_with_a_hint(tmp_path):
    nodes = [helper.make_node("Trilu", ["x"], ["y"])]
    path = save(make_model(nodes, [("x", (1, 4, 4))], [("y", None)]), tmp_path)
    with pytest.raises(UnsupportedError) as err:
        qsim.onnx.load(path)
    assert "Trilu" in str(err.value) and "causal" in err.value.hint


@pytest.mark.parametrize("upper, k", [(1, 0), (1, 1), (0, -1), (0, 2)])
def test_trilu_of_constants_folds_like_onnxruntime(tmp_path, upper, k):
    a = np.arange(1, 1 + 2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    nodes = [helper.make_node("Trilu", ["a", "k"], ["t"], upper=upper), helper.make_node("Add", ["x", "t"], ["y"])]
    model = make_model(nodes, [("x", (2, 4, 5))], [("y", None)], [init("a", a), init("k", np.int64(k))])
    x = np.zeros((2, 4, 5), np.float32)
    got = execute(qsim.onnx.load(save(model, tmp_path)), {"x": x})["y"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})["y"])


@pytest.mark.parametrize("name", ["encoder_causal_mask", "encoder_is_causal"])
def test_torch_causal_exports_quantize_with_exact_zero_probabilities_and_simulate(tmp_path, capsys, name):
    path = EXPORTS / f"{name}_opset17.onnx"
    model = onnx.load(str(path))
    x = np.random.default_rng(2).normal(0, 1, (2, 5, 16)).astype(np.float32)
    graph2 = qsim.onnx.load(str(path), batch=2)
    (out,) = graph2.outputs
    ref = run_ort(model, {"x": x})
    # float: one post-norm layer as test_onnx_torch_exports' encoder; its bound there is
    # 2·γ_150·S·(2/σ_min)², here checked against the tighter observed 1e-5 relative
    assert np.abs(execute(graph2, {"x": x})[out] - ref[out]).max() <= 1e-5 * np.abs(ref[out]).max()
    graph = qsim.onnx.load(str(path))
    (masked,) = masked_tensors(graph)
    softmax = graph.consumers(masked)[0]
    rng = np.random.default_rng(4)
    result = quantize_graph(graph, Samples(rng.normal(0, 1, (24, 5, 16)).astype(np.float32)),
                            options=QuantizeOptions(show_progress=False))
    x1 = x[:1]
    ints = _run_both(result.model, x1)
    p = ints[result.model.tensor_map[softmax.outputs[0]].name]
    assert p.shape[-2:] == (5, 5)
    causal = np.triu(np.ones((5, 5), bool), 1)
    assert np.all(p[..., causal] == -128)
    assert np.all(p[..., 0, 0] == 127)                     # the first query sees only itself: p = 1
    v = result.model.tensor_map[out]
    got = dequantize(ints[v.name].transpose(np.argsort(v.perm)), v.quant)
    assert sqnr_db(execute(graph, {"x": x1})[out], got) > 28
    calib, xin, q = tmp_path / "calib.npy", tmp_path / "x1.npy", tmp_path / "q"
    np.save(calib, rng.normal(0, 1, (16, 5, 16)).astype(np.float32))
    np.save(xin, x1)
    assert main(["quantize", str(path), "--calib", str(calib), "--eval-limit", "4", "-o", str(q), "-q"]) == 0
    assert main(["simulate", str(q), "--input", str(xin), "--engine", "model", "-o", str(tmp_path / "s")]) == 0
    assert "every layer bit-exact with the kernels" in capsys.readouterr().out
