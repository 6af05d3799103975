"""Operators a model defines in its own modules execute by their @lower bodies
(qsim.runtime.runners.defined), carried by the ops themselves (ir.Op.definition)."""
from pathlib import Path

import numpy as np
import pytest

import qsim
from qsim.cli import main as cli_main
from qsim.errors import UnsupportedError
from qsim.runtime import execute
from qsim.skriptnd.writer import write_model

MAIN = """import extra;

operator relu_sq {
    @input {
        x: real[m, n];
    }
    @output {
        y: real[m, n];
    }
    @lower {
        y[i, j] = 0.0,
            i < m, j < n;
        y[i, j] = x[i, j] * x[i, j],
            i < m, j < n | x[i, j] > 0.0;
    }
}

operator row_sum {
    @input {
        x: real[m, n];
    }
    @output {
        y: real[m];
    }
    @lower {
        y[i,] += x[i, j],
            i < m, j < n;
    }
}

operator no_formula {
    @input {
        x: real[m, n];
    }
    @output {
        y: real[m, n];
    }
}

graph G {
    @input {
        a: real[3, 6];
    }
    @output {
        r: real[3];
        s: real[3, 6];
    }
    @compose {
        q = relu_sq(a);
        r = row_sum(q);
        s = extra.smooth3(a);
    }
}
"""

EXTRA = """operator smooth3 {
    @input {
        x: real[m, n];
    }
    @output {
        y: real[m, n];
    }
    @lower {
        y[i, j] += x[i, |j + k - 1|],
            i < m, j < n, k < 3;
    }
}
"""


def _model(folder: Path, main: str = MAIN) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.sknd").write_text(main)
    (folder / "extra.sknd").write_text(EXTRA)
    return folder


def _oracle(a: np.ndarray):
    """Written from the formulas: a conditional square, a row sum, a 3-tap sum that skips
    taps outside the row (the guarded index |j + k - 1| drops out-of-range terms)."""
    q = np.where(a > 0, a * a, 0.0)
    s = np.zeros_like(a)
    for j in range(a.shape[1]):
        for k in range(3):
            if 0 <= j + k - 1 < a.shape[1]:
                s[:, j] += a[:, j + k - 1]
    return q.sum(axis=1), s


def test_model_operators_run_by_their_lower_bodies(tmp_path):
    a = np.random.default_rng(4).normal(size=(3, 6)).astype(np.float32)
    values = execute(qsim.load(_model(tmp_path / "m")), {"a": a})
    r, s = _oracle(a.astype(np.float64))
    np.testing.assert_allclose(values["r"], r, rtol=1e-6)
    np.testing.assert_allclose(values["s"], s, rtol=1e-6, atol=1e-6)


def test_qsim_run_executes_them(tmp_path):
    a = np.arange(-9, 9, dtype=np.float32).reshape(3, 6)
    np.save(tmp_path / "a.npy", a)
    assert cli_main(["run", str(_model(tmp_path / "m")), "--input", str(tmp_path / "a.npy"),
                     "--dump", str(tmp_path / "dump")]) == 0
    r, s = _oracle(a.astype(np.float64))
    np.testing.assert_allclose(np.load(tmp_path / "dump" / "r.npy"), r)
    np.testing.assert_allclose(np.load(tmp_path / "dump" / "s.npy"), s)


def test_two_models_keep_their_own_definitions(tmp_path):
    """Both define main.row_sum; each graph runs its own (no global registry)."""
    other = MAIN.replace("y[i,] += x[i, j],", "y[i,] += 2.0 * x[i, j],")
    g1 = qsim.load(_model(tmp_path / "one"))
    g2 = qsim.load(_model(tmp_path / "two", other))
    a = np.ones((3, 6), np.float32)
    np.testing.assert_allclose(execute(g1, {"a": a})["r"], np.full(3, 6.0))
    np.testing.assert_allclose(execute(g2, {"a": a})["r"], np.full(3, 12.0))
    np.testing.assert_allclose(execute(g1, {"a": a})["r"], np.full(3, 6.0))


def test_an_operator_without_lower_is_a_located_error(tmp_path):
    main = MAIN.replace("r = row_sum(q);", "p = no_formula(q);\n        r = row_sum(p);")
    graph = qsim.load(_model(tmp_path / "m", main))
    with pytest.raises(UnsupportedError) as err:
        execute(graph, {"a": np.zeros((3, 6), np.float32)})
    assert "operator 'no_formula' has no @lower body" in err.value.message
    assert err.value.location is not None and err.value.location.line == MAIN.splitlines().index(
        "operator no_formula {") + 1


def test_write_load_write_is_identical_with_model_operators(tmp_path):
    """The writer copies the model's own definitions: main's into main.sknd, other modules
    as their files; the written model loads, computes the same, and re-writes identically."""
    graph = qsim.load(_model(tmp_path / "m"))
    write_model(graph, tmp_path / "w1")
    again = qsim.load(tmp_path / "w1")
    write_model(again, tmp_path / "w2")
    assert sorted(p.name for p in (tmp_path / "w1").iterdir()) == ["extra.sknd", "main.sknd"]
    for name in ("main.sknd", "extra.sknd"):
        assert (tmp_path / "w1" / name).read_text() == (tmp_path / "w2" / name).read_text()
    text = (tmp_path / "w1" / "main.sknd").read_text()
    assert "operator relu_sq {" in text and "operator row_sum {" in text
    assert "operator no_formula" not in text          # only the operators the graph uses
    a = np.random.default_rng(2).normal(size=(3, 6)).astype(np.float32)
    v1, v2 = execute(graph, {"a": a}), execute(again, {"a": a})
    for name in graph.outputs:
        np.testing.assert_array_equal(v1[name], v2[name])


def test_the_same_executor_runs_an_integer_graph():
    """One executor: the quantized (TOSA) graph runs through qsim.runtime.execute too, each op
    giving what qsim.tosa.run computes for it from the same inputs."""
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.tosa import run
    from qsim.tosa import OPERATORS
    from qsim.tosa.verify import bind_op
    model = embedded_quantized_model(QuantizeOptions(show_progress=False))
    g = model.graph
    x = np.random.default_rng(3).integers(-128, 128, g.tensor(g.inputs[0]).shape).astype(np.int8)
    values = execute(g, {g.inputs[0]: x}, backend="reference")
    assert {op.kind.dialect for op in g.ops} == {"tosa"}
    for op in g.ops:
        attrs = bind_op(OPERATORS[op.kind.short_name], op, g).attrs     # with out_t from the graph
        got = run(op.kind.short_name, [values[n] for n in op.inputs], attrs, backend="reference")
        np.testing.assert_array_equal(got[0], values[op.outputs[0]])
