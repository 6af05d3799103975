"""qsim.tosa.run (with its backend): bad calls give a QsimError naming the problem and the fix; backend dispatch
hands kernels the validated, normalized call; every operator has a definition."""

import numpy as np
import pytest

from qsim.errors import InvalidGraphError, QsimError, UsageError
from qsim.ir import OpKind
from qsim.tosa import run
from qsim.tosa import OPERATORS

FC_ATTRS = dict(weight=np.ones((2, 3), np.int8), bias=np.zeros(2, np.int32), input_zp=0, weight_zp=0)


def test_every_issue_operator_is_defined_and_registered():
    names = """ARGMAX AVG_POOL2D CONV2D CONV3D DEPTHWISE_CONV2D FULLY_CONNECTED MATMUL MAX_POOL2D
    TRANSPOSE_CONV2D CLAMP SIGMOID TANH ADD ARITHMETIC_RIGHT_SHIFT BITWISE_AND BITWISE_OR BITWISE_XOR INTDIV
    LOGICAL_AND LOGICAL_LEFT_SHIFT LOGICAL_RIGHT_SHIFT LOGICAL_OR LOGICAL_XOR MAXIMUM MINIMUM MUL POW SUB TABLE
    ABS BITWISE_NOT CEIL CLZ EXP FLOOR LOG LOGICAL_NOT NEGATE RECIPROCAL RSQRT SELECT EQUAL GREATER
    GREATER_EQUAL REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN REDUCE_PRODUCT REDUCE_SUM CONCAT PAD RESHAPE
    REVERSE SLICE TILE TRANSPOSE GATHER SCATTER RESIZE CAST RESCALE CONST IDENTITY COND_IF WHILE_LOOP""".split()
    assert sorted(names) == sorted(OPERATORS)
    for name in names:
        assert OpKind.get(f"tosa.{name}").verifier is not None


def test_attribute_names_are_the_specs():
    assert [a.name for a in OPERATORS["CONV2D"].attrs] == ["weight", "bias", "pad", "stride", "dilation",
                                                           "input_zp", "weight_zp"]
    assert [a.name for a in OPERATORS["RESCALE"].attrs] == ["input_zp", "output_zp", "multiplier", "shift",
                                                            "scale32", "double_round", "per_channel"]
    assert [a.name for a in OPERATORS["TRANSPOSE_CONV2D"].attrs][2:5] == ["out_pad", "stride", "out_shape"]


@pytest.mark.parametrize("call,kind,match", [
    (lambda: run("CONV9D", [], {}), UsageError, r"unknown TOSA operator 'CONV9D'"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], {k: v for k, v in FC_ATTRS.items() if k != "bias"}),
     UsageError, r"missing attribute\(s\) bias"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], dict(FC_ATTRS, padding=1)),
     UsageError, r"unknown attribute\(s\) 'padding'"),
    (lambda: run("FULLY_CONNECTED", [[[1, 2, 3]]], FC_ATTRS), UsageError, r"input 0 is a list, not a numpy array"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.float64)], FC_ATTRS), UsageError,
     r"float64 array, which no TOSA type"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int32)], FC_ATTRS), InvalidGraphError,
     r"no supported data type mode of FULLY_CONNECTED has in_t=int32_t"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 1, 3), np.int8)], FC_ATTRS), InvalidGraphError,
     r"input input has rank 3 .* needs rank 2"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8), np.zeros(2, np.int8)], FC_ATTRS), UsageError,
     r"got 2 input tensor\(s\), FULLY_CONNECTED takes 1: input"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], dict(FC_ATTRS, input_zp=1.5)), UsageError,
     r"input_zp=1.5 must be an integer"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], dict(FC_ATTRS, weight=[[1, 2, 3]])), UsageError,
     r"attribute weight must be a numpy array"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], FC_ATTRS, backend="gpu"), UsageError,
     r"unknown backend 'gpu'"),
    (lambda: run("CAST", [np.zeros(2, np.int8)], {"out_t": "int128"}), UsageError, r"out_t='int128' is not a TOSA"),
    (lambda: run("ADD", np.zeros(2, np.int32), {}), UsageError, r"inputs must be a list"),
    (lambda: run("CONV2D", [np.zeros((1, 2, 2, 1), np.int8)],
                 dict(weight=np.zeros((1, 1, 1, 1), np.int8), bias=np.zeros(1, np.int32), pad=(0, 0),
                      stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=0)),
     InvalidGraphError, r"attribute pad has 2 values, the spec gives it shape \[4\]"),
    (lambda: run("FULLY_CONNECTED", [np.zeros((1, 3), np.int8)], dict(FC_ATTRS, weight_t="int16")), UsageError,
     r"weight_t='int16' does not match"),
])
def test_bad_calls(call, kind, match):
    with pytest.raises(kind, match=match) as info:
        call()
    err = info.value
    assert isinstance(err, QsimError)
    assert err.hint or "hint" not in str(err)


def test_wrong_dtype_message_lists_the_modes():
    with pytest.raises(InvalidGraphError) as info:
        run("ADD", [np.zeros(2, np.int8), np.zeros(2, np.int8)], {})
    assert "signed 32 (in_out_t=int32_t)" in info.value.hint


def test_mixed_input_types_are_named():
    with pytest.raises(InvalidGraphError, match=r"input input2 is int16_t but input input1 is int32_t"):
        run("ADD", [np.zeros(2, np.int32), np.zeros(2, np.int16)], {})


def test_kernels_backend_calls_registered_kernel_with_normalized_attrs(monkeypatch):
    seen = {}

    def fake_fc(inputs, attrs):
        seen["attrs"], seen["inputs"] = attrs, inputs
        return [np.full((inputs[0].shape[0], attrs["weight"].shape[0]), 7, np.int32)]

    from qsim.kernels import registry
    monkeypatch.setitem(registry.KERNELS, "FULLY_CONNECTED", fake_fc)
    x = np.zeros((4, 3), np.int8)[:, ::1]
    out, = run("FULLY_CONNECTED", [x], dict(FC_ATTRS, input_zp=np.int64(-3), weight_zp=2), backend="kernels")
    assert out.tolist() == [[7, 7]] * 4
    a = seen["attrs"]
    assert type(a["input_zp"]) is int and a["input_zp"] == -3
    assert a["weight"].dtype == np.int8 and a["bias"].dtype == np.int32
    assert a["out_t"] == "int32" and a["weight_t"] == "int8"
    assert seen["inputs"][0].flags.c_contiguous
    # the reference backend never calls the kernel; an op listed in ON_REFERENCE runs on it
    out, = run("FULLY_CONNECTED", [x], FC_ATTRS, backend="reference")
    assert out.tolist() == [[0, 0]] * 4
    assert "ABS" in registry.ON_REFERENCE
    assert run("ABS", [np.array([-3], np.int32)], {}, backend="kernels")[0].tolist() == [3]


def test_normalized_tuples_and_int48_storage():
    out, = run("CONV2D", [np.ones((1, 2, 2, 1), np.int16)],
               dict(weight=np.ones((1, 1, 1, 1), np.int8), bias=[5], pad=[0, 0, 0, 0], stride=np.array([1, 1]),
                    dilation=(1, 1), input_zp=0, weight_zp=0))
    assert out.dtype == np.int64 and out.ravel().tolist() == [6, 6, 6, 6]
    with pytest.raises(UsageError, match=r"int48_t\) with values outside"):
        run("RESCALE", [np.array([1 << 50], np.int64)],
            dict(input_zp=0, output_zp=0, multiplier=[1 << 14], shift=[14], scale32=False, double_round=False,
                 per_channel=False, out_t="int32"))


def test_the_public_call_runs_both_backends_with_the_same_bits():
    """qsim.tosa.run takes backend= (the README's API example): the kernels and the reference agree"""
    import qsim.tosa
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (2, 5, 5, 3), dtype=np.int8)
    attrs = dict(weight=rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8), bias=rng.integers(-999, 999, 4, dtype=np.int32),
                 pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), input_zp=-128, weight_zp=0)
    kernels, = qsim.tosa.run("CONV2D", [x], attrs, backend="kernels")
    reference, = qsim.tosa.run("CONV2D", [x], attrs, backend="reference")
    default, = qsim.tosa.run("CONV2D", [x], attrs)
    assert kernels.dtype == np.int32 and np.array_equal(kernels, reference) and np.array_equal(default, kernels)


def test_the_old_module_name_still_works_and_warns():
    import importlib
    import sys
    import warnings
    sys.modules.pop("qsim.kernels.run", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("qsim.kernels.run")
    assert any(issubclass(w.category, DeprecationWarning) and "qsim.tosa.run" in str(w.message) for w in caught)
    assert old.run is run
