"""CVM ops in ir.Graphs: the OpKind verifier, declared precisions, the executor's "cvm" runner."""
import numpy as np
import pytest

import qsim.cvm as cvm
from qsim import ir
from qsim.errors import DataError, InvalidGraphError


def t(name, dtype, shape, bits=None, data=None):
    q = None if bits is None else ir.QuantInfo(scale=1.0, bits=bits, symmetric=True, source="derived")
    return ir.Tensor(name, dtype, shape, data=data, quant=q)


def op(name, ins, outs, **attrs):
    return ir.Op(ir.OpKind.get(f"cvm.{name}"), ins, outs, attrs, name=outs[0])


I8, I32 = ir.DType.I8, ir.DType.I32


def small_net(rng, y_bits=None, z_dtype=I8, x_bits=8):
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    b = rng.integers(-1000, 1000, 4).astype(np.int32)
    w2 = rng.integers(-127, 128, (5, 4 * 3 * 3)).astype(np.int8)
    tensors = [
        t("x", I8, (1, 3, 6, 6), x_bits), t("w", I8, (4, 3, 3, 3), 8, w), t("b", I32, (4,), 12, b),
        t("y", I32, (1, 4, 6, 6), y_bits), t("z", z_dtype, (1, 4, 6, 6), 8),
        t("p", I8, (1, 4, 3, 3)), t("r", I8, (1, 4, 3, 3)), t("f", I8, (36,)),
        t("f2", I8, (1, 36)), t("w2", I8, (5, 36), 8, w2), t("out", I32, (1, 5)),
    ]
    ops = [
        op("conv2d", ("x", "w", "b"), ("y",), padding=(1, 1)),
        op("cvm_right_shift", ("y",), ("z",), precision=8, shift_bit=10),
        op("max_pool2d", ("z",), ("p",), pool_size=(2, 2), strides=(2, 2)),
        op("relu", ("p",), ("r",)),
        op("flatten", ("r",), ("f",)),
        op("reshape", ("f",), ("f2",), shape=(1, 36)),
        op("dense", ("f2", "w2", ""), ("out",)),
    ]
    return ir.Graph("net", ("x",), ("out",), ops, {x.name: x for x in tensors}), w, b, w2


def test_graph_verifies_and_precisions_follow_the_rules(rng):
    g, *_ = small_net(rng)
    g.verify()
    assert cvm.tensor_precision(g, "y") == max(8 + 8 + 27 .bit_length(), 12) + 1     # 22
    assert cvm.tensor_precision(g, "z") == 8
    assert cvm.tensor_precision(g, "out") == 8 + 8 + 36 .bit_length()


def test_executor_runs_pure_cvm_graph_on_both_backends(rng):
    from qsim.runtime import execute
    g, w, b, w2 = small_net(rng)
    x = rng.integers(-127, 128, (1, 3, 6, 6)).astype(np.int8)
    results = [execute(g, {"x": x}, backend) for backend in ("reference", "kernels")]
    # the same chain, one operator at a time through qsim.cvm.run
    y = cvm.run("conv2d", [x, w, b], {"padding": 1})[0]
    z = cvm.run("cvm_right_shift", [y], {"precision": 8, "shift_bit": 10})[0]
    p = cvm.run("max_pool2d", [z], {"pool_size": 2, "strides": 2})[0]
    r = np.maximum(p, 0).reshape(1, 36)
    out = r.astype(np.int64) @ w2.T.astype(np.int64)
    for values in results:
        assert values["z"].dtype == np.int8 and values["out"].dtype == np.int32
        np.testing.assert_array_equal(values["y"], y)
        np.testing.assert_array_equal(values["out"], out)


def test_executor_reports_data_outside_declared_precision(rng):
    from qsim.runtime import execute
    g, *_ = small_net(rng, x_bits=4)
    x = np.zeros((1, 3, 6, 6), np.int8)
    x[0, 2, 1, 5] = 9
    with pytest.raises(DataError) as e:
        execute(g, {"x": x}, "reference")
    msg = str(e.value)
    assert "tensor 'x'" in msg and "9 at index [0, 2, 1, 5]" in msg and "precision 4" in msg
    assert "cvm.conv2d 'y'" in msg


def test_verifier_rejects_declared_precision_below_the_rule(rng):
    g, *_ = small_net(rng, y_bits=16)
    with pytest.raises(InvalidGraphError, match=r"'y'\) is declared precision 16, but the operator's rule gives 22"):
        g.verify()


def test_verifier_rejects_i8_output_above_8_bits(rng):
    g, *_ = small_net(rng)
    bad = ir.Graph(g.name, g.inputs, ("y",), g.ops[:1],
                   {**g.tensors, "y": t("y", I8, (1, 4, 6, 6))})
    with pytest.raises(InvalidGraphError, match="is i8 but has precision 22 > 8"):
        bad.verify()


def test_verifier_checks_shapes_dtypes_attributes_and_constants(rng):
    g, *_ = small_net(rng)
    tensors = dict(g.tensors)
    wrong_shape = ir.Graph("g", ("x",), ("y",), g.ops[:1], {**tensors, "y": t("y", I32, (1, 4, 5, 5))})
    with pytest.raises(InvalidGraphError, match=r"declared \[1, 4, 5, 5\] but the operator produces \[1, 4, 6, 6\]"):
        wrong_shape.verify()
    float_in = ir.Graph("g", ("x",), ("y",), g.ops[:1], {**tensors, "x": t("x", ir.DType.F32, (1, 3, 6, 6))})
    with pytest.raises(InvalidGraphError, match="is f32; CVM tensors are i8 or i32"):
        float_in.verify()
    bad_attr = ir.Graph("g", ("x",), ("y",), (op("conv2d", ("x", "w", "b"), ("y",), padding=(1, 1), stride=0),),
                        tensors)
    with pytest.raises(InvalidGraphError, match=r"stride\[0\] = 0 is outside \[1, 4096\)"):
        bad_attr.verify()
    w = np.zeros((4, 3, 3, 3), np.int8)
    w[1, 2, 0, 0] = -128
    bad_const = ir.Graph("g", ("x",), ("y",), g.ops[:1], {**tensors, "w": t("w", I8, (4, 3, 3, 3), 8, w)})
    with pytest.raises(DataError, match=r"constant 'w'\) holds -128 at index \[1, 2, 0, 0\]"):
        bad_const.verify()
    unknown = ir.Graph("g", ("x",), ("y",), (op("conv2d", ("x", "w", "b"), ("y",), pad=1),), tensors)
    with pytest.raises(InvalidGraphError, match=r"cvm.conv2d 'y': unknown attribute\(s\) pad"):
        unknown.verify()


def test_every_operator_has_a_registered_kind():
    for name in cvm.OPS:
        kind = ir.OpKind.get(f"cvm.{name}")
        assert kind.verifier is cvm.verify_op


def test_variadic_and_multi_output_ops_in_a_graph(rng):
    from qsim.runtime import execute
    a = rng.integers(-50, 50, (2, 3)).astype(np.int32)
    boxes = np.array([[[0, 5, 0, 0, 4, 4], [1, 1, 0, 0, 4, 4], [0, 9, 1, 1, 5, 5]]], np.int32)
    tensors = [t("a", I32, (2, 3), 7), t("b", I32, (2, 2), None, rng.integers(-9, 9, (2, 2)).astype(np.int32)),
               t("c", I32, (2, 5)), t("x", I32, (1, 3, 6), 5), t("vc", I32, (1,)), t("y", I32, (1, 3, 6)),
               t("nms", I32, (1, 3, 6))]
    ops = [op("concatenate", ("a", "b"), ("c",), axis=1),
           op("get_valid_count", ("x",), ("vc", "y"), score_threshold=2),
           op("non_max_suppression", ("y", "vc"), ("nms",), iou_threshold=50)]
    g = ir.Graph("g", ("a", "x"), ("c", "nms"), ops, {x.name: x for x in tensors}).verify()
    assert cvm.tensor_precision(g, "c") == 7
    assert cvm.tensor_precision(g, "vc") == 3          # counts up to N = 3
    values = execute(g, {"a": a, "x": boxes}, "reference")
    np.testing.assert_array_equal(values["c"][:, :3], a)
    assert values["vc"].tolist() == [2]
    # rows with score > 2: [0, 5, ..] and [0, 9, ..]; same class, iou(0..4, 1..5) = 9*100//23 = 39 < 50
    assert values["nms"][0].tolist() == [[0, 9, 1, 1, 5, 5], [0, 5, 0, 0, 4, 4], [-1] * 6]
    bad = ir.Graph("g", ("a", "x"), ("c",), ops[:1],
                   {**{x.name: x for x in tensors}, "b": t("b", I32, (3, 2), None, np.zeros((3, 2), np.int32))})
    with pytest.raises(InvalidGraphError, match=r"input 1 has shape \[3, 2\] but input 0 has shape \[2, 3\]"):
        bad.verify()
