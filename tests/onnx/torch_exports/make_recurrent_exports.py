"""Writes tests/onnx/torch_exports/{lstm,gru}_*.onnx: real PyTorch (TorchScript exporter,
dynamo=False, opset 14) exports of recurrent layers for tests/onnx/test_recurrent_torch.py:
a 2-layer bidirectional nn.LSTM and a 2-layer nn.GRU (torch's GRU is ONNX linear_before_reset=1),
both batch_first over [N, 6, 5], hidden 8, returning the whole output sequence and the final
hidden state. Weights are seeded and scaled by 0.15 (torch's default init has |R| row sums above
1, under which the tests' float32 error bound would grow too fast over the steps to be useful).
For tests/onnx/test_recurrent_state_inputs.py: a 1-layer bidirectional nn.LSTM called as
rnn(x, (h0, c0)) and a 1-layer nn.GRU called as rnn(x, h0), batch 1, weights scaled by 0.5, whose
exports read initial_h / initial_c from the graph inputs h0 / c0.
The tests read the files, so they need no torch; regenerate them (with torch installed):

    python tests/onnx/torch_exports/make_recurrent_exports.py
"""
from __future__ import annotations

import io
from pathlib import Path

import onnx
import torch

HERE = Path(__file__).resolve().parent
STEPS, FEATURES, HIDDEN = 6, 5, 8


class Recurrent(torch.nn.Module):
    def __init__(self, kind, bidirectional: bool):
        super().__init__()
        self.rnn = kind(FEATURES, HIDDEN, num_layers=2, batch_first=True, bidirectional=bidirectional)
        with torch.no_grad():
            for p in self.rnn.parameters():
                p.mul_(0.15)

    def forward(self, x):
        y, state = self.rnn(x)
        h = state[0] if isinstance(state, tuple) else state
        return y, h


class StateInputs(torch.nn.Module):
    """One recurrent layer whose initial state comes in as graph inputs: forward(x, h0[, c0])
    returns the output sequence and the final states (h0, c0: [directions, N, hidden])."""

    def __init__(self, kind, bidirectional: bool):
        super().__init__()
        self.rnn = kind(FEATURES, HIDDEN, batch_first=True, bidirectional=bidirectional)
        with torch.no_grad():
            for p in self.rnn.parameters():
                p.mul_(0.5)

    def forward(self, x, *state):
        y, final = self.rnn(x, state if len(state) == 2 else state[0])
        return (y, *final) if isinstance(final, tuple) else (y, final)


def write_state_inputs(name: str, kind, bidirectional: bool) -> None:
    """initial_h (and initial_c) as graph inputs, batch 1 (qsim quantizes batch-1 models)."""
    torch.manual_seed(0)
    module = StateInputs(kind, bidirectional).eval()
    d = 2 if bidirectional else 1
    states = ["h0", "c0"] if kind is torch.nn.LSTM else ["h0"]
    example = (torch.zeros(1, STEPS, FEATURES), *(torch.zeros(d, 1, HIDDEN) for _ in states))
    outputs = ["y", "h", "c"][:1 + len(states)]
    buf = io.BytesIO()
    torch.onnx.export(module, example, buf, input_names=["x", *states], output_names=outputs, opset_version=14,
                      dynamo=False)
    onnx.save(onnx.load_from_string(buf.getvalue()), HERE / f"{name}.onnx")


def write(name: str, kind, bidirectional: bool) -> None:
    torch.manual_seed(0)
    module = Recurrent(kind, bidirectional).eval()
    buf = io.BytesIO()
    torch.onnx.export(module, (torch.zeros(2, STEPS, FEATURES),), buf, input_names=["x"], output_names=["y", "h"],
                      opset_version=14, dynamo=False, dynamic_axes={"x": {0: "N"}})
    onnx.save(onnx.load_from_string(buf.getvalue()), HERE / f"{name}.onnx")


if __name__ == "__main__":
    write("lstm_bidirectional_2layers_opset14", torch.nn.LSTM, True)
    write("gru_2layers_opset14", torch.nn.GRU, False)
    write_state_inputs("lstm_bidirectional_state_inputs_opset14", torch.nn.LSTM, True)
    write_state_inputs("gru_state_inputs_opset14", torch.nn.GRU, False)
