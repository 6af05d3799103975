"""Attribute kinds are checked against the operator's ONNX definition in one place, for every
converter: an attribute stored with another kind than onnx.defs gives (a Reduce `axes` as FLOAT,
a Softmax `axis` as INTS), an attribute the operator does not define, or a missing required one
is an InvalidGraphError naming the node, the op, the attribute and both kinds; never a
TypeError from a converter."""
from __future__ import annotations

import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import qsim.onnx
from qsim.errors import InvalidGraphError
from qsim.onnx.convert_base import CONVERTERS
from onnx_helpers import make_model

A = onnx.AttributeProto
# one value of each kind, as onnx.helper.make_attribute infers the kind from it
VALUES = {A.INT: 3, A.FLOAT: 1.5, A.STRING: "abc", A.INTS: [1, 2], A.FLOATS: [0.5, 2.0],
          A.STRINGS: ["a", "b"], A.TENSOR: helper.make_tensor("t", onnx.TensorProto.FLOAT, [1], [1.0])}


def node_with(op_type: str, opset: int, name: str, value) -> onnx.ModelProto:
    """A model of one `op_type` node with every input the definition declares, and `name` = value."""
    schema = onnx.defs.get_schema(op_type, opset, "")
    count = max(len(schema.inputs), schema.min_input)
    node = helper.make_node(op_type, [f"x{i}" for i in range(count)], ["y"], name="n")
    node.attribute.append(helper.make_attribute(name, value))
    return make_model([node], [(f"x{i}", [1, 2, 3, 4]) for i in range(count)], [("y", None)], opset=opset)


def opset_for(op: str) -> int:
    """17, or 21 for operators ONNX added later (Gelu)."""
    try:
        onnx.defs.get_schema(op, 17, "")
        return 17
    except onnx.defs.SchemaError:
        return 21


# (op, opset, attribute, defined kind) for every attribute of every operator qsim converts
CASES = [(op, opset, name, int(spec.type)) for op in sorted(CONVERTERS) for opset in [opset_for(op)]
         for name, spec in sorted(onnx.defs.get_schema(op, opset, "").attributes.items())
         if int(spec.type) in VALUES]


def test_every_converter_has_attributes_to_check():
    assert len({case[0] for case in CASES}) > 30 and len(CASES) > 60


@settings(derandomize=True, deadline=None, max_examples=300)
@given(case=st.sampled_from(CASES), wrong=st.sampled_from(sorted(VALUES)))
def test_a_wrong_attribute_kind_names_node_attribute_and_kinds(tmp_path_factory, case, wrong):
    op, opset, name, defined = case
    if wrong == defined:
        wrong = A.INTS if defined != A.INTS else A.FLOAT
    path = str(tmp_path_factory.mktemp("kinds") / "m.onnx")
    onnx.save(node_with(op, opset, name, VALUES[wrong]), path)
    with pytest.raises(InvalidGraphError) as err:
        qsim.onnx.load(path)
    message = err.value.message
    assert f"node 'n' ({op}, domain ai.onnx, opset {opset})" in message
    assert f"attribute '{name}' is stored as {A.AttributeType.Name(wrong)}" in message
    assert f"defines it as {A.AttributeType.Name(defined)}" in message


@pytest.mark.parametrize("op, name, value, kind", [("ReduceMean", "axes", 1.5, "FLOAT"),
                                                   ("Softmax", "axis", [1, 2], "INTS")])
def test_the_issue_cases(tmp_path, op, name, value, kind):
    path = str(tmp_path / "m.onnx")
    onnx.save(node_with(op, 13, name, value), path)
    with pytest.raises(InvalidGraphError, match=f"'{name}' is stored as {kind}"):
        qsim.onnx.load(path)


def test_an_attribute_the_operator_does_not_define(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(node_with("ReduceMean", 18, "axes", [1]), path)    # an input from opset 18 on
    with pytest.raises(InvalidGraphError, match="'axes' is not an attribute of ReduceMean") as err:
        qsim.onnx.load(path)
    assert "keepdims" in err.value.hint


def test_a_missing_required_attribute(tmp_path):
    node = helper.make_node("Concat", ["a", "b"], ["y"], name="n")
    path = str(tmp_path / "m.onnx")
    onnx.save(make_model([node], [("a", [1, 2]), ("b", [1, 2])], [("y", None)]), path)
    with pytest.raises(InvalidGraphError, match="required attribute.*'axis'"):
        qsim.onnx.load(path)
