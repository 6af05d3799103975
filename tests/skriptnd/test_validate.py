"""Static checks of operator definitions (qsim.skriptnd.validate) and the binding order of 2.6.2,
with the spec's own examples; the five stdlib operators whose binding needed care compose and
compute what numpy formulas written here compute."""
from __future__ import annotations

import numpy as np
import pytest

import qsim
from qsim.errors import SemanticError
from qsim.skriptnd.binding import binding_order
from qsim.runtime import execute
from qsim.skriptnd.modules import ModuleSet
from qsim.skriptnd.parser import parse
from qsim.skriptnd.validate import validate_module

ALL_MODULES = ("layout", "math", "linalg", "nn", "image", "quant", "algo", "tosa", "cvm")


def test_every_stdlib_definition_is_valid():
    modules = ModuleSet(None)
    counts = {m: validate_module(modules, m) for m in ALL_MODULES}
    assert all(n > 0 for n in counts.values())
    assert counts["layout"] >= 25 and counts["nn"] >= 25


def _op(text: str):
    return parse("operator op {\n" + text + "\n}\n", "defs.sknd").definitions[0]


def test_spec_example_order_y_then_x():
    # 2.6.2: r is known; x has two flexible packs (z, t) until y binds d
    op = _op("""
    @attrib { r: int; a: optional int; b: int..(d) = 0; c: int = 2 * d + r; }
    @input { x: real[s..(r),z..(d),t..]; y: real[s..(r),z..(d)]; }
    @output { o: real[]; }""")
    assert [d.name for d in binding_order(op, "op")] == ["y", "x"]


def test_spec_example_length_from_rank_attribute():
    op = _op("@attrib { r: int; } @input { x: real[s..(r),t..]; } @output { o: real[]; }")
    assert [d.name for d in binding_order(op, "op")] == ["x"]


@pytest.mark.parametrize("text,line,col,needle", [
    # 2.6.2: `x: real[s...,t...]` is ambiguous
    ("@input {\n    x: real[s..,t..];\n} @output { o: real[]; }", 3, 5, "2 packed extents of unknown length (s, t)"),
    # 2.6.2: the length of a packed attribute does not disambiguate ("invalid")
    ("@attrib { a: int..(d) = 0; }\n@input {\n    x: real[s..(d),t..];\n} @output { o: real[]; }", 4, 5,
     "input 'x' cannot be bound unambiguously"),
    # nor does an optional attribute
    ("@attrib { r: optional int; }\n@input {\n    x: real[s..(r),t..];\n} @output { o: real[]; }", 4, 5,
     "cannot be bound unambiguously"),
])
def test_invalid_binding_orders_rejected(text, line, col, needle):
    with pytest.raises(SemanticError) as err:
        binding_order(_op(text), "operator 'op'")
    assert needle in err.value.message
    assert (err.value.location.line, err.value.location.column) == (line, col)


def _validate(text: str):
    modules = ModuleSet(None)
    modules.add("main", parse(text, "main.sknd"))
    return validate_module(modules, "main")


@pytest.mark.parametrize("text,line,col,needle", [
    ("operator a {\n    @input { x: float[n]; }\n    @output { y: real[n]; }\n}\n", 2, 14,
     "'x' has unknown type 'float'"),
    ("import nn;\noperator a {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
     "    @compose {\n        y = nn.rellu(x);\n    }\n}\n", 6, 13, "module 'nn' has no operator 'rellu'"),
    ("import nn;\noperator a {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
     "    @compose {\n        y = nn.relu{slope = 0.1}(x);\n    }\n}\n", 6, 21, "'nn.relu' has no attribute 'slope'"),
    ("import nn;\noperator a {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
     "    @compose {\n        y = nn.relu(x, x);\n    }\n}\n", 6, 13, "'nn.relu' takes 1 inputs, 2 given"),
    ("operator a {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
     "    @compose {\n        y = layout.copy(x);\n    }\n}\n", 5, 13, "module 'layout' is not imported"),
    ("operator a {\n    @dtype { T: number; }\n    @input { x: T[n]; }\n    @output { y: T[n]; }\n}\n", 2, 14,
     "generic type 'T' names unknown type 'number'"),
    ("import nn;\noperator a {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
     "    @compose {\n        y = if true then { z = nn.relu(x); yield z; } else nn.tanh(x);\n    }\n}\n",
     6, 60, "module 'nn' has no operator 'tanh'"),
])
def test_definition_errors_located(text, line, col, needle):
    with pytest.raises(SemanticError) as err:
        _validate(text)
    assert needle in err.value.message
    assert (err.value.location.line, err.value.location.column) == (line, col)


SPACE = """import layout;
graph G {
    @input { x: real[1, 4, 6, 6]; i: int[2, 1]; u: real[2, 6, 6]; }
    @output { y: real[1, 16, 3, 3]; z: real[1, 4, 6, 6]; w: real[4, 4, 3, 3]; x2: real[1, 4, 6, 6];
              v: real[4, 6, 6]; q2: real[1, 3, 3, 16]; }
    @compose {
        y = layout.space_to_depth{block_size = 2}(x);
        z = layout.depth_to_space{block_size = 2}(y);
        w = layout.space_to_batch{block_size = 2}(x);
        x2 = layout.batch_to_space{block_size = 2}(w);
        r = layout.reshape{shape = [4, 6, 6]}(x);
        v = layout.scatter_nd(r, i, u);
        q = layout.transpose{perm = [0, 2, 3, 1]}(x);
        q2 = layout.space_to_depth{block_size = 2, data_format = 'NXC'}(q);
    }
}
"""


def test_space_depth_batch_and_scatter_nd_compose(tmp_path):
    (tmp_path / "main.sknd").write_text(SPACE)
    g = qsim.load(tmp_path)
    x = np.arange(144, dtype=np.float32).reshape(1, 4, 6, 6)
    idx = np.array([[1], [3]])
    r = execute(g, {"x": x, "i": idx, "u": np.full((2, 6, 6), -1, np.float32)})
    # blocks first: output channel (by * 2 + bx) * C + c holds x[c, 2h + by, 2w + bx]
    want = x.reshape(1, 4, 3, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 16, 3, 3)
    np.testing.assert_array_equal(r["y"], want)
    np.testing.assert_array_equal(r["z"], x)
    np.testing.assert_array_equal(r["q2"], want.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(r["w"], x.reshape(1, 4, 3, 2, 3, 2).transpose(3, 5, 0, 1, 2, 4)
                                  .reshape(4, 4, 3, 3))
    np.testing.assert_array_equal(r["x2"], x)
    scattered = x.reshape(4, 6, 6).copy()
    scattered[[1, 3]] = -1
    np.testing.assert_array_equal(r["v"], scattered)
