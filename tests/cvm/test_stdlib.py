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
