"""The one rule registry, keyed by target (qsim/quant/rules.py), and the error for an op
that has no rule for the chosen target."""
import numpy as np
import pytest

from qsim import ir
from qsim.errors import UnsupportedError
from qsim.quant.lowering.float_side import FloatSide, Wording
from qsim.quant.rules import RULES, apply_rules, rule
from qsim.quant.target import TargetKind
from qsim.quant.cvm.target import CvmTarget, lower_cvm_graph
from qsim.quant.tosa.target import TosaTarget, lower_graph

from .lowering_models import FloatGraph


def sym(amax: float) -> ir.QuantInfo:
    return ir.QuantInfo(scale=amax / 127, zero_point=0, bits=8, symmetric=True)


def test_each_target_reads_its_own_rules():
    assert set(RULES) == set(TargetKind)
    assert TosaTarget().rules() == RULES[TargetKind.TOSA]
    assert CvmTarget().rules() == RULES[TargetKind.CVM]
    # both lower the layers of the embedded CNN, each with its own function
    for kind in ("nn.conv", "nn.linear", "nn.relu", "math.mean_reduce"):
        assert RULES[TargetKind.TOSA][kind] is not RULES[TargetKind.CVM][kind], kind
    # softmax has a TOSA rule (tables) and no CVM one
    assert "nn.softmax" in RULES[TargetKind.TOSA] and "nn.softmax" not in RULES[TargetKind.CVM]


def test_a_second_rule_for_a_kind_is_refused():
    with pytest.raises(ValueError, match="two cvm lowering rules for nn.conv"):
        rule(TargetKind.CVM, "nn.conv")(lambda ctx, op: None)
    assert RULES[TargetKind.CVM]["nn.conv"].__module__ == "qsim.quant.cvm.rules"


def _softmax_graph():
    g = FloatGraph(np.random.default_rng(0))
    x = g.input("x", (1, 4))
    y = g.op("nn.softmax", [x], "y", (1, 4), axes=[1])
    return g.graph([y])


def test_an_op_without_a_rule_names_the_target_and_the_rules_it_has():
    graph = _softmax_graph()
    qparams = {"x": sym(4.0), "y": sym(1.0)}
    lower_graph(graph, qparams)                        # TOSA has a rule
    with pytest.raises(UnsupportedError, match="cannot lower nn.softmax 'y': no CVM lowering for "
                                               "nn.softmax") as err:
        lower_cvm_graph(graph, qparams)
    assert "nn.conv" in err.value.hint and "nn.softmax" not in err.value.hint


def test_apply_rules_walks_the_float_ops_in_order_and_skips_fused_ones(monkeypatch):
    seen = []

    class Probe:        # a context: apply_rules needs `f` and quantize_input only
        def __init__(self, f):
            self.f = f

        def quantize_input(self, name):
            seen.append(("input", name))

    g = FloatGraph(np.random.default_rng(0))
    x = g.input("x", (1, 4))
    a = g.op("nn.relu", [x], "a", (1, 4))
    b = g.op("nn.relu", [a], "b", (1, 4))
    graph = g.graph([b])
    monkeypatch.setitem(RULES[TargetKind.TOSA], "nn.relu", lambda ctx, op: seen.append(op.outputs[0]))
    f = FloatSide(graph, {}, Wording("", "hint"))
    f.fused.add(id(graph.ops[1]))
    apply_rules(Probe(f), TargetKind.TOSA)
    assert seen == [("input", "x"), "a"] and f.op is None
    # a rule that binds nothing for a graph output is caught at that op
    seen.clear()
    with pytest.raises(UnsupportedError, match="cannot lower nn.relu 'b': output 'b' was not produced"):
        apply_rules(Probe(FloatSide(graph, {}, Wording("", "hint"))), TargetKind.TOSA)
    assert seen == [("input", "x"), "a", "b"]
