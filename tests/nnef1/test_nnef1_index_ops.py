"""NNEF 1.0 operations without a 2.0 operator (debox, argmax_pool, sample, desample, RoI operations,
update): values against loop-by-loop transcriptions of the chapter 4 formulas written here, hand-worked
corner cases, shapes, and located errors."""
import itertools
import pathlib

import numpy as np
import pytest
from nnef1_helpers import compose_text as compose

from qsim.errors import SemanticError
from qsim.runtime import execute

HEAD = "version 1.0;\n"
SPEC_DIR = pathlib.Path(__file__).parent.parent / "fixtures" / "nnef1" / "spec"


def graph(body: str, inputs="x", outputs="y") -> str:
    return f"{HEAD}graph g( {inputs} ) -> ( {outputs} )\n{{\n{body}\n}}\n"


def run(text: str, feeds: dict, data=None) -> dict:
    g = compose(text, data=data)
    return execute(g, feeds)


# ------------------------------------------------------------------ oracles (4.3, 4.6)

def padded_value(x, index, border):
    """input~[index] of 4.3: the border decides values outside the input."""
    out = []
    for i, n in zip(index, x.shape):
        if 0 <= i < n:
            out.append(i)
        elif border in ("constant", "ignore"):
            return 0.0 if border == "constant" else -np.inf
        elif border == "replicate":
            out.append(min(max(i, 0), n - 1))
        elif border == "reflect":
            out.append(-i if i < 0 else 2 * (n - 1) - i)
        else:  # reflect-even
            out.append(-i - 1 if i < 0 else 2 * n - 1 - i)
    return x[tuple(out)]


def window_shape(X, f, s, d, p, q):
    return [(pi + Xi + qi - ((fi - 1) * di + 1)) // si + 1 for Xi, fi, si, di, pi, qi in zip(X, f, s, d, p, q)]


def oracle_argmax_pool(x, size, stride, dilation, before, after, border):
    out = np.zeros(window_shape(x.shape, size, stride, dilation, before, after), np.int64)
    for i in np.ndindex(*out.shape):
        values = [padded_value(x, [ii * s + jj * d - p for ii, s, jj, d, p in zip(i, stride, j, dilation, before)],
                               border) for j in itertools.product(*[range(f) for f in size])]
        best = 0
        for k, v in enumerate(values):   # the first of equal maxima (4.3.3)
            if v > values[best]:
                best = k
        out[i] = best
    return out


def oracle_sample(x, index, size, stride, dilation, before, border):
    out = np.zeros(index.shape, np.float32)
    for i in np.ndindex(*index.shape):
        j = np.unravel_index(index[i], size)
        out[i] = padded_value(x, [ii * s + jj * d - p for ii, s, jj, d, p in zip(i, stride, j, dilation, before)],
                              border)
    return out


def oracle_desample(x, index, size, stride, dilation, before, up):
    """output[i] = sum over j, (i + p - j d) / s a valid position whose index is j (4.3.3)."""
    out = np.zeros(up, np.float32)
    taps = list(itertools.product(*[range(f) for f in size]))
    for i in np.ndindex(*up):
        for k, j in enumerate(taps):
            t = [ii + p - jj * d for ii, p, jj, d in zip(i, before, j, dilation)]
            if all(tt % s == 0 and 0 <= tt // s < n for tt, s, n in zip(t, stride, x.shape)):
                src = tuple(tt // s for tt, s in zip(t, stride))
                if index[src] == k:
                    out[i] += x[src]
    return out


def oracle_debox(x, size, stride, dilation, before, up, border, normalize):
    out = np.zeros(up, np.float32)
    for i in np.ndindex(*up):
        total, count = 0.0, 0
        for j in itertools.product(*[range(f) for f in size]):
            t = [ii + p - jj * d for ii, p, jj, d in zip(i, before, j, dilation)]
            if all(tt % s == 0 for tt, s in zip(t, stride)):
                src = [tt // s for tt, s in zip(t, stride)]
                inside = all(0 <= v < n for v, n in zip(src, x.shape))
                total += padded_value(x, src, "constant" if border == "ignore" else border)
                count += inside
        if normalize:
            total /= max(count, 1) if border == "ignore" else np.prod(size)
        out[i] = total
    return out


# ------------------------------------------------------------------ argmax_pool

def test_argmax_pool_ties_take_the_first_position():
    # all values equal: the first window position (index 0) wins everywhere; automatic padding
    # (4.3) adds (0, 1) per spatial axis, zeros below 2.0, so the output is 3x3
    x = np.full((1, 1, 3, 3), 2.0, np.float32)
    out = run(graph("    x = external(shape = [1, 1, 3, 3]);\n    y = argmax_pool(x, size = [1, 1, 2, 2]);"),
              {"x": x})["y"]
    np.testing.assert_array_equal(out, np.zeros((1, 1, 3, 3)))


def test_argmax_pool_padding_with_constant_and_ignore_borders():
    # x = -1 everywhere, 3x3 window, one pixel of padding around a 2x2 input: with zeros padded
    # ('constant') the padding wins and the first padded position is 0 (top-left corner) for
    # output (0,0); with 'ignore' the first real pixel of the window wins: window position (1,1) = 4
    x = np.full((1, 1, 2, 2), -1.0, np.float32)
    body = ("    x = external(shape = [1, 1, 2, 2]);\n    y = argmax_pool(x, size = [1, 1, 3, 3], "
            "padding = [(0,0), (0,0), (1,1), (1,1)], border = '{}');")
    constant = run(graph(body.format("constant")), {"x": x})["y"]
    ignore = run(graph(body.format("ignore")), {"x": x})["y"]
    # constant: output (1,1) reads rows 0..2, cols 0..2 of the padded 4x4: (0,0) is real, so the
    # first padding position is (0,2) = 2
    np.testing.assert_array_equal(constant[0, 0], [[0, 0], [0, 2]])
    # ignore: the first real pixel; output (0,1) window rows -1..1, cols 0..2: first real is (1,0) = 3
    np.testing.assert_array_equal(ignore[0, 0], [[4, 3], [1, 0]])


GEOMETRIES = [  # size, stride, dilation, padding before, after, output shape for a [1, 2, 5, 6] input
    # H: (1 + 5 + 1 - 3) / 2 + 1 = 3; W: (0 + 6 + 2 - 3) / 1 + 1 = 6
    ([1, 1, 3, 2], [1, 1, 2, 1], [1, 1, 1, 2], [0, 0, 1, 0], [0, 0, 1, 2], (1, 2, 3, 6)),
    # negative padding crops: C: (2 - 2) + 1 = 1; H: (-1 + 5 + 0 - 2) + 1 = 3; W: (1 + 6 - 1 - 2) / 2 + 1 = 3
    ([1, 2, 2, 2], [1, 1, 1, 2], [1, 1, 1, 1], [0, 0, -1, 1], [0, 0, 0, -1], (1, 1, 3, 3)),
]


@pytest.mark.parametrize("border", ["ignore", "constant", "replicate", "reflect", "reflect-even"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["padded", "cropped"])
def test_argmax_pool_and_sample_match_the_formulas(rng, border, geometry):
    x = rng.integers(-3, 4, (1, 2, 5, 6)).astype(np.float32)   # small integers: many ties
    size, stride, dilation, before, after, shape = geometry
    pads = ", ".join(f"({p},{q})" for p, q in zip(before, after))
    attrs = f"size = {size}, stride = {stride}, dilation = {dilation}, padding = [{pads}], border = '{border}'"
    text = graph(f"    x = external(shape = [1, 2, 5, 6]);\n    i = argmax_pool(x, {attrs});\n"
                 f"    y = sample(x, i, {attrs});", outputs="i, y")
    out = run(text, {"x": x})
    index = oracle_argmax_pool(x, size, stride, dilation, before, after, border)
    assert out["i"].shape == index.shape == shape
    np.testing.assert_array_equal(out["i"], index)
    np.testing.assert_array_equal(out["y"], oracle_sample(x, index, size, stride, dilation, before, border))


@pytest.mark.parametrize("border", ["ignore", "constant", "replicate", "reflect-even"])
def test_max_pool_with_index_kept_whole_equals_its_body(rng, border):
    # kept: nn.max_pool + argmax_pool; expanded (keep=()): the spec body argmax_pool + sample
    x = rng.integers(-2, 3, (2, 3, 6, 5)).astype(np.float32)
    attrs = f"size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = '{border}'"
    text = graph(f"    x = external(shape = [2, 3, 6, 5]);\n    y, i = max_pool_with_index(x, {attrs});",
                 outputs="y, i")
    kept, expanded = compose(text), compose(text, keep=())
    assert "nn.max_pool" in {op.kind.name for op in kept.ops}
    assert "layout.gather_nd" in {op.kind.name for op in expanded.ops}
    a, b = execute(kept, {"x": x}), execute(expanded, {"x": x})
    assert a["i"].dtype == np.int64 and a["i"].shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(a["i"], b["i"])
    np.testing.assert_array_equal(a["y"], b["y"])


def test_sample_reads_index_positions_by_hand():
    # 1x1x1x4 input, windows of 2 with stride 2: index [1, 0] picks x[1] and x[2]
    x = np.array([[[[5.0, 7.0, 1.0, 3.0]]]], np.float32)
    text = graph("    x = external(shape = [1, 1, 1, 4]);\n    i = external<integer>(shape = [1, 1, 1, 2]);\n"
                 "    y = sample(x, i, size = [1, 1, 1, 2], stride = [1, 1, 1, 2]);", inputs="x, i")
    out = run(text, {"x": x, "i": np.array([[[[1, 0]]]], np.int64)})["y"]
    np.testing.assert_array_equal(out, [[[[7.0, 1.0]]]])


# ------------------------------------------------------------------ desample

def test_desample_sums_collisions_by_hand():
    # down-space [2, 5], windows of 3 with stride 1: down 0 with index 2 and down 1 with index 1
    # both land on up position 2 (0 + 2 = 1 + 1): output [0, 0, 7, 0]
    text = graph("    x = external(shape = [1, 1, 1, 2]);\n    i = external<integer>(shape = [1, 1, 1, 2]);\n"
                 "    y = desample(x, i, size = [1, 1, 1, 3], padding = [(0,0), (0,0), (0,0), (0,0)]);",
                 inputs="x, i")
    g = compose(text)
    assert g.tensor("y").shape == (1, 1, 1, 4)
    out = execute(g, {"x": np.array([[[[2.0, 5.0]]]], np.float32), "i": np.array([[[[2, 1]]]], np.int64)})
    np.testing.assert_array_equal(out["y"], [[[[0.0, 0.0, 7.0, 0.0]]]])


def test_desample_inverts_max_pool_with_index(rng):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    attrs = "size = [1, 1, 2, 2], stride = [1, 1, 2, 2]"
    text = graph(f"    x = external(shape = [1, 2, 6, 6]);\n    p, i = max_pool_with_index(x, {attrs});\n"
                 f"    y = desample(p, i, {attrs}, output_shape = [1, 2, 6, 6]);")
    y = run(text, {"x": x})["y"]
    keep = x == np.repeat(np.repeat(x.reshape(1, 2, 3, 2, 3, 2).max((3, 5)), 2, 2), 2, 3)
    np.testing.assert_array_equal(y, np.where(keep, x, 0.0))


@pytest.mark.parametrize("size, stride, dilation, before, after, up", [
    ([1, 1, 3, 2], [1, 1, 2, 1], [1, 1, 1, 2], [0, 0, 1, 0], [0, 0, 1, 2], [1, 2, 6, 5]),
    ([1, 2, 2, 2], [1, 1, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 1], [1, 3, 6, 7]),
])
def test_desample_matches_the_formula(rng, size, stride, dilation, before, after, up):
    down = window_shape(up, size, stride, dilation, before, after)
    x = rng.standard_normal(down).astype(np.float32)
    index = rng.integers(0, int(np.prod(size)), down)
    pads = ", ".join(f"({p},{q})" for p, q in zip(before, after))
    text = graph(f"    x = external(shape = {down});\n    i = external<integer>(shape = {down});\n"
                 f"    y = desample(x, i, size = {size}, stride = {stride}, dilation = {dilation}, "
                 f"padding = [{pads}], output_shape = {up});", inputs="x, i")
    y = run(text, {"x": x, "i": index})["y"]
    np.testing.assert_allclose(y, oracle_desample(x, index, size, stride, dilation, before, up), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ debox

def test_debox_by_hand():
    # windows of 2 with stride 2 repeat each value twice; padding (1, 0) shifts by one
    x = np.array([[[[1.0, 2.0, 3.0]]]], np.float32)
    out = run(graph("    x = external(shape = [1, 1, 1, 3]);\n"
                    "    y = debox(x, size = [1, 1, 1, 2], stride = [1, 1, 1, 2], "
                    "padding = [(0,0), (0,0), (0,0), (1,0)]);"), {"x": x})["y"]
    # X = (3 - 1) * 2 + 2 - 1 = 5; output[i] = x[(i + 1) / 2] + x[i / 2] over even numerators
    np.testing.assert_array_equal(out, [[[[1.0, 2.0, 2.0, 3.0, 3.0]]]])


@pytest.mark.parametrize("border", ["ignore", "constant", "replicate", "reflect", "reflect-even"])
@pytest.mark.parametrize("normalize", [False, True])
def test_debox_matches_the_formula(rng, border, normalize):
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    size, stride, dilation, before, after = [1, 1, 3, 2], [1, 1, 2, 1], [1, 1, 1, 2], [0, 0, 1, 1], [0, 0, 1, 0]
    up = [1, 2, 5, 5]
    assert window_shape(up, size, stride, dilation, before, after) == list(x.shape)
    pads = ", ".join(f"({p},{q})" for p, q in zip(before, after))
    text = graph(f"    x = external(shape = [1, 2, 3, 4]);\n    y = debox(x, size = {size}, stride = {stride}, "
                 f"dilation = {dilation}, padding = [{pads}], output_shape = {up}, border = '{border}', "
                 f"normalize = {'true' if normalize else 'false'});")
    y = run(text, {"x": x})["y"]
    np.testing.assert_allclose(y, oracle_debox(x, size, stride, dilation, before, up, border, normalize),
                               rtol=1e-5, atol=1e-6)


def test_nearest_upsample_expanded_through_debox_equals_the_kept_operator(rng):
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    text = graph("    x = external(shape = [1, 2, 3, 4]);\n    y = nearest_upsample(x, factor = [2, 3]);")
    kept, expanded = compose(text), compose(text, keep=())
    assert "nn.deconv" in {op.kind.name for op in expanded.ops}
    np.testing.assert_array_equal(execute(kept, {"x": x})["y"], execute(expanded, {"x": x})["y"])


# ------------------------------------------------------------------ RoI operations (4.6)

IMAGE = np.arange(2 * 2 * 4 * 5, dtype=np.float32).reshape(2, 2, 4, 5)
# the third RoI lies partially outside the image (rows -1..2, columns 2..6)
ROIS = np.array([[0.0, 0.0, 4.0, 5.0], [1.0, 1.0, 3.0, 3.4], [-1.0, 2.0, 2.0, 6.0]], np.float32)
BATCH = np.array([[0], [1], [0]], np.int64)


def roi_text(call: str) -> str:
    return graph("    x = external(shape = [2, 2, 4, 5]);\n    r = external(shape = [3, 4]);\n"
                 f"    b = external<integer>(shape = [3, 1]);\n    y = {call};", inputs="x, r, b")


def oracle_roi_pool(x, rois, batch, out_size, reduce):
    """4.6.1: coordinates rounded; cells ceil(r/p) big, floor(r/p) apart from the RoI start
    (the spec's "c_H + i s_H" read as y0 + i s_H); cells are clipped to the image and the empty
    RoI extent counts as 1 (docs/nnef1.md)."""
    n, m = rois.shape[0], len(out_size)
    out = np.zeros((n, x.shape[1], *out_size), np.float32)
    for r in range(n):
        lo = np.floor(rois[r, :m] + 0.5).astype(int)
        hi = np.floor(rois[r, m:] + 0.5).astype(int)
        extent = np.maximum(hi - lo, 1)
        cell, step = -(-extent // out_size), extent // out_size
        for c in np.ndindex(*out_size):
            start = [lo[a] + c[a] * step[a] for a in range(m)]
            window = [slice(max(start[a], 0), max(min(start[a] + cell[a], x.shape[2 + a]), 0)) for a in range(m)]
            patch = x[(batch[r, 0], slice(None), *window)].reshape(x.shape[1], -1)
            out[(r, slice(None), *c)] = reduce(patch, axis=1) if patch.size else 0.0
    return out


def oracle_roi_resample(x, rois, batch, out_size, method):
    """4.6.2 with the interpolation of 4.3.4: the RoI [start, end) is the input interval, indices
    clamped to the image ('replicate', the default border of multilinear_upsample)."""
    n, m = rois.shape[0], len(out_size)
    out = np.zeros((n, x.shape[1], *out_size), np.float64)
    for r in range(n):
        for i in np.ndindex(*out_size):
            coords = []
            for a in range(m):
                start, extent, h = float(rois[r, a]), float(rois[r, m + a] - rois[r, a]), out_size[a]
                if method == "symmetric":
                    coords.append(start + (i[a] + 0.5) * extent / h - 0.5)
                elif method == "asymmetric":
                    coords.append(start + i[a] * extent / h)
                else:
                    coords.append(start + (i[a] * (extent - 1) / (h - 1) if h > 1 else 0.0))
            value = 0.0
            for corner in itertools.product((0, 1), repeat=m):
                weight, index = 1.0, []
                for a, c in enumerate(corner):
                    j = np.floor(coords[a]) + c
                    weight *= 1.0 - abs(j - coords[a])
                    index.append(int(min(max(j, 0), x.shape[2 + a] - 1)))
                value = value + weight * x[(batch[r, 0], slice(None), *index)]
            out[(r, slice(None), *i)] = value
    return out


@pytest.mark.parametrize("op, reduce", [("max_roi_pool", np.max), ("avg_roi_pool", np.mean)])
def test_roi_pools_match_the_formula(op, reduce):
    g = compose(roi_text(f"{op}(x, r, b, output_size = [2, 3])"))
    assert g.tensor("y").shape == (3, 2, 2, 3)
    y = execute(g, {"x": IMAGE, "r": ROIS, "b": BATCH})["y"]
    np.testing.assert_allclose(y, oracle_roi_pool(IMAGE, ROIS, BATCH, [2, 3], reduce), rtol=1e-6)


def test_max_roi_pool_by_hand():
    # RoI (1, 1, 3, 3) of batch item 1, one cell: the maximum of rows 1..2, cols 1..2
    y = run(roi_text("max_roi_pool(x, r, b, output_size = [1, 1])"), {"x": IMAGE, "r": ROIS, "b": BATCH})["y"]
    assert y[1, 0, 0, 0] == IMAGE[1, 0, 2, 2] == 52.0


@pytest.mark.parametrize("method", ["symmetric", "asymmetric", "aligned"])
def test_roi_resample_matches_the_formula(method):
    g = compose(roi_text(f"roi_resample(x, r, b, output_size = [3, 4], method = '{method}')"))
    assert g.tensor("y").shape == (3, 2, 3, 4)
    y = execute(g, {"x": IMAGE, "r": ROIS, "b": BATCH})["y"]
    np.testing.assert_allclose(y, oracle_roi_resample(IMAGE, ROIS, BATCH, [3, 4], method), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, rois, size", [
    ((2, 2, 7), [[0.5, 5.0], [-1.0, 3.0]], [4]),                              # one spatial dimension
    ((1, 1, 3, 4, 5), [[0.2, 0.5, 1.0, 2.5, 3.5, 4.2], [0.0, 0.0, 0.0, 3.0, 4.0, 5.0]], [2, 3, 4]),  # three
])
def test_roi_resample_in_one_and_three_dimensions(shape, rois, size):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    rois = np.asarray(rois, np.float32)
    batch = np.zeros((len(rois), 1), np.int64)
    m = len(shape) - 2
    text = graph(f"    x = external(shape = {list(shape)});\n    r = external(shape = [{len(rois)}, {2 * m}]);\n"
                 f"    b = external<integer>(shape = [{len(rois)}, 1]);\n"
                 f"    y = roi_resample(x, r, b, output_size = {size}, method = 'asymmetric');", inputs="x, r, b")
    y = run(text, {"x": x, "r": rois, "b": batch})["y"]
    assert y.shape == (len(rois), shape[1], *size)
    np.testing.assert_allclose(y, oracle_roi_resample(x, rois, batch, size, "asymmetric"), rtol=1e-5, atol=1e-4)


def test_roi_resample_aligned_by_hand():
    # RoI rows 1..3, cols 1..3.4 of batch item 1, 2x3 aligned: rows 1, 2; cols 1, 1.7, 2.4
    y = run(roi_text("roi_resample(x, r, b, output_size = [2, 3], method = 'aligned')"),
            {"x": IMAGE, "r": ROIS, "b": BATCH})["y"]
    np.testing.assert_allclose(y[1, 0], [[46.0, 46.7, 47.4], [51.0, 51.7, 52.4]], rtol=1e-5)


@pytest.mark.parametrize("op, pool", [("avg_roi_align", np.mean), ("max_roi_align", np.max)])
def test_roi_align_compounds_pool_the_resampled_roi(op, pool):
    y = run(roi_text(f"{op}(x, r, b, output_size = [2, 2], sampling_rate = [2, 3])"),
            {"x": IMAGE, "r": ROIS, "b": BATCH})["y"]
    resized = oracle_roi_resample(IMAGE, ROIS, BATCH, [4, 6], "symmetric")
    expected = pool(resized.reshape(3, 2, 2, 2, 2, 3), axis=(3, 5))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-4)


# ------------------------------------------------------------------ update (4.8)

def test_update_returns_the_value_and_outputs_the_new_variable():
    text = graph("    x = external(shape = [1, 2]);\n    s = variable(shape = [1, 2], label = 's');\n"
                 "    y = update(s, s + x);")
    g = compose(text, data={"s": np.array([[1.0, 2.0]])})
    assert g.outputs == ("y", "s.updated")
    out = execute(g, {"x": np.array([[10.0, 20.0]], np.float32)})
    np.testing.assert_array_equal(out["y"], [[11.0, 22.0]])
    np.testing.assert_array_equal(out["s.updated"], [[11.0, 22.0]])


def test_update_inside_a_fragment_like_the_spec_recurrent_example():
    # D.2's simple_recurrent_network, with n equal to the batch so that its shapes agree
    fragment = """fragment rnn( x: tensor<scalar>, n: integer ) -> ( y: tensor<scalar> )
{
    k = shape_of(x)[0];
    m = shape_of(x)[1];
    W = variable(shape = [n,m], label = 'W');
    U = variable(shape = [n,n], label = 'U');
    b = variable(shape = [1,n], label = 'b');
    s = variable(shape = [k,n], label = 's');
    t = sigmoid(linear(W, x) + linear(U, s) + b);
    y = update(s, t);
}
"""
    text = f"{HEAD}{fragment}graph g( x ) -> ( y )\n{{\n    x = external(shape = [2, 3]);\n    y = rnn(x, n = 2);\n}}\n"
    rng = np.random.default_rng(1)
    data = {"W": rng.standard_normal((2, 3)), "U": rng.standard_normal((2, 2)), "b": rng.standard_normal((1, 2)),
            "s": rng.standard_normal((2, 2))}
    g = compose(text, data=data)
    assert g.outputs == ("y", "s.updated")
    x = rng.standard_normal((2, 3)).astype(np.float32)
    out = execute(g, {"x": x})
    W, U, b, s = (data[k].astype(np.float32) for k in "WUbs")
    expected = 1.0 / (1.0 + np.exp(-(x @ W.T).T - (s @ U.T).T - b))   # linear(A, B) = A B^T
    np.testing.assert_allclose(out["s.updated"], expected, rtol=1e-5)


# ------------------------------------------------------------------ located errors

ERRORS = [
    ("    x = external(shape = [1, 1, 2]);\n    i = external<integer>(shape = [1, 1, 2]);\n"
     "    y = desample(x, i, size = [1, 1, 2], border = 'replicate');", 6, 9,
     "desample: border 'replicate': desample needs border 'constant'"),
    ("    x = external(shape = [1, 1, 2]);\n    i = external<integer>(shape = [1, 1, 3]);\n"
     "    y = desample(x, i, size = [1, 1, 2]);", 6, 9,
     "desample: 'index' has shape [1, 1, 3], expected the input shape [1, 1, 2]"),
    ("    x = external(shape = [1, 1, 4]);\n    i = external<integer>(shape = [1, 1, 3]);\n"
     "    y = sample(x, i, size = [1, 1, 2], stride = [1, 1, 2]);", 6, 9,
     "sample: 'index' has shape [1, 1, 3], expected the output shape [1, 1, 2]"),
    ("    x = external(shape = [1, 1, 4]);\n    y = argmax_pool(x, size = [2]);", 5, 9,
     "argmax_pool: 'size' has 1 items, expected 3 (the input rank)"),
    ("    x = external(shape = [1, 1, 4]);\n    y = argmax_pool(x, size = [1, 1, 2], border = 'wrap');", 5, 9,
     "argmax_pool: border 'wrap' is not one of"),
    ("    x = external(shape = [1, 1, 2]);\n    y = argmax_pool(x, size = [1, 1, 3], border = 'reflect', "
     "padding = [(0,0), (0,0), (2,0)]);", 5, 9, "beyond what the input [1, 1, 2] can reflect"),
    ("    x = external(shape = [1, 1, 3]);\n    y = debox(x, size = [1, 1, 2], output_shape = [1, 1, 9]);", 5, 9,
     "debox: output extent 9 does not down-scale to the input extent 3"),
    ("    x = external(shape = [1, 2, 4, 4]);\n    r = external(shape = [3, 4]);\n"
     "    b = external<integer>(shape = [3]);\n    y = max_roi_pool(x, r, b, output_size = [2, 2]);", 7, 9,
     "max_roi_pool: 'batch_index' has shape [3], expected [3, 1]"),
    ("    x = external(shape = [1, 2, 4, 4]);\n    r = external(shape = [3, 3]);\n"
     "    b = external<integer>(shape = [3, 1]);\n    y = roi_resample(x, r, b, output_size = [2, 2]);", 7, 9,
     "roi_resample: 'rois' has shape [3, 3], expected [N, 4]"),
    ("    x = external(shape = [1, 2, 4, 4]);\n    r = external(shape = [3, 4]);\n"
     "    b = external<integer>(shape = [3, 1]);\n    y = roi_resample(x, r, b, output_size = [2]);", 7, 9,
     "roi_resample: 'output_size' [2] must have 2 positive items"),
    ("    x = external(shape = [1, 2, 4, 4]);\n    r = external(shape = [3, 4]);\n"
     "    b = external<integer>(shape = [3, 1]);\n    y = roi_resample(x, r, b, output_size = [2, 2], "
     "method = 'cubic');", 7, 9, "roi_resample: method 'cubic' is not"),
    ("    x = external(shape = [2]);\n    y = update(x, x);", 5, 9, "update: 'x' is not a variable tensor"),
    ("    x = external(shape = [2]);\n    s = variable(shape = [3], label = 's');\n    y = update(s, x);", 6, 9,
     "update: value shape [2] differs from the variable's [3]"),
    ("    x = external(shape = [2]);\n    s = variable(shape = [2], label = 's');\n    a = update(s, x);\n"
     "    y = update(s, a);", 7, 9, "update: variable 's' is updated twice"),
]


@pytest.mark.parametrize("body, line, column, message", ERRORS, ids=[e[3][:40] for e in ERRORS])
def test_errors_are_located(body, line, column, message):
    with pytest.raises(SemanticError) as info:
        compose(graph(body), filename="m.nnef")
    err = info.value
    assert message in str(err)
    assert (err.location.file, err.location.line, err.location.column) == ("m.nnef", line, column)


# ------------------------------------------------------------------ the spec's own examples

@pytest.mark.parametrize("fixture, name, call, inputs", [
    ("line2086.nnef", "avg_roi_align", "(x, r, b, output_size = [2, 2], sampling_rate = [2, 2])", "x, r, b"),
    ("line2105.nnef", "max_roi_align", "(x, r, b, output_size = [2, 2], sampling_rate = [2, 2])", "x, r, b"),
    ("line2322.nnef", "max_pool_with_index", "(x, size = [1, 1, 3, 3], padding = [(0,0), (0,0), (1,1), (1,1)])",
     "x"),
    ("line1606.nnef", "nearest_upsample", "(x, factor = [2, 2])", "x"),
])
def test_spec_examples_compose_and_agree_with_the_standard_operation(fixture, name, call, inputs):
    """The spec's fragment text, renamed so that it does not clash with the standard operation,
    computes what the standard operation computes."""
    source = (SPEC_DIR / fixture).read_text().replace(f"fragment {name}(", f"fragment spec_{name}(")
    # the repair qsim/nnef1/stdlib.nnef makes too: pooling windows cover every dimension (4.3)
    source = source.replace("size = sampling_rate, stride = sampling_rate",
                            "size = [1,1] + sampling_rate, stride = [1,1] + sampling_rate")
    source = source.replace("index: tensor<logical>", "index: tensor<integer>")   # argmax_pool's type
    declarations = "    x = external(shape = [2, 2, 4, 5]);\n"
    feeds = {"x": IMAGE}
    if "r" in inputs:
        declarations += "    r = external(shape = [3, 4]);\n    b = external<integer>(shape = [3, 1]);\n"
        feeds.update(r=ROIS, b=BATCH)
    pairs = [("y", "z"), ("i", "j")] if name == "max_pool_with_index" else [("y", "z")]
    outputs = ", ".join(n for pair in pairs for n in pair)
    targets = ", ".join(a for a, _ in pairs), ", ".join(b for _, b in pairs)
    text = (f"{HEAD}{source}\ngraph g( {inputs} ) -> ( {outputs} )\n{{\n{declarations}"
            f"    {targets[0]} = spec_{name}{call};\n    {targets[1]} = {name}{call};\n}}\n")
    out = run(text, feeds)
    for a, b in pairs:
        np.testing.assert_allclose(out[a], out[b], rtol=1e-6)


def test_model_folder_with_update_loads_and_runs(tmp_path, rng):
    """qsim.load on a folder (graph.nnef + the variable's .dat) and the float executor, as `qsim run`."""
    import qsim
    from qsim import tensorfile
    (tmp_path / "graph.nnef").write_text(graph(
        "    x = external(shape = [1, 1, 4, 4]);\n    s = variable(shape = [1, 1, 2, 2], label = 'state');\n"
        "    p, i = max_pool_with_index(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);\n"
        "    y = update(s, s + p);"))
    state = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    tensorfile.write_tensor(tmp_path / "state.dat", state)
    g = qsim.load(tmp_path)
    assert g.outputs == ("y", "state.updated")
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    out = execute(g, {"x": x})
    expected = state + x.reshape(1, 1, 2, 2, 2, 2).max((3, 5))
    np.testing.assert_allclose(out["y"], expected, rtol=1e-6)
    np.testing.assert_array_equal(out["state.updated"], out["y"])


# D.2 of the spec text (explanatory examples, outside the chapter 3-7 fixtures); `linear_layer`
# is not defined by the spec, the file defines it with variables per scope
RECURRENT = (pathlib.Path(__file__).parent / "spec_d2_recurrent.nnef").read_text()


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def test_spec_lstm_and_gru_examples_compose_and_run(rng):
    text = (f"{HEAD}{RECURRENT}graph g( x ) -> ( y, w )\n{{\n    x = external(shape = [2, 3]);\n"
            "    y = lstm(x, channels = 4, scope = 'lstm');\n    w = gru(x, channels = 4, scope = 'gru');\n}\n")
    data = {}
    for scope, inputs in (("lstm", 7), ("gru", 7)):
        for part in ("f", "i", "o", "z") if scope == "lstm" else ("z", "r", "s"):
            data[f"{scope}/{part}/filter"] = rng.standard_normal((4, inputs)).astype(np.float32)
            data[f"{scope}/{part}/bias"] = rng.standard_normal((1, 4)).astype(np.float32)
        data[f"{scope}/h"] = rng.standard_normal((2, 4)).astype(np.float32)
    data["lstm/c"] = rng.standard_normal((2, 4)).astype(np.float32)
    g = compose(text, data=data)
    assert g.outputs == ("y", "w", "lstm/c.updated", "lstm/h.updated", "gru/h.updated")
    x = rng.standard_normal((2, 3)).astype(np.float32)
    out = execute(g, {"x": x})

    def layer(v, name):
        return v @ data[name + "/filter"].T + data[name + "/bias"]

    s = np.concatenate([x, data["lstm/h"]], axis=1)
    a = data["lstm/c"] * _sigmoid(layer(s, "lstm/f")) + np.tanh(layer(s, "lstm/z")) * _sigmoid(layer(s, "lstm/i"))
    h = np.tanh(a) * _sigmoid(layer(s, "lstm/o"))
    np.testing.assert_allclose(out["lstm/c.updated"], a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["y"], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["lstm/h.updated"], out["y"])

    h0 = data["gru/h"]
    m = np.concatenate([x, h0], axis=1)
    z, r = _sigmoid(layer(m, "gru/z")), _sigmoid(layer(m, "gru/r"))
    sg = np.tanh(layer(np.concatenate([x, r * h0], axis=1), "gru/s"))
    np.testing.assert_allclose(out["w"], z * sg + (1.0 - z) * h0, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["gru/h.updated"], out["w"])
