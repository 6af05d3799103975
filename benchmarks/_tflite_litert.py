"""LiteRT's reference kernels as the oracle of benchmarks/tflite.py (`pip install ai-edge-litert`).

The interpreter runs with OpResolverType.BUILTIN_REF (the reference kernels, no XNNPACK or
optimized kernels) and experimental_preserve_all_tensors=True, so that every operator's output
is still readable after invoke() and can be compared with qsim's tensor of the same name.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from _tflite_match import TfliteOp


def interpreter(path: Path):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    return it


def operators(it) -> list[TfliteOp]:
    """The model's operators in execution order (LiteRT's order is the subgraph's)."""
    details = it.get_tensor_details()
    names = {d["index"]: d["name"] for d in details}
    return [TfliteOp(int(op["index"]), str(op["op_name"]), names[int(op["outputs"][0])],
                     tuple(names[int(i)] for i in op["inputs"] if int(i) >= 0))
            for op in it._get_ops_details()]


def produced(it) -> set[str]:
    """Every tensor an operator writes (all outputs, not only the first)."""
    names = {d["index"]: d["name"] for d in it.get_tensor_details()}
    return {names[int(i)] for op in it._get_ops_details() for i in op["outputs"]}


def input_quantization(it) -> tuple[tuple[int, ...], float, int]:
    (inp,) = it.get_input_details()
    scale, zero_point = inp["quantization"]
    return tuple(int(s) for s in inp["shape"]), float(scale), int(zero_point)


def quantize_input(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float samples to the int8 input both runtimes receive (the same array: how it is rounded
    does not change the comparison)."""
    return np.clip(np.round(x / scale) + zero_point, -128, 127).astype(np.int8)


def run(it, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every operator output of one int8 input, by tensor name (copies: the interpreter reuses
    its buffers on the next invoke)."""
    (inp,) = it.get_input_details()
    it.set_tensor(inp["index"], x)
    it.invoke()
    values = {}
    details = {d["index"]: d for d in it.get_tensor_details()}
    for op in it._get_ops_details():
        for index in op["outputs"]:
            values[details[int(index)]["name"]] = np.array(it.get_tensor(int(index)))
    return values
