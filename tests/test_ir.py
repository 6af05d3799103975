import numpy as np
import pytest

from qsim import ir
from qsim.errors import InvalidGraphError, UsageError


def test_dtype_ranges_follow_tosa_table_4():
    assert (ir.DType.I4.min, ir.DType.I4.max) == (-7, 7)
    assert (ir.DType.I8.min, ir.DType.I8.max) == (-128, 127)
    assert (ir.DType.U16.min, ir.DType.U16.max) == (0, 65535)
    assert (ir.DType.I48.min, ir.DType.I48.max) == (-(1 << 47), (1 << 47) - 1)
    assert ir.DType.I48.numpy == np.int64 and ir.DType.I4.numpy == np.int8


@pytest.mark.parametrize("name,expected", [("int8_t", ir.DType.I8), ("i48", ir.DType.I48),
                                           ("uint16", ir.DType.U16), ("fp32", ir.DType.F32)])
def test_dtype_from_name(name, expected):
    assert ir.DType.from_name(name) is expected


def test_dtype_from_name_rejects_unknown():
    with pytest.raises(UsageError, match="unknown dtype 'int7'"):
        ir.DType.from_name("int7")


def test_op_kind_registry_is_closed():
    with pytest.raises(UsageError, match="unknown operator kind 'nope.NOTHING'"):
        ir.OpKind.get("nope.NOTHING")
    k = ir.register_op_kind("test.ident")
    assert ir.OpKind.get("test.ident") is k
    with pytest.raises(TypeError):
        ir.Op("test.ident", ("a",), ("b",))


def _graph(ops, tensors, inputs=("x",), outputs=("y",)):
    return ir.Graph("g", inputs, outputs, ops, {t.name: t for t in tensors})


def test_verify_accepts_valid_graph_and_runs_kind_verifier():
    seen = []
    kind = ir.register_op_kind("test.copy", verifier=lambda op, g: seen.append(op.label))
    x = ir.Tensor("x", ir.DType.I8, (2, 3))
    y = ir.Tensor("y", ir.DType.I8, (2, 3))
    g = _graph([ir.Op(kind, ["x"], ["y"], name="copy1")], [x, y])
    assert g.verify() is g
    assert seen == ["copy1"]


def test_verify_rejects_use_before_definition():
    kind = ir.register_op_kind("test.copy2")
    t = [ir.Tensor(n, ir.DType.I8, (1,)) for n in "xyz"]
    ops = [ir.Op(kind, ["y"], ["z"]), ir.Op(kind, ["x"], ["y"])]
    with pytest.raises(InvalidGraphError, match="reads 'y' before it is produced"):
        _graph(ops, t, outputs=("z",)).verify()


def test_verify_rejects_second_producer_and_missing_output():
    kind = ir.register_op_kind("test.copy3")
    t = [ir.Tensor(n, ir.DType.I8, (1,)) for n in "xy"]
    with pytest.raises(InvalidGraphError, match="already defined"):
        _graph([ir.Op(kind, ["x"], ["y"]), ir.Op(kind, ["x"], ["y"])], t).verify()
    with pytest.raises(InvalidGraphError, match="output 'y' is never produced"):
        _graph([], t).verify()


def test_verify_checks_constant_data_against_declaration():
    w = ir.Tensor("w", ir.DType.I4, (2,), data=np.array([3, -8], dtype=np.int8))
    with pytest.raises(InvalidGraphError, match="outside i4 range"):
        ir.Graph("g", (), (), (), {"w": w}).verify()
    w = ir.Tensor("w", ir.DType.I8, (3,), data=np.zeros(2, dtype=np.int8))
    with pytest.raises(InvalidGraphError, match="data of shape"):
        ir.Graph("g", (), (), (), {"w": w}).verify()


def test_graph_is_immutable():
    g = ir.Graph("g", (), (), (), {})
    with pytest.raises(Exception):
        g.tensors["a"] = None
    with pytest.raises(Exception):
        g.name = "h"


def test_op_kind_pickles_by_its_registered_name():
    import pickle
    kind = ir.register_op_kind("test.pickled", doc="a long description " * 50)
    data = pickle.dumps(kind)
    assert pickle.loads(data) is kind
    assert b"a long description" not in data and len(data) < 120


def test_op_kind_unpickled_before_its_dialect_is_the_one_the_dialect_registers():
    """A Dask worker may unpickle a kind before importing the dialect module that registers it:
    the kind it gets is the instance the dialect's registration then completes (verifier,
    doc), not a second one. Shown in a fresh process with a kind only this test registers."""
    import pickle
    import subprocess
    import sys
    import textwrap
    data = pickle.dumps(ir.register_op_kind("flowtest.LATE", doc="registered by the test"))
    script = textwrap.dedent(f"""
        import pickle
        import qsim.ir as ir
        assert "flowtest.LATE" not in ir._OP_KINDS
        kind = pickle.loads({data!r})
        assert kind.verifier is None and kind.doc == ""
        def verify(op, graph):
            pass
        again = ir.register_op_kind("flowtest.LATE", verify, doc="the dialect's doc")
        assert again is kind and ir.OpKind.get("flowtest.LATE") is kind
        assert kind.verifier is verify and kind.doc == "the dialect's doc"
        print("same instance")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same instance"
