"""qsim.onnx on the blocks of common networks, built with onnx.helper the way PyTorch exports
them (dynamic batch, Shape→Gather→Unsqueeze→Concat→Reshape chains, Constant nodes): float
execution vs onnxruntime, through the API and through `qsim run model.onnx --input x.npy`.

Bound for a block (onnx_helpers): first-order error propagation. Each sum of K products adds
at most γ_K·Σ|a b|; monotone activations that are 1-Lipschitz (ReLU, Clip, max pooling,
PReLU/LeakyReLU with |slope| ≤ 1) pass errors on unamplified, so every output is within
2·γ_n·S of the exact value on both sides, n = the roundings along the longest path (Σ K_l plus
one per element-wise op) and S = the output of the same block with |x|, |W| and batch-norm
means 0 (`abs_block`), which bounds every partial sum's magnitude. Gates (sigmoid,
hard-sigmoid: slope ≤ 1/4 resp. 1/6) and products with them keep that form (|gate| ≤ 1).
The transformer layer's layer norms divide by σ: their error gain is max|scale|/σ_min, taken
from onnxruntime's intermediate values and stated in the test.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnx_helpers import EPS32, abs_block, assert_within, gamma, init, make_model, run_ort, run_qsim, save, tensor_info

R = np.random.default_rng(7)


def normal(*shape, scale=1.0):
    return (R.normal(size=shape) * scale).astype(np.float32)


def kaiming(*shape):
    fan_in = int(np.prod(shape[1:]))
    return normal(*shape, scale=np.sqrt(2.0 / fan_in))


def bn(prefix: str, c: int, x: str, y: str):
    inits = [init(f"{prefix}.g", 1 + normal(c, scale=0.1)), init(f"{prefix}.b", normal(c, scale=0.1)),
             init(f"{prefix}.m", normal(c, scale=0.1)), init(f"{prefix}.v", 1 + np.abs(normal(c, scale=0.1)))]
    node = helper.make_node("BatchNormalization", [x, f"{prefix}.g", f"{prefix}.b", f"{prefix}.m", f"{prefix}.v"],
                            [y], name=prefix, epsilon=1e-5)
    return [node], inits


def conv(name, x, y, w, pads=1, group=1, strides=1, bias=True):
    inits = [init(f"{name}.weight", w)] + ([init(f"{name}.bias", normal(w.shape[0], scale=0.1))] if bias else [])
    node = helper.make_node("Conv", [x, f"{name}.weight"] + ([f"{name}.bias"] if bias else []), [y], name=name,
                            pads=[pads] * 4, group=group, strides=[strides] * 2, kernel_shape=list(w.shape[2:]))
    return [node], inits


def check_block(tmp_path, model, feeds, n_roundings, gain=1.0):
    path = save(model, tmp_path)
    got = run_qsim(path, feeds, batch=feeds["x"].shape[0])
    ref = run_ort(model, feeds)
    s = abs_block(model, feeds)
    for name in ref:
        assert_within(got[name], ref[name], 2 * gamma(n_roundings) * gain * s[name], name)
    return path, ref


def resnet_basic_block(c=8):
    nodes, inits = [], []
    for part in (conv("conv1", "x", "c1", kaiming(c, c, 3, 3), bias=False), bn("bn1", c, "c1", "b1"),
                 ([helper.make_node("Relu", ["b1"], ["r1"])], []),
                 conv("conv2", "r1", "c2", kaiming(c, c, 3, 3), bias=False), bn("bn2", c, "c2", "b2"),
                 ([helper.make_node("Add", ["b2", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], [])):
        nodes += part[0]
        inits += part[1]
    return make_model(nodes, [("x", ["N", c, 8, 8])], [("y", None)], inits, 13)


def inverted_residual(c=8, expand=4):
    h = c * expand
    nodes, inits = [], []
    six = [init("zero", np.float32(0)), init("six", np.float32(6))]
    for part in (conv("expand", "x", "e", kaiming(h, c, 1, 1), pads=0, bias=False), bn("bn_e", h, "e", "eb"),
                 ([helper.make_node("Clip", ["eb", "zero", "six"], ["er"])], six),
                 conv("dw", "er", "d", kaiming(h, 1, 3, 3), group=h, bias=False), bn("bn_d", h, "d", "db"),
                 ([helper.make_node("Clip", ["db", "zero", "six"], ["dr"])], []),
                 conv("project", "dr", "p", kaiming(c, h, 1, 1), pads=0, bias=False), bn("bn_p", c, "p", "pb"),
                 ([helper.make_node("Add", ["x", "pb"], ["y"])], [])):
        nodes += part[0]
        inits += part[1]
    return make_model(nodes, [("x", ["N", c, 6, 6])], [("y", None)], inits, 13)


def se_hardswish_block(c=8, squeeze=4):
    nodes, inits = [], []
    for part in (conv("conv", "x", "c", kaiming(c, c, 3, 3)), ([helper.make_node("HardSwish", ["c"], ["h"]),
                                                                helper.make_node("GlobalAveragePool", ["h"], ["g"])], []),
                 conv("fc1", "g", "f1", kaiming(squeeze, c, 1, 1), pads=0),
                 ([helper.make_node("Relu", ["f1"], ["f1r"])], []),
                 conv("fc2", "f1r", "f2", kaiming(c, squeeze, 1, 1), pads=0),
                 ([helper.make_node("HardSigmoid", ["f2"], ["gate"], alpha=1 / 6, beta=0.5),
                   helper.make_node("Mul", ["h", "gate"], ["y"])], [])):
        nodes += part[0]
        inits += part[1]
    return make_model(nodes, [("x", ["N", c, 6, 6])], [("y", None)], inits, 14)


def channel_shuffle_block(c=8, groups=2):
    """ShuffleNetV2 unit (stride 1) as torchvision exports it: Split, branch, Concat, then the
    shuffle with batch taken from Shape (Shape→Gather→Unsqueeze→Concat→Reshape)."""
    half = c // 2
    nodes = [helper.make_node("Split", ["x", "split"], ["x1", "x2"], axis=1)]
    inits = [init("split", np.asarray([half, half], np.int64))]
    for part in (conv("b1", "x2", "b1o", kaiming(half, half, 1, 1), pads=0),
                 ([helper.make_node("Relu", ["b1o"], ["b1r"])], []),
                 conv("b2", "b1r", "b2o", kaiming(half, 1, 3, 3), group=half)):
        nodes += part[0]
        inits += part[1]
    nodes += [
        helper.make_node("Concat", ["x1", "b2o"], ["cat"], axis=1),
        helper.make_node("Shape", ["cat"], ["shape"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.asarray(0, np.int64))),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "rest"], ["shape5"], axis=0),
        helper.make_node("Reshape", ["cat", "shape5"], ["grouped"]),
        helper.make_node("Transpose", ["grouped"], ["swapped"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Concat", ["batch1", "rest4"], ["shape4"], axis=0),
        helper.make_node("Reshape", ["swapped", "shape4"], ["y"]),
    ]
    inits += [init("axes0", np.asarray([0], np.int64)), init("rest", np.asarray([groups, c // groups, 5, 5], np.int64)),
              init("rest4", np.asarray([c, 5, 5], np.int64))]
    return make_model(nodes, [("x", ["N", c, 5, 5])], [("y", None)], inits, 13)


def prelu_cnn():
    """MTCNN RNet-like: conv, PReLU, max pool with ceil_mode, conv, PReLU, flatten, Gemm, two heads
    (softmax face probability, box regression)."""
    nodes, inits = [], []
    for part in (conv("conv1", "x", "c1", kaiming(6, 3, 3, 3), pads=0),
                 ([helper.make_node("PRelu", ["c1", "a1"], ["p1"]),
                   helper.make_node("MaxPool", ["p1"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
                  [init("a1", np.abs(normal(6, 1, 1, scale=0.25)))]),
                 conv("conv2", "m1", "c2", kaiming(8, 6, 3, 3), pads=0),
                 ([helper.make_node("PRelu", ["c2", "a2"], ["p2"]), helper.make_node("Flatten", ["p2"], ["f"]),
                   helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["h"], transB=1),
                   helper.make_node("Gemm", ["h", "cls.weight", "cls.bias"], ["logits"], transB=1),
                   helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
                   helper.make_node("Gemm", ["h", "box.weight", "box.bias"], ["box"], transB=1)],
                  [init("a2", np.abs(normal(8, 1, 1, scale=0.25))), init("fc.weight", kaiming(16, 8 * 3 * 3)),
                   init("fc.bias", normal(16, scale=0.1)), init("cls.weight", kaiming(2, 16)),
                   init("cls.bias", normal(2, scale=0.1)), init("box.weight", kaiming(4, 16)),
                   init("box.bias", normal(4, scale=0.1))])):
        nodes += part[0]
        inits += part[1]
    return make_model(nodes, [("x", ["N", 3, 12, 12])], [("prob", None), ("box", None)], inits, 13)


def test_resnet_basic_block(tmp_path):
    x = normal(2, 8, 8, 8)
    # longest path: 3x3 conv (72 terms), bn (4), relu, conv (72), bn (4), add: n = 160
    check_block(tmp_path, resnet_basic_block(), {"x": x}, 160)


def test_inverted_residual(tmp_path):
    check_block(tmp_path, inverted_residual(), {"x": normal(1, 8, 6, 6)}, 8 + 4 + 9 + 4 + 32 + 4 + 2)


def test_se_hardswish_block(tmp_path):
    # conv 72 + hardswish 4 + mean 36 + fc 8 + fc 4 + hardsigmoid 3 + mul 1
    check_block(tmp_path, se_hardswish_block(), {"x": normal(2, 8, 6, 6)}, 72 + 4 + 36 + 8 + 4 + 4 + 1)


def test_channel_shuffle_block_folds_shape_chain(tmp_path):
    model = channel_shuffle_block()
    path, _ = check_block(tmp_path, model, {"x": normal(3, 8, 5, 5)}, 4 + 9 + 2)
    import qsim.onnx
    graph = qsim.onnx.load(path, batch=3)
    kinds = [op.kind.name for op in graph.ops]
    # the Shape→Gather→Unsqueeze→Concat chain folded at import: only data ops remain
    assert "layout.shape" not in kinds and "layout.gather" not in kinds
    assert kinds.count("layout.reshape") == 2 and kinds.count("layout.transpose") == 1
    assert graph.tensor("x").shape == (3, 8, 5, 5)


def test_prelu_cnn_two_heads(tmp_path):
    model = prelu_cnn()
    x = normal(2, 3, 12, 12)
    path = save(model, tmp_path)
    got, ref = run_qsim(path, {"x": x}, batch=2), run_ort(model, {"x": x})
    s = abs_block(model, {"x": x})
    # box: conv 27 + prelu + conv 54 + prelu + fc 72 + fc 16 (+ biases): n = 175
    assert_within(got["box"], ref["box"], 2 * gamma(175) * s["box"], "box")
    # prob = softmax of the logits: the Jacobian's row sums of |.| are 2 p (1 - p) <= 1/2, so
    # |d prob| <= max |d logit| / 2, plus softmax's own exp/sum/div roundings (8 EPS32)
    logit_error = 2 * gamma(175) * float(np.max(abs_logits(model, x)))
    assert_within(got["prob"], ref["prob"], logit_error / 2 + 8 * EPS32, "prob")


def abs_logits(model, x):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.append(tensor_info("logits", None))
    return abs_block(m, {"x": x})["logits"]


def transformer_encoder_layer(d=16, heads=2, ff=32, seq=5):
    """torch.nn.TransformerEncoderLayer (batch_first, norm_first=False, activation gelu) as the
    TorchScript exporter writes it at opset 17: MatMul + Add projections, head split through
    Shape/Gather/Concat/Reshape, Transpose, scaled QKᵀ, Softmax, AV, output projection,
    residual + LayerNormalization, feed-forward with the erf form of GELU (Div, Erf, Add, Mul,
    Mul), residual + LayerNormalization."""
    hd = d // heads
    inits = [init("Wq", normal(d, d, scale=d ** -0.5)), init("bq", normal(d, scale=0.1)),
             init("Wk", normal(d, d, scale=d ** -0.5)), init("bk", normal(d, scale=0.1)),
             init("Wv", normal(d, d, scale=d ** -0.5)), init("bv", normal(d, scale=0.1)),
             init("Wo", normal(d, d, scale=d ** -0.5)), init("bo", normal(d, scale=0.1)),
             init("W1", normal(d, ff, scale=d ** -0.5)), init("b1", normal(ff, scale=0.1)),
             init("W2", normal(ff, d, scale=ff ** -0.5)), init("b2", normal(d, scale=0.1)),
             init("ln1.g", 1 + normal(d, scale=0.1)), init("ln1.b", normal(d, scale=0.1)),
             init("ln2.g", 1 + normal(d, scale=0.1)), init("ln2.b", normal(d, scale=0.1)),
             init("i0", np.asarray(0, np.int64)), init("i1", np.asarray(1, np.int64)),
             init("ax0", np.asarray([0], np.int64)), init("heads_hd", np.asarray([heads, hd], np.int64)),
             init("d_", np.asarray([d], np.int64)), init("scale", np.float32(np.sqrt(hd))),
             init("sqrt2", np.float32(np.sqrt(2.0))), init("one", np.float32(1.0)), init("half", np.float32(0.5))]
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["xs"]), n("Gather", ["xs", "i0"], ["B"]), n("Gather", ["xs", "i1"], ["S"]),
             n("Unsqueeze", ["B", "ax0"], ["B1"]), n("Unsqueeze", ["S", "ax0"], ["S1"]),
             n("Concat", ["B1", "S1", "heads_hd"], ["split_shape"], axis=0),
             n("Concat", ["B1", "S1", "d_"], ["merge_shape"], axis=0)]
    for p in "qkv":
        nodes += [n("MatMul", ["x", f"W{p}"], [f"{p}m"]), n("Add", [f"{p}m", f"b{p}"], [f"{p}a"]),
                  n("Reshape", [f"{p}a", "split_shape"], [f"{p}r"]),
                  n("Transpose", [f"{p}r"], [f"{p}t"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["qt", "kt"], ["qk"]), n("Div", ["qk", "scale"], ["qks"]),
              n("Softmax", ["qks"], ["att"], axis=-1), n("MatMul", ["att", "vt"], ["av"]),
              n("Transpose", ["av"], ["avt"], perm=[0, 2, 1, 3]), n("Reshape", ["avt", "merge_shape"], ["avm"]),
              n("MatMul", ["avm", "Wo"], ["om"]), n("Add", ["om", "bo"], ["o"]), n("Add", ["x", "o"], ["r1"]),
              n("LayerNormalization", ["r1", "ln1.g", "ln1.b"], ["h1"], axis=-1, epsilon=1e-5),
              n("MatMul", ["h1", "W1"], ["f1m"]), n("Add", ["f1m", "b1"], ["f1"]),
              n("Div", ["f1", "sqrt2"], ["gd"]), n("Erf", ["gd"], ["ge"]), n("Add", ["ge", "one"], ["g1"]),
              n("Mul", ["f1", "g1"], ["gm"]), n("Mul", ["gm", "half"], ["g"]),
              n("MatMul", ["g", "W2"], ["f2m"]), n("Add", ["f2m", "b2"], ["f2"]), n("Add", ["h1", "f2"], ["r2"]),
              n("LayerNormalization", ["r2", "ln2.g", "ln2.b"], ["y"], axis=-1, epsilon=1e-5)]
    return make_model(nodes, [("x", ["batch", seq, d])], [("y", None)], inits, 17)


def test_transformer_encoder_layer(tmp_path):
    model = transformer_encoder_layer()
    x = normal(2, 5, 16)
    path = save(model, tmp_path)
    got = run_qsim(path, {"x": x}, batch=2)["y"]
    ref = run_ort(model, {"x": x})["y"]
    # The output of a layer norm is (r - mean)/σ·g + b with |(r - mean)/σ| ≤ sqrt(d) = 4; an error
    # e in r moves it by at most 2·e·max|g|/σ_min. The errors reaching r2 come from sums of at most
    # 16 + 16 + 5 + 16 + 16 + 32 terms (projections, QKᵀ, AV, output, FF) of values bounded by the
    # abs-model (≤ 40 here, checked below), amplified by ln1's gain once more: bound
    # 2·γ_n·S·(max|g|/σ_min)² with n = 150 (sums, softmax, erf and the element-wise ops).
    r = np.asarray(run_ort_intermediate(model, x, ["r1", "r2"]))
    sigma_min = min(float(np.sqrt(np.var(v, axis=-1)).min()) for v in r)
    gain = 2 * 1.3 / sigma_min
    s = float(np.abs(r).max()) * 4
    assert s <= 40
    assert_within(got, ref, 2 * gamma(150) * s * gain ** 2, "y")


def run_ort_intermediate(model, x, names):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    for name in names:
        m.graph.output.append(tensor_info(name, None))
    out = run_ort(m, {"x": x})
    return [out[name] for name in names]


def test_cli_run_matches_onnxruntime(tmp_path):
    """`qsim run model.onnx --input x.npy --output y.npy` (the CLI route through qsim.load)."""
    model = resnet_basic_block()
    path = save(model, tmp_path)
    x = normal(1, 8, 8, 8)
    np.save(tmp_path / "x.npy", x)
    done = subprocess.run([sys.executable, "-m", "qsim", "run", path, "--input", str(tmp_path / "x.npy"),
                           "--output", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "y.npy")
    ref = run_ort(model, {"x": x})["y"]
    assert_within(got, ref, 2 * gamma(160) * abs_block(model, {"x": x})["y"], "y")
    check = subprocess.run([sys.executable, "-m", "qsim", "check", path], capture_output=True, text=True)
    assert check.returncode == 0 and "ONNX" in check.stdout and "nn.conv x2" in check.stdout


@pytest.mark.parametrize("batch", [1, 4])
def test_dynamic_batch_takes_the_given_batch(tmp_path, batch):
    import qsim
    path = save(resnet_basic_block(), tmp_path)
    graph = qsim.load(path, batch=batch)
    assert graph.tensor("x").shape == (batch, 8, 8, 8)
    assert graph.tensor("y").shape == (batch, 8, 8, 8)


def test_quantize_reads_onnx_and_keeps_its_names(tmp_path):
    """`qsim quantize model.onnx --calib` goes through the same loader (the integer lowerings of
    newer operators are issue 13 items 2-3; this block uses conv, batch norm, relu, add)."""
    model = resnet_basic_block(c=4)
    path = save(model, tmp_path)
    np.save(tmp_path / "calib.npy", normal(4, 4, 8, 8))
    out = tmp_path / "q"
    done = subprocess.run([sys.executable, "-m", "qsim", "quantize", path, "--calib", str(tmp_path / "calib.npy"),
                           "-o", str(out), "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import qsim
    graph = qsim.load(str(out))
    assert graph.inputs == ("x",) and graph.outputs == ("y",)
    assert {op.kind.name for op in graph.ops} <= {"tosa.CONV2D", "tosa.RESCALE", "tosa.ADD", "tosa.CLAMP",
                                                   "tosa.TRANSPOSE", "tosa.IDENTITY", "tosa.RESHAPE"}
