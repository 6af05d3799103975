"""Integer lowerings of the small blocks of today's CNNs, from ONNX models built in code and from
NNEF 1.0 text: scalar constants in a written folder, weight sub-graphs as nnef-tools writes
them (copy / unsqueeze / transpose of variables, folded before lowering; a PReLU slope among
them, as in nnef-tools' MTCNN), squeeze-and-excitation (MUL of [N,C,1,1] by [N,C,H,W], two computed tensors),
channel shuffle (Split, 5-D reshape and transpose), and Resize (TOSA RESIZE). Each integer
graph is replayed on the TOSA reference and the kernels (equal on every tensor); data
movement is checked code for code, arithmetic against float by SQNR and exact bounds, and
the CLI route `qsim quantize → run / simulate / export-vectors` on written folders (simulate on
the NPU's numpy cycle model, which tests/npu hold equal to the RTL).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

import qsim
import qsim.tosa  # noqa: F401  (registers the TOSA folder form for qsim.load)
from qsim import cli, ir
from qsim.quant.fold_constants import fold_constant_ops
from qsim.quant.params import QuantConfig
from qsim.runtime.executor import execute
from qsim.tensorfile import write_tensor

from .lowering_models import FloatGraph, calibrate_minmax
from .onnx_quantize import init, node, onnx_model, quantize_onnx, replay, run_quantized, sqnr_db, tosa_kinds


def _cli_quantize(tmp_path, model: onnx.ModelProto, calib: np.ndarray, *options) -> str:
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "calib.npy", calib.astype(np.float32))
    out = tmp_path / "q"
    assert cli.main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npy"),
                     "-o", str(out), "-q", *options]) == 0
    return str(out)


# ---------------------------------------------------------------- scalar constants (folders)

def test_a_scalar_constant_survives_the_written_folder(tmp_path, rng, capsys):
    """Add(x, 3): the constant operand is a rank-0 int8 tensor; the folder reloads with it
    rank 0, and run / simulate / export-vectors take the folder."""
    model = onnx_model([node("Add", ["x", "three"], ["y"], name="plus3")], (1, 4, 4, 4), ["y"],
                       [init("three", np.float32(3))])
    calib = rng.normal(0, 2, (8, 4, 4, 4)).astype(np.float32)
    out = _cli_quantize(tmp_path, model, calib, "--observer", "minmax")    # quantize_onnx's observer
    loaded = qsim.load(out)
    scalars = [t for t in loaded.tensors.values() if t.is_constant and t.shape == ()]
    assert scalars and all(np.asarray(t.data).shape == () for t in scalars)
    x = calib[:1]
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", out, "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    graph, lowered = quantize_onnx(tmp_path, model, calib)           # the same lowering in memory
    from qsim.quant.params import quantize
    ints = replay(lowered, quantize(x, lowered.input_quant["x"]))
    assert np.array_equal(y, ints[lowered.tensor_map["y"].name])
    assert cli.main(["simulate", out, "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "sim"),
                     "--engine", "model"]) == 0
    assert "every layer bit-exact" in capsys.readouterr().out
    assert cli.main(["export-vectors", out, "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "v")]) == 0


# ---------------------------------------------------------------- weight sub-graphs

WEIGHT_SUBGRAPHS = """version 1.0;

graph g( input ) -> ( output )
{{
    input = external<scalar>(shape = [1, 2, 6, 6]);
    variable1 = variable<scalar>(shape = [4, 2, 3, 3], label = "variable1");
    variable2 = variable<scalar>(shape = [4], label = "variable2");
    variable3 = variable<scalar>(shape = [4, 2, 1, 1], label = "variable3");
    variable4 = variable<scalar>(shape = [4], label = "variable4");
    filter = copy(variable1);
    bias = unsqueeze(variable2, axes = [0]);
    filter2 = transpose(variable3, axes = [1, 0, 2, 3]);
    slope = unsqueeze(variable4, axes = [0]);
    conv = conv(input, filter, bias, padding = [(1, 1), (1, 1)]);
    hidden = {activation};
    output = conv(hidden, filter2, 0.0);
}}
"""


def _weight_subgraph_model(tmp_path, rng, activation="prelu(conv, slope)"):
    """(folder, weights); CVM has no PReLU: `activation` "relu(conv)" leaves the slope unused."""
    folder = tmp_path / "nnef"
    folder.mkdir()
    (folder / "graph.nnef").write_text(WEIGHT_SUBGRAPHS.format(activation=activation))
    weights = {"variable1": rng.normal(0, 0.3, (4, 2, 3, 3)), "variable2": rng.normal(0, 0.1, (4,)),
               "variable3": rng.normal(0, 0.5, (4, 2, 1, 1)), "variable4": np.array([0.25, -0.1, 0.0, 0.5])}
    for name, w in weights.items():
        write_tensor(folder / f"{name}.dat", w.astype(np.float32))
    np.save(tmp_path / "calib.npy", rng.normal(0, 1, (8, 2, 6, 6)).astype(np.float32))
    return folder, weights


def test_constant_sub_graphs_fold_into_constants(tmp_path, rng):
    folder, weights = _weight_subgraph_model(tmp_path, rng)
    graph = qsim.load(str(folder))
    kinds = [op.kind.name for op in graph.ops]
    folded = fold_constant_ops(graph)
    assert [op.kind.name for op in graph.ops] == kinds              # the input graph is unchanged
    assert [op.kind.name for op in folded.ops] == ["nn.conv", "nn.prelu", "nn.conv"]
    conv1, _, conv2 = folded.ops
    assert np.array_equal(folded.tensor(conv1.inputs[1]).data, weights["variable1"].astype(np.float32))
    assert np.array_equal(folded.tensor(conv1.inputs[2]).data.reshape(-1), weights["variable2"].astype(np.float32))
    assert np.array_equal(folded.tensor(conv2.inputs[1]).data,
                          weights["variable3"].astype(np.float32).transpose(1, 0, 2, 3))
    x = rng.normal(0, 1, (1, 2, 6, 6)).astype(np.float32)
    assert np.array_equal(execute(folded, {"input": x})["output"], execute(graph, {"input": x})["output"])
    assert fold_constant_ops(folded) is folded                       # nothing left to fold


@pytest.mark.parametrize("target", ["tosa", "cvm"])
def test_weight_sub_graphs_quantize_and_simulate(tmp_path, rng, target, capsys):
    folder, _ = _weight_subgraph_model(tmp_path, rng, "prelu(conv, slope)" if target == "tosa" else "relu(conv)")
    out = tmp_path / "q"
    assert cli.main(["quantize", str(folder), "--calib", str(tmp_path / "calib.npy"), "-o", str(out), "-q",
                     "--target", target]) == 0
    np.save(tmp_path / "x.npy", np.load(tmp_path / "calib.npy")[:1])
    if target == "tosa":
        assert cli.main(["simulate", str(out), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "s"),
                         "--engine", "model"]) == 0
        assert "every layer bit-exact" in capsys.readouterr().out


# ---------------------------------------------------------------- squeeze-and-excitation

def _conv(name, x, y, w, pads=1):
    return node("Conv", [x, f"{name}.w", f"{name}.b"], [y], name=name, pads=[pads] * 4), \
        [init(f"{name}.w", w.astype(np.float32)), init(f"{name}.b", np.full(w.shape[0], 0.05, np.float32))]


def se_block(rng, c=8, squeeze=4):
    """MobileNetV3's SE: conv, HardSwish, global mean, 1×1 conv, relu, 1×1 conv, HardSigmoid,
    MUL of the [N,C,1,1] gate with the [N,C,H,W] features."""
    parts = [_conv("conv", "x", "c", rng.normal(0, 0.3, (c, c, 3, 3))),
             ([node("HardSwish", ["c"], ["h"], name="hswish"), node("GlobalAveragePool", ["h"], ["g"], name="gap")], []),
             _conv("fc1", "g", "f1", rng.normal(0, 0.5, (squeeze, c, 1, 1)), 0),
             ([node("Relu", ["f1"], ["f1r"], name="relu")], []),
             _conv("fc2", "f1r", "f2", rng.normal(0, 0.5, (c, squeeze, 1, 1)), 0),
             ([node("HardSigmoid", ["f2"], ["gate"], name="hsig", alpha=1 / 6, beta=0.5),
               node("Mul", ["h", "gate"], ["y"], name="scale")], [])]
    return sum((p[0] if isinstance(p[0], list) else [p[0]] for p in parts), []), sum((p[1] for p in parts), [])


def test_squeeze_excitation_block(tmp_path, rng):
    nodes, inits = se_block(rng)
    model = onnx_model(nodes, (1, 8, 6, 6), ["y"], inits, 14)
    calib = rng.normal(0, 1, (16, 8, 6, 6)).astype(np.float32)
    graph, lowered = quantize_onnx(tmp_path, model, calib)
    kinds = tosa_kinds(lowered)
    assert kinds.count("tosa.TABLE") == 2                # hardswish and hardsigmoid, one TABLE each
    mul = next(op for op in lowered.graph.ops if op.kind.name == "tosa.MUL")
    shapes = sorted(lowered.graph.tensors[n].shape for n in mul.inputs)
    assert shapes == [(1, 1, 1, 8), (1, 6, 6, 8)]         # the gate broadcasts over H and W
    x = rng.normal(0, 1, (1, 8, 6, 6)).astype(np.float32)
    db = sqnr_db(execute(graph, {"x": x})["y"], run_quantized(lowered, x))
    assert db > 25.0, db


# ---------------------------------------------------------------- channel shuffle

def shuffle_unit(rng, c=8, groups=2, hw=5):
    half = c // 2
    nodes = [node("Split", ["x", "split"], ["x1", "x2"], name="split", axis=1)]
    conv_a, ia = _conv("b1", "x2", "b1o", rng.normal(0, 0.5, (half, half, 1, 1)), 0)
    conv_b, ib = _conv("b2", "b1r", "b2o", rng.normal(0, 0.5, (half, half, 3, 3)))
    nodes += [conv_a, node("Relu", ["b1o"], ["b1r"], name="relu"), conv_b,
              node("Concat", ["x1", "b2o"], ["cat"], name="concat", axis=1),
              node("Reshape", ["cat", "shape5"], ["grouped"], name="reshape5"),
              node("Transpose", ["grouped"], ["swapped"], name="shuffle", perm=[0, 2, 1, 3, 4]),
              node("Reshape", ["swapped", "shape4"], ["y"], name="reshape4")]
    inits = [init("split", np.asarray([half, half], np.int64)), *ia, *ib,
             init("shape5", np.asarray([1, groups, c // groups, hw, hw], np.int64)),
             init("shape4", np.asarray([1, c, hw, hw], np.int64))]
    return onnx_model(nodes, (1, c, hw, hw), ["y"], inits, 13)


def test_channel_shuffle_moves_codes_exactly(tmp_path, rng):
    model = shuffle_unit(rng)
    calib = rng.normal(0, 1, (16, 8, 5, 5)).astype(np.float32)
    graph, lowered = quantize_onnx(tmp_path, model, calib)
    assert tosa_kinds(lowered).count("tosa.SLICE") == 2
    from qsim.quant.params import quantize
    ints = replay(lowered, quantize(calib[:1], lowered.input_quant["x"]))
    cat, y = lowered.tensor_map["cat"], lowered.tensor_map["y"]
    assert cat.quant == y.quant
    cat_codes = ints[cat.name].transpose(np.argsort(cat.perm))
    y_codes = ints[y.name].transpose(np.argsort(y.perm))
    # channel k of the output is channel (k % 2) * 4 + k // 2 of the concatenation
    order = [(k % 2) * 4 + k // 2 for k in range(8)]
    assert np.array_equal(y_codes, cat_codes[:, order])
    x = calib[1:2]
    assert sqnr_db(execute(graph, {"x": x})["y"], run_quantized(lowered, x)) > 30.0


def test_channel_shuffle_of_an_nhwc_tensor_takes_one_transpose(tmp_path, rng):
    """After a convolution the integer tensor is NHWC: the shuffle is RESHAPE, one TRANSPOSE of
    the last two axes, RESHAPE (no round trip through NCHW)."""
    conv, inits = _conv("conv", "x", "c", rng.normal(0, 0.5, (6, 3, 3, 3)))
    model = onnx_model([conv, node("Reshape", ["c", "shape5"], ["g5"], name="reshape5"),
                        node("Transpose", ["g5"], ["t5"], name="shuffle", perm=[0, 2, 1, 3, 4]),
                        node("Reshape", ["t5", "shape4"], ["y"], name="reshape4")], (1, 3, 4, 4), ["y"],
                       inits + [init("shape5", np.asarray([1, 3, 2, 4, 4], np.int64)),
                                init("shape4", np.asarray([1, 6, 4, 4], np.int64))], 13)
    calib = rng.normal(0, 1, (8, 3, 4, 4)).astype(np.float32)
    graph, lowered = quantize_onnx(tmp_path, model, calib)
    transposes = [op for op in lowered.graph.ops if op.kind.name == "tosa.TRANSPOSE"]
    assert [op.attrs["perms"] for op in transposes if len(op.attrs["perms"]) == 5] == [(0, 1, 2, 4, 3)]
    assert len(transposes) == 3            # x to NHWC, the shuffle, y back to the float layout
    from qsim.quant.params import quantize
    ints = replay(lowered, quantize(calib[:1], lowered.input_quant["x"]))
    c, y = lowered.tensor_map["c"], lowered.tensor_map["y"]
    c_codes = ints[c.name].transpose(np.argsort(c.perm))
    y_codes = ints[y.name].transpose(np.argsort(y.perm))
    # output channel j·3 + i is input channel i·2 + j (g = 3 groups of 2)
    order = [i * 2 + j for j in range(2) for i in range(3)]
    assert np.array_equal(y_codes, c_codes[:, order])


# ---------------------------------------------------------------- resize

def _bilinear(codes: np.ndarray, out_hw, transform: str) -> np.ndarray:
    """ONNX Resize (linear) of `codes` on H and W, float64, written from the ONNX definition."""
    out = codes.astype(np.float64)
    for axis, n in zip((2, 3), out_hw):
        size = out.shape[axis]
        o = np.arange(n, dtype=np.float64)
        if transform == "align_corners":
            r = o * (size - 1) / (n - 1) if n > 1 else np.zeros(1)
        elif transform == "asymmetric":
            r = o * size / n
        else:                            # half_pixel, pytorch_half_pixel (n > 1)
            r = (o + 0.5) * size / n - 0.5
        r = np.clip(r, 0, size - 1)
        lo = np.floor(r).astype(np.int64)
        hi = np.minimum(lo + 1, size - 1)
        w = (r - lo).reshape([-1 if a == axis else 1 for a in range(4)])
        out = np.take(out, lo, axis=axis) * (1 - w) + np.take(out, hi, axis=axis) * w
    return out


@pytest.mark.parametrize("precision", ["int8", "16x8"])
@pytest.mark.parametrize("transform,in_hw,out_hw", [
    ("half_pixel", (5, 5), (10, 10)), ("asymmetric", (4, 6), (8, 24)), ("pytorch_half_pixel", (5, 3), (10, 6)),
    ("half_pixel", (8, 8), (4, 4)), ("align_corners", (5, 5), (10, 10)), ("align_corners", (3, 5), (5, 9))])
def test_bilinear_resize_rounds_the_interpolated_codes_once(tmp_path, rng, precision, transform, in_hw, out_hw):
    shape = (1, 3) + in_hw
    model = onnx_model([node("Resize", ["x", "", "", "sizes"], ["y"], name="up", mode="linear",
                             coordinate_transformation_mode=transform)], shape, ["y"],
                       [init("sizes", np.asarray((1, 3) + out_hw, np.int64))], 13)
    calib = rng.normal(0, 1, (4,) + shape[1:]).astype(np.float32)
    graph, lowered = quantize_onnx(tmp_path, model, calib, precision)
    assert "tosa.RESIZE" in tosa_kinds(lowered)
    dt = lowered.graph.tensors[lowered.graph.inputs[0]].dtype
    codes = np.concatenate([[dt.min, dt.max, dt.min, dt.max], rng.integers(dt.min, dt.max + 1, int(np.prod(shape)) - 4)])
    codes = codes.reshape(shape)
    ints = replay(lowered, codes)
    v = lowered.tensor_map["y"]
    got = ints[v.name].transpose(np.argsort(v.perm))
    assert v.quant == lowered.input_quant["x"]                      # the grid is kept
    exact = _bilinear(codes, out_hw, transform)
    dyadic = all(_is_dyadic(i, o, transform) for i, o in zip(in_hw, out_hw))
    if dyadic:        # positions exact: one rounding of the exact interpolation
        near_tie = np.abs(exact - np.floor(exact) - 0.5) < 1e-9
        want = np.floor(exact + 0.5)
        assert np.all((got == want) | (near_tie & (np.abs(got - want) == 1)))
    else:             # positions within (o/2 + 1/2)·2^-11 rows per axis (tosa/rules_resize.py)
        step = float(dt.max - dt.min)
        bound = 0.5 + sum(step * (n / 2 + 0.5) / 2 ** 11 for n in out_hw) + 1e-9
        assert np.abs(got - exact).max() <= bound


def _is_dyadic(i, o, transform):
    from fractions import Fraction
    scale = Fraction(i - 1, o - 1) if transform == "align_corners" else Fraction(i, o)
    return (scale * 2 ** 11).denominator == 1 and (scale / 2 * 2 ** 11).denominator == 1


# ---------------------------------------------------------------- a block chain through the CLI

def test_blocks_quantize_and_simulate_every_layer(tmp_path, rng, capsys):
    """SE block → channel shuffle → bilinear ×2 → PReLU per channel, via the CLI."""
    nodes, inits = se_block(rng)
    nodes[-1] = node("Mul", ["h", "gate"], ["se"], name="scale")
    nodes += [node("Reshape", ["se", "shape5"], ["g5"], name="reshape5"),
              node("Transpose", ["g5"], ["t5"], name="shuffle", perm=[0, 2, 1, 3, 4]),
              node("Reshape", ["t5", "shape4"], ["sh"], name="reshape4"),
              node("Resize", ["sh", "", "scales"], ["up"], name="up", mode="linear"),
              node("PRelu", ["up", "slope"], ["y"], name="prelu")]
    inits += [init("shape5", np.asarray([1, 2, 4, 6, 6], np.int64)), init("shape4", np.asarray([1, 8, 6, 6], np.int64)),
              init("scales", np.asarray([1, 1, 2, 2], np.float32)),
              init("slope", rng.uniform(0, 0.5, (8, 1, 1)).astype(np.float32))]
    model = onnx_model(nodes, (1, 8, 6, 6), ["y"], inits, 14)
    calib = rng.normal(0, 1, (8, 8, 6, 6)).astype(np.float32)
    out = _cli_quantize(tmp_path, model, calib)
    np.save(tmp_path / "x.npy", calib[:1])
    capsys.readouterr()
    assert cli.main(["simulate", out, "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "sim"),
                     "--engine", "model"]) == 0
    assert "every layer bit-exact" in capsys.readouterr().out


def _nearest_rows(size: int, n: int, transform: str, mode: str) -> np.ndarray:
    """ONNX Resize (nearest): the source index of each output index, from the ONNX definition."""
    o = np.arange(n, dtype=np.float64)
    if transform == "align_corners":
        r = o * (size - 1) / (n - 1) if n > 1 else np.zeros(1)
    elif transform == "asymmetric":
        r = o * size / n
    else:
        r = (o + 0.5) * size / n - 0.5
    if mode == "floor":
        idx = np.floor(r)
    elif mode == "ceil":
        idx = np.ceil(r)
    elif mode == "round_prefer_floor":
        idx = np.where(r - np.floor(r) == 0.5, np.floor(r), np.floor(r + 0.5))
    else:
        idx = np.where(r - np.floor(r) == 0.5, np.ceil(r), np.floor(r + 0.5))
    return np.clip(idx, 0, size - 1).astype(np.int64)


@pytest.mark.parametrize("transform,mode,in_hw,out_hw", [
    ("asymmetric", "floor", (5, 4), (15, 12)), ("half_pixel", "round_prefer_floor", (6, 9), (4, 6)),
    ("align_corners", "round_prefer_ceil", (4, 5), (7, 13)), ("half_pixel", "ceil", (3, 3), (7, 5)),
    ("asymmetric", "floor", (4, 4), (8, 16))])
def test_nearest_resize_reads_the_onnx_rows(tmp_path, rng, transform, mode, in_hw, out_hw):
    shape = (1, 2) + in_hw
    model = onnx_model([node("Resize", ["x", "", "", "sizes"], ["y"], name="near", mode="nearest",
                             coordinate_transformation_mode=transform, nearest_mode=mode)], shape, ["y"],
                       [init("sizes", np.asarray((1, 2) + out_hw, np.int64))], 13)
    graph, lowered = quantize_onnx(tmp_path, model, rng.normal(0, 1, (4,) + shape[1:]).astype(np.float32))
    assert "tosa.RESIZE" in tosa_kinds(lowered)
    codes = rng.integers(-128, 128, shape)
    ints = replay(lowered, codes)
    v = lowered.tensor_map["y"]
    got = ints[v.name].transpose(np.argsort(v.perm))
    rows = _nearest_rows(in_hw[0], out_hw[0], transform, mode)
    cols = _nearest_rows(in_hw[1], out_hw[1], transform, mode)
    assert np.array_equal(got, codes[:, :, rows][:, :, :, cols])
