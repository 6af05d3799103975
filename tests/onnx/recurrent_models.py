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

from onnx_helpers import init, make_model

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
