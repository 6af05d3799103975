"""Embedding lookups with computed indices (qsim/quant/tosa/rules_gather.py, lowering/integer_inputs.py): token ids
as an integer model input stay integers (int32 in the integer graph, int64 narrowed with a
range check), the table is quantized over its whole range, and the lookup is one TOSA GATHER
(values [N, K, C], indices [N, W] int32), replayed on the reference and the kernels bit for
bit. tests/onnx/torch_exports/embedding_encoder_opset17.onnx (nn.Embedding → encoder → head,
written by make_exports.py) goes through `qsim quantize --calib ids.npy` and `qsim simulate`.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import qsim.onnx
from qsim import ir
from qsim.cli import main
from qsim.errors import DataError, QsimError
from qsim.quant.calibration.data import Samples, load_samples
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.lowering.integer_inputs import INTEGER_INPUT
from qsim.quant.params import quantize
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph, single_input
from qsim.runtime.executor import execute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import init, make_model, run_ort, save  # noqa: E402

EXPORT = Path(__file__).resolve().parents[1] / "onnx" / "torch_exports" / "embedding_encoder_opset17.onnx"
VOCAB, DIM = 20, 16


def _run_both(model, feed: dict) -> dict:
    q = quantize_feed(model, feed)
    ref = execute(model.graph, q, backend="reference")
    fast = execute(model.graph, q, backend="kernels")
    for t in ref:
        assert np.array_equal(ref[t], fast[t]), f"kernels and reference differ on {t}"
    return ref


def _lookup_model(axis: int = 0, table_shape=(VOCAB, DIM), ids_shape=(1, 5)) -> onnx.ModelProto:
    table = np.random.default_rng(3).normal(0, 1, table_shape).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=axis),
             helper.make_node("Relu", ["rows"], ["y"])]
    return make_model(nodes, [("ids", ids_shape, np.int64)], [("rows", None), ("y", None)],
                      [init("table", table)])


def _quantize(path, calib_ids) -> tuple[ir.Graph, object]:
    graph = qsim.onnx.load(str(path))
    return graph, quantize_graph(graph, Samples(calib_ids), options=QuantizeOptions(show_progress=False))


@pytest.mark.parametrize("axis, table_shape, ids_shape", [(0, (VOCAB, DIM), (1, 5)), (1, (2, VOCAB, 3), (1, 4))])
def test_lookup_is_one_gather_of_the_quantized_table(tmp_path, axis, table_shape,
                                                                                    ids_shape):
    model = _lookup_model(axis, table_shape, ids_shape)
    path = save(model, tmp_path)
    rng = np.random.default_rng(0)
    calib = rng.integers(0, VOCAB, (16,) + ids_shape[1:]).astype(np.int64)
    graph, result = _quantize(path, calib)
    qmodel = result.model
    (ids_int,) = qmodel.graph.inputs
    assert qmodel.graph.tensor(ids_int).dtype is ir.DType.I32 and qmodel.input_quant[ids_int] == INTEGER_INPUT
    kinds = [op.kind.name for op in qmodel.graph.ops]
    assert kinds.count("tosa.GATHER") == 1 and ("tosa.TILE" in kinds) == (axis == 1)
    table = numpy_table(model)
    rows_q = qmodel.tensor_map["rows"].quant
    # the table's grid covers its whole range: the extreme entries sit on the rails
    assert quantize(table, rows_q).min() == -128 and quantize(table, rows_q).max() == 127
    for ids in (np.array([[0, VOCAB - 1, 1, VOCAB - 2, 7][:ids_shape[1]]], np.int64), calib[:1]):
        ints = _run_both(qmodel, {"ids": ids})
        v = qmodel.tensor_map["rows"]
        want = np.take(quantize(table, rows_q), ids, axis=axis)
        assert np.array_equal(ints[v.name].transpose(np.argsort(v.perm)), want)
        ref = run_ort(model, {"ids": ids})
        np.testing.assert_array_equal(execute(graph, {"ids": ids})["rows"], ref["rows"])   # float: exact copies


def numpy_table(model: onnx.ModelProto) -> np.ndarray:
    return onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "table"))


def test_ids_that_do_not_fit_int32_or_the_table_are_refused_with_where(tmp_path):
    path = save(_lookup_model(), tmp_path)
    _, result = _quantize(path, np.zeros((4, 5), np.int64))
    with pytest.raises(DataError) as err:
        quantize_feed(result.model, {"ids": np.array([[1, 2, 2 ** 40, 3, 4]], np.int64)})
    assert "value 1099511627776 at index [0, 2] does not fit int32" in str(err.value)
    for bad in (VOCAB, -1):
        with pytest.raises(QsimError) as err:
            _run_both(result.model, {"ids": np.array([[1, 2, bad, 3, 4]], np.int64)})
        assert "GATHER" in str(err.value) and "k < K" in str(err.value) and f"= {bad}" in str(err.value)
    with pytest.raises(DataError) as err:
        quantize_feed(result.model, {"ids": np.zeros((1, 5), np.float32)})
    assert "holds integers" in str(err.value)


def test_float_calibration_data_for_token_ids_is_refused(tmp_path):
    path = save(_lookup_model(), tmp_path)
    graph = qsim.onnx.load(path)
    with pytest.raises(DataError) as err:
        quantize_graph(graph, Samples(np.zeros((4, 5), np.float32)), options=QuantizeOptions(show_progress=False))
    assert "'ids' is I64" in str(err.value) and "integer" in err.value.hint


def test_integer_samples_load_as_integers(tmp_path):
    f = tmp_path / "ids.npy"
    np.save(f, np.array([[2 ** 40, 1, 2, 3, 4]], np.int64))
    samples = load_samples(f, "ids", (5,))
    assert samples.inputs.dtype == np.int64 and samples.inputs[0, 0] == 2 ** 40     # no float rounding


def test_torch_embedding_encoder_quantizes_and_simulates(tmp_path, capsys):
    model = onnx.load(str(EXPORT))
    rng = np.random.default_rng(1)
    ids = rng.integers(0, VOCAB, (4, 6)).astype(np.int64)
    g4 = qsim.onnx.load(str(EXPORT), batch=4)
    (out,) = g4.outputs
    ref = run_ort(model, {"x": ids})[out]
    assert np.abs(execute(g4, {"x": ids})[out] - ref).max() <= 1e-5 * np.abs(ref).max()
    graph, result = _quantize(EXPORT, rng.integers(0, VOCAB, (32, 6)).astype(np.int64))
    assert single_input(graph) == ("x", (6,))
    (scored,) = result.report.outputs
    # 3 classes of a random-weight model: one of the 32 samples may sit within an LSB of a tie
    assert scored.sqnr_db > 30 and scored.top1_agreement >= 31 / 32
    ints = _run_both(result.model, {"x": ids[:1]})
    assert "tosa.GATHER" in [op.kind.name for op in result.model.graph.ops]
    calib, x1, q = tmp_path / "calib.npy", tmp_path / "x1.npy", tmp_path / "q"
    np.save(calib, rng.integers(0, VOCAB, (16, 6)).astype(np.int64))
    np.save(x1, ids[:1])                                  # int64 ids, narrowed to int32
    assert main(["quantize", str(EXPORT), "--calib", str(calib), "-o", str(q), "-q"]) == 0
    assert main(["simulate", str(q), "--input", str(x1), "--engine", "model", "-o", str(tmp_path / "s")]) == 0
    text = capsys.readouterr().out
    assert "every layer bit-exact with the kernels" in text
    assert ints is not None
