"""Fuzz target `multi-input` (issue 29): a model with a float input, an int64 token-id input
into an embedding table and a bool mask input, fed by hostile data: .npz archives and folders
with inputs missing, extra, misnamed, of other shapes, dtypes or sample counts, ids beyond the
table, float ids, non-0/1 masks; run by `qsim quantize --calib`, `qsim run` and `qsim simulate`
with `--input [NAME=]x.npy` specs that name unknown inputs, repeat or omit some."""
from __future__ import annotations

import io
import random

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .runner import Case

NAMES = ("x", "ids", "mask")
SHAPES = {"x": (4,), "ids": (3,), "mask": (3,)}
VOCAB = 5


def _model() -> bytes:
    """y = mean(Embedding(ids) masked by mask) + x @ W: all three inputs reach the output."""
    table = numpy_helper.from_array(np.linspace(-1, 1, VOCAB * 4, dtype=np.float32).reshape(VOCAB, 4), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]),
             helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["m", "axis"], ["mu"]),
             helper.make_node("Mul", ["e", "mu"], ["em"]),
             helper.make_node("ReduceMean", ["em"], ["r"], axes=[1], keepdims=0),
             helper.make_node("Add", ["r", "x"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
              helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3]),
              helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 3])]
    axis = numpy_helper.from_array(np.array([2], np.int64), "axis")
    graph = helper.make_graph(nodes, "multi", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [table, axis])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _array(rng: random.Random, name: str, n: int | None) -> np.ndarray:
    """Samples of input `name` ([n, *shape]; one sample [1, *shape] for n None), now and then wrong."""
    g = np.random.default_rng(rng.randrange(2 ** 32))
    shape = SHAPES[name] if rng.random() < 0.85 else rng.choice(((2,), (3, 1), (), (0,)))
    lead = (1,) if n is None else (n,)
    if name == "ids":
        a = g.integers(0, VOCAB if rng.random() < 0.8 else VOCAB + 3, lead + shape)
        return a.astype(rng.choice(("int64", "int32", "float32"))) if rng.random() < 0.3 else a
    if name == "mask":
        a = g.integers(0, 2 if rng.random() < 0.85 else 4, lead + shape)
        return a.astype(bool) if rng.random() < 0.6 else a
    a = g.normal(size=lead + shape).astype(np.float32)
    if rng.random() < 0.05:
        a[...] = rng.choice((np.nan, np.inf))
    return a


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def gen_multi_input(rng: random.Random, corpus) -> Case:
    files = {"m.onnx": _model()}
    n = rng.choice((1, 4, 4, 4, 0))
    chosen = [k for k in NAMES if rng.random() < 0.85] + (["extra"] if rng.random() < 0.1 else [])
    arrays = {k: _array(rng, k if k in SHAPES else "x", n if rng.random() < 0.9 else n + 1) for k in chosen}
    kind = rng.choice(("quantize-npz", "quantize-folder", "run", "simulate"))
    if kind == "quantize-npz":
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        files["d.npz"] = buf.getvalue()
        argv = ["quantize", "m.onnx", "--calib", "d.npz", "-o", "q", "-q"]
    elif kind == "quantize-folder":
        files.update({f"d/{k}.npy": _npy(a) for k, a in arrays.items()})
        argv = ["quantize", "m.onnx", "--calib", "d", "-o", "q", "-q"]
    else:
        specs = []
        for k in chosen:
            files[f"{k}.npy"] = _npy(_array(rng, k if k in SHAPES else "x", None))
            specs += ["--input", f"{k}={k}.npy" if rng.random() < 0.8 else f"{k}.npy"]
        argv = (["run", "m.onnx", *specs] if kind == "run" else
                ["simulate", "--engine", "model", "--config", "8x8", *specs, "-o", "s", "-q"])
    return Case("multi-input", kind, files, argv=argv, timeout_s=60)
