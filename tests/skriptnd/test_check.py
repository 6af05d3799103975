"""qsim.skriptnd.check: what `qsim check` asks of the front end (the command formats it)."""
from __future__ import annotations

import pytest

from qsim.errors import SemanticError, UsageError
from qsim.skriptnd.check import check_skriptnd

GRAPHS = """import nn;
graph Good {
    @input { x: real[1, 4]; }
    @output { y: real[1, 4]; }
    @compose { y = nn.relu(x); }
}
graph Bad {
    @input { x: real[2, 3]; }
    @output { y: real[2, 3]; }
    @compose { y = nn.no_such_operator(x); }
}
"""

OPERATORS = """operator twice {
    @input { x: real[s..]; }
    @output { y: real[s..]; }
    @lower { y[i..] = 2.0 * x[i..], i < s; }
}
operator half {
    @input { x: real[s..]; }
    @output { y: real[s..]; }
    @lower { y[i..] = x[i..] / 2.0, i < s; }
}
"""


def test_a_module_of_operators_is_validated_and_counted(tmp_path):
    (tmp_path / "main.sknd").write_text(OPERATORS)
    checked = check_skriptnd(str(tmp_path))
    assert checked.operator_count == 2 and checked.composed == ()


def test_the_named_graph_is_composed(tmp_path):
    (tmp_path / "main.sknd").write_text(GRAPHS)
    checked = check_skriptnd(str(tmp_path), graph="Good")
    assert checked.operator_count is None
    assert [c.graph.name for c in checked.composed] == ["Good"]
    assert [op.kind.name for op in checked.composed[0].graph.ops] == ["nn.relu"]
    with pytest.raises(UsageError, match="has no graph 'Other'"):
        check_skriptnd(str(tmp_path), graph="Other")


def test_all_graphs_reports_every_failure_at_the_first_failing_place(tmp_path):
    (tmp_path / "main.sknd").write_text(GRAPHS)
    with pytest.raises(SemanticError) as info:
        check_skriptnd(str(tmp_path), all_graphs=True)
    err = info.value
    assert "1 of 2 graphs do not compose (1 do)" in err.message
    assert "graph 'Bad'" in err.message and "no_such_operator" in err.message
    assert err.location is not None and err.location.line == 10
