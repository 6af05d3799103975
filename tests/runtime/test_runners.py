"""The executor's runners on their error paths: control flow (runners/control.py) and the
operators a model defines (runners/defined.py), each failure naming the op."""
import numpy as np
import pytest

import qsim
from qsim import ir
from qsim.errors import DataError, UnsupportedError
from qsim.runtime import execute, run_op
from qsim.runtime.runners import control

LOOP = """import math;

graph G {
    @input { x: real[3]; n: int[]; }
    @output { y: real[3]; }
    @compose {
        y, ~ = with s = x, k = n while { z = math.gt(k, 0); yield z; } do {
            s2 = math.add(s, x); k2 = math.sub(k, 1); yield s2, k2; };
    }
}
"""

BRANCH = """import math;

graph G {
    @input { x: real[3]; c: bool[]; }
    @output { y: real[3]; }
    @compose {
        y = if c then math.neg(x) else math.exp(x);
    }
}
"""


def _load(tmp_path, text):
    (tmp_path / "main.sknd").write_text(text)
    return qsim.load(tmp_path)


def test_a_while_loop_counts_its_steps(tmp_path):
    g = _load(tmp_path, LOOP)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for n in (0, 1, 4):
        np.testing.assert_array_equal(execute(g, {"x": x, "n": np.array(n)})["y"], (n + 1) * x)


def test_an_endless_loop_is_stopped_naming_the_op(tmp_path, monkeypatch):
    g = _load(tmp_path, LOOP)
    monkeypatch.setattr(control, "MAX_LOOP_STEPS", 5)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(execute(g, {"x": x, "n": np.array(5)})["y"], 6 * x)
    label = next(op.label for op in g.ops if op.kind.name == "control.loop")
    with pytest.raises(UnsupportedError, match=rf"control.loop '{label}': more than 5 iterations"):
        execute(g, {"x": x, "n": np.array(6)})


def test_a_branch_needs_one_condition_value(tmp_path):
    g = _load(tmp_path, BRANCH)
    op = next(op for op in g.ops if op.kind.name == "control.if")
    x = np.array([0.0, 1.0, -1.0], np.float32)
    assert run_op(g, op, [np.array([False])], values={"x": x})[0].tolist() == np.exp(x).tolist()
    with pytest.raises(DataError, match=r"control.if 'y': the condition has 2 values, a branch needs one"):
        run_op(g, op, [np.array([True, False])], values={"x": x})


def test_an_unknown_control_operator_is_refused():
    kind = ir.register_op_kind("control.switch")
    g = ir.Graph("g", ("a",), ("b",), (ir.Op(kind, ("a",), ("b",), name="sw"),),
                 {"a": ir.Tensor("a", ir.DType.F32, (1,)), "b": ir.Tensor("b", ir.DType.F32, (1,))})
    with pytest.raises(UnsupportedError, match=r"control.switch 'sw': unknown control-flow operator"):
        execute(g, {"a": np.zeros(1, np.float32)})


def test_an_operator_of_no_dialect_and_no_definition_is_refused():
    kind = ir.register_op_kind("main.mystery")
    g = ir.Graph("g", ("a",), ("b",), (ir.Op(kind, ("a",), ("b",), name="m"),),
                 {"a": ir.Tensor("a", ir.DType.F32, (1,)), "b": ir.Tensor("b", ir.DType.F32, (1,))})
    with pytest.raises(UnsupportedError, match=r"main.mystery 'm': neither a standard operator nor one "
                                               r"the model defines, and no runner is registered for "
                                               r"dialect 'main'"):
        execute(g, {"a": np.zeros(1, np.float32)})
