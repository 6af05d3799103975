"""The `onnx` fuzz target: valid ONNX models (built with onnx.helper: a small CNN, a PyTorch-
style shape chain, a transformer-like attention core, random layer stacks) mutated as bytes
(flips, splices, truncation) and as structure (dims, attribute values, element types, node
order, opset, input names, initializer data, external-data entries that point out of the
folder or nowhere), run as `qsim check m.onnx` or `qsim run m.onnx --input x.npy`."""
from __future__ import annotations

import io
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from . import mutate
from .runner import Case


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, inits, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fz", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _cnn(rng: np.random.Generator) -> onnx.ModelProto:
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             n("BatchNormalization", ["c", "g", "be", "m", "v"], ["bn"], name="bn"),
             n("Clip", ["bn", "lo", "hi"], ["r"], name="relu6"),
             n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, name="pool"),
             n("PRelu", ["p", "a"], ["pr"], name="prelu"),
             n("GlobalAveragePool", ["pr"], ["gap"]), n("Flatten", ["gap"], ["f"]),
             n("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")]
    f = np.float32
    inits = [_init("w", rng.normal(size=(4, 1, 3, 3)).astype(f)), _init("b", np.zeros(4, f)),
             _init("g", np.ones(4, f)), _init("be", np.zeros(4, f)), _init("m", np.zeros(4, f)),
             _init("v", np.ones(4, f)), _init("lo", f(0)), _init("hi", f(6)), _init("a", np.full((4, 1, 1), 0.25, f)),
             _init("fw", rng.normal(size=(3, 4)).astype(f)), _init("fb", np.zeros(3, f))]
    return _model(nodes, [("x", ["N", 1, 5, 5])], inits)


def _shape_chain(rng: np.random.Generator) -> onnx.ModelProto:
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]), n("Gather", ["s", "i0"], ["b"]), n("Unsqueeze", ["b", "ax"], ["b1"]),
             n("Concat", ["b1", "rest"], ["shape"], axis=0), n("Reshape", ["x", "shape"], ["r"]),
             n("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]), n("Reshape", ["t", "flat"], ["u"]),
             n("Slice", ["u", "st", "en", "axs"], ["sl"]), n("Pad", ["sl", "pads"], ["pd"], mode="reflect"),
             n("Resize", ["pd", "", "sc"], ["y"], mode="nearest")]
    inits = [_init("i0", np.int64(0)), _init("ax", np.asarray([0], np.int64)),
             _init("rest", np.asarray([2, 2, 4, 4], np.int64)), _init("flat", np.asarray([0, 4, 4, 4], np.int64)),
             _init("st", np.asarray([1], np.int64)), _init("en", np.asarray([-1], np.int64)),
             _init("axs", np.asarray([2], np.int64)), _init("pads", np.asarray([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
             _init("sc", np.asarray([1, 1, 2, 2], np.float32))]
    return _model(nodes, [("x", ["N", 4, 4, 4])], inits, 13)


def _attention(rng: np.random.Generator) -> onnx.ModelProto:
    n = helper.make_node
    d = 8
    f = np.float32
    nodes = [n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]), n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["s"]), n("Div", ["s", "sc"], ["ss"]),
             # a causal mask as torch writes it: Trilu of constants (folded), 0 / -inf added to the scores
             n("Trilu", ["ninf", "one"], ["cm"], upper=1), n("Add", ["ss", "cm"], ["ms"]),
             n("Softmax", ["ms"], ["p"], axis=-1),
             n("MatMul", ["p", "x"], ["a"]), n("Add", ["a", "x"], ["r"]),
             n("LayerNormalization", ["r", "lg", "lb"], ["ln"], axis=-1),
             n("Gelu", ["ln"], ["ge"]), n("HardSwish", ["ge"], ["hs"]), n("Sigmoid", ["hs"], ["sg"]),
             n("Where", ["msk", "sg", "hs"], ["w"]), n("ReduceMean", ["w", "rax"], ["y"], keepdims=1)]
    inits = [_init("wq", rng.normal(size=(d, d)).astype(f)), _init("wk", rng.normal(size=(d, d)).astype(f)),
             _init("sc", f(np.sqrt(d))), _init("lg", np.ones(d, f)), _init("lb", np.zeros(d, f)),
             _init("msk", rng.random((3, d)) < 0.5), _init("rax", np.asarray([-1], np.int64)),
             _init("ninf", np.full((3, 3), -np.inf, f)), _init("one", np.int64(1))]
    return _model(nodes, [("x", ["N", 3, d])], inits, 20)


SEEDS = (_cnn, _shape_chain, _attention)
INPUT_SHAPES = {"_cnn": [1, 1, 5, 5], "_shape_chain": [1, 4, 4, 4], "_attention": [1, 3, 8]}
EXTREMES = (-(2 ** 63), -(2 ** 31), -2, -1, 0, 1, 2, 3, 255, 2 ** 16, 2 ** 31 - 1, 2 ** 40, 2 ** 62)


def _mutate_structure(rng: random.Random, model: onnx.ModelProto) -> str:
    g = model.graph
    what = rng.choice(("dim", "attr", "dtype", "order", "opset", "input", "init-data", "external",
                       "graph-input-dim", "op-type", "drop-node"))
    if what == "dim" and len(g.initializer):
        t = rng.choice(list(g.initializer))
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(EXTREMES)
    elif what == "attr":
        nodes = [n for n in g.node if n.attribute]
        if nodes:
            a = rng.choice(nodes).attribute[0]
            if a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice(EXTREMES)
            elif a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(EXTREMES)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice((float("nan"), float("inf"), -1e38, 0.0, -1.0))
            elif a.type == onnx.AttributeProto.STRING:
                a.s = rng.choice((b"", b"wrap", b"\xff", b"SAME_UPPER", b"cubic", b"tf_crop_and_resize"))
    elif what == "dtype" and len(g.initializer):
        rng.choice(list(g.initializer)).data_type = rng.randrange(0, 26)
    elif what == "order":
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    elif what == "opset":
        model.opset_import[0].version = rng.choice((-1, 0, 1, 7, 10, 11, 12, 13, 16, 18, 21, 22, 99))
    elif what == "input":
        node = rng.choice(list(g.node))
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(("", "x", "y", "ghost", node.output[0]))
    elif what == "init-data" and len(g.initializer):
        t = rng.choice(list(g.initializer))
        t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data) + 1)] + bytes(rng.randrange(3))
    elif what == "external" and len(g.initializer):
        t = rng.choice(list(g.initializer))
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", rng.choice(("../x.npy", "/etc/passwd", "w.bin", "", "nope/../../a"))),
                           ("offset", rng.choice(("0", "-5", "x", "99999999999"))),
                           ("length", rng.choice(("4", "0", "", "-1")))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    elif what == "graph-input-dim":
        dims = g.input[0].type.tensor_type.shape.dim
        if dims:
            d = dims[rng.randrange(len(dims))]
            if rng.random() < 0.5:
                d.dim_param = rng.choice(("S", "batch"))     # "batch": the batch wherever it is
            else:
                d.dim_value = rng.choice(EXTREMES)
    elif what == "op-type":
        rng.choice(list(g.node)).op_type = rng.choice(("Conv", "Loop", "If", "Gelu", "Nope", "Split", "Resize", "Trilu", ""))
    elif what == "drop-node" and len(g.node) > 1:
        del g.node[rng.randrange(len(g.node))]
    return what


def _npy(shape, rng: random.Random) -> bytes:
    buf = io.BytesIO()
    arr = np.random.default_rng(rng.randrange(2 ** 32)).normal(size=shape).astype(np.float32)
    if rng.random() < 0.1:
        arr[...] = rng.choice((np.nan, np.inf, -np.inf, 3e38))
    np.save(buf, arr)
    return buf.getvalue()


def model_command(rng: random.Random, files: dict, model: str, input_shape, commands) -> list[str]:
    """The qsim command a fuzzed model file is fed to: `commands` is ((cumulative probability,
    command name), ...) over check, run, quantize and export-vectors; the commands that take an
    input get a seeded x.npy of `input_shape` in `files`. One rng.random() call and then the
    input's, so a seed replays the same case."""
    roll = rng.random()
    name = next(command for limit, command in commands if roll < limit)
    if name in ("run", "export-vectors"):
        files["x.npy"] = _npy(input_shape, rng)
    return {"check": ["check", model],
            "run": ["run", model, "--input", "x.npy"],
            "quantize": ["quantize", model, "-o", "q", "-q"],
            "export-vectors": ["export-vectors", model, "--out", "v", "--input", "x.npy"]}[name]


def serialized_variant(rng: random.Random, model: onnx.ModelProto, mutate_structure, structured: float,
                       max_structural: int, max_byte: int, truncated: float) -> tuple[bytes, str]:
    """`model` as bytes with the kind of change: up to `max_structural` structural mutations
    (share `structured`), byte flips/splices (up to 0.85), truncation (the next `truncated`), or
    valid."""
    pick = rng.random()
    if pick < structured:
        kinds = [mutate_structure(rng, model) for _ in range(rng.randint(1, max_structural))]
        return model.SerializeToString(), "structured:" + "+".join(kinds)
    if pick < 0.85:
        blob = model.SerializeToString()
        for _ in range(rng.randint(1, max_byte)):
            blob = rng.choice((mutate.byte_flip, mutate.byte_splice))(rng, blob)
        return blob, "bytes"
    if pick < 0.85 + truncated:
        blob = model.SerializeToString()
        return blob[:rng.randrange(len(blob))], "truncated"
    return model.SerializeToString(), "valid"


def gen_onnx(rng: random.Random, corpus) -> Case:
    seed = rng.choice(SEEDS)
    model = seed(np.random.default_rng(rng.randrange(2 ** 32)))
    files: dict[str, bytes] = {}
    blob, kind = serialized_variant(rng, model, _mutate_structure, structured=0.6, max_structural=3, max_byte=4,
                                    truncated=0.05)
    files["m.onnx"] = blob
    if rng.random() < 0.2:
        files["w.bin"] = bytes(rng.randrange(64))
    if rng.random() < 0.7:
        argv = ["check", "m.onnx"]
    else:
        files["x.npy"] = _npy(INPUT_SHAPES[seed.__name__], rng)
        argv = ["run", "m.onnx", "--input", "x.npy"] + (["--output", "y.npy"] if rng.random() < 0.3 else [])
    if rng.random() < 0.03:
        argv = ["--max-tensor-bytes", rng.choice(("1", "1K", "64M"))] + argv
    return Case("onnx", f"{seed.__name__.strip('_')}:{kind}", files, argv=argv)
