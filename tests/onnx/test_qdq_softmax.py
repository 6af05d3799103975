"""A QDQ softmax (uint8, output grid 1/255 with zero point 0: what quantize_static writes) in
qsim and in onnxruntime's two modes. qsim's integer softmax is within one step of the QDQ
model's definition, round(255 p) of the dequantized input, which onnxruntime's float path
(ORT_DISABLE_ALL) computes exactly. Its fused QLinearSoftmax (ORT_ENABLE_ALL) multiplies by
floor(1 / y_scale), and float32's 1/255 inverts to 254.99998, so it computes round(254 p): on
its own grid it is up to 1 step under the definition for large p, 2 where the roundings add
(MTCNN ONet's face probability, docs/onnx.md). This test holds both statements."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_helpers import save
from qdq_models import compare_with_ort, ort_session

S_IN = 0.05


def _softmax_qdq(rows: int, length: int) -> onnx.ModelProto:
    nodes = [helper.make_node("QuantizeLinear", ["x", "si", "zi"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "si", "zi"], ["xd"]),
             helper.make_node("Softmax", ["xd"], ["p"], axis=-1),
             helper.make_node("QuantizeLinear", ["p", "so", "zo"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "so", "zo"], ["y"])]
    inits = [numpy_helper.from_array(np.float32(S_IN), "si"), numpy_helper.from_array(np.uint8(128), "zi"),
             numpy_helper.from_array(np.float32(1 / 255), "so"), numpy_helper.from_array(np.uint8(0), "zo")]
    graph = helper.make_graph(nodes, "softmax_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, length])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _exact(x: np.ndarray) -> np.ndarray:
    q = np.clip(np.rint(x / np.float32(S_IN)), -128, 127) * np.float64(np.float32(S_IN))
    e = np.exp(q - q.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_fused_qlinear_softmax_is_round_254p_and_qsim_is_the_definition(tmp_path):
    rng = np.random.default_rng(0)
    model = _softmax_qdq(64, 8)
    path = save(model, tmp_path)
    xs = [rng.normal(0, 3.0, (1, 64, 8)).astype(np.float32) for _ in range(3)]
    fused = ort_session(path, "ORT_ENABLE_ALL")
    plain = ort_session(path, "ORT_DISABLE_ALL")
    for x in xs:
        p = _exact(x)
        got_fused = np.rint(fused.run(None, {"x": x})[0] * 255).astype(np.int64)
        got_plain = np.rint(plain.run(None, {"x": x})[0] * 255).astype(np.int64)
        for k, got in ((254, got_fused), (255, got_plain)):
            # onnxruntime's float32 p is within ~1e-7 relative of the exact one: equality is
            # asserted where k·p is more than 1e-4 from a .5 tie, 1 step elsewhere
            clear = np.abs(p * k - np.floor(p * k) - 0.5) > 1e-4
            assert clear.mean() > 0.99
            np.testing.assert_array_equal(got[clear], np.rint(k * p)[clear])
            assert np.abs(got - np.rint(k * p)).max() <= 1
    agreement = compare_with_ort(path, xs)
    assert agreement.max_lsb["ORT_DISABLE_ALL"] <= 1                 # the bound, against the definition
    assert agreement.max_lsb["ORT_ENABLE_ALL"] <= 2
    assert agreement.differing["ORT_ENABLE_ALL"] > agreement.differing["ORT_DISABLE_ALL"]
