"""nn.lstm_loop / nn.lstm with a run-time step count: composed whole (their bodies loop
`..(steps)` times with per-step outputs, which needs a compile-time count to be composed) and
executed with the per-step outputs stacked in the dynamic extent ~|s."""
from __future__ import annotations

import numpy as np
import pytest

import qsim
from qsim.errors import QsimError
from qsim.runtime import execute

try:
    from .test_stdlib_ops import _lstm_ref
except ImportError:
    from test_stdlib_ops import _lstm_ref

S, B, C, N = 5, 2, 3, 4

LOOP = f"""import nn;

graph G {{
    @input {{
        X: real[{S}, {B}, {C}];
        W: real[{4 * N}, {C}];
        R: real[{4 * N}, {N}];
        Bias: real[{4 * N}];
        h0: real[{B}, {N}];
        c0: real[{B}, {N}];
        steps: int[];
    }}
    @output {{
        Y: real[~|{S}, {B}, {N}];
        hN: real[{B}, {N}];
        cN: real[{B}, {N}];
    }}
    @compose {{
        Y, hN, cN = nn.lstm_loop(X, W, R, Bias, h0, c0, steps);
    }}
}}
"""

JAGGED = LOOP.replace("steps: int[];", f"steps: int[{B}];").replace(
    "nn.lstm_loop(X, W, R, Bias, h0, c0, steps)", "nn.lstm(X, W, R, Bias, h0, c0, steps)")


def _inputs(seed=9):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(scale=0.5, size=s).astype(np.float32)  # noqa: E731
    return dict(X=f(S, B, C), W=f(4 * N, C), R=f(4 * N, N), Bias=f(4 * N), h0=f(B, N), c0=f(B, N))


def _graph(tmp_path, text):
    (tmp_path / "main.sknd").write_text(text)
    return qsim.load(tmp_path)


def _reference(x, steps):
    """numpy LSTM (gates i, f, g, o as lstm_step defines them), float64."""
    d = {k: v.astype(np.float64) for k, v in x.items()}
    if steps == 0:
        return np.zeros((0, B, N)), d["h0"], d["c0"]
    return _lstm_ref(d["X"], d["W"], d["R"], d["Bias"], d["h0"], d["c0"], steps)


@pytest.mark.parametrize("steps", [0, 1, 3, S])
def test_lstm_loop_with_a_run_time_step_count(tmp_path, steps):
    graph = _graph(tmp_path, LOOP)
    assert [op.kind.name for op in graph.ops] == ["nn.lstm_loop"]
    x = _inputs()
    out = execute(graph, dict(x, steps=np.array(steps, np.int32)))
    Y, h, c = _reference(x, steps)
    assert out["Y"].shape == (steps, B, N)
    np.testing.assert_allclose(out["Y"], Y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["hN"], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["cN"], c, rtol=1e-5, atol=1e-6)


def test_lstm_with_a_step_count_per_batch_item(tmp_path):
    """Jagged: item b runs steps[b] steps; Y has max(steps) rows, zero past an item's count."""
    graph = _graph(tmp_path, JAGGED)
    x = _inputs(3)
    steps = np.array([2, 4], np.int32)
    out = execute(graph, dict(x, steps=steps))
    assert out["Y"].shape == (4, B, N)
    for b in range(B):
        one = {k: (v[:, b:b + 1] if k == "X" else v[b:b + 1] if k in ("h0", "c0") else v)
               for k, v in x.items()}
        d = {k: v.astype(np.float64) for k, v in one.items()}
        Y, h, c = _lstm_ref(d["X"], d["W"], d["R"], d["Bias"], d["h0"], d["c0"], int(steps[b]))
        np.testing.assert_allclose(out["Y"][:steps[b], b], Y[:, 0], rtol=1e-5, atol=1e-6)
        assert not out["Y"][steps[b]:, b].any()
        np.testing.assert_allclose(out["hN"][b], h[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["cN"][b], c[0], rtol=1e-5, atol=1e-6)


def test_a_step_count_beyond_the_sequence_is_an_error(tmp_path):
    graph = _graph(tmp_path, LOOP)
    with pytest.raises(QsimError, match="'steps'=6 must be between 0 and the sequence length 5"):
        execute(graph, dict(_inputs(), steps=np.array(6, np.int32)))
