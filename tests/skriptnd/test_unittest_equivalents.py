"""qsim's own equivalents of the feature categories of NNEF-Tools' skriptnd unittest.sknd that the
earlier tests did not cover: packed graph inputs in the parallel, folding and unrolled loop forms,
packs of run-time length (`..(s|5)`) into layout.concat/stack and out of layout.split/unstack, real
ranges, packed graph outputs, model operators with packed inputs/outputs. Composed shapes and
executed values are checked against numpy oracles written from chapter 2 and chapter 4 formulas.
"""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.errors import SemanticError, SyntaxError_, UnsupportedError
from qsim.runtime import execute
from qsim.skriptnd.model import compose_graphs
from qsim.skriptnd.parser import parse

FIXTURE = Path(__file__).parent.parent / "fixtures" / "skriptnd" / "unittest_equivalents.sknd"


def compose(name, path=FIXTURE):
    return compose_graphs(str(path), graph=name)[0].graph


def shapes(graph, names):
    return [graph.tensors[n].shape for n in names]


def run(graph, feeds):
    values = execute(graph, feeds)
    return [values[n] for n in graph.outputs]


def refused(tmp_path, kind, body):
    """The error composing graph G of `import layout, math;` + body (so body line k is line k+1)."""
    path = tmp_path / "main.sknd"
    path.write_text(f"import layout, math;\n{body}")
    with pytest.raises(kind) as err:
        compose_graphs(str(path), graph="G")
    return err.value


# ---------------------------------------------------------------- parsing


def test_a_pack_length_takes_an_upper_bound():
    module = parse("graph G {\n @input { xs: real[2]..(s|5); }\n @output { y: real[]; }\n"
                   " @compose { y = math.sum_reduce(xs); }\n}\n", "m.sknd")
    pack = module.graphs[0].inputs[0].type.pack
    assert pack.length.name == "s" and pack.bound.value == 5
    assert (pack.loc.line, pack.loc.column) == (2, 22)


def test_an_unclosed_bounded_pack_length_is_a_located_syntax_error():
    with pytest.raises(SyntaxError_) as err:
        parse("graph G {\n @input { xs: real[2]..(s|5; }\n}\n", "m.sknd")
    assert err.value.location.line == 2


# ---------------------------------------------------------------- packed graph inputs in loops


@pytest.mark.parametrize("name", ["scan_parallel", "unrolled_parallel"])
def test_a_packed_input_scanned_in_parallel(name, rng):
    g = compose(name)
    assert list(g.inputs) == ["xs_0", "xs_1", "xs_2"] and list(g.outputs) == ["ys_0", "ys_1", "ys_2"]
    assert shapes(g, g.inputs) == [(2, 3)] * 3 and shapes(g, g.outputs) == [(2, 3)] * 3
    if name == "unrolled_parallel":        # unroll: one op per item, no loop op (2.10.1)
        assert [op.kind.name for op in g.ops] == ["math.mul"] * 3
    else:
        assert [op.kind.name for op in g.ops] == ["control.loop"]
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    ys = run(g, dict(zip(g.inputs, xs)))
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y, x * np.float32(3.0))


@pytest.mark.parametrize("name", ["scan_folding", "unrolled_folding"])
def test_a_packed_input_folded_in_order(name, rng):
    g = compose(name)
    assert list(g.inputs) == ["init", "xs_0", "xs_1", "xs_2", "xs_3"]
    assert shapes(g, g.outputs) == [(2,)]
    init = rng.standard_normal(2).astype(np.float32)
    xs = [rng.standard_normal(2).astype(np.float32) for _ in range(4)]
    (acc,) = run(g, dict(zip(g.inputs, [init] + xs)))
    expected = init
    for x in xs:                          # a_k = 2 a_{k-1} + x_k: the order of items matters
        expected = expected * np.float32(2.0) + x
    np.testing.assert_allclose(acc, expected, rtol=1e-6, atol=1e-6)


def test_a_static_pack_with_a_dynamic_extent_feeds_an_operator(rng):
    g = compose("packed_into_operator")
    assert shapes(g, g.inputs) == [(None, 3), (None, 3)]
    assert g.tensors["xs_0"].max_shape == (4, 3)
    assert shapes(g, g.outputs) == [(None, 6)]
    a, b = (rng.standard_normal((3, 3)).astype(np.float32) for _ in range(2))
    (y,) = run(g, {"xs_0": a, "xs_1": b})
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))


def test_a_packed_input_length_must_be_known_or_bounded(tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { xs: real[2]..(n); }\n @output { y: real[2]; }\n"
                           " @compose { y = layout.concat{axis=0}(xs); }\n}\n")
    assert "needs an upper bound" in err.message and "..(n|5)" in err.message
    assert (err.location.line, err.location.column) == (3, 22)


def test_a_packed_input_over_its_bound_is_refused(tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { xs: real[2]..(6|5); }\n @output { y: real[12]; }\n"
                           " @compose { y = layout.concat{axis=0}(xs); }\n}\n")
    assert "above its upper bound 5" in err.message and err.location.line == 3


# ---------------------------------------------------------------- packs of run-time length


def dyn_items(rng, count, shape):
    return rng.standard_normal((count,) + shape).astype(np.float32)


@pytest.mark.parametrize("count", [1, 3, 5])
def test_concat_of_a_runtime_length_pack(count, rng):
    g0, g1 = compose("dyn_concat_0"), compose("dyn_concat_1")
    assert [op.kind.name for op in g1.ops] == ["layout.transpose", "layout.flatten"]
    # the pack is one input holding its items stacked along a leading extent s <= 5
    assert list(g0.inputs) == ["xs"] and shapes(g0, ["xs"]) == [(None, 2, 3)]
    assert g0.tensors["xs"].max_shape == (5, 2, 3)
    assert shapes(g0, g0.outputs) == [(None, 3)] and g0.tensors["y"].max_shape == (10, 3)
    assert shapes(g1, g1.outputs) == [(2, None)] and g1.tensors["y"].max_shape == (2, 15)
    xs = dyn_items(rng, count, (2, 3))
    items = list(xs)
    np.testing.assert_array_equal(run(g0, {"xs": xs})[0], np.concatenate(items, axis=0))
    np.testing.assert_array_equal(run(g1, {"xs": xs})[0], np.concatenate(items, axis=1))


def test_stack_of_a_runtime_length_pack(rng):
    g, gs, g0 = compose("dyn_stack_1"), compose("dyn_stack_squeeze"), compose("dyn_stack_0")
    # stacking at axis 0 is the stacked tensor itself: one identity op gives the output its name
    assert [op.kind.name for op in g0.ops] == ["math.iden"] and list(g0.outputs) == ["y"]
    xs0 = dyn_items(rng, 3, (2, 3))
    np.testing.assert_array_equal(run(g0, {"xs": xs0})[0], np.stack(list(xs0), axis=0))
    assert shapes(g, g.outputs) == [(2, None, 3)] and shapes(gs, gs.outputs) == [(2, None, 3)]
    xs = dyn_items(rng, 4, (2, 3))
    np.testing.assert_array_equal(run(g, {"xs": xs})[0], np.stack(list(xs), axis=1))
    xs1 = dyn_items(rng, 2, (2, 1, 3))
    np.testing.assert_array_equal(run(gs, {"xs": xs1})[0], np.concatenate(list(xs1), axis=1))


def test_unstack_along_a_dynamic_extent_gives_a_runtime_length_pack(rng):
    g, gk = compose("dyn_unstack_1"), compose("dyn_unstack_keep")
    assert list(g.outputs) == ["ys"] and shapes(g, g.outputs) == [(None, 2, 3)]
    assert g.tensors["ys"].max_shape == (6, 2, 3)
    assert shapes(gk, gk.outputs) == [(None, 2, 1, 3)]
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    (ys,) = run(g, {"x": x})
    for k in range(4):                   # item k of the pack is x[:, k, :]
        np.testing.assert_array_equal(ys[k], x[:, k, :])
    (yk,) = run(gk, {"x": x})
    for k in range(4):
        np.testing.assert_array_equal(yk[k], x[:, k:k + 1, :])


def test_split_by_a_runtime_count_and_concat_back(rng):
    g = compose("dyn_split_round_trip")
    assert shapes(g, g.outputs) == [(3, None)]
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(run(g, {"x": x})[0], x)
    parts = execute(g, {"x": x})["parts"]
    assert parts.shape == (5, 3, 1)     # items real[3,1], one per unit of s
    np.testing.assert_array_equal(parts[:, :, 0], x.T)


def test_a_runtime_length_pack_goes_only_to_concat_and_stack(tmp_path):
    err = refused(tmp_path, UnsupportedError, "graph G {\n @input { xs: real[2]..(s|5); }\n @output { y: real[2]; }\n"
                           " @compose { y = math.sum_n(xs); }\n}\n")
    assert "run-time length" in err.message and "layout.concat" in err.message
    assert (err.location.line, err.location.column) == (5, 17)


def test_a_runtime_count_splits_only_its_own_extent(tmp_path):
    err = refused(tmp_path, UnsupportedError, "graph G {\n @input { x: real[s|5]; c: real[t|5]; }\n @output { y: real[s]; }\n"
                           " @compose { ps..(t) = layout.split{axis=0, count=t}(x); "
                           "y = layout.concat{axis=0}(ps); }\n}\n")
    assert "same symbol" in err.message and err.location.line == 5


def test_a_runtime_length_output_must_match_its_declared_length(tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { x: real[s|5,2]; }\n @output { ys: real[2]..(3); }\n"
                           " @compose { ys = layout.unstack{axis=0}(x); }\n}\n")
    assert "run-time length s|5, 3 written" in err.message and err.location.line == 4


# ---------------------------------------------------------------- real ranges


def test_real_range_counts_by_the_rounded_up_quotient():
    g = compose("real_range")
    assert shapes(g, g.outputs) == [(5,), (4,)]
    r, d = run(g, {})
    # 4.1.1: output[i] = first + i * stride, i < int((last - first) \ stride)
    np.testing.assert_array_equal(r, np.float32(1.0) + np.arange(5, dtype=np.float32) * np.float32(2.0))
    np.testing.assert_array_equal(d, np.float32(1.0) - np.arange(4, dtype=np.float32) * np.float32(0.5))
    assert r.dtype == np.float32


# ---------------------------------------------------------------- imports and `qsim check --all`

MIXED = """import layout, math, misc;
graph Good {
    @input { xs: real[2]..(s|4); }
    @output { y: real[2 * s]; }
    @compose { y = layout.concat{axis=0}(xs); }
}
graph UsesMissing {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @compose { y = misc.iden(x); }
}
graph NoSuchOperator {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @compose { y = math.axpby(x); }
}
"""


def test_an_unused_unknown_import_is_a_note_and_a_used_one_a_located_error(tmp_path, capsys):
    from qsim.cli import main
    path = tmp_path / "main.sknd"
    path.write_text(MIXED)
    assert main(["check", str(path), "--graph", "Good"]) == 0
    out = capsys.readouterr().out
    assert f"note: {path}:1:1: import of unknown module 'misc'" in out
    assert "input   xs: f32[?<=4, 2]" in out and "output  y: f32[?<=8]" in out
    assert main(["check", str(path), "--graph", "UsesMissing"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:10:20: semantic error: unknown module 'misc'" in err


def test_check_all_reports_every_failing_graph_located(tmp_path, capsys):
    from qsim.cli import main
    path = tmp_path / "main.sknd"
    path.write_text(MIXED)
    assert main(["check", str(path), "--all"]) == 2
    err = capsys.readouterr().err
    assert "2 of 3 graphs do not compose (1 do)" in err
    assert f"graph 'UsesMissing': {path}:10:20: semantic error: unknown module 'misc'" in err
    assert f"graph 'NoSuchOperator': {path}:15:20: semantic error: module 'math' has no operator 'axpby'" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- model operators with packs

OWN_PACKS = """import layout;

operator pack_sum {
    @input {
        xs: real[s..(d)]..(n);
    }
    @output {
        y: real[s..];
    }
    @lower {
        y[i..] += xs[k][i..],
            i < s, k < n;
    }
}

operator rows {
    @input {
        x: real[n, m];
    }
    @output {
        ys: real[m]..(n);
    }
    @lower {
        ys[k][j,] = x[k, j],
            k < n, j < m;
    }
}

operator two_packs {
    @attrib {
        n: int;
    }
    @input {
        a: real[m]..(n);
        b: real[m]..(k);
    }
    @output {
        y: real[m];
    }
    @lower {
        y[j,] += a[i][j,],
            i < n, j < m;
        y[j,] += 10.0 * b[i][j,],
            i < k, j < m;
    }
}

operator ambiguous {
    @input {
        a: real[m]..(p);
        b: real[m]..(q);
    }
    @output {
        y: real[m];
    }
    @lower {
        y[j,] += a[i][j,] - b[i][j,],
            i < p, j < m;
    }
}

graph G {
    @input {
        a: real[2, 3];
        b: real[2, 3];
        c: real[2, 3];
        x: real[4, 5];
    }
    @output {
        y: real[2, 3];
        r: real[5]..(4);
        t: real[5];
    }
    @compose {
        y = pack_sum([a, b, c]);
        r..(4) = rows(x);
        [r0, r1, r2, r3] = r;
        t = two_packs{n=1}([r0], [r1, r2, r3]);
    }
}

graph Ambiguous {
    @input {
        a: real[3];
        b: real[3];
    }
    @output {
        y: real[3];
    }
    @compose {
        y = ambiguous([a], [b]);
    }
}
"""


def test_model_operators_with_packed_inputs_and_outputs_run(tmp_path, rng):
    path = tmp_path / "main.sknd"
    path.write_text(OWN_PACKS)
    g = compose("G", path)
    assert list(g.outputs) == ["y", "r_0", "r_1", "r_2", "r_3", "t"]
    assert shapes(g, g.outputs) == [(2, 3)] + [(5,)] * 4 + [(5,)]
    assert [list(op.inputs) for op in g.ops] == [["a", "b", "c"], ["x"], ["r_0", "r_1", "r_2", "r_3"]]
    feeds = {n: rng.standard_normal(g.tensors[n].shape).astype(np.float32) for n in g.inputs}
    y, *rs, t = run(g, feeds)
    x = feeds["x"]
    # sum over the pack of three, in float32: bounded by 2 ulps of the largest partial sum
    exact = feeds["a"].astype(np.float64) + feeds["b"] + feeds["c"]
    bound = 2 * np.finfo(np.float32).eps * (np.abs(feeds["a"]) + np.abs(feeds["b"]) + np.abs(feeds["c"]))
    assert np.all(np.abs(y - exact) <= bound)
    for k in range(4):                    # ys[k][j] = x[k, j]
        np.testing.assert_array_equal(rs[k], x[k])
    exact_t = x[0].astype(np.float64) + 10.0 * (x[1].astype(np.float64) + x[2] + x[3])
    assert np.all(np.abs(t - exact_t) <= 4 * np.finfo(np.float32).eps * (np.abs(x[0]) + 10 * np.abs(x[1:]).sum(0)))


def test_a_model_operator_whose_packs_cannot_be_told_apart_is_refused_located(tmp_path):
    path = tmp_path / "main.sknd"
    path.write_text(OWN_PACKS)
    g = compose("Ambiguous", path)
    with pytest.raises(UnsupportedError) as err:
        execute(g, {"a": np.zeros(3, np.float32), "b": np.zeros(3, np.float32)})
    assert "cannot tell which of its 2 inputs belong to the packs a, b" in err.value.message
    assert err.value.location.line == OWN_PACKS.splitlines().index("operator ambiguous {") + 1


@pytest.mark.parametrize("name", ["dyn_concat_1", "dyn_stack_squeeze", "dyn_unstack_keep",
                                  "dyn_split_round_trip", "scan_parallel"])
def test_write_load_write_keeps_runtime_length_packs(name, tmp_path, rng):
    from qsim.skriptnd.writer import write_model
    g = compose(name)
    write_model(g, tmp_path / "a")
    again = compose_graphs(str(tmp_path / "a"))[0].graph
    write_model(again, tmp_path / "b")
    assert (tmp_path / "a" / "main.sknd").read_text() == (tmp_path / "b" / "main.sknd").read_text()
    assert [again.tensors[n].shape for n in again.inputs] == shapes(g, g.inputs)
    feeds = {}
    for n in g.inputs:
        shape = tuple(3 if d is None else d for d in g.tensors[n].shape)
        feeds[n] = rng.standard_normal(shape).astype(np.float32)
    for a, b in zip(run(g, feeds), run(again, feeds)):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- attributes of dynamic extents


@pytest.mark.parametrize("h,w", [(2, 3), (6, 8), (1, 5)])
def test_reshape_to_dynamic_extents_runs_with_the_actual_extents(h, w, rng):
    g = compose("dyn_reshape")
    assert shapes(g, g.outputs) == [(None, None)]
    x = rng.standard_normal((h, w)).astype(np.float32)
    (y,) = run(g, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(w, h))     # row-major, 4.1.2 reshape


@pytest.mark.parametrize("s", [1, 4, 7, 10])
def test_split_by_dynamic_sizes_runs_with_the_actual_extent(s, rng):
    g = compose("dyn_split_sizes")
    # `[a, b] = layout.split(...)`: the pack's items take the names of the list's targets
    assert list(g.outputs) == ["a", "b"] and [op.outputs for op in g.ops] == [("a", "b")]
    x = rng.standard_normal(s).astype(np.float32)
    a, b = run(g, {"x": x})
    first = -(-s // 2)                                      # s \ 2: rounded up (2.4)
    np.testing.assert_array_equal(a, x[:first])
    np.testing.assert_array_equal(b, x[first:])
    assert len(b) == s // 2


def test_an_extent_of_no_graph_input_in_an_attribute_is_refused_when_run():
    from qsim.skriptnd.compose.dynattr import resolve
    from qsim.skriptnd.values import Dyn
    with pytest.raises(UnsupportedError) as err:
        resolve((Dyn("n.1", 0, 6), 1), {}, "layout.reshape 'y'")
    assert "layout.reshape 'y'" in err.value.message and "'n.1'" in err.value.message


def test_a_runtime_length_is_its_size_and_shares_its_symbol(tmp_path, rng):
    path = tmp_path / "main.sknd"
    path.write_text("import layout;\ngraph G {\n @input { xs: real[2]..(s|5); x: real[s]; }\n"
                    " @output { y: real[s]; z: real[3 * s]; }\n"
                    " @compose { parts..(s) = layout.split{axis=0, count=xs.size}(x);\n"
                    "   y = layout.stack{axis=0, squeeze=true}(parts);\n"
                    "   both = layout.concat{axis=0}(xs);\n"
                    "   z = layout.concat{axis=0}([both, x]); }\n}\n")
    g = compose("G", path)
    assert shapes(g, g.outputs) == [(None,), (None,)] and g.tensors["z"].max_shape == (15,)
    xs = dyn_items(rng, 4, (2,))
    x = rng.standard_normal(4).astype(np.float32)
    y, z = run(g, {"xs": xs, "x": x})
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, np.concatenate([xs.reshape(-1), x]))


def test_a_loop_over_a_runtime_length_pack_is_refused_located(tmp_path):
    err = refused(tmp_path, UnsupportedError, "graph G {\n @input { xs: real[]..(s|5); }\n"
                  " @output { ys: real[]..(s); }\n @compose { ys = for x : xs do math.neg(x); }\n}\n")
    assert "scans a pack of run-time length" in err.message and (err.location.line, err.location.column) == (5, 22)


def test_a_runtime_length_above_its_bound_is_a_data_error(rng):
    from qsim.errors import DataError
    g = compose("dyn_concat_0")
    with pytest.raises(DataError) as err:
        execute(g, {"xs": dyn_items(rng, 6, (2, 3))})
    assert "input 'xs' has extent 6 at dimension 0, above its upper bound 5" in err.value.message


@pytest.mark.parametrize("op,axis", [("stack", -3), ("stack", -1), ("stack", 2), ("concat", -2), ("concat", -1)])
def test_negative_and_last_axes_of_runtime_length_packs(op, axis, tmp_path, rng):
    path = tmp_path / "main.sknd"
    path.write_text("import layout;\ngraph G {\n @input { xs: real[2,3]..(s|5); }\n @output { y: real; }\n"
                    f" @compose {{ y = layout.{op}{{axis={axis}}}(xs); }}\n}}\n")
    g = compose("G", path)
    xs = dyn_items(rng, 4, (2, 3))
    want = (np.stack if op == "stack" else np.concatenate)(list(xs), axis=axis)
    np.testing.assert_array_equal(run(g, {"xs": xs})[0], want)


def test_an_axis_out_of_range_for_a_runtime_length_pack_is_located(tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { xs: real[2,3]..(s|5); }\n"
                  " @output { y: real[2,3,s]; }\n @compose { y = layout.stack{axis=3}(xs); }\n}\n")
    assert "'axis' must be between -3 (inclusive) and 3 (exclusive), got 3" in err.message
    assert (err.location.line, err.location.column) == (5, 17)


@pytest.mark.parametrize("output,body,needle", [
    ("y: real[2]", "y = layout.unstack{axis=0}(x);", "output 'y' is declared as one tensor but is assigned a pack of 3"),
    ("y: real[2]", "y = layout.unstack{axis=0}(d);", "output 'y' is declared as one tensor but is assigned a pack of s|5"),
    ("y: real[3,2]..(2)", "y = math.neg(x);", "output 'y' is declared packed but is assigned the single tensor"),
])
def test_a_pack_where_one_tensor_is_declared_and_back_is_located(output, body, needle, tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { x: real[3,2]; d: real[s|5,2]; }\n"
                  f" @output {{ {output}; }}\n @compose {{ {body} }}\n}}\n")
    assert needle in err.message and err.location.line == 4 and err.hint


def test_a_packed_target_given_one_tensor_says_what_the_operator_gives(tmp_path):
    err = refused(tmp_path, SemanticError, "graph G {\n @input { x: real[3,2]; }\n @output { y: real[3]; }\n"
                  " @compose { m..(2) = math.argmax_nd{axes=[1]}(x); y = math.neg(x); }\n}\n")
    assert "'m' is declared packed but the result is not a pack" in err.message
    assert "the right-hand side gives tensor" in err.hint and err.location.line == 5


@settings(derandomize=True, deadline=None, max_examples=25)
@given(dims=st.lists(st.integers(1, 3), min_size=1, max_size=3), count=st.integers(0, 4),
       data=st.data())
def test_runtime_length_packs_agree_with_numpy(dims, count, data, tmp_path_factory):
    """Property: concat/stack of a pack of run-time length, at any valid axis, is numpy's on the
    items; unstacking the stacked result at that axis gives the items back."""
    rank = len(dims)
    cat_axis = data.draw(st.integers(-rank, rank - 1))
    stack_axis = data.draw(st.integers(-rank - 1, rank))
    item = ",".join(map(str, dims))
    text = ("import layout;\ngraph G {\n @input { xs: real[" + item + "]..(s|4); }\n"
            " @output { c: real; t: real; us: real[" + item + "]..(s); }\n"
            f" @compose {{ c = layout.concat{{axis={cat_axis}}}(xs); t = layout.stack{{axis={stack_axis}}}(xs);\n"
            f"   us..(s) = layout.unstack{{axis={stack_axis}}}(t); }}\n}}\n")
    path = tmp_path_factory.mktemp("prop") / "main.sknd"
    path.write_text(text)
    g = compose("G", path)
    xs = np.arange(count * int(np.prod(dims)), dtype=np.float32).reshape((count,) + tuple(dims))
    c, t, us = run(g, {"xs": xs})
    items = list(xs)
    if count:
        np.testing.assert_array_equal(c, np.concatenate(items, axis=cat_axis))
        np.testing.assert_array_equal(t, np.stack(items, axis=stack_axis))
    else:
        assert c.size == 0 and t.size == 0
    np.testing.assert_array_equal(us, xs)
