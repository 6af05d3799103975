"""Building small ONNX models in code (onnx.helper) and comparing qsim's float execution with
onnxruntime, the independent oracle.

Bounds (never exact equality of rounded results, never arbitrary tolerances): float32 has unit
roundoff u = 2^-24 (EPS32 = 2u is the spacing at 1). A result computed with n roundings of
values of magnitude at most M differs from the exact one by at most about n·u·M (Higham,
"Accuracy and Stability of Numerical Algorithms", 3.1: |fl(Σ a_i b_i) - Σ a_i b_i| ≤ γ_n Σ|a_i b_i|,
γ_n = n u / (1 - n u)); two implementations that each meet that bound differ by at most twice
it. Each test says its n and how it bounds M (`magnitude`: the same model run by onnxruntime
on |inputs| and |weights|, which gives Σ|a_i b_i| per output element for sums of products).
Operators without rounding (layout, max, relu, comparisons) have the bound 0.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import qsim.onnx
from qsim.runtime.executor import execute

EPS32 = float(np.finfo(np.float32).eps)   # 2^-23 = 2u
U32 = EPS32 / 2

_ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL,
               np.int32: TensorProto.INT32}


def gamma(n: int) -> float:
    """γ_n = n u / (1 - n u) (Higham 3.1): relative error bound of n float32 roundings."""
    return n * U32 / (1 - n * U32)


def tensor_info(name: str, shape, dtype=np.float32):
    return helper.make_tensor_value_info(name, _ONNX_TYPES[np.dtype(dtype).type], shape)


def init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 17, name: str = "g") -> onnx.ModelProto:
    """`inputs`/`outputs`: (name, shape[, dtype]) tuples or ValueInfoProtos; output shapes may be None."""
    def info(spec):
        return spec if isinstance(spec, onnx.ValueInfoProto) else tensor_info(*spec)
    graph = helper.make_graph(list(nodes), name, [info(i) for i in inputs], [info(o) for o in outputs],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)     # onnxruntime reads IR versions up to 9/10
    return model


def save(model: onnx.ModelProto, folder, name: str = "model.onnx") -> str:
    path = os.path.join(os.fspath(folder), name)
    onnx.save(model, path)
    return path


def run_qsim(path: str, feeds: dict, **kw) -> dict:
    graph = qsim.onnx.load(path, **kw)
    values = execute(graph, feeds)
    return {name: values[name] for name in graph.outputs}


def run_ort(model_or_path, feeds: dict) -> dict:
    blob = model_or_path.SerializeToString() if isinstance(model_or_path, onnx.ModelProto) else model_or_path
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1       # results must not depend on thread count
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def magnitude(model: onnx.ModelProto, feeds: dict) -> dict:
    """onnxruntime's outputs of the model with every float initializer and input replaced by its
    absolute value: for sums of products that is Σ|a_i b_i| per output element."""
    absolute = onnx.ModelProto()
    absolute.CopyFrom(model)
    for t in absolute.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype.kind == "f":
            t.CopyFrom(numpy_helper.from_array(np.abs(a), t.name))
    return run_ort(absolute, {k: np.abs(v) if v.dtype.kind == "f" else v for k, v in feeds.items()})


def abs_block(model: onnx.ModelProto, feeds: dict) -> dict:
    """The model on |inputs| with |initializers| and batch-norm means 0: for blocks of sums of
    products and monotone 1-Lipschitz activations it bounds every partial sum's magnitude
    (test_onnx_blocks' module doc)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    means = {n.input[3] for n in m.graph.node if n.op_type == "BatchNormalization"}
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype.kind == "f":
            t.CopyFrom(numpy_helper.from_array(np.zeros_like(a) if t.name in means else np.abs(a), t.name))
    return run_ort(m, {k: np.abs(v) if v.dtype.kind == "f" else v for k, v in feeds.items()})


def assert_within(got: np.ndarray, ref: np.ndarray, bound, what: str = "") -> None:
    """|got - ref| ≤ bound elementwise (bound a scalar or an array of ref's shape); same shape."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != onnxruntime's {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != onnxruntime's {ref.dtype}"
    if ref.dtype.kind != "f":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), diff.shape)
    worst = np.unravel_index(np.argmax(diff - bound), diff.shape) if diff.size else ()
    assert np.all(diff <= bound), (f"{what}: |qsim - onnxruntime| = {diff[worst]:.3g} at {worst} exceeds "
                                   f"the bound {bound[worst]:.3g}")
