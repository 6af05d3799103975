"""Seeded ONNX LSTM and GRU models built in code with onnx.helper, for the recurrent-network
tests: one recurrent node with every option the tests vary (direction, layout, initial states,
peepholes, linear_before_reset, which outputs are used), and keyword-spotting networks (MFCC
frames [N, 49, 10] → 1-2 recurrent layers → last hidden state → Gemm classifier) as PyTorch
exports them (Transpose to sequence-first, one node per layer, Squeeze between layers)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from onnx_helpers import EPS32, U32, gamma, init, make_model

GATES = {"LSTM": 4, "GRU": 3}


@dataclass(frozen=True)
class Recurrent:
    """One LSTM/GRU node's options; `outputs` says which of Y, Y_h (, Y_c) the graph uses."""
    op: str = "LSTM"
    direction: str = "forward"
    layout: int = 0
    initial_h: bool = False
    initial_c: bool = False
    peepholes: bool = False
    linear_before_reset: int | None = None
    outputs: tuple = (True, True, True)
    steps: int = 5
    batch: int = 2
    input_size: int = 3
    hidden: int = 4
    weight_scale: float = 0.15

    @property
    def directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def state_shape(self) -> list[int]:
        d, n, h = self.directions, self.batch, self.hidden
        return [n, d, h] if self.layout else [d, n, h]

    @property
    def x_shape(self) -> list[int]:
        s, n, i = self.steps, self.batch, self.input_size
        return [n, s, i] if self.layout else [s, n, i]


def recurrent_model(spec: Recurrent, rng: np.random.Generator) -> tuple[onnx.ModelProto, dict]:
    """The model (opset 14) and seeded feeds {x, h0?, c0?}; weights ~ N(0, weight_scale²)."""
    g, d, h = GATES[spec.op], spec.directions, spec.hidden

    def normal(*shape, scale=spec.weight_scale):
        return (rng.normal(size=shape) * scale).astype(np.float32)
    inits = [init("W", normal(d, g * h, spec.input_size)), init("R", normal(d, g * h, h)),
             init("B", normal(d, 2 * g * h))]
    inputs = [("x", spec.x_shape)]
    names = ["x", "W", "R", "B", ""]
    names.append("h0" if spec.initial_h else "")
    names.append("c0" if spec.initial_c else "")
    if spec.initial_h:
        inputs.append(("h0", spec.state_shape))
    if spec.initial_c:
        inputs.append(("c0", spec.state_shape))
    if spec.peepholes:
        names.append("P")
        inits.append(init("P", normal(d, 3 * h)))
    while names[-1] == "":
        names.pop()
    out_names = ["Y", "Y_h", "Y_c"][:2 if spec.op == "GRU" else 3]
    outs = [n if used else "" for n, used in zip(out_names, spec.outputs)]
    attrs = {"direction": spec.direction, "hidden_size": h}
    if spec.layout:
        attrs["layout"] = 1
    if spec.linear_before_reset is not None:
        attrs["linear_before_reset"] = spec.linear_before_reset
    node = helper.make_node(spec.op, names, outs, name="rnn", **attrs)
    model = make_model([node], inputs, [(n, None) for n in outs if n], inits, opset=14)
    # states of the size a cell produces (|h| < 1); inputs standard normal
    feeds = {name: (rng.normal(size=shape) * (1.0 if name == "x" else 0.5)).astype(np.float32)
             for name, shape in inputs}
    return model, feeds


def keyword_spotting(op: str, rng: np.random.Generator, layers: int = 1, hidden: int = 32, frames: int = 49,
                     mfcc: int = 10, classes: int = 12) -> onnx.ModelProto:
    """x [N, frames, mfcc] → Transpose → `layers` × op(hidden) → Y_h of the last → Gemm → logits."""
    g = GATES[op]
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="to_seq_first")]
    inits = [init("axis1", np.asarray([1], np.int64)), init("axis0", np.asarray([0], np.int64))]
    current, size = "xt", mfcc
    for layer in range(layers):
        inits += [init(f"W{layer}", (rng.normal(size=(1, g * hidden, size)) / np.sqrt(size)).astype(np.float32)),
                  init(f"R{layer}", (rng.normal(size=(1, g * hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)),
                  init(f"B{layer}", (rng.normal(size=(1, 2 * g * hidden)) * 0.1).astype(np.float32))]
        nodes.append(helper.make_node(op, [current, f"W{layer}", f"R{layer}", f"B{layer}"], [f"Y{layer}", f"Y_h{layer}"],
                                      hidden_size=hidden, name=f"{op.lower()}{layer}"))
        if layer < layers - 1:     # Y [S, 1, N, H] → [S, N, H] feeds the next layer
            nodes.append(helper.make_node("Squeeze", [f"Y{layer}", "axis1"], [f"seq{layer}"]))
            current, size = f"seq{layer}", hidden
    nodes.append(helper.make_node("Squeeze", [f"Y_h{layers - 1}", "axis0"], ["last"]))
    inits += [init("fc.weight", (rng.normal(size=(classes, hidden)) / np.sqrt(hidden)).astype(np.float32)),
              init("fc.bias", (rng.normal(size=classes) * 0.1).astype(np.float32))]
    nodes.append(helper.make_node("Gemm", ["last", "fc.weight", "fc.bias"], ["logits"], transB=1, name="fc"))
    return make_model(nodes, [("x", ["N", frames, mfcc])], [("logits", None)], inits, opset=14,
                      name=f"kws_{op.lower()}{layers}")


ACT = 2 * EPS32     # σ / tanh of each implementation: within EPS32 of exact, two of them


def state_error_bound(op: str, weights: dict, steps: int, x_max: float, x_error: float = 0.0,
                      h0_max: float = 0.0, c0_max: float = 0.0, linear_before_reset: bool = False) -> float:
    """A bound on the difference of two float32 implementations of one LSTM/GRU node (every
    hidden and cell state, all steps), from its weights {W, R, B, P?} ([D, G·H, ...]), the
    largest |input| and an error `x_error` the inputs already carry (a previous layer's
    bound). test_recurrent_float's doc derives the terms."""
    w = {k: np.abs(np.asarray(v, np.float64)) for k, v in weights.items()}
    gates = 4 if op == "LSTM" else 3
    n = w["R"].shape[-1]
    h_max = max(1.0, h0_max)
    bias = w["B"][:, :gates * n] + w["B"][:, gates * n:]
    m = float((w["W"].sum(-1) * x_max + w["R"].sum(-1) * h_max + bias).max())
    w_norm = float(w["W"].sum(-1).max())
    delta = 2 * gamma(w["W"].shape[-1] + n + 3) * m + w_norm * x_error
    r_norm = float(w["R"].sum(-1).max())
    p_max = float(w["P"].max()) if "P" in w else 0.0
    f_max = 1 / (1 + np.exp(-(m + p_max * (c0_max + steps))))    # σ of the largest pre-activation
    e_h = e_c = 0.0
    c_max = c0_max                      # |C| before the step: |C_t| ≤ f_max·|C_t-1| + 1
    for _ in range(steps):
        if op == "LSTM":
            pre = r_norm * e_h + p_max * e_c + delta
            e_c = f_max * e_c + (c_max + 1) * (pre / 4 + ACT) + pre + ACT + 4 * U32 * (c_max + 2)
            c_max = f_max * c_max + 1
            pre_o = r_norm * e_h + p_max * e_c + delta
            e_h = pre_o / 4 + ACT + e_c + ACT + 2 * U32
        else:
            r_h = float(w["R"][:, 2 * n:].sum(-1).max())
            rec_max = r_h * h_max + float(w["B"][:, 5 * n:].max())
            gate = (r_norm * e_h + delta) / 4 + ACT              # z and r
            if linear_before_reset:
                pre_n = gate * rec_max + r_h * e_h + 2 * delta
            else:
                pre_n = r_h * (gate * h_max + e_h) + 2 * delta
            e_n = pre_n + ACT
            # (1 - z)·n + z·h is a convex combination: errors of n and h pass on at most their
            # larger one; z's error moves it by |h - n| ≤ 2·h_max; qsim's n + z·(h - n) rounds 3 times
            e_h = max(e_n, e_h) + gate * 2 * h_max + 3 * U32 * 2 * h_max
    return max(e_h, e_c)
