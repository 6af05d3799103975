"""ONNX models reach qsim through nnef-tools' NNEF 1.0 output (issue 3): small ONNX models built
with onnx.helper, converted with `python -m nnef_tools.convert --input-format onnx
--output-format nnef --keep-io-names` (a folder; with --compress, <output-model>.tgz; without
--io-transpose the NCHW layout is kept, which is what qsim expects), loaded with qsim.load
and executed in float; onnxruntime is the independent oracle.

Tolerance: float32 results agree within atol 1e-4 + rtol 1e-4 (both sides accumulate in float32
in different orders; the values are O(1)).

Test-only packages: onnx, onnxruntime, nnef-tools (pip install onnx onnxruntime nnef-tools).
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the test-only package onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs the test-only package onnxruntime "
                                                "(pip install onnxruntime)")
pytest.importorskip("nnef_tools", reason="needs the test-only package nnef-tools (pip install nnef-tools)")

import qsim  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

OPSET = 13
ATOL = RTOL = 1e-4


def _const(name, array):
    array = np.asarray(array, dtype=np.float32)
    return helper.make_tensor(name, TensorProto.FLOAT, array.shape, array.reshape(-1).tolist())


def _model(name, nodes, inputs, output, output_shape, initializers):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)],
        initializer=[_const(k, v) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def conv_net(rng):
    """Convolutions of every kind, relu/relu6, pools, residual add, GAP, flatten, gemm, softmax."""
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3  # noqa: E731
    nodes = [
        # stride 2, asymmetric pads (0, 1) as TF 'SAME' exports write them
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 0, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        # depthwise 3x3, pads 1
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "zero", "six"], ["r2"]),                  # relu6
        # grouped 1x1 (2 groups), no bias
        helper.make_node("Conv", ["r2", "w3"], ["c3"], kernel_shape=[1, 1], group=2),
        helper.make_node("Add", ["c3", "r1"], ["a3"]),                            # residual
        helper.make_node("MaxPool", ["a3"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        # average pool with padding that is not counted (ONNX default count_include_pad = 0)
        helper.make_node("AveragePool", ["a3"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["p1", "p2"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w4", "b4"], ["c4"], kernel_shape=[3, 3], strides=[1, 1],
                         dilations=[2, 2], pads=[2, 2, 2, 2]),
        helper.make_node("Sigmoid", ["c4"], ["s4"]),
        helper.make_node("GlobalAveragePool", ["s4"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w5", "b5"], ["fc"], transB=1),
        helper.make_node("Softmax", ["fc"], ["y"], axis=1),
    ]
    init = {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(8, 1, 3, 3), "b2": w(8), "w3": w(8, 4, 1, 1),
            "zero": np.float32(0.0), "six": np.float32(6.0), "w4": w(6, 16, 3, 3), "b4": w(6),
            "w5": w(5, 6), "b5": w(5)}
    return _model("conv_net", nodes, [("x", [1, 3, 17, 17])], "y", [1, 5], init)


def mlp(rng):
    """matmul + add (bias), sigmoid, reshape, concat, softmax."""
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5  # noqa: E731
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 6])
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h1"]),
        helper.make_node("Sigmoid", ["h1"], ["s1"]),
        helper.make_node("MatMul", ["x", "w2"], ["m2"]),
        helper.make_node("Relu", ["m2"], ["r2"]),
        helper.make_node("Concat", ["s1", "r2"], ["cat"], axis=1),
        helper.make_node("Constant", [], ["shape"], value=shape),
        helper.make_node("Reshape", ["cat", "shape"], ["y0"]),
        helper.make_node("Softmax", ["y0"], ["y"], axis=-1),
    ]
    init = {"w1": w(10, 8), "b1": w(8), "w2": w(10, 4)}
    return _model("mlp", nodes, [("x", [1, 10])], "y", [2, 6], init)


MODELS = {"conv_net": conv_net, "mlp": mlp}

_DRIVER = textwrap.dedent("""
    import runpy, sys
    for argv in {jobs!r}:
        sys.argv = ["nnef_tools.convert"] + argv
        try:
            runpy.run_module("nnef_tools.convert", run_name="__main__")
        except SystemExit as e:
            if e.code:
                raise SystemExit(f"nnef_tools.convert {{argv}} exited with {{e.code}}")
""")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """{name: (onnx path, NNEF folder, NNEF .tgz)}: every model converted in ONE subprocess
    (nnef_tools is slow to import), with the documented command-line flags."""
    root = tmp_path_factory.mktemp("onnx")
    rng = np.random.default_rng(3)
    jobs, paths = [], {}
    for name, build in MODELS.items():
        src = root / f"{name}.onnx"
        onnx.save(build(rng), str(src))
        common = ["--input-format", "onnx", "--output-format", "nnef", "--input-model", str(src),
                  "--keep-io-names"]
        jobs.append(common + ["--output-model", str(root / f"{name}_nnef")])
        # with --compress nnef-tools writes <output-model>.tgz
        jobs.append(common + ["--output-model", str(root / f"{name}_packed"), "--compress"])
        paths[name] = (src, root / f"{name}_nnef", root / f"{name}_packed.tgz")
    done = subprocess.run([sys.executable, "-c", _DRIVER.format(jobs=jobs)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return paths


def _onnx_run(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_converted_models_match_onnxruntime(converted, name):
    src, folder, tgz = converted[name]
    rng = np.random.default_rng(11)
    for path in (folder, tgz):
        graph = qsim.load(str(path))
        x_shape = graph.tensor(graph.inputs[0]).shape
        for _ in range(2):
            x = rng.standard_normal(x_shape).astype(np.float32)
            got = execute(graph, {graph.inputs[0]: x})[graph.outputs[0]]
            want = _onnx_run(src, x)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=ATOL, rtol=RTOL, err_msg=f"{name} from {path}")


def test_conv_net_operators_arrive_whole(converted):
    """nnef-tools writes conv/max_pool/avg_pool/linear/softmax as NNEF 1.0 operations that
    qsim keeps as the compound NNEF 2.0 operators the quantizer has rules for."""
    graph = qsim.load(str(converted["conv_net"][1]))
    kinds = [op.kind.name for op in graph.ops]
    assert kinds.count("nn.conv") == 4
    for kind in ("nn.relu", "math.clamp", "math.add", "nn.max_pool", "nn.avg_pool", "layout.concat",
                 "nn.sigmoid", "math.mean_reduce", "layout.reshape", "nn.softmax", "nn.linear"):
        assert kind in kinds, (kind, kinds)
    convs = [op for op in graph.ops if op.kind.name == "nn.conv"]
    assert [op.attrs.get("groups") for op in convs][:3] == [1, 8, 2]
