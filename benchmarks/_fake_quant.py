"""An independent check of qsim's integer results for benchmarks/accuracy.py: simulated
("fake") quantization of the FLOAT graph in numpy, with the same quantization parameters.

Every activation the integer graph materializes (LoweredModel.tensor_map) is rounded to its grid
(x → dequantize(quantize(x))) as the float graph runs; conv/linear weights are rounded to the
default int8 scheme (symmetric per output channel, max |w| / 127) here, independently of the
lowering. Biases, accumulators and RESCALE stay exact. If qsim's integer graph computes what
it should, its output SQNR matches this emulation's to a fraction of a dB; a lowering bug shows
up as a gap. The emulation also tells which layers' weights cost the most (weight_sensitivity).
"""
from __future__ import annotations

import math

import numpy as np

from qsim.quant.params import dequantize, quantize
from qsim.runtime.executor import run_op

WEIGHTED = ("nn.conv", "nn.linear")


def per_channel_int8(w: np.ndarray) -> np.ndarray:
    """Symmetric per-output-channel int8 rounding of a weight array (values, float32)."""
    rows = w.astype(np.float64).reshape(w.shape[0], -1)
    peak = np.abs(rows).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0)[:, None]
    return (np.clip(np.round(rows / scale), -127, 127) * scale).reshape(w.shape).astype(np.float32)


def run(graph, x: np.ndarray, weights: dict | None = None, activations: dict | None = None) -> np.ndarray:
    """The float graph's output for input `x`, with `weights` (name → array) replacing
    constants and `activations` (name → QuantInfo) rounding tensors to their grids."""
    activations = activations or {}
    values = {n: t.data for n, t in graph.tensors.items() if t.is_constant}
    values.update(weights or {})
    name = graph.inputs[0]
    values[name] = _round(x, activations.get(name))
    for op in graph.ops:
        outs = run_op(graph, op, [values[n] if n else None for n in op.inputs])
        for out, v in zip(op.outputs, outs):
            values[out] = _round(v, activations.get(out))
    return np.asarray(values[graph.outputs[0]], dtype=np.float64)


def _round(v, quant):
    if quant is None:
        return v
    return dequantize(quantize(v, quant), quant).astype(np.float32)


def sqnr_db(reference: list[np.ndarray], other: list[np.ndarray]) -> float:
    signal = sum(float(np.sum(r * r)) for r in reference)
    noise = sum(float(np.sum((o - r) ** 2)) for r, o in zip(reference, other))
    return math.inf if noise == 0 else 10.0 * math.log10(signal / noise)


def all_weights(graph) -> dict:
    return {op.inputs[1]: per_channel_int8(graph.tensor(op.inputs[1]).data)
            for op in graph.ops if op.kind.name in WEIGHTED}


def emulated_output_sqnr(graph, model, xs: np.ndarray, float_outputs: list[np.ndarray]) -> float:
    """Output SQNR of the fake-quantized float graph (weights and activations)."""
    acts = {n: lw.quant for n, lw in model.tensor_map.items() if not graph.tensor(n).is_constant}
    weights = all_weights(graph)
    return sqnr_db(float_outputs, [run(graph, xs[i:i + 1], weights, acts) for i in range(len(xs))])


def weight_sensitivity(graph, xs: np.ndarray, float_outputs: list[np.ndarray], most: int = 5) -> list:
    """Output SQNR with only one layer's weights rounded, for the `most` most sensitive layers."""
    rows = []
    for op in graph.ops:
        if op.kind.name not in WEIGHTED:
            continue
        w = {op.inputs[1]: per_channel_int8(graph.tensor(op.inputs[1]).data)}
        got = [run(graph, xs[i:i + 1], w) for i in range(len(xs))]
        shape = list(graph.tensor(op.inputs[1]).shape)
        rows.append({"layer": op.name, "op": op.kind.name, "weight_shape": shape,
                     "groups": op.attrs.get("groups"), "output_sqnr_db": round(sqnr_db(float_outputs, got), 2)})
    return sorted(rows, key=lambda r: r["output_sqnr_db"])[:most]
