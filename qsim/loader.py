"""`qsim.load(path)`: any model form qsim reads, as an ir.Graph.

- a `.sknd` file, or a folder holding `main.sknd`: NNEF 2.0 / SkriptND (qsim.skriptnd);
- a `graph.nnef` file, a folder holding `graph.nnef`, or a `.tgz` / `.tar.gz` / `.tar` container:
  NNEF 1.0 (qsim.nnef1);
- a `.onnx` file: ONNX (qsim.onnx);
- a TFLite flatbuffer (file identifier "TFL3" at bytes 4..8, whatever its name): TFLite
  (qsim.tflite).
Each front end is imported when a model of its form is loaded (the package's __init__ imports
this module, so every `import qsim...` would otherwise pay for all of them).
Anything else is a UsageError saying what was found and what is expected.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from .errors import UnsupportedError, UsageError
from .ir import Graph

NNEF1_CONTAINERS = (".tgz", ".tar.gz", ".tar")


def model_kind(path: str) -> str:
    """'skriptnd', 'nnef1', 'onnx' or 'tflite' for a model path; raises UsageError otherwise."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "main.sknd")):
            return "skriptnd"
        if os.path.isfile(os.path.join(path, "graph.nnef")):
            return "nnef1"
        raise UsageError(f"{path} is a folder with neither main.sknd (NNEF 2.0) nor graph.nnef (NNEF 1.0)")
    if not os.path.exists(path):
        raise UsageError(f"no such file or folder: {path}")
    lower = path.lower()
    if _has_tflite_identifier(path):
        return "tflite"
    if lower.endswith(".sknd"):
        return "skriptnd"
    if lower.endswith(".nnef") or lower.endswith(NNEF1_CONTAINERS):
        return "nnef1"
    if lower.endswith(".onnx"):
        return "onnx"
    raise UsageError(f"cannot tell the model format of {path}",
                     hint="give a .sknd file or a folder with main.sknd (NNEF 2.0), graph.nnef, "
                          "a folder holding it, or a .tgz/.tar container (NNEF 1.0), a .onnx file, "
                          "or a .tflite file")


def _has_tflite_identifier(path: str) -> bool:
    """Bytes 4..8 of a TFLite flatbuffer are its file identifier "TFL3" (read here, not by
    importing the front end: every model path passes this test)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == b"TFL3"


def load(path: str, *, graph: str | None = None, keep: Iterable[str] = (),
         attribs: Mapping[str, Any] | None = None, require_data: bool = True, batch: int = 1) -> Graph:
    """Loads the model at `path` as a verified ir.Graph.

    SkriptND options: `graph` picks a graph of the main module by name (default: the first),
    `keep` names compound operators to keep as single ops (e.g. {"nn.conv"}), `attribs` gives
    graph attribute values, `require_data=False` accepts variables without .dat files.
    ONNX option: `batch` is the extent of a dynamic first input dimension (default 1).
    NNEF 1.0 option: `batch` replaces the first extent of external inputs declared 1.
    """
    path = os.fspath(path)
    loaded = _load(path, graph=graph, keep=keep, attribs=attribs, require_data=require_data, batch=batch)
    require_outputs(loaded, path)
    return loaded


def require_outputs(graph: Graph, path: str) -> None:
    """Refuses a graph without outputs. Valid ONNX allows one (onnxruntime loads it and returns
    nothing), and so does a SkriptND `@output { }`, but no qsim command has anything to compute,
    quantize or report: every command (check too) says so the same way."""
    if not graph.outputs:
        raise UnsupportedError(f"{path}: graph '{graph.name}' declares no outputs, so there is nothing to "
                               "run, quantize or simulate",
                               hint="declare the tensors the model computes as graph outputs "
                                    "(ONNX: graph.output; SkriptND: @output)")


def _load(path: str, *, graph, keep, attribs, require_data: bool, batch: int) -> Graph:
    kind = model_kind(path)
    if kind == "skriptnd":
        # qsim/__init__ imports this module: at module level, every `import qsim...` would pay this
        from .skriptnd.model import load_skriptnd  # deferred: SkriptND front end, lark: +0.12 s CPU
        # a quantized model (TOSA operators) comes back in qsim's integer form: widths from
        # @quantize, tensor attributes from @variable inputs (skriptnd.model._integer_form)
        return load_skriptnd(path, graph=graph, keep=keep, attribs=attribs, require_data=require_data)
    if kind == "onnx":
        from .onnx import load as load_onnx  # deferred: imports the onnx package (protobuf), a real cost
        return load_onnx(path, batch=batch)
    if kind == "tflite":
        from .tflite import load_tflite  # deferred: the TFLite front end (flatbuffers)
        return load_tflite(path)
    from .nnef1 import load_nnef1  # deferred: NNEF 1.0 front end: +0.07 s CPU (as above)
    return load_nnef1(path, batch=None if batch == 1 else batch)
