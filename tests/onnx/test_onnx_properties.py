"""Property tests of qsim.onnx: random small graphs of supported operators agree with
onnxruntime within the float32 bound (onnx_helpers, test_onnx_blocks: 2·γ_n·S with S the
|inputs|/|weights| model's output, valid for sums of products and monotone 1-Lipschitz
activations, the only kinds drawn here); mutated protobuf bytes and mutated model fields
load or fail with a QsimError, never another exception."""
from __future__ import annotations

import numpy as np
import onnx
from hypothesis import given, settings, strategies as st
from onnx import helper

import qsim.onnx
from qsim.errors import QsimError
from onnx_helpers import assert_within, gamma, init, magnitude, make_model, run_ort, run_qsim, save

C, H, W = 3, 6, 6


def _layer(draw, index: int, x: str, c: int, rng: np.random.Generator):
    """One randomly chosen layer on tensor x (c channels, H×W kept): (nodes, inits, channels, terms)."""
    kind = draw(st.sampled_from(["conv1", "conv3", "dwconv", "relu", "clip", "leaky", "add", "mul", "maxpool",
                                 "avgpool", "transpose2", "reshape2", "concat", "pad_slice"]))
    y = f"t{index}"
    name = f"{kind}{index}"
    if kind in ("conv1", "conv3", "dwconv"):
        k = 1 if kind == "conv1" else 3
        out = c if kind == "dwconv" else draw(st.integers(1, 4))
        group = c if kind == "dwconv" else 1
        w = rng.normal(size=(out, c // group, k, k)).astype(np.float32)
        b = rng.normal(size=(out,)).astype(np.float32)
        node = helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [y], name=name, group=group,
                                pads=[k // 2] * 4)
        return [node], [init(f"{name}.w", w), init(f"{name}.b", b)], out, (c // group) * k * k + 1
    if kind == "relu":
        return [helper.make_node("Relu", [x], [y], name=name)], [], c, 0
    if kind == "clip":
        return ([helper.make_node("Clip", [x, f"{name}.lo", f"{name}.hi"], [y], name=name)],
                [init(f"{name}.lo", np.float32(-1.5)), init(f"{name}.hi", np.float32(2.0))], c, 0)
    if kind == "leaky":
        return [helper.make_node("LeakyRelu", [x], [y], name=name, alpha=0.25)], [], c, 1
    if kind in ("add", "mul"):
        v = rng.normal(size=(c, 1, 1)).astype(np.float32)
        op = "Add" if kind == "add" else "Mul"
        return [helper.make_node(op, [x, f"{name}.v"], [y], name=name)], [init(f"{name}.v", v)], c, 1
    if kind in ("maxpool", "avgpool"):
        op = "MaxPool" if kind == "maxpool" else "AveragePool"
        node = helper.make_node(op, [x], [y], name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        return [node], [], c, 0 if kind == "maxpool" else 10
    if kind == "transpose2":
        return ([helper.make_node("Transpose", [x], [f"{y}a"], perm=[0, 3, 2, 1]),
                 helper.make_node("Transpose", [f"{y}a"], [y], perm=[0, 3, 2, 1])], [], c, 0)
    if kind == "reshape2":
        return ([helper.make_node("Flatten", [x], [f"{y}a"]),
                 helper.make_node("Reshape", [f"{y}a", f"{name}.s"], [y])],
                [init(f"{name}.s", np.asarray([0, c, H, -1], np.int64))], c, 0)
    if kind == "concat":
        return [helper.make_node("Concat", [x, x], [y], axis=1)], [], 2 * c, 0
    pads = np.asarray([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    return ([helper.make_node("Pad", [x, f"{name}.p"], [f"{y}a"]),
             helper.make_node("Slice", [f"{y}a", f"{name}.st", f"{name}.en", f"{name}.ax"], [y])],
            [init(f"{name}.p", pads), init(f"{name}.st", np.asarray([1, 2], np.int64)),
             init(f"{name}.en", np.asarray([1 + H, 2 + W], np.int64)), init(f"{name}.ax", np.asarray([2, 3], np.int64))],
            c, 0)


@st.composite
def random_models(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    nodes, inits, x, c, terms = [], [], "x", C, 0
    for i in range(draw(st.integers(1, 5))):
        n, w, c, t = _layer(draw, i, x, c, rng)
        nodes += n
        inits += w
        terms += t + 1
        x = n[-1].output[0]
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    opset = draw(st.sampled_from([13, 17, 21]))
    model = make_model(nodes, [("x", ["N", C, H, W])], [("y", None)], inits, opset)
    feeds = {"x": rng.normal(size=(draw(st.integers(1, 2)), C, H, W)).astype(np.float32)}
    return model, feeds, terms


@settings(derandomize=True, deadline=None, max_examples=40)
@given(random_models())
def test_random_graphs_match_onnxruntime(tmp_path_factory, case):
    model, feeds, terms = case
    path = save(model, tmp_path_factory.mktemp("m"))
    got = run_qsim(path, feeds, batch=feeds["x"].shape[0])["y"]
    ref = run_ort(model, feeds)["y"]
    assert_within(got, ref, 2 * gamma(terms + 1) * magnitude(model, feeds)["y"], "y")


def _seed_model() -> bytes:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)]
    inits = [init("w", np.ones((2, 1, 3, 3), np.float32)), init("b", np.zeros(2, np.float32)),
             init("i0", np.asarray(0, np.int64)), init("ax", np.asarray([0], np.int64)),
             init("rest", np.asarray([-1], np.int64)), init("fw", np.ones((3, 32), np.float32)),
             init("fb", np.zeros(3, np.float32))]
    return make_model(nodes, [("x", ["N", 1, 4, 4])], [("y", None)], inits, 17).SerializeToString()


SEED = _seed_model()


def _load_bytes(tmp_path_factory, blob: bytes):
    path = tmp_path_factory.mktemp("mut") / "m.onnx"
    path.write_bytes(blob)
    try:
        qsim.onnx.load(str(path))
    except QsimError as err:
        assert err.message  # a located, explained refusal


@settings(derandomize=True, deadline=None, max_examples=150)
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, len(SEED)))
def test_mutated_bytes_never_raise_a_traceback(tmp_path_factory, flips, cut):
    blob = bytearray(SEED)
    for pos, value in flips:
        blob[pos] = value
    _load_bytes(tmp_path_factory, bytes(blob[:max(cut, 1)]))


@settings(derandomize=True, deadline=None, max_examples=120)
@given(st.data())
def test_mutated_fields_never_raise_a_traceback(tmp_path_factory, data):
    model = onnx.ModelProto()
    model.ParseFromString(SEED)
    g = model.graph
    for _ in range(data.draw(st.integers(1, 3))):
        what = data.draw(st.sampled_from(["dim", "attr", "dtype", "order", "opset", "input", "init"]))
        big = st.sampled_from([-(2 ** 62), -1, 0, 1, 3, 7, 2 ** 31, 2 ** 62])
        if what == "dim":
            t = data.draw(st.sampled_from(list(g.initializer)))
            if t.dims:
                t.dims[data.draw(st.integers(0, len(t.dims) - 1))] = data.draw(big)
        elif what == "attr":
            node = data.draw(st.sampled_from([n for n in g.node if n.attribute]))
            a = node.attribute[0]
            if a.ints:
                a.ints[data.draw(st.integers(0, len(a.ints) - 1))] = data.draw(big)
            else:
                a.i = data.draw(big)
        elif what == "dtype":
            t = data.draw(st.sampled_from(list(g.initializer)))
            t.data_type = data.draw(st.integers(0, 25))
        elif what == "order":
            nodes = list(g.node)
            order = data.draw(st.permutations(range(len(nodes))))
            del g.node[:]
            g.node.extend(nodes[i] for i in order)
        elif what == "opset":
            model.opset_import[0].version = data.draw(st.integers(-1, 30))
        elif what == "input":
            node = data.draw(st.sampled_from(list(g.node)))
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(
                st.sampled_from(["", "x", "y", "nope", "r", "w"]))
        else:
            t = data.draw(st.sampled_from(list(g.initializer)))
            t.raw_data = t.raw_data[: data.draw(st.integers(0, len(t.raw_data)))]
    _load_bytes(tmp_path_factory, model.SerializeToString())
