"""The SkriptND writer: ir.Graph → model folder → qsim.load → the same folder, byte for byte.

Expected values are the source graphs themselves (names, dtypes, data, QuantInfo, attributes)
and independent parses of the written literals; executions compare the source graph with the
reloaded one, element for element.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import qsim
from qsim import ir
from qsim.errors import QsimError, UnsupportedError, UsageError
from qsim.skriptnd.evaluate import Evaluator
from qsim.runtime import execute
from qsim.skriptnd.parser import parse_expr
from qsim.skriptnd.writer import format_value, render, write_model
from qsim.tensorfile import read_tensor_file

ZOO = Path(qsim.__file__).parent / "zoo" / "fashion_cnn"
KEEP = {"nn.conv", "nn.batch_norm", "nn.linear"}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def round_trip(graph: ir.Graph, tmp_path: Path, *, keep=(), prepare=lambda g: g) -> ir.Graph:
    """write → load → write; asserts identical folders and returns the reloaded graph."""
    write_model(prepare(graph), tmp_path / "a")
    loaded = qsim.load(tmp_path / "a", keep=keep)
    write_model(prepare(loaded), tmp_path / "b")
    first, second = folder_bytes(tmp_path / "a"), folder_bytes(tmp_path / "b")
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], name
    return loaded


@pytest.mark.parametrize("keep", [KEEP, ()], ids=["kept-compounds", "expanded"])
def test_fashion_cnn_round_trip_and_results(tmp_path, keep):
    g = qsim.load(ZOO, keep=keep)
    loaded = round_trip(g, tmp_path, keep=keep)
    # computed tensors keep their (scoped) names; data tensors are identifiers
    computed = [n for n, t in g.tensors.items() if t.data is None]
    assert all(n in loaded.tensors for n in computed)
    for name, t in g.tensors.items():
        if t.data is not None:
            twin = loaded.tensors[name.replace(".", "_")]
            np.testing.assert_array_equal(twin.data, t.data)
            assert twin.data.dtype == t.data.dtype
    x = np.random.default_rng(3).random((1, 1, 28, 28), dtype=np.float32)
    a, b = execute(g, {"input": x}), execute(loaded, {"input": x})
    assert np.array_equal(a["output"], b["output"])
    text = (tmp_path / "a" / "main.sknd").read_text()
    assert text.startswith("# Model written by qsim")
    assert text.count("nn.conv") == (4 if keep else 4)
    # one invocation per line
    compose = text.split("@compose {")[1].split("}\n")[0]
    assert all(line.count("(") >= 1 for line in compose.strip().splitlines())


def test_kept_compound_written_as_one_invocation(tmp_path):
    g = qsim.load(ZOO, keep=KEEP)
    text, files = render(g)
    assert "bn1 = nn.batch_norm(conv1, bn1_mean, bn1_variance, bn1_bias, bn1_scale);" in text
    assert "conv1_filter.dat" in [f[0] for f in files]


def _tosa_graph():
    from qsim.quant.pipeline import embedded_quantized_model
    return embedded_quantized_model().graph


def test_tosa_integer_graph_round_trip(tmp_path):
    from qsim.tosa.sknd_form import to_sknd_form
    from qsim.runtime.executor import execute
    g = _tosa_graph()
    loaded = round_trip(g, tmp_path, prepare=to_sknd_form)
    text = (tmp_path / "a" / "main.sknd").read_text()
    assert "import tosa;" in text and "import quant;" in text
    # names, integer types, QuantInfo (but its source) and attributes come back
    assert set(loaded.tensors) == set(g.tensors)
    for name, t in g.tensors.items():
        u = loaded.tensors[name]
        assert (u.dtype, u.shape) == (t.dtype, t.shape), name
        if t.quant is None:
            assert u.quant is None, name
        else:
            q, r = t.quant, u.quant
            assert np.array_equal(q.scales(), r.scales()) and np.array_equal(q.zero_points(), r.zero_points())
            assert (q.bits, q.signed, q.symmetric, q.axis) == (r.bits, r.signed, r.symmetric, r.axis)
            assert r.source == "annotation"
    for op, back in zip(g.ops, loaded.ops):
        assert op.kind is back.kind and op.inputs == back.inputs and op.outputs == back.outputs
        assert set(op.attrs) == set(back.attrs), op
        for k, v in op.attrs.items():
            if isinstance(v, np.ndarray):
                assert back.attrs[k].dtype == v.dtype
                np.testing.assert_array_equal(back.attrs[k], v)
            else:
                assert back.attrs[k] == v, (op, k)
    x = np.random.default_rng(5).integers(-128, 128, (1, 1, 28, 28)).astype(np.int8)
    a = execute(g, {"input": x}, backend="reference")
    b = execute(loaded, {"input": x}, backend="reference")
    np.testing.assert_array_equal(a["output"], b["output"])
    assert a["output"].dtype == b["output"].dtype == np.int8


def test_cvm_integer_graph_round_trip(tmp_path):
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.quant.cvm.target import CvmTarget
    from qsim.runtime.executor import execute
    g = embedded_quantized_model(target=CvmTarget()).graph
    loaded = round_trip(g, tmp_path)
    assert "import cvm;" in (tmp_path / "a" / "main.sknd").read_text()
    for name, t in g.tensors.items():
        twin = loaded.tensors[name.replace(".", "_") if t.data is not None else name]
        assert twin.dtype == t.dtype and twin.quant.bits == t.quant.bits, name
    x = np.random.default_rng(1).integers(-127, 128, (1, 1, 28, 28)).astype(np.int8)
    a, b = execute(g, {g.inputs[0]: x}), execute(loaded, {loaded.inputs[0]: x})
    np.testing.assert_array_equal(a[g.outputs[0]], b[loaded.outputs[0]])


def _kind(name: str) -> ir.OpKind:
    return ir.register_op_kind(name)


def _hand_graph() -> ir.Graph:
    """Scoped and non-identifier names, real/str/int/bool/list attributes, generics, a packed
    output, integer widths and per-channel quantization, labels, an input used as an output."""
    rng = np.random.default_rng(11)
    f32 = ir.DType.F32
    t = {}

    def add(name, dtype, shape, data=None, quant=None):
        t[name] = ir.Tensor(name, dtype, shape, data=data, quant=quant)

    add("x-in", f32, (1, 4, 6, 6))
    add("blk.w", f32, (4, 1, 3, 3), rng.standard_normal((4, 1, 3, 3)).astype(np.float32))
    add("blk.conv.out", f32, (1, 4, 6, 6), quant=ir.QuantInfo(
        np.array([0.5, 0.25, 0.125, 1e-3]), np.array([1, -2, 3, 0]), axis=1, bits=8, signed=True))
    add("act", f32, (1, 4, 6, 6), quant=ir.QuantInfo(0.1, 7, bits=8, signed=False, symmetric=False))
    add("parts_0", f32, (1, 1, 6, 6))
    add("parts_1", f32, (1, 3, 6, 6))
    add("in", ir.DType.I64, (2,))                       # a reserved word as a name
    add("q.u8", ir.DType.U8, (4,), np.array([0, 7, 200, 255], dtype=np.uint8))
    add("q.flat", ir.DType.U8, (2, 2))
    add("q16", ir.DType.I16, (3,), np.array([-32768, 0, 32767], dtype=np.int16),
        quant=ir.QuantInfo(2.0 ** -20, 0, bits=16, signed=True, symmetric=True))
    add("empty", ir.DType.BOOL, (0,))
    add("zp0", ir.DType.I8, (), np.array(-3, dtype=np.int8))          # rank 0, width only
    add("w4", ir.DType.I4, (5,), np.array([-7, -1, 0, 3, 7], dtype=np.int8))
    add("acc48", ir.DType.I48, (2,), np.array([-(1 << 47), (1 << 47) - 1], dtype=np.int64))
    add("wide", ir.DType.I64, (2,), np.array([1 << 40, -5], dtype=np.int64))
    ops = [
        ir.Op(_kind("nn.conv"), ("x-in", "blk.w"), ("blk.conv.out",),
              {"stride": (1, 1), "dilation": (1, 1), "padding": (1, 1, 1, 1), "padding_align": "UPPER",
               "ceil_mode": False, "groups": 4, "data_format": "NCX", "filter_format": "NCX"},
              name="blk.conv.out"),
        ir.Op(_kind("nn.relu"), ("blk.conv.out",), ("act",), {"alpha": 0.1, "max": 6.0000000000000009},
              name="first_relu"),
        ir.Op(_kind("layout.split"), ("act",), ("parts_0", "parts_1"),
              {"axis": 1, "count": 2, "sizes": (1, 3)}, name="parts"),
        ir.Op(_kind("layout.tensor"), (), ("in",), {"shape": (2,), "value": (3, -4)}, name="in"),
        ir.Op(_kind("layout.unflatten"), ("q.u8",), ("q.flat",), {"axis": 0, "shape": (2, 2)},
              name="q.flat"),
        ir.Op(_kind("layout.tensor"), (), ("empty",), {"shape": (0,), "value": ()}, name="empty"),
    ]
    return ir.Graph("hand-built", ("x-in",), ("parts_1", "in", "q.flat", "x-in", "q16", "wide", "empty", "zp0", "w4", "acc48"),
                    tuple(ops), t)


def test_hand_built_graph_round_trip(tmp_path):
    g = _hand_graph()
    loaded = round_trip(g, tmp_path)
    text = (tmp_path / "a" / "main.sknd").read_text()
    assert "graph hand_built {" in text
    assert "x_in: real[1, 4, 6, 6];" in text
    assert "blk_conv_out = blk: { blk_conv_out_1 = conv: { out = nn.conv" not in text
    assert "blk: { blk_conv = conv: {" not in text
    assert "first_relu: nn.relu{alpha = 0.1, max = 6.000000000000001}(blk_conv_out);" in text
    assert "in_ = layout.tensor{shape = [2], value = [3, -4]}();" in text
    assert "empty = layout.tensor<bool>{shape = [0], value = []}();" in text
    assert "parts = layout.split{axis = 1, count = 2, sizes = [1, 3]}(act);" in text
    # scoped computed names survive; variables and other names become identifiers
    for name in ("blk.conv.out", "act", "parts_0", "parts_1", "q.flat", "x_in"):
        assert name in loaded.tensors, name
    assert loaded.inputs == ("x_in",)
    assert loaded.tensors["blk_w"].data is not None and "in_" in loaded.tensors
    # integer widths and quantization
    q = loaded.tensors["blk.conv.out"].quant
    np.testing.assert_array_equal(q.scales(), [0.5, 0.25, 0.125, 1e-3])
    np.testing.assert_array_equal(q.zero_points(), [1, -2, 3, 0])
    assert q.axis == 1 and q.bits == 8
    act = loaded.tensors["act"].quant
    assert (act.scale, act.zero_point, act.signed, act.symmetric) == (0.1, 7, False, False)
    assert loaded.tensors["q_u8"].quant.bits == 8 and not loaded.tensors["q_u8"].quant.signed
    assert loaded.tensors["q16"].quant.scale == 2.0 ** -20
    np.testing.assert_array_equal(loaded.tensors["q16"].data, [-32768, 0, 32767])
    np.testing.assert_array_equal(loaded.tensors["wide"].data, [1 << 40, -5])
    assert loaded.tensors["zp0"].data.shape == () and int(loaded.tensors["zp0"].data) == -3
    assert loaded.tensors["zp0"].quant.bits == 8
    assert (loaded.tensors["w4"].quant.bits, loaded.tensors["acc48"].quant.bits) == (4, 48)
    np.testing.assert_array_equal(loaded.tensors["w4"].data, [-7, -1, 0, 3, 7])
    np.testing.assert_array_equal(loaded.tensors["acc48"].data, [-(1 << 47), (1 << 47) - 1])
    assert read_tensor_file(tmp_path / "a" / "w4.dat").header.bits == 4
    assert read_tensor_file(tmp_path / "a" / "acc48.dat").header.bits == 48
    # the files: int16 tensor at 16 bits, unsigned 8, the wide int64 at 64 bits
    assert read_tensor_file(tmp_path / "a" / "q16.dat").header.bits == 16
    assert read_tensor_file(tmp_path / "a" / "q_u8.dat").header.bits == 8
    assert read_tensor_file(tmp_path / "a" / "wide.dat").header.bits == 64
    # op labels: identifiers survive, the default label is not written
    assert [op.name for op in loaded.ops][:2] == ["blk.conv.out", "first_relu"]
    # same values
    x = np.random.default_rng(2).standard_normal((1, 4, 6, 6)).astype(np.float32)
    a, b = execute(g, {"x-in": x}), execute(loaded, {"x_in": x})
    for name in ("blk.conv.out", "act", "parts_0", "parts_1", "q.flat"):
        assert np.array_equal(a[name], b[name]), name
    np.testing.assert_array_equal(b["in_"], [3, -4])


@pytest.mark.parametrize("value", [
    0, -7, 1 << 62, True, False, 0.1, -2.5, 1e-300, 5e-324, 1.7976931348623157e308, 1e22, -0.0,
    float("inf"), float("-inf"), "", "plain", 'quote " and \' and \\ and {braces} and\nnewline\tTab',
    (), (1, 2, 3), (0.5, -1e-7), ("a", "b{c}"), (True, False),
])
def test_attribute_literals_read_back_identically(value):
    text = format_value(value, "test")
    back = Evaluator({}, "test").eval(parse_expr(text))
    assert type(back) is type(value) or (isinstance(value, tuple) and isinstance(back, tuple))
    assert back == value
    if isinstance(value, float):
        assert math.copysign(1.0, back) == math.copysign(1.0, value)


def test_random_reals_are_repr_exact():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 63, 500, dtype=np.int64).view(np.float64)
    for v in bits:
        if math.isfinite(v):
            assert Evaluator({}, "t").eval(parse_expr(format_value(float(v), "t"))) == float(v)


def test_nested_lists_are_refused():
    with pytest.raises(UnsupportedError, match="lists do not nest"):
        format_value(((1, 2), (3, 4)), "attribute 'padding'")


def test_nan_attribute_reads_back_as_nan():
    back = Evaluator({}, "t").eval(parse_expr(format_value(float("nan"), "t")))
    assert math.isnan(back)


# ---------------------------------------------------------------- errors

def _single(op_kind, attrs, tensors, inputs=("x",), outputs=("y",)):
    return ir.Graph("g", ("x",), outputs, (ir.Op(_kind(op_kind), inputs, outputs, attrs),), tensors)


def _t(name, shape=(2, 3), dtype=ir.DType.F32, data=None):
    return ir.Tensor(name, dtype, shape, data=data)


def test_error_unwritable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    g = _single("nn.relu", {}, {"x": _t("x"), "y": _t("y")})
    with pytest.raises(QsimError) as err:
        write_model(g, blocker / "model")
    assert "model" in str(err.value)
    with pytest.raises(UsageError, match="not a directory"):
        write_model(g, blocker)


def test_error_tensor_without_data(tmp_path):
    g = ir.Graph("g", ("x",), ("y",), (ir.Op(_kind("math.add"), ("x", "w"), ("y",), {}),),
                 {"x": _t("x"), "w": _t("w"), "y": _t("y")})
    with pytest.raises(QsimError, match="'w' is read but has no data"):
        write_model(g, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_error_tensor_attribute_needs_sknd_form(tmp_path):
    g = _tosa_graph()
    with pytest.raises(UnsupportedError, match="to_sknd_form") as err:
        write_model(g, tmp_path / "m")
    assert "tosa.CONV2D" in str(err.value)


def test_error_unrepresentable(tmp_path):
    f16 = _single("nn.relu", {}, {"x": _t("x", dtype=ir.DType.F16), "y": _t("y", dtype=ir.DType.F16)})
    with pytest.raises(UnsupportedError, match="'x' is f16"):
        render(f16)
    unknown = _single("nn.relu", {"slope": 0.5}, {"x": _t("x"), "y": _t("y")})
    with pytest.raises(QsimError, match="attribute 'slope' is not declared by 'nn.relu'"):
        render(unknown)
    nomodule = _single("npu.magic", {}, {"x": _t("x"), "y": _t("y")})
    with pytest.raises(UnsupportedError, match="'npu' is not a SkriptND module"):
        render(nomodule)
    noop = _single("nn.magic", {}, {"x": _t("x"), "y": _t("y")})
    with pytest.raises(UnsupportedError, match="module 'nn' has no operator 'magic'"):
        render(noop)


def test_failed_write_keeps_existing_folder(tmp_path):
    good = _single("nn.relu", {}, {"x": _t("x"), "y": _t("y")})
    write_model(good, tmp_path / "m")
    before = folder_bytes(tmp_path / "m")
    bad = _single("nn.relu", {"alpha": np.zeros(2)}, {"x": _t("x"), "y": _t("y")})
    with pytest.raises(UnsupportedError):
        write_model(bad, tmp_path / "m")
    assert folder_bytes(tmp_path / "m") == before
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_header_lines_are_comments(tmp_path):
    g = _single("nn.relu", {}, {"x": _t("x"), "y": _t("y")})
    write_model(g, tmp_path / "m", header="line one\nline two")
    text = (tmp_path / "m" / "main.sknd").read_text()
    assert text.startswith("# line one\n# line two\nimport nn;\n")
    assert os.listdir(tmp_path / "m") == ["main.sknd"]
    assert qsim.load(tmp_path / "m").outputs == ("y",)


def test_nnef1_model_written_as_skriptnd(tmp_path):
    """An NNEF 1.0 model (its compounds kept whole by that front end) written as SkriptND and
    reloaded with the same kept operator computes the same values."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "graph.nnef").write_text(
        "version 1.0;\ngraph G( input ) -> ( output )\n{\n"
        "    input = external<scalar>(shape = [1, 3, 8, 8]);\n"
        "    w = variable<scalar>(shape = [4, 3, 3, 3], label = 'w');\n"
        "    c = conv(input, w, 0.0, padding = [(1, 1), (1, 1)]);\n"
        "    p = max_pool(relu(c), size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);\n"
        "    output = softmax(p, axes = [1]);\n}\n")
    from qsim.tensorfile import write_tensor
    write_tensor(src / "w.dat", np.random.default_rng(4).standard_normal((4, 3, 3, 3)).astype(np.float32))
    g = qsim.load(src)
    loaded = round_trip(g, tmp_path, keep={"nn.softmax"})
    assert [op.kind.name for op in loaded.ops] == [op.kind.name for op in g.ops]
    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    a = execute(g, {"input": x})[g.outputs[0]]
    b = execute(loaded, {"input": x})[loaded.outputs[0]]
    np.testing.assert_array_equal(a, b)


CONTROL = """import math;
import linalg;
graph G {
    @input { x0: real[3]; x1: real[3]; z: real[3]; n: int[]; c: bool[]; A: real[2, 2]; }
    @output { y0: real[3]; acc: real[3]; w: real[3]; branch: real[3]; p: real[2, 2]; }
    @constant { I: real[2, 2] = i == j ? 1.0 : 0.0, i < 2, j < 2; }
    @compose {
        [y0, y1] = for x : [x0, x1] do { s = math.add(x, z); yield s; };
        acc, ys = with a = z for x : [x0, x1] do ..(i -> 2) { b = math.add(a, x); yield b, b; };
        w, ~ = with v = z, k = n do { v2 = math.mul(v, z); k2 = math.sub(k, 1); yield v2, k2; }
               while { t = math.gt(k, 1); yield t; };
        branch = if c then { q = math.neg(x0); yield q; } else { q = math.exp(x1); yield q; };
        p = with X = I while { t = math.gt(n, 0); yield t; } do ..(n) linalg.matmul(X, A);
    }
}
"""


def test_control_flow_round_trip(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.sknd").write_text(CONTROL)
    g = qsim.load(tmp_path / "src")
    assert {op.kind.name for op in g.ops} == {"control.loop", "control.if"}
    loaded = round_trip(g, tmp_path)
    text = (tmp_path / "a" / "main.sknd").read_text()
    assert "if c then {" in text and "do ..(i -> 2) {" in text and "} while {" in text
    x0, x1 = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    z, a = np.array([0.5, 2, 1], np.float32), np.array([[1, 1], [0, 2]], np.float32)
    for n, c in ((3, True), (2, False)):
        feeds = {"x0": x0, "x1": x1, "z": z, "n": np.array(n), "c": np.array(c), "A": a}
        want, got = execute(g, feeds), execute(loaded, feeds)
        for name, twin in zip(g.outputs, loaded.outputs):
            np.testing.assert_array_equal(got[twin], want[name])
        np.testing.assert_array_equal(want[g.outputs[0]], x0 + z)
        np.testing.assert_array_equal(want["acc"], z + x0 + x1)
        np.testing.assert_array_equal(want["w"], z ** n)          # do-while: n - 1 more steps
        np.testing.assert_array_equal(want["branch"], -x0 if c else np.exp(x1))
        np.testing.assert_array_equal(want["p"], np.linalg.matrix_power(a, n))


def test_long_tensor_names_make_files_the_file_system_takes(tmp_path):
    """A converter's tensor names can run to hundreds of characters (TensorFlow joins every fused
    op's name with ';'); a data variable's identifier is its file's name (2.15), so the writer keeps
    identifiers to MAX_IDENTIFIER characters and two long names sharing a prefix stay apart."""
    from qsim.skriptnd.writer import MAX_IDENTIFIER
    f32 = ir.DType.F32
    prefix = "functional_1/ds_cnn_1/ds0_dwrelu_1/Relu;" + "block/depthwise_conv2d;" * 12
    long_a, long_b = prefix + "bias", prefix + "scale"          # not identifiers, share 300 chars
    plain_long = "w_" + "x" * 300                                # an identifier, but too long a file name
    t = {"x": ir.Tensor("x", f32, (3,)), "y": ir.Tensor("y", f32, (3,)), "z": ir.Tensor("z", f32, (3,)),
         "out": ir.Tensor("out", f32, (3,))}
    for name, value in ((long_a, 1.0), (long_b, 2.0), (plain_long, 4.0)):
        t[name] = ir.Tensor(name, f32, (3,), data=np.full(3, value, np.float32))
    ops = [ir.Op(_kind("math.add"), ("x", long_a), ("y",), {}),
           ir.Op(_kind("math.add"), ("y", long_b), ("z",), {}),
           ir.Op(_kind("math.add"), ("z", plain_long), ("out",), {})]
    g = ir.Graph("long_names", ("x",), ("out",), tuple(ops), t)
    loaded = round_trip(g, tmp_path)
    names = [p.name for p in (tmp_path / "a").iterdir()]
    dat = [n for n in names if n.endswith(".dat")]
    assert len(dat) == 3 and all(len(n) <= MAX_IDENTIFIER + 4 for n in dat)
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(execute(loaded, {"x": x})["out"], x + 7)


def test_block_local_name_beside_an_outer_name_of_the_same_spelling(tmp_path):
    """An op output scoped as `gather.ids` beside a graph input `ids` (an integer model's token ids
    and the gather rule's reshaped indices): a block `gather: { ids = ...(ids) }` would define
    `ids` twice, which the reader refuses, so the output is written unscoped."""
    i32 = ir.DType.I32
    t = {"ids": ir.Tensor("ids", i32, (6,)), "gather.ids": ir.Tensor("gather.ids", i32, (1, 6)),
         "y": ir.Tensor("y", i32, (6, 1))}
    ops = [ir.Op(_kind("tosa.RESHAPE"), ("ids",), ("gather.ids",), {"new_shape": (1, 6)}, name="gather.ids"),
           ir.Op(_kind("tosa.RESHAPE"), ("gather.ids",), ("y",), {"new_shape": (6, 1)}, name="y")]
    g = ir.Graph("shadow", ("ids",), ("y",), tuple(ops), t)
    loaded = round_trip(g, tmp_path)
    assert "gather: {" not in (tmp_path / "a" / "main.sknd").read_text()
    ids = np.arange(6, dtype=np.int32) - 3
    np.testing.assert_array_equal(execute(loaded, {"ids": ids})["y"], ids.reshape(6, 1))
