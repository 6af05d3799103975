"""qsim.onnx refuses what it cannot read with a QsimError of the right kind that names the
file, the node (name, op type, domain, opset) and gives a hint; never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import qsim
import qsim.onnx
from qsim.runtime.executor import execute
from qsim.errors import DataError, ErrorKind, InvalidGraphError, QsimError, UnsupportedError, UsageError
from onnx_helpers import init, make_model, save


def relu_model(opset=17, **kw):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="act")], [("x", [1, 4])], [("y", None)],
                      opset=opset, **kw)


def load_error(tmp_path, model, kind=QsimError, name="model.onnx", **kw) -> QsimError:
    path = save(model, tmp_path, name) if isinstance(model, onnx.ModelProto) else model
    with pytest.raises(kind) as info:
        qsim.onnx.load(path, **kw)
    return info.value


def test_unsupported_operator_names_node_type_domain_opset(tmp_path):
    model = make_model([helper.make_node("Det", ["x"], ["y"], name="determinant")], [("x", [2, 3, 3])],
                       [("y", None)], opset=15)
    err = load_error(tmp_path, model, UnsupportedError)
    assert "node 'determinant' (Det, domain ai.onnx, opset 15)" in err.message
    assert "no conversion of Det" in err.message
    assert "supported operators:" in err.hint and "Conv" in err.hint
    assert str(err.location).endswith("model.onnx")


def test_operator_missing_from_the_models_opset(tmp_path):
    model = make_model([helper.make_node("Gelu", ["x"], ["y"], name="g")], [("x", [2])], [("y", None)], opset=17)
    err = load_error(tmp_path, model, UnsupportedError)
    assert "node 'g' (Gelu, domain ai.onnx, opset 17)" in err.message and "at opset 17" in err.message
    assert err.hint


def test_custom_domain_is_unsupported(tmp_path):
    node = helper.make_node("FusedGemm", ["x"], ["y"], name="fg", domain="com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    err = load_error(tmp_path, model, UnsupportedError)
    assert "node 'fg' (FusedGemm, domain com.microsoft, opset 1)" in err.message
    assert "default ONNX domain" in err.hint


@pytest.mark.parametrize("opset", [10, 22])
def test_opset_outside_11_to_21(tmp_path, opset):
    err = load_error(tmp_path, relu_model(opset=opset), UnsupportedError)
    assert f"opset {opset}" in err.message and "11 to 21" in err.message
    assert "version_converter" in err.hint


def test_unsupported_input_dtype(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])], [("y", None)])
    err = load_error(tmp_path, model, UnsupportedError)
    assert "graph input 'x' is f16" in err.message and "float32" in err.hint


def test_unsupported_attribute_value_names_node(tmp_path):
    model = make_model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad1", mode="wrap")], [("x", [1, 4])],
                       [("y", None)], [init("p", np.asarray([0, 1, 0, 1], np.int64))], opset=19)
    err = load_error(tmp_path, model, UnsupportedError)
    assert "node 'pad1' (Pad, domain ai.onnx, opset 19)" in err.message and "'wrap'" in err.message
    assert "constant, reflect and edge" in err.hint


def test_data_dependent_shape_is_unsupported_with_hint(tmp_path):
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                       [("x", [2, 3]), ("s", [2], np.int64)], [("y", None)])
    err = load_error(tmp_path, model, UnsupportedError)
    assert "node 'rs' (Reshape" in err.message and "'shape' is computed at run time" in err.message
    assert "folds constant sub-graphs" in err.hint


def test_bad_shape_is_invalid_graph_naming_node(tmp_path):
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [("x", [2, 3])],
                       [("y", None)], [init("s", np.asarray([4, -1], np.int64))])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "node 'rs' (Reshape, domain ai.onnx, opset 17)" in err.message and "cannot hold" in err.message


def test_conv_channel_mismatch(tmp_path):
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c1")], [("x", [1, 3, 5, 5])],
                       [("y", None)], [init("w", np.zeros((4, 2, 3, 3), np.float32))])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "node 'c1' (Conv" in err.message and "input channels" in err.message and err.hint


def test_undefined_input(tmp_path):
    model = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add1")], [("x", [2])], [("y", None)])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "node 'add1' (Add) reads 'ghost'" in err.message and "no node, graph input or initializer" in err.message


def test_cycle(tmp_path):
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["a"], ["y"], name="n3")]
    model = make_model(nodes, [("x", [2])], [("y", None)])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "is part of a cycle" in err.message and "'n1'" in err.message


def test_output_never_produced(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", None), ("z", None)])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "graph output 'z'" in err.message


def test_nodes_out_of_order_are_scheduled(tmp_path):
    nodes = [helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["x"], ["a"])]
    graph = qsim.onnx.load(save(make_model(nodes, [("x", [2])], [("y", None)]), tmp_path))
    assert [op.kind.name for op in graph.ops] == ["math.neg", "nn.relu"]


@pytest.mark.parametrize("cut", [1, 7, 40, -3])
def test_truncated_protobuf_is_a_data_error(tmp_path, cut):
    blob = relu_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(blob[:cut])
    err = load_error(tmp_path, str(path), DataError)
    assert str(path) in err.format()
    assert "truncated" in err.hint or "not an ONNX model" in err.hint


def test_garbage_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe not a protobuf \x00\x01" * 10)
    err = load_error(tmp_path, str(path), DataError)
    assert "junk.onnx" in err.message


def test_initializer_size_disagrees_with_dims(tmp_path):
    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.raw_data = t.raw_data[:-4]
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", [2, 3])], [("y", None)], [t])
    err = load_error(tmp_path, model, DataError)
    assert "initializer 'w' holds 20 bytes for dims [2, 3]" in err.message


def test_typed_field_count_disagrees_with_dims(tmp_path):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0] * 5)
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", [2, 3])], [("y", None)], [t])
    err = load_error(tmp_path, model, DataError)
    assert "initializer 'w' holds 5 values for dims [2, 3]" in err.message


def test_huge_dims_refused_before_allocating(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[100000, 100000], raw_data=b"")
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", [1])], [("y", None)], [t])
    err = load_error(tmp_path, model, DataError)
    assert "initializer 'w'" in err.message and "limit" in err.message and "--max-tensor-bytes" in err.hint


def test_constant_of_shape_too_big_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"), helper.make_node("Add", ["x", "c"], ["y"])]
    model = make_model(nodes, [("x", [1])], [("y", None)], [init("s", np.asarray([1 << 20, 1 << 20], np.int64))])
    err = load_error(tmp_path, model, DataError)
    assert "node 'cos' (ConstantOfShape" in err.message and "limit" in err.message


def _external_model(tmp_path, location: str):
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", [2, 3])], [("y", None)], [t])


def test_external_data_inside_the_folder_is_read(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    path = save(_external_model(tmp_path, "weights.bin"), tmp_path)
    graph = qsim.onnx.load(path)
    np.testing.assert_array_equal(graph.tensor("w").data, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_external_data_outside_the_folder_is_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.zeros(6, np.float32).tobytes())
    err = load_error(inner, _external_model(inner, "../secret.bin"), DataError)
    assert "initializer 'w' (external data) names '../secret.bin'" in err.message
    assert "'..'" in err.hint


def test_external_data_symlink_out_of_the_folder_is_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.zeros(6, np.float32).tobytes())
    os.symlink(tmp_path / "secret.bin", inner / "w.bin")
    err = load_error(inner, _external_model(inner, "w.bin"), DataError)
    assert "outside the model folder" in err.message


def test_external_data_missing_file(tmp_path):
    err = load_error(tmp_path, _external_model(tmp_path, "absent.bin"), DataError)
    assert "external data file" in err.message and "is missing" in err.message and err.hint


def test_dynamic_non_batch_dimension(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", "C"])], [("y", None)])
    err = load_error(tmp_path, model, UnsupportedError)
    assert "graph input 'x' has a dynamic dimension 1 ('C')" in err.message and "input_shapes" in err.hint
    graph = qsim.onnx.load(save(model, tmp_path), input_shapes={"x": [2, 5]})
    assert graph.tensor("x").shape == (2, 5)


def test_bad_batch_argument():
    with pytest.raises(UsageError):
        qsim.onnx.load("whatever.onnx", batch=0)


def test_cli_reports_without_traceback(tmp_path):
    model = make_model([helper.make_node("Det", ["x"], ["y"], name="det1")], [("x", [2, 2])], [("y", None)])
    path = save(model, tmp_path)
    done = subprocess.run([sys.executable, "-m", "qsim", "check", path], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "unsupported error" in done.stderr and "node 'det1' (Det, domain ai.onnx, opset 17)" in done.stderr


def test_error_kinds_are_qsim_kinds():
    assert UnsupportedError("x").kind is ErrorKind.UNSUPPORTED and DataError("x").kind is ErrorKind.DATA


def test_missing_required_input_of_a_foldable_node(tmp_path):
    """fuzz (onnx target): Reshape whose data input was emptied, with a constant shape, reached
    the numpy folder with None (AttributeError); the operator definition's required inputs are
    now checked before converting or folding."""
    model = make_model([helper.make_node("Reshape", ["", "s"], ["y"], name="rs")], [("x", [2])], [("y", None)],
                       [init("s", np.asarray([2], np.int64))])
    err = load_error(tmp_path, model, InvalidGraphError)
    assert "node 'rs' (Reshape, domain ai.onnx, opset 17): required input 0 ('data') is missing" in err.message


def test_name_with_bad_utf8_is_a_data_error(tmp_path):
    """fuzz (onnx target): a byte flip inside an op type left bytes where protobuf (proto2) gives
    text, and onnx.defs.get_schema raised TypeError; names are now checked after parsing."""
    blob = relu_model().SerializeToString().replace(b"Relu", b"Re\xffu")
    path = tmp_path / "bad.onnx"
    path.write_bytes(blob)
    err = load_error(tmp_path, str(path), DataError)
    assert "node #0 op_type is not valid UTF-8" in err.message and "bad.onnx" in err.message


def test_outputs_that_are_inputs_or_constants_get_a_copy(tmp_path):
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["c"], ["z"])]
    model = make_model(nodes, [("x", [2])], [("y", None), ("z", None), ("x", None)],
                       [init("c", np.asarray([1.5, 2.5], np.float32))])
    graph = qsim.onnx.load(save(model, tmp_path))
    assert graph.outputs[:2] == ("y", "z") and graph.outputs[2] != "x"
    assert [op.kind.name for op in graph.ops] == ["math.iden"] * 3
    values = execute(graph, {"x": np.asarray([3.0, 4.0], np.float32)})
    np.testing.assert_array_equal(values["z"], [1.5, 2.5])
    np.testing.assert_array_equal(values[graph.outputs[2]], [3.0, 4.0])


def test_folded_matmul_outer_product_too_big_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"], name="outer"), helper.make_node("Add", ["x", "m"], ["y"])]
    model = make_model(nodes, [("x", [1])], [("y", None)],
                       [init("a", np.ones((2048, 1), np.float32)), init("b", np.ones((1, 2048), np.float32))])
    err = load_error(tmp_path, model, DataError)
    assert "node 'outer' (MatMul" in err.message and "limit" in err.message
