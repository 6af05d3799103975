"""NNEF 1.0 composition: 1.0 → 2.0 operator conversion (attributes and shapes worked by hand from
chapter 4), compositional features of 3.3, and located semantic errors."""
import numpy as np
import pytest
from nnef1_helpers import compose_text as compose

from qsim.errors import SemanticError

HEAD = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def graph(body: str, inputs="x", outputs="y", fragments="") -> str:
    return f"{HEAD}{fragments}graph g( {inputs} ) -> ( {outputs} )\n{{\n{body}\n}}\n"


def only(g, kind):
    ops = [op for op in g.ops if op.kind.name == kind]
    assert len(ops) == 1, [op.kind.name for op in g.ops]
    return ops[0]


# ------------------------------------------------------------------ conversions

def test_conv_automatic_padding_follows_4_3():
    # X=7, f=3, s=2: x = ceil(7/2) = 4, t = (4-1)*2 + 3 - 7 = 2 → (1, 1)
    # X=8, f=3, s=2: x = 4, t = 3*2 + 3 - 8 = 1 → (0, 1)
    g = compose(graph("""    x = external(shape = [1, 2, 7, 8]);
    w = variable(shape = [4, 2, 3, 3], label = 'w');
    y = conv(x, w, stride = [2, 2]);"""))
    op = only(g, "nn.conv")
    assert op.attrs["padding"] == (1, 0, 1, 1)
    assert op.attrs["stride"] == (2, 2) and op.attrs["dilation"] == (1, 1) and op.attrs["groups"] == 1
    assert g.tensor("y").shape == (1, 4, 4, 4)
    assert op.inputs == ("x", "w", "")           # bias 0.0 omitted


def test_conv_bias_becomes_a_channel_vector_and_groups_zero_is_depthwise():
    bias = np.arange(6, dtype=np.float32).reshape(1, 6)
    g = compose(graph("""    x = external(shape = [2, 3, 5, 5]);
    w = variable(shape = [6, 1, 3, 3], label = 'w');
    b = variable(shape = [1, 6], label = 'b');
    y = conv(x, w, b, padding = [(0, 0), (2, 1)], dilation = [1, 2], groups = 0);"""), data={"b": bias})
    op = only(g, "nn.conv")
    assert op.attrs["groups"] == 3 and op.attrs["padding"] == (0, 2, 0, 1)
    # rows: (0 + 5 + 0 - 3) / 1 + 1 = 3; cols: fd = 5, (2 + 5 + 1 - 5) / 1 + 1 = 4
    assert g.tensor("y").shape == (2, 6, 3, 4)
    vector = g.tensor(op.inputs[2])
    assert vector.shape == (6,) and vector.data.tolist() == list(range(6))


def test_conv_replicate_border_becomes_explicit_pad():
    g = compose(graph("""    x = external(shape = [1, 1, 4, 4]);
    w = variable(shape = [1, 1, 3, 3], label = 'w');
    y = conv(x, w, border = 'reflect-even', padding = [(1, 1), (1, 1)]);"""))
    pad = only(g, "layout.pad")
    assert pad.attrs == {"axes": (2, 3), "padding": (1, 1, 1, 1), "method": "SYMMETRIC"}
    assert only(g, "nn.conv").attrs["padding"] == (0, 0, 0, 0)
    assert g.tensor("y").shape == (1, 1, 4, 4)


def test_binary_broadcast_aligns_left_like_1_0():
    g = compose(graph("""    x = external(shape = [2, 3, 4, 5]);
    b = variable(shape = [1, 3], label = 'b');
    y = x + b;"""))
    op = only(g, "math.add")
    assert op.attrs == {"lhs_align": None, "rhs_align": 0}
    assert g.tensor("y").shape == (2, 3, 4, 5)


def test_pools_map_window_axes_and_borders():
    g = compose(graph("""    x = external(shape = [1, 2, 6, 6]);
    a = max_pool(x, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore');
    b = avg_pool(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], padding = [(0,0), (0,0), (0,0), (0,0)]);
    y = box(x, size = [1, 2, 1, 1]);""", outputs="a, b, y"))
    mp = only(g, "nn.max_pool")
    # X=6, f=3, s=2: x = 3, t = 2*2 + 3 - 6 = 1 → (0, 1)
    assert mp.attrs["axes"] == (2, 3) and mp.attrs["size"] == (3, 3) and mp.attrs["padding"] == (0, 0, 1, 1)
    assert g.tensor("a").shape == (1, 2, 3, 3)
    ap = only(g, "nn.avg_pool")
    assert ap.attrs["ignore_border"] is False and g.tensor("b").shape == (1, 2, 3, 3)
    sp = only(g, "nn.sum_pool")                # a channel window: every axis is a window axis
    assert sp.attrs["axes"] == (0, 1, 2, 3) and sp.attrs["size"] == (1, 2, 1, 1)
    assert sp.attrs["padding"] == (0, 0, 0, 0, 0, 1, 0, 0)


def test_max_pool_with_constant_border_pads_zeros_first():
    g = compose(graph("""    x = external(shape = [1, 1, 4, 4]);
    y = max_pool(x, size = [1, 1, 3, 3], padding = [(0,0), (0,0), (1,1), (1,1)]);"""))
    assert only(g, "layout.pad").attrs["method"] == "CONSTANT"
    assert only(g, "nn.max_pool").attrs["padding"] == (0, 0, 0, 0)


def test_shape_operations():
    g = compose(graph("""    x = external(shape = [2, 3, 4]);
    r = reshape(x, shape = [0, -1]);
    t = transpose(x, axes = [1, 0]);
    [p, q] = split(x, axis = 2, ratios = [1, 3]);
    c = concat([q, p], axis = 2);
    s = slice(x, axes = [2], begin = [-3], end = [0]);
    u = unsqueeze(x, axes = [0, 3]);
    y = squeeze(u, axes = [0]);""", outputs="r, t, c, s, y"))
    assert only(g, "layout.reshape").attrs == {"axis": 0, "rank": 3, "shape": (2, 12)}
    assert only(g, "layout.transpose").attrs["perm"] == (1, 0, 2) and g.tensor("t").shape == (3, 2, 4)
    assert only(g, "layout.split").attrs["sizes"] == (1, 3)
    assert g.tensor("p").shape == (2, 3, 1) and g.tensor("q").shape == (2, 3, 3)
    assert only(g, "layout.concat").inputs == ("q", "p") and g.tensor("c").shape == (2, 3, 4)
    assert only(g, "layout.slice").attrs == {"axes": (2,), "begin": (1,), "end": (4,), "stride": (1,)}
    assert g.tensor("u").shape == (1, 2, 3, 1, 4) and g.tensor("y").shape == (2, 3, 1, 4)


def test_kept_compound_versus_expanded():
    text = graph("""    x = external(shape = [1, 4]);
    y = relu(x);""")
    assert [op.kind.name for op in compose(text).ops] == ["nn.relu"]
    expanded = compose(text, keep=())
    # relu = max(x, 0.0) = select(x > 0.0, x, 0.0) (4.9.1, 4.2.4)
    assert [op.kind.name for op in expanded.ops] == ["math.gt", "math.select"]
    assert expanded.outputs == ("y",)


def test_linear_softmax_batch_norm_kept_whole():
    g = compose(graph("""    x = external(shape = [2, 8]);
    w = variable(shape = [3, 8], label = 'w');
    b = variable(shape = [1, 3], label = 'b');
    h = linear(x, w, b);
    m = variable(shape = [1, 3], label = 'm');
    v = variable(shape = [1, 3], label = 'v');
    n = batch_normalization(h, m, v, 0.0, 1.0, epsilon = 0.001);
    y = softmax(n);"""))
    assert [op.kind.name for op in g.ops] == ["nn.linear", "nn.batch_norm", "nn.softmax"]
    bn = only(g, "nn.batch_norm")
    assert bn.attrs == {"epsilon": 0.001, "channel_axis": 1}
    assert g.tensor(bn.inputs[3]).data.tolist() == [0.0, 0.0, 0.0]      # offset 0.0 → [C] zeros
    assert only(g, "nn.softmax").attrs == {"axes": (1,)}


# ------------------------------------------------------------------ compositional features

FRAGMENTS = """fragment scaled( x: tensor<scalar>, factor: scalar = 2.0, bias: tensor<scalar> = 0.0 )
-> ( y: tensor<scalar> )
{
    y = x * factor + bias;
}
fragment total( items: tensor<scalar>[] ) -> ( sum: tensor<scalar> )
{
    sum = items[0] + total(items[1:]) if length_of(items) > 1 else items[0];
}
fragment ident<?>( x: tensor<?> ) -> ( y: tensor<?> )
{
    y = copy<?>(x);
}
fragment pair( x: tensor<scalar> ) -> ( a: tensor<scalar>, b: tensor<scalar> )
{
    a = neg(x);
    b = exp(x);
}
"""


def test_user_fragments_defaults_recursion_generics_tuples():
    g = compose(graph("""    x = external(shape = [2, 2]);
    s = scaled(x);
    t = scaled(x, factor = 0.5, bias = s);
    r = total([x, s, t]);
    i = ident(r);
    a, b = pair(i);
    y = reshape(b, shape = [[for k in range_of(shape_of(x)) yield shape_of(x)[k] * 2][0]]
                if length_of(shape_of(x)) == 2 else [0]);""", outputs="a, y", fragments=FRAGMENTS))
    kinds = [op.kind.name for op in g.ops]
    # scaled: mul + add (bias 0.0 still added: only conv/linear drop a zero bias)
    assert kinds[:4] == ["math.mul", "math.add", "math.mul", "math.add"]
    assert kinds[4:6] == ["math.add", "math.add"]               # total of three: two adds
    assert kinds[6:] == ["math.iden", "math.neg", "math.exp", "layout.reshape"]
    assert g.tensor("y").shape == (4,)
    assert g.outputs == ("a", "y")


def test_if_else_is_lazy():
    g = compose(graph("""    x = external(shape = [3]);
    y = x if length_of([1]) == 1 else undefined_op(x);"""))
    assert g.ops == () and g.outputs == ("x",)


def test_spec_example_0634_composes():
    import pathlib
    text = (pathlib.Path(__file__).parent.parent / "fixtures" / "nnef1" / "spec" / "line0634.nnef").read_text()
    g = compose(text)
    assert g.inputs == ("input",) and g.outputs == ("output",)
    assert g.tensor("output").shape == (4, 10)


def test_spec_chapter_7_example_composes_with_linear_quantize():
    import pathlib
    text = (pathlib.Path(__file__).parent.parent / "fixtures" / "nnef1" / "spec" / "line2695.nnef").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    g = compose(f"version 1.0;\ngraph G( input ) -> ( quant2 )\n{{\n{body}\n}}\n")
    kinds = [op.kind.name for op in g.ops]
    assert kinds == ["nn.conv", "math.add", "nn.relu", "quant.min_max_linear_quantize"] * 2
    q = g.ops[3]
    assert q.attrs == {"min": (0.0,), "max": (1.0,), "bits": 8, "signed": False, "symmetric": False,
                       "channel_axis": 1}
    assert g.tensor("quant2").shape == (1, 64, 224, 224)


def test_dynamic_linear_quantize_is_expanded():
    g = compose(graph("""    x = external(shape = [1, 2, 3]);
    m = max_reduce(x, axes = [0, 2]);
    y = linear_quantize(x, min = 0.0, max = m, bits = 8);"""))
    kinds = [op.kind.name for op in g.ops]
    assert "quant.min_max_linear_quantize" not in kinds and "math.round" in kinds


# ------------------------------------------------------------------ semantic errors

ERRORS = [
    ("    x = external(shape = [1]);\n    y = frobnicate(x);", 6, 9, SemanticError,
     "unknown operation 'frobnicate'"),
    ("    x = external(shape = [1]);\n    y = relu(z);", 6, 14, SemanticError, "undefined identifier 'z'"),
    ("    x = external(shape = [1]);\n    y = relu(x);\n    y = relu(x);", 7, 5, SemanticError,
     "identifier 'y' is assigned twice"),
    ("    x = external(shape = [1]);\n    y = softmax(x, axis = [0]);", 6, 9, SemanticError,
     "'softmax' has no parameter 'axis'"),
    ("    x = external(shape = [1]);\n    y = reshape(x);", 6, 9, SemanticError,
     "'reshape' needs argument 'shape'"),
    ("    x = external(shape = [1]);\n    y = reshape(x, [1]);", 6, 9, SemanticError,
     "attribute 'shape' of 'reshape' is passed by position"),
    ("    x = external(shape = [1]);\n    y = reshape(x, shape = 'a');", 6, 9, SemanticError,
     "'reshape' argument 'shape' is string 'a', expected integer[]"),
    ("    x = external(shape = [2, 3]);\n    y = reshape(x, shape = [4]);", 6, 9, SemanticError,
     "reshape: 'shape' [4] (= [4]) has a different volume than input [2, 3]"),
    ("    x = external(shape = [2, 3]);\n    z = external(shape = [4, 3]);\n    y = x + z;", 7, 9,
     SemanticError, "do not broadcast (dimension 0)"),
    ("    x = external(shape = [1, 3, 5, 5]);\n    w = variable(shape = [2, 4, 3, 3], label = 'w');\n"
     "    y = conv(x, w);", 7, 9, SemanticError, "does not fit input channels 3"),
    ("    x = external(shape = [1]);\n    y = copy(x, flag = true);", 6, 9, SemanticError,
     "'copy' has no parameter 'flag'"),
    ("    x = external(shape = [0, 2]);\n    y = relu(x);", 5, 9, SemanticError,
     "shape [0, 2] has items that are not positive"),
    ("    x = external(shape = [3]);\n    c = constant(shape = [3], value = [1.0, 2.0]);\n    y = x + c;",
     6, 9, SemanticError, "'value' has 2 items, expected 1 or 3"),
    ("    x = external(shape = [3]);\n    a = variable(shape = [3], label = 'v');\n"
     "    b = variable(shape = [4], label = 'V');\n    y = x + a;", 7, 9, SemanticError,
     "variable 'V' is declared with shape [4] and [3]"),
    ("    x = external(shape = [3]);\n    a = variable(shape = [3], label = 'a b');\n    y = x + a;",
     6, 9, SemanticError, "label 'a b' is empty or has characters outside"),
    ("    x = external(shape = [3]);\n    y = x + [1, 2][5];", 6, 20, SemanticError,
     "index 5 is out of range for a array of length 2"),
    ("    x = external(shape = [3]);\n    y = x + (1 + 2.0);", 6, 14, SemanticError,
     "operator '+' cannot combine integer and scalar"),
    ("    x = external(shape = [3]);\n    y = x if 1 else x;", 6, 14, SemanticError,
     "if-else condition is a integer, expected logical"),
    ("    x = external(shape = [3]);\n    y = select(x, x, x);", 6, 9, SemanticError,
     "'select' argument 'condition' is tensor<scalar> 'x', expected tensor<logical>"),
]


@pytest.mark.parametrize("body, line, column, cls, message", ERRORS, ids=[e[4][:40] for e in ERRORS])
def test_semantic_errors_are_located(body, line, column, cls, message):
    with pytest.raises(cls) as err:
        compose(graph(body), filename="bad.nnef")
    assert message in err.value.message, err.value.message
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == ("bad.nnef", line, column), str(err.value)


def test_graph_level_rules():
    with pytest.raises(SemanticError, match="graph input 'x' is not defined by an 'external'"):
        compose(graph("    x = variable(shape = [1], label = 'x');\n    y = relu(x);"))
    with pytest.raises(SemanticError, match="graph output 'y' is never assigned"):
        compose(graph("    x = external(shape = [1]);\n    z = relu(x);"))
    with pytest.raises(SemanticError, match="identifier 'n' in the graph body is a integer, not a tensor"):
        compose(graph("    x = external(shape = [1]);\n    n = 3;\n    y = relu(x);"))


def test_fragment_rules():
    bad_param = "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { x = neg(x); y = x; }\n"
    with pytest.raises(SemanticError, match="parameter 'x' of fragment 'f' is assigned") as err:
        compose(graph("    x = external(shape = [1]);\n    y = f(x);", fragments=bad_param))
    assert err.value.location.line == 3
    missing = "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar>, z: tensor<scalar> ) { y = neg(x); }\n"
    with pytest.raises(SemanticError, match="fragment 'f' never assigns its result 'z'"):
        compose(graph("    x = external(shape = [1]);\n    y, w = f(x);", fragments=missing))
    redefined = "fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = x; }\n"
    with pytest.raises(SemanticError, match="fragment 'relu' is already defined as a standard operation"):
        compose(graph("    x = external(shape = [1]);\n    y = relu(x);", fragments=redefined))
    external_inside = "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = external(shape = [1]); }\n"
    with pytest.raises(SemanticError, match="'external' is used inside fragment 'f'"):
        compose(graph("    x = external(shape = [1]);\n    y = f(x);", fragments=external_inside))
    generic = "fragment f<?>( n: integer ) -> ( y: tensor<?> ) { y = constant<?>(shape = [n], value = [1]); }\n"
    with pytest.raises(SemanticError, match="cannot deduce the generic type of 'f'"):
        compose(graph("    x = external(shape = [1]);\n    y = f(n = 1);", fragments=generic))
