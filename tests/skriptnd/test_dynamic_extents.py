"""Standard operators meeting dynamic extents (2.6.1) where they need static ones: a located
UnsupportedError (the operator, where it was invoked, the run-time extent), never a TypeError
from a `Dyn` reaching numpy or integer arithmetic. The seeded sweep invokes every standard
operator on inputs with dynamic extents, as the `sknd-dynamic` fuzz target does."""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest

from qsim.errors import QsimError, UnsupportedError
from qsim.loader import load
from qsim.runtime.executor import execute

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
from _fuzz.gen_dynamic import dynamic_graph, standard_operators  # noqa: E402


def graph_text(inputs: str, outputs: str, body: str, modules=("math", "layout")) -> str:
    return ("".join(f"import {m};\n" for m in modules) + f"\ngraph G {{\n    @input {{ {inputs} }}\n"
            f"    @output {{ {outputs} }}\n    @compose {{ {body} }}\n}}\n")


def write(tmp_path, text):
    path = tmp_path / "g.sknd"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("attrs", ["", ", reverse=true", ", exclusive=true", ", exclusive=true, reverse=true"])
def test_cumsum_over_inputs_with_dynamic_extents_runs(tmp_path, attrs):
    """The issue's case (a TypeError before): cumsum's running sum starts from a zero tensor of
    the input's shape with the summed axis 1, which a run-time extent leaves unknown when the
    graph is composed; it is broadcast to the actual extents when the graph runs."""
    path = write(tmp_path, graph_text("x: real[2, n|8, 3];", "y: real;", f"y = math.cumsum{{axis=2{attrs}}}(x);"))
    graph = load(path)
    x = np.random.default_rng(3).normal(size=(2, 5, 3)).astype(np.float32)
    y = execute(graph, {"x": x})[graph.outputs[0]]
    reverse, exclusive = "reverse" in attrs, "exclusive" in attrs
    z = x[:, :, ::-1] if reverse else x
    expected = np.cumsum(z, axis=2, dtype=np.float32)
    if exclusive:
        expected = np.concatenate([np.zeros_like(expected[:, :, :1]), expected[:, :, :-1]], axis=2)
    expected = expected[:, :, ::-1] if reverse else expected
    assert y.shape == (2, 5, 3)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_cumsum_along_a_dynamic_axis_is_a_located_error(tmp_path):
    path = write(tmp_path, graph_text("x: real[2, n|8, 3];", "y: real;", "y = math.cumsum{axis=1}(x);"))
    with pytest.raises(UnsupportedError) as err:
        load(path)
    assert "math.cumsum invoked at" in str(err.value) and "pack of run-time length" in str(err.value)
    assert err.value.location is not None and err.value.location.file.endswith("math.sknd")


def test_an_initial_value_over_an_extent_no_input_gives_is_a_located_error(tmp_path):
    """nonzero's count is known only once computed: no graph input dimension gives it."""
    path = write(tmp_path, graph_text("x: real[n|8, 2];", "y: real;",
                                      "i = layout.nonzero(x); r = layout.cast<real>(i); y = math.cumsum{axis=0}(r);"))
    with pytest.raises(UnsupportedError) as err:
        load(path)
    message = str(err.value)
    assert "math.cumsum invoked at" in message and "needs a static shape" in message
    assert "not dimensions of the graph's inputs" in err.value.hint


def test_a_rank_taken_from_a_dynamic_extent_is_a_located_error(tmp_path):
    path = write(tmp_path, graph_text("x: real[a|8]; i: int[b|8];", "y: real;", "y = layout.gather_nd(x, i);"))
    with pytest.raises(UnsupportedError, match="rank of a packed extent .* run-time extent b\\|8"):
        load(path)


def test_a_bound_that_is_itself_dynamic_gives_a_static_upper_bound(tmp_path):
    """layout.nonzero of a dynamic input: its count is bounded by the input's (dynamic) volume,
    itself bounded by the input's bounds; the graph composes and runs."""
    path = write(tmp_path, graph_text("x: real[n|8, 2];", "y: int;", "y = layout.nonzero(x);"))
    graph = load(path)
    assert all(isinstance(d, int) and d >= 0 for d in graph.tensor(graph.outputs[0]).max_shape)
    x = np.array([[0, 1], [2, 0], [0, 0]], np.float32)
    y = execute(graph, {"x": x})[graph.outputs[0]]
    assert sorted(map(tuple, np.asarray(y).T.tolist() if y.shape[0] == 2 else y.tolist())) == [(0, 1), (1, 0)]


def test_every_standard_operator_is_generated():
    names = {name for name, _ in standard_operators()}
    assert {"math.cumsum", "layout.gather_nd", "layout.nonzero", "nn.conv", "image.resize"} <= names
    assert len(names) > 120


@pytest.mark.parametrize("seed", range(12))
def test_dynamic_extents_into_standard_operators_never_escape_as_tracebacks(tmp_path, seed):
    """60 generated invocations per seed: composing and (when it composes) running on inputs of
    random extents within the bounds ends in a result or a QsimError."""
    rng = random.Random(seed)
    for k in range(60):
        name, text, inputs = dynamic_graph(rng)
        path = write(tmp_path, text)
        try:
            graph = load(path)
            data = np.random.default_rng(k)
            feeds = {}
            for (input_name, base, extents), graph_input in zip(inputs, graph.inputs):
                shape = [e if e is not None else int(data.integers(1, 9)) for e in extents]
                feeds[graph_input] = (data.integers(-3, 4, size=shape) if base == "int" else
                                      data.random(size=shape) < 0.5 if base == "bool" else
                                      data.normal(size=shape).astype(np.float32))
            execute(graph, feeds)
        except QsimError:
            pass
        except Exception as err:  # noqa: BLE001 - the assertion is that nothing else escapes
            pytest.fail(f"{name}: {type(err).__name__}: {err}\n{text}")
