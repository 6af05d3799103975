"""Small multi-output ONNX models (built with onnx.helper) for the per-output scoring tests:
`two_heads` is MTCNN's RNet/ONet shape in small: a box regression [N, 4] as outputs[0], then a
softmax face probability [N, 2]."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _model(nodes, outputs, inits, batch="N") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, 3, 8, 8])
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs]
    graph = helper.make_graph(nodes, "heads", [x], outs, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 9)
    return model


def _trunk(rng):
    """conv 3x3 (4 channels) → relu → flatten: [N, 144]."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("Flatten", ["r1"], ["f"])]
    inits = {"w1": rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32),
             "b1": rng.normal(0, 0.1, 4).astype(np.float32)}
    return nodes, inits


def _head(rng, name, k, inits):
    inits[f"{name}.w"] = rng.normal(0, 0.1, (k, 144)).astype(np.float32)
    inits[f"{name}.b"] = rng.normal(0, 0.1, k).astype(np.float32)
    return helper.make_node("Gemm", ["f", f"{name}.w", f"{name}.b"], [name], transB=1)


def two_heads(rng, batch="N") -> onnx.ModelProto:
    """outputs: 'box' [N, 4] (Gemm), 'prob' [N, 2] (Gemm → Softmax)."""
    nodes, inits = _trunk(rng)
    nodes += [_head(rng, "box", 4, inits), _head(rng, "logits", 2, inits),
              helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    return _model(nodes, ["box", "prob"], inits, batch)


def plain_heads(rng) -> onnx.ModelProto:
    """outputs: 'a' [N, 3] and 'b' [N, 5], both plain Gemm (no softmax), and 'map' [N, 4, 6, 6]."""
    nodes, inits = _trunk(rng)
    nodes += [_head(rng, "a", 3, inits), _head(rng, "b", 5, inits), helper.make_node("Identity", ["r1"], ["map"])]
    return _model(nodes, ["a", "b", "map"], inits)


def classifier(rng) -> onnx.ModelProto:
    """one output 'logits' [N, 10]."""
    nodes, inits = _trunk(rng)
    nodes.append(_head(rng, "logits", 10, inits))
    return _model(nodes, ["logits"], inits)
