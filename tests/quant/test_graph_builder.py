"""IntegerGraphBuilder (qsim/quant/lowering/graph_builder.py): names, exact claims, renames, build."""
import numpy as np
import pytest

from qsim import ir
from qsim.errors import InvalidGraphError
from qsim.quant.lowering.graph_builder import IntegerGraphBuilder

I8 = ir.DType.I8


def test_fresh_names_avoid_used_and_reserved_names():
    b = IntegerGraphBuilder()
    b.reserve(["conv1", "relu1"])
    assert b.fresh("conv1") == "conv1_2"             # reserved for the float tensor of that name
    assert b.fresh("conv1") == "conv1_3"
    assert b.fresh("conv1", exact=True) == "conv1"   # claimed exactly, once
    with pytest.raises(ValueError, match="'conv1' is already used"):
        b.fresh("conv1", exact=True)


def test_rename_updates_ops_and_frees_the_old_name():
    b = IntegerGraphBuilder()
    x = b.add_tensor("x", I8, (1, 4), exact=True)
    y = b.add_tensor("y", I8, (1, 4), exact=True)
    b.append(ir.Op(ir.OpKind.get("tosa.IDENTITY"), (x,), (y,), {}, name="id"))
    new = b.rename("y", "y.acc")
    assert new == "y.acc" and "y" not in b.tensors and b.ops[0].outputs == ("y.acc",)
    # 'int' is a SkriptND keyword: the text could not keep 'y.int', so the builder never uses it
    assert b.rename("y.acc", "y.int") == "y_int"
    assert b.fresh("y", exact=True) == "y"           # free again


def test_build_keeps_only_the_tensors_the_graph_uses_and_verifies():
    b = IntegerGraphBuilder()
    x = b.add_tensor("x", I8, (1, 4), exact=True)
    b.add_tensor("unused", I8, (2,), data=np.zeros(2, np.int8))
    y = b.add_tensor("y", I8, (1, 4), exact=True)
    b.append(ir.Op(ir.OpKind.get("tosa.IDENTITY"), (x,), (y,), {}, name="id"))
    g = b.build("g", [x], [y])
    assert set(g.tensors) == {"x", "y"} and g.ops[0].kind.name == "tosa.IDENTITY"
    with pytest.raises(InvalidGraphError, match="output 'nowhere'|nowhere"):
        b.build("g", [x], ["nowhere"])
