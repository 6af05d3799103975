"""Real exporter output for recurrent layers: PyTorch's 2-layer bidirectional nn.LSTM and 2-layer
nn.GRU (linear_before_reset=1), batch_first, as torch.onnx writes them (Transpose to sequence-
first, initial states from ConstantOfShape zeros, Y reshaped between layers; files written by
torch_exports/make_recurrent_exports.py). qsim.onnx loads them and agrees with onnxruntime on
the output sequence and the final hidden states within the float32 bound of
recurrent_models.state_error_bound, chained over the layers: the second layer's input carries
the first layer's bound (|h| ≤ 1)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnx_helpers import assert_within, run_ort, run_qsim
from recurrent_models import state_error_bound

EXPORTS = Path(__file__).resolve().parent / "torch_exports"


def _layer_bounds(model: onnx.ModelProto, x_max: float) -> list[float]:
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    bounds, error, largest = [], 0.0, x_max
    for node in model.graph.node:
        if node.op_type not in ("LSTM", "GRU"):
            continue
        weights = dict(zip("WRB", (inits[name] for name in node.input[1:4])))
        lbr = any(a.name == "linear_before_reset" and a.i for a in node.attribute)
        steps = 6
        error = state_error_bound(node.op_type, weights, steps, largest, x_error=error, linear_before_reset=lbr)
        bounds.append(error)
        largest = 1.0                   # the next layer reads hidden states
    return bounds


@pytest.mark.parametrize("name, cells", [("lstm_bidirectional_2layers_opset14", "LSTM"),
                                         ("gru_2layers_opset14", "GRU")])
def test_torch_recurrent_export_matches_onnxruntime(name, cells):
    path = EXPORTS / f"{name}.onnx"
    model = onnx.load(str(path))
    assert [n.op_type for n in model.graph.node].count(cells) == 2
    x = np.random.default_rng(0).normal(size=(3, 6, 5)).astype(np.float32)
    got = run_qsim(str(path), {"x": x}, batch=3)
    ref = run_ort(model, {"x": x})
    bound = max(_layer_bounds(model, float(np.abs(x).max())))
    assert set(got) == set(ref) == {"y", "h"}
    # the bound must be small against the outputs, or a wrong cell could pass it
    assert bound < 0.02 * float(np.abs(ref["y"]).max()), (bound, float(np.abs(ref["y"]).max()))
    for out in ref:
        assert_within(got[out], ref[out], bound, f"{name}: {out}")
