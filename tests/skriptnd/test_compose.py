"""Graph composition (chapter 3, 2.7, 2.10, 2.11, 2.13, 2.14): constants, scoped variables and
their data files, labels and public scopes, @update, static branching, generics, dynamic extents,
keeping compounds. Expected names, shapes and values are worked out from the spec text."""
from __future__ import annotations

import numpy as np
import pytest

import qsim
from qsim.errors import SemanticError
from qsim.runtime import execute
from qsim.tensorfile import write_tensor

OPS = """import nn;
import math;
import quant;
operator scale_by {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @variable { w: real[n]; }
    @compose { y = math.mul(x, w); }
}
public operator twice {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @compose {
        h = nn.relu(x);
        y = math.add(h, h);
    }
}
"""


def load(tmp_path, text, files=None, **kw):
    (tmp_path / "main.sknd").write_text(text)
    for name, array in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_tensor(path, array)
    return qsim.load(tmp_path, **kw)


def test_constants_uniform_flat_and_indexed(tmp_path):
    g = load(tmp_path, """import math;
graph G {
    @input { x: real[2, 3]; }
    @output { y: real[2, 3]; }
    @constant {
        u: real[2, 3] = 1.5;
        f: real[2, 3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        e: real[2, 3] = i == j ? 1.0 : 0.0, i < 2, j < 3;
        k: int[3] = [7, 8, 9];
    }
    @compose {
        a = math.add(u, f);
        b = math.add(a, e);
        y = math.mul(b, x);
    }
}
""")
    np.testing.assert_array_equal(g.tensors["u"].data, np.full((2, 3), 1.5, np.float32))
    np.testing.assert_array_equal(g.tensors["f"].data, np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(g.tensors["e"].data, np.eye(2, 3, dtype=np.float32))
    assert g.tensors["k"].data.tolist() == [7, 8, 9] and g.tensors["k"].dtype.short == "i64"
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(execute(g, {"x": x})["y"],
                                  1.5 + np.arange(1, 7).reshape(2, 3) + np.eye(2, 3))


def test_scoped_variables_read_from_dat_files_both_forms(tmp_path):
    text = OPS + """graph G {
    @input { x: real[3]; }
    @output { y: real[3]; z: real[3]; }
    @compose {
        y = first: scale_by(x);
        z = scale_by(y);
    }
}
"""
    w1, w2 = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)
    # `first.w` as a dotted file name, the auto-labelled `z.w` as a folder path (2.7, 2.10)
    g = load(tmp_path, text, {"first.w.dat": w1, "z/w.dat": w2})
    assert {"first.w", "z.w"} <= set(g.tensors)
    out = execute(g, {"x": np.ones(3, np.float32)})
    np.testing.assert_array_equal(out["y"], w1)
    np.testing.assert_array_equal(out["z"], w1 * w2)


def test_quantize_reaches_scoped_tensors_public_and_private(tmp_path):
    text = OPS + """graph G {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @compose {
        y = blk: twice(x);
    }
    @quantize {
        blk.h: quant.zero_point_linear_quantize{zero_point = 0, scale = 0.25, bits = 8};
        y: quant.min_max_linear_quantize{min = -1.0, max = 1.0, bits = 8, signed = false};
    }
}
"""
    g = load(tmp_path, text)
    h = g.tensors["blk.h"].quant
    assert (h.scale, h.zero_point, h.bits, h.source) == (0.25, 0, 8, "annotation")
    # min_max: r = 255, scale = 2/255, zero_point = round(1 / scale) - 0 = 128 (4.6 formula)
    y = g.tensors["y"].quant
    assert y.scale == pytest.approx(2 / 255) and y.zero_point == 128 and not y.signed
    # `h` of a private operator is not reachable (2.10)
    private = text.replace("public operator twice", "operator twice")
    with pytest.raises(SemanticError, match="'blk.h', which is not an accessible tensor"):
        load(tmp_path, private)


def test_labels_scope_intermediate_names(tmp_path):
    text = OPS + """graph G {
    @input { x: real[3]; }
    @output { y: real[3]; z: real[3]; }
    @compose {
        y = twice(x);
        z = named: twice(y);
    }
}
"""
    g = load(tmp_path, text)
    # auto-generated label = the first result's name; explicit label; outputs keep their names
    assert {"y.h", "named.h", "y", "z"} <= set(g.tensors)
    out = execute(g, {"x": np.array([-1, 0.5, 2], np.float32)})
    np.testing.assert_array_equal(out["z"], 4 * np.maximum([-1, 0.5, 2], 0).astype(np.float32))


def test_update_block_adds_updated_variables_to_outputs(tmp_path):
    text = """import math;
graph G {
    @input { x: real[2]; }
    @output { y: real[2]; }
    @variable { acc: real[2]; }
    @compose { y = math.add(acc, x); }
    @update { acc = math.mul(y, y); }
}
"""
    g = load(tmp_path, text, {"acc.dat": np.array([1, 2], np.float32)})
    assert g.outputs[0] == "y" and len(g.outputs) == 2
    out = execute(g, {"x": np.array([1, 1], np.float32)})
    np.testing.assert_array_equal(out[g.outputs[1]], [4, 9])


def test_static_branching_generics_and_keep(tmp_path):
    text = """import nn;
import layout;
graph G {
    @attrib { fast: bool = true; }
    @input { x: real[2, 2]; }
    @output { y: real[2, 2]; z: real[2, 2]; }
    @compose {
        y = if fast then nn.relu(x) else nn.softmax{axes = [1]}(x);
        z = layout.tensor<real>{shape = [2, 2], value = [1.0, 2.0, 3.0, 4.0]}();
    }
}
"""
    g = load(tmp_path, text)
    assert [op.kind.name for op in g.ops] == ["nn.relu", "layout.tensor"]     # branch chosen statically
    g2 = load(tmp_path, text, attribs={"fast": False}, keep={"nn.softmax"})
    assert g2.ops[0].kind.name == "nn.softmax"
    expanded = load(tmp_path, text, attribs={"fast": False})
    assert "nn.softmax" not in [op.kind.name for op in expanded.ops] and len(expanded.ops) > 2
    x = np.array([[0.0, 1.0], [2.0, 2.0]], np.float32)
    a, b = execute(g2, {"x": x})["y"], execute(expanded, {"x": x})["y"]
    np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(a[1], [0.5, 0.5])
    # the generic type can be deduced from the value too, or given explicitly
    with pytest.raises(SemanticError, match="attribute 'value' must be int"):
        load(tmp_path, text.replace("<real>", "<int>"))


def test_dynamic_extent_with_upper_bound(tmp_path):
    g = load(tmp_path, """import nn;
graph G {
    @input { x: real[2, n|10]; }
    @output { y: real[2, n]; }
    @compose { y = nn.relu(x); }
}
""")
    assert g.tensors["x"].shape == (2, None) and g.tensors["x"].max_shape == (2, 10)
    assert g.tensors["y"].shape == (2, None)
    out = execute(g, {"x": np.array([[-1.0, 2.0, 3.0]] * 2, np.float32)})
    np.testing.assert_array_equal(out["y"], [[0, 2, 3]] * 2)


def test_model_folder_modules_nested_and_shadowing(tmp_path):
    """2.15: other modules of the folder (nested ones in subfolders) are imported by name; a
    model's own module named like a standard one is the one used."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "acts.sknd").write_text(
        "import math;\noperator cube { @input { x: real[s..]; } @output { y: real[s..]; }\n"
        "    @compose { x2 = math.mul(x, x); y = math.mul(x2, x); } }\n")
    (tmp_path / "algo.sknd").write_text(
        "import math;\noperator negate { @input { x: real[s..]; } @output { y: real[s..]; }\n"
        "    @compose { y = math.neg(x); } }\n")
    g = load(tmp_path, """import lib.acts;
import algo;
graph G {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @compose {
        c = lib.acts.cube(x);
        y = algo.negate(c);
    }
}
""")
    assert [op.kind.name for op in g.ops] == ["math.mul", "math.mul", "math.neg"]
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(execute(g, {"x": x})["y"], -(x ** 3))
