"""Executing converted NNEF 1.0 graphs (float executor of qsim.skriptnd): each compound kept whole
as a 2.0 operator agrees with the same compound expanded from its 1.0 body into primitives, and
windows/borders agree with a direct numpy transcription of the 4.3 formulas."""
import numpy as np
import pytest
from nnef1_helpers import compose_text as compose

from qsim.runtime import execute

HEAD = "version 1.0;\n"

# (name, input shape, body, variables {label: (shape, kind)}); mean_reduce and avg_pool are left
# out: their bodies are the same 2.0 operator (sum_reduce/box with normalize = true)
COMPOUNDS = [
    ("relu", (2, 3, 4), "y = relu(x);", {}),
    ("sigmoid", (2, 5), "y = sigmoid(x);", {}),
    ("tanh", (2, 5), "y = tanh(x);", {}),
    ("elu", (2, 5), "y = elu(x);", {}),
    ("softplus", (2, 5), "y = softplus(x);", {}),
    ("leaky_relu", (2, 5), "y = leaky_relu(x, alpha = 0.2);", {}),
    ("prelu", (2, 3, 4), "y = prelu(x, a);", {"a": ((1, 3), "uniform")}),
    ("softmax", (2, 3, 4), "y = softmax(x, axes = [1, 2]);", {}),
    ("sqr_sqrt_rsqrt_log2", (2, 5), "y = sqr(x) + sqrt(abs(x)) + rsqrt(abs(x) + 1.0) + log2(abs(x) + 1.0);", {}),
    ("min_max_clamp", (2, 5), "y = min(x, 0.5) + max(x, -0.5) + clamp(x, -0.25, 0.25);", {}),
    ("batch_normalization", (2, 3, 4, 4), "y = batch_normalization(x, m, v, o, s, epsilon = 0.001);",
     {"m": ((1, 3), "normal"), "v": ((1, 3), "positive"), "o": ((1, 3), "normal"), "s": ((1, 3), "normal")}),
    ("l1_normalization", (2, 3, 4), "y = l1_normalization(x, axes = [1], bias = 0.5, epsilon = 0.001);", {}),
    ("l2_normalization", (2, 3, 4), "y = l2_normalization(x, axes = [1, 2], epsilon = 0.001);", {}),
    ("moments", (2, 3, 4), "m, v = moments(x, axes = [1]);\n    y = m + v;", {}),
    ("rms_pool", (1, 2, 5, 5), "y = rms_pool(x, size = [1, 1, 3, 3], stride = [1, 1, 2, 2]);", {}),
    ("local_response_normalization", (1, 5, 3, 3),
     "y = local_response_normalization(x, size = [1, 3, 1, 1], alpha = 0.01, beta = 0.75, bias = 1.0);", {}),
    ("linear", (3, 6), "y = linear(x, w, b);", {"w": ((4, 6), "normal"), "b": ((1, 4), "normal")}),
    ("stack_unstack", (2, 3), "[p, q] = unstack(x, axis = 0);\n    y = stack([q, p], axis = 1);", {}),
    ("squeeze_unsqueeze", (2, 1, 3), "u = squeeze(x, axes = [1]);\n    y = unsqueeze(u, axes = [0, 2]);", {}),
    ("linear_quantize", (2, 7), "y = linear_quantize(x, min = -1.0, max = 1.0, bits = 4);", {}),
    ("nearest_downsample", (1, 2, 4, 6), "y = nearest_downsample(x, factor = [2, 3]);", {}),
    ("area_downsample", (1, 2, 4, 6), "y = area_downsample(x, factor = [2, 3]);", {}),
]


def _data(rng, shape, kind):
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape).astype(np.float32)
    if kind == "uniform":
        return rng.uniform(0.0, 1.0, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name, shape, body, variables", COMPOUNDS, ids=[c[0] for c in COMPOUNDS])
def test_kept_compound_equals_its_expanded_body(rng, name, shape, body, variables):
    decls = "".join(f"    {label} = variable(shape = {list(s)}, label = '{label}');\n"
                    for label, (s, _) in variables.items())
    text = f"{HEAD}graph g( x ) -> ( y )\n{{\n    x = external(shape = {list(shape)});\n{decls}    {body}\n}}\n"
    data = {label: _data(rng, s, kind) for label, (s, kind) in variables.items()}
    kept = compose(text, data=data)
    expanded = compose(text, data=data, keep=())
    kept_kinds = {op.kind.name for op in kept.ops}
    assert {op.kind.name for op in expanded.ops} != kept_kinds      # two different routes
    x = rng.standard_normal(shape).astype(np.float32)
    a = execute(kept, {"x": x})["y"]
    b = execute(expanded, {"x": x})["y"]
    assert a.shape == b.shape == kept.tensor("y").shape
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


# ------------------------------------------------------------------ numpy transcription of 4.3

def _extended(x, pads, border):
    """input~ of 4.3 Border Modes as numpy padding modes."""
    mode = {"constant": "constant", "replicate": "edge", "reflect": "reflect", "reflect-even": "symmetric"}[border]
    return np.pad(x, pads, mode=mode)


def _conv_reference(x, w, bias, stride, dilation, pads, border, groups):
    xe = _extended(x.astype(np.float64), [(0, 0), (0, 0)] + pads, border)
    n, c, H, W = xe.shape
    o, cg, fh, fw = w.shape
    oh = (H - (fh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (W - (fw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for k in range(o):
        g = k // per_group
        for i in range(oh):
            for j in range(ow):
                window = xe[:, g * cg:(g + 1) * cg,
                            i * stride[0]: i * stride[0] + (fh - 1) * dilation[0] + 1: dilation[0],
                            j * stride[1]: j * stride[1] + (fw - 1) * dilation[1] + 1: dilation[1]]
                out[:, k, i, j] = (window * w[k]).sum(axis=(1, 2, 3)) + bias[k]
    return out


@pytest.mark.parametrize("border", ["constant", "replicate", "reflect", "reflect-even"])
@pytest.mark.parametrize("stride, dilation, padding, groups", [
    ([1, 1], [1, 1], "[]", 1),                          # automatic padding
    ([2, 2], [1, 1], "[]", 1),
    ([2, 1], [1, 2], "[(1, 2), (2, 1)]", 2),
    ([1, 1], [1, 1], "[(0, 0), (1, 1)]", 0),            # depth-wise
])
def test_conv_matches_the_4_3_formula(rng, border, stride, dilation, padding, groups):
    x = rng.standard_normal((1, 4, 7, 6)).astype(np.float32)
    g = 4 if groups == 0 else groups
    w = rng.standard_normal((4, 4 // g, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 4)).astype(np.float32)
    text = f"""{HEAD}graph G( x ) -> ( y )
{{
    x = external(shape = [1, 4, 7, 6]);
    w = variable(shape = {list(w.shape)}, label = 'w');
    b = variable(shape = [1, 4], label = 'b');
    y = conv(x, w, b, border = '{border}', padding = {padding}, stride = {stride}, dilation = {dilation},
             groups = {groups});
}}"""
    graph = compose(text, data={"w": w, "b": b})
    if padding == "[]":
        pads = []
        for X, s, d in zip((7, 6), stride, dilation):   # 4.3 automatic padding, by hand
            out = -(-X // s)
            t = max((out - 1) * s + (3 - 1) * d + 1 - X, 0)
            pads.append((t // 2, t - t // 2))
    else:
        pads = [tuple(p) for p in eval(padding)]
    expected = _conv_reference(x, w, b[0], stride, dilation, pads, border, g)
    got = execute(graph, {"x": x})["y"]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("border, normalize", [("constant", "false"), ("constant", "true"),
                                               ("ignore", "true"), ("reflect", "false")])
def test_box_matches_the_4_3_formula(rng, border, normalize):
    x = rng.standard_normal((1, 1, 5, 4)).astype(np.float32)
    text = f"""{HEAD}graph G( x ) -> ( y )
{{
    x = external(shape = [1, 1, 5, 4]);
    y = box(x, size = [1, 1, 3, 2], border = '{border}', padding = [(0,0), (0,0), (1,1), (1,0)],
            normalize = {normalize});
}}"""
    got = execute(compose(text), {"x": x})["y"]
    pads = [(0, 0), (0, 0), (1, 1), (1, 0)]
    ext = _extended(x.astype(np.float64), pads, "constant" if border == "ignore" else border)
    ones = _extended(np.ones_like(x, dtype=np.float64), pads, "constant")
    expected = np.zeros((1, 1, 5, 4))
    count = np.zeros((1, 1, 5, 4))
    for i in range(5):
        for j in range(4):
            expected[0, 0, i, j] = ext[0, 0, i:i + 3, j:j + 2].sum()
            count[0, 0, i, j] = ones[0, 0, i:i + 3, j:j + 2].sum() if border == "ignore" else 6
    if normalize == "true":
        expected /= count
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_matmul_transposes_and_reshape(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    text = f"""{HEAD}graph G( a ) -> ( y )
{{
    a = external(shape = [2, 3, 4]);
    b = variable(shape = [2, 5, 3], label = 'b');
    c = matmul(a, b, transposeA = true, transposeB = true);
    y = reshape(c, shape = [-1, 5]);
}}"""
    b = rng.standard_normal((2, 5, 3)).astype(np.float32)
    got = execute(compose(text, data={"b": b}), {"a": a})["y"]
    expected = np.einsum("bki,bjk->bij", a, b).reshape(-1, 5)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
