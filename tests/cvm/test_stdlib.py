"""stdlib/cvm.sknd parses and declares every qsim.cvm operator with the same signature."""
from pathlib import Path

import qsim.cvm as cvm
from qsim.skriptnd import parser


def _module():
    # read from the source tree (the editable install does not map qsim.stdlib)
    path = Path(__file__).resolve().parents[2] / "stdlib" / "cvm.sknd"
    return parser.parse(path.read_text(), "stdlib/cvm.sknd")


def test_cvm_sknd_parses_and_matches_the_operator_set():
    defs = {d.name: d for d in _module().definitions}
    assert set(defs) == set(cvm.OPS)
    for name, opdef in cvm.OPS.items():
        d = defs[name]
        assert not d.lowers and not d.compose          # intrinsic: executed by qsim.cvm
        assert [p.name for p in d.inputs] == list(opdef.inputs), name
        assert [p.name for p in d.outputs] == list(opdef.outputs), name
        assert [a.name for a in d.attribs] == list(opdef.attrs), name
        for p in d.inputs:
            assert p.type.base == "int"
            assert p.type.optional == (p.name in opdef.optional), (name, p.name)
        assert (d.inputs[0].type.pack is not None) == opdef.variadic, name


def test_a_skriptnd_model_invokes_cvm_operators(tmp_path):
    """`import cvm;` in a model: the composer builds cvm.* ops, the executor runs them.
    Worked by hand: relu zeroes rows 0-1; cvm_right_shift by 1 rounds half up
    (row 2: 0 1 2 3 -> 0 1 1 2, row 3: 4 5 6 7 -> 2 3 3 4); 2x2 max pooling -> [[0, 0], [3, 4]]."""
    import numpy as np

    import qsim
    from qsim.runtime.executor import execute
    (tmp_path / "main.sknd").write_text(
        "import cvm;\n\ngraph g {\n"
        "    @input { x: int[1, 1, 4, 4]; }\n"
        "    @output { y: int[1, 1, 2, 2]; }\n"
        "    @compose {\n"
        "        r = cvm.relu(x);\n"
        "        s = cvm.cvm_right_shift{precision=8, shift_bit=1}(r);\n"
        "        y = cvm.max_pool2d{pool_size=[2, 2], strides=[2, 2]}(s);\n"
        "    }\n}\n")
    g = qsim.load(tmp_path)
    assert [op.kind.name for op in g.ops] == ["cvm.relu", "cvm.cvm_right_shift", "cvm.max_pool2d"]
    x = np.arange(-8, 8, dtype=np.int32).reshape(1, 1, 4, 4)
    for backend in ("reference", "kernels"):
        assert execute(g, {"x": x}, backend=backend)["y"].tolist() == [[[[0, 0], [3, 4]]]]
