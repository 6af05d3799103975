"""Float operators on inputs where exp and friends overflow: no numpy RuntimeWarning reaches the
user, the results on ordinary inputs are bit for bit those of the formulas as written (the code
before the change), and overflowing inputs give the IEEE limits (sigmoid -> 0 and 1, exp -> inf)."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from qsim.runtime.float_ops import run_op

ORDINARY = np.linspace(-80, 80, 4001, dtype=np.float32)       # exp(80) < float32 max
HUGE = np.array([-3.4e38, -1e30, -1e5, -100, -89, 89, 100, 1e5, 1e30, 3.4e38], np.float32)

# the formulas the operators computed before (the reference for ordinary inputs)
FORMULAS = {
    "nn.sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "nn.silu": lambda x: x / (1 + np.exp(-x)),
    "nn.elu": lambda x: np.where(x < 0, np.float32(1.0) * np.expm1(x), x),
    "nn.softplus": lambda x: np.logaddexp(x, np.float32(0)),
    "math.exp": np.exp, "math.sinh": np.sinh, "math.cosh": np.cosh, "math.tanh": np.tanh,
}


def run(name, x, **attrs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a RuntimeWarning fails the test
        return run_op(name, [x], attrs)[0]


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_ordinary_inputs_give_the_same_bits(name):
    got = run(name, ORDINARY)
    assert got.dtype == np.float32
    assert got.tobytes() == FORMULAS[name](ORDINARY).astype(np.float32).tobytes()


@pytest.mark.parametrize("name", sorted(FORMULAS) + ["nn.selu", "math.sqr", "math.rcp", "math.log", "math.sqrt",
                                                    "math.rsqr", "math.rsqrt", "math.acos"])
def test_huge_inputs_warn_nothing(name):
    run(name, HUGE)


def test_huge_inputs_give_the_limits():
    neg, pos = HUGE < 0, HUGE > 0
    s = run("nn.sigmoid", HUGE)
    assert np.all(s[HUGE <= -100] == 0) and np.all(s[HUGE >= 100] == 1)
    assert np.all(run("nn.silu", HUGE)[HUGE <= -100] == 0)
    assert np.array_equal(run("nn.silu", HUGE)[HUGE >= 100], HUGE[HUGE >= 100])
    e = run("math.exp", HUGE)
    assert np.all(e[HUGE >= 100] == np.inf) and np.all(e[HUGE <= -1e5] == 0)
    elu = run("nn.elu", HUGE)
    assert np.array_equal(elu[pos], HUGE[pos]) and np.all(elu[HUGE <= -100] == -1)
    assert np.all(run("math.tanh", HUGE)[neg] == -1) and np.all(run("nn.softplus", HUGE)[HUGE <= -1e5] == 0)


def test_run_of_a_sigmoid_on_huge_inputs_prints_no_warning(tmp_path):
    """Through the CLI: the user sees the summary, no RuntimeWarning."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", HUGE.reshape(1, 10))
    done = subprocess.run([sys.executable, "-m", "qsim", "run", str(tmp_path / "m.onnx"), "--input",
                           str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy")[0], (HUGE > 0).astype(np.float32))


def test_min_and_max_reduce_over_an_empty_axis_are_clear_errors():
    """max_reduce/min_reduce have no identity: an output element over an extent-0 axis has no value
    (the spec's @lower assigns none); an empty output is still fine (found by benchmarks/fuzz.py)"""
    from qsim.errors import SemanticError
    from qsim.runtime.float_ops.base import run_op
    x = np.zeros((4, 0, 3), np.float32)
    for name in ("math.max_reduce", "math.min_reduce"):
        with pytest.raises(SemanticError, match="extent 0 along a reduced axis"):
            run_op(name, [x], {"axes": [1]})
        assert run_op(name, [x], {"axes": [2]})[0].shape == (4, 0, 1)
        assert run_op(name, [np.zeros((0, 5), np.float32)], {"axes": [1], "squeeze": True})[0].shape == (0,)
        assert run_op(name, [np.zeros((0, 0), np.float32)], {"axes": [1]})[0].shape == (0, 1)


def test_gelu_and_erf_take_rank_0_tensors():
    """a rank-0 input (a full reduction with squeeze) through nn.gelu and its erf: numpy turns the
    op's intermediates into scalars, which erf must take like arrays (found by benchmarks/fuzz.py)"""
    import math
    x = np.array(0.7, np.float32)
    y = np.asarray(run_op("nn.gelu", [x], {})[0])
    assert y.shape == () and y.dtype == np.float32
    assert abs(float(y) - 0.5 * 0.7 * (1 + math.erf(0.7 / math.sqrt(2)))) <= 4 * np.finfo(np.float32).eps
    from qsim.runtime.float_ops.math import erf
    e = erf(np.float32(0.7))                      # a numpy scalar, as x / c of a 0-d array is
    assert e.shape == () and e.dtype == np.float32 and e == np.float32(math.erf(float(np.float32(0.7))))
