"""`qsim export-vectors`: golden vectors of every layer for verifying one's own RTL.

A layer is one NPU layer (CONV2D / DEPTHWISE_CONV2D / FULLY_CONNECTED / MATMUL with
the RESCALE and CLAMP that consume its result fused, as the requantization unit runs
them) or one host operator (every other TOSA operator). Each layer's folder holds
one `.npy` and one `.hex` file per tensor role; `manifest.json` lists, per layer,
the TOSA operators, their scalar attributes, and per tensor the file names, shape,
dtype and hex layout. Each TOSA operator's own tensors are named in `ops[*]` by role,
so a fused layer's files serve both views without copies. docs/vectors.md describes
the format; qsim/npu/vectors_hex.py is the one definition of the hex layout.

Roles of an NPU layer: input (activation, R lanes), input_b (MATMUL B), weight, bias,
accumulator (the TOSA CONV2D/... output: int32 sums with the bias added, the input
of RESCALE), array_sums (accumulator - bias, wrapped to int32: what the array's
accumulator buffer holds before the requantization unit adds the bias), multiplier,
shift, rescaled (RESCALE output when a CLAMP follows), output.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import atomic_directory
from ..outpath import GOLDEN_VECTORS, require_replaceable
from ..errors import UnsupportedError
from ..quant.lowering.float_side import LoweredModel
from ..runtime.executor import execute
from ..version import __version__
from .grouping import group_ops
from .layers import LAYER_OPS
from .vectors_hex import LAYOUT_DOC, element_bits, hex_text, words_of

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ROW_LANE_ROLES = ("input",)          # activation inputs feed the array rows (R lanes)


@dataclass(frozen=True)
class Step:
    """One executed TOSA operator: its name, attributes, input and output values."""
    op: str                                   # TOSA name, e.g. "CONV2D"
    attrs: dict
    inputs: list                              # numpy arrays
    outputs: list
    input_names: tuple = ()                   # graph tensor names, when from a graph
    output_names: tuple = ()
    label: str = ""                           # the op's scoped name in the graph


@dataclass
class LayerVectors:
    name: str
    kind: str                                 # "npu" or "host"
    tensors: dict = field(default_factory=dict)    # role -> (array, graph tensor name or None)
    scalars: dict = field(default_factory=dict)
    ops: list = field(default_factory=list)        # per TOSA op: op, label, attrs, role maps
    notes: dict = field(default_factory=dict)      # extra manifest entries (corner cases)

    @property
    def op(self) -> str:
        return "+".join(o["op"] for o in self.ops)


def _scalar(value):
    """JSON form of a scalar attribute, or None when the attribute is a tensor."""
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str, np.generic))
                                                for v in value):
        return [v.item() if isinstance(v, np.generic) else v for v in value]
    return None


def _split_attrs(attrs: dict) -> tuple[dict, dict]:
    scalars, arrays = {}, {}
    for key, value in attrs.items():
        s = _scalar(value)
        if s is None and isinstance(value, np.ndarray):
            arrays[key] = value
        elif s is not None:
            scalars[key] = s
    return scalars, arrays


def build_layer(name: str, steps: list[Step]) -> LayerVectors:
    """Assigns tensor roles to a group of executed steps (an NPU layer when steps[0] is a
    layer operator; RESCALE and CLAMP steps must follow in that order)."""
    npu = steps[0].op in LAYER_OPS
    layer = LayerVectors(name=name, kind="npu" if npu else "host")
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        scalars, arrays = _split_attrs(step.attrs)
        names_in = step.input_names or (None,) * len(step.inputs)
        names_out = step.output_names or (None,) * len(step.outputs)
        if npu:
            after = steps[i + 1].op if not last else None
            if i == 0:
                ins = ["input", "input_b"][:len(step.inputs)]
                outs = ["accumulator" if after == "RESCALE" else "output"]
            elif step.op == "RESCALE":
                ins, outs = ["accumulator"], ["rescaled" if after == "CLAMP" else "output"]
            else:
                ins, outs = ["rescaled"], ["output"]
        else:
            ins = ["input" if k == 0 else f"input_{k}" for k in range(len(step.inputs))]
            outs = ["output" if k == 0 else f"output_{k}" for k in range(len(step.outputs))]
        attr_roles = {}
        for key, array in arrays.items():
            layer.tensors[key] = (array, None)
            attr_roles[key] = key
        for role, value, tname in zip(ins, step.inputs, names_in):
            layer.tensors.setdefault(role, (value, tname))
        for role, value, tname in zip(outs, step.outputs, names_out):
            layer.tensors[role] = (value, tname)
        layer.ops.append({"op": step.op, "label": step.label, "attrs": scalars,
                          "inputs": ins, "outputs": outs, "attr_tensors": attr_roles})
    if npu:
        layer.scalars = _npu_scalars(steps)
        acc = layer.tensors.get("accumulator")
        bias = layer.tensors.get("bias")
        if acc is not None and bias is not None and acc[0].dtype == np.int32:
            sums = (acc[0].astype(np.int64) - bias[0].astype(np.int64)).astype(np.uint32).astype(np.int32)
            layer.tensors["array_sums"] = (sums, None)
    return layer


def _npu_scalars(steps: list[Step]) -> dict:
    """The fused layer's parameters as the NPU sees them (one clamp range: the RESCALE
    output type's range intersected with the CLAMP's, hw/README.md COMPUTE)."""
    out = {}
    first = steps[0].attrs
    for key in ("input_zp", "weight_zp", "pad", "stride", "dilation", "out_pad", "out_shape"):
        if key in first:
            out[key] = _scalar(first[key])
    for key in ("A_zp", "B_zp"):           # TOSA's MATMUL names; the vector files say a_zp, b_zp
        if key in first:
            out[key.lower()] = _scalar(first[key])
    for step in steps[1:]:
        if step.op == "RESCALE":
            for key in ("output_zp", "double_round", "scale32", "per_channel"):
                out[key] = _scalar(step.attrs.get(key))
            info = np.iinfo(step.outputs[0].dtype)
            out["clamp_min"], out["clamp_max"] = int(info.min), int(info.max)
        elif step.op == "CLAMP":
            out["clamp_min"] = max(out.get("clamp_min", -2**31), int(step.attrs["min_val"]))
            out["clamp_max"] = min(out.get("clamp_max", 2**31 - 1), int(step.attrs["max_val"]))
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "layer"


def _tensor_entry(folder: str, role: str, array: np.ndarray, tensor: str | None, lanes: int) -> dict:
    bits = element_bits(array.dtype, f"layer {folder}, tensor {role}")
    return {"npy": f"{folder}/{role}.npy", "hex": f"{folder}/{role}.hex", "tensor": tensor,
            "shape": list(array.shape), "dtype": array.dtype.name,
            "element_bits": bits, "lanes": lanes, "word_bits": bits * lanes,
            "words": words_of(array.shape, lanes)}


def write_vectors(layers: list[LayerVectors], out: str | Path, rows: int, cols: int,
                  header: dict, readme_intro: str) -> Path:
    """Writes the vector folder atomically: per layer .npy + .hex files, manifest.json, README.md."""
    out = require_replaceable(out, GOLDEN_VECTORS)
    with atomic_directory(out, command=GOLDEN_VECTORS.command) as tmp:
        write_vector_files(layers, tmp, rows, cols, header, readme_intro)
    return out


def write_vector_files(layers: list[LayerVectors], folder: Path, rows: int, cols: int,
                       header: dict, readme_intro: str) -> dict:
    """The vector files in `folder` (an empty folder of an atomic output); returns the manifest."""
    manifest = {"format": "qsim-golden-vectors", "version": FORMAT_VERSION, **header,
                "array": {"rows": rows, "cols": cols}, "layers": []}
    for index, layer in enumerate(layers):
        name = layer_folder(index, layer.name)
        (folder / name).mkdir()
        entries = {}
        for role, (array, tensor) in layer.tensors.items():
            array = np.ascontiguousarray(array)
            lanes = rows if role in ROW_LANE_ROLES else cols
            entries[role] = _tensor_entry(name, role, array, tensor, lanes)
            np.save(folder / name / f"{role}.npy", array)
            (folder / name / f"{role}.hex").write_text(
                hex_text(array, lanes, f"layer {layer.name}, tensor {role}"))
        manifest["layers"].append({"name": layer.name, "dir": name, "kind": layer.kind,
                                   "op": layer.op, "scalars": layer.scalars, "tensors": entries,
                                   "ops": layer.ops, **layer.notes})
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (folder / "README.md").write_text(readme_text(manifest, readme_intro))
    return manifest


def layer_folder(index: int, name: str) -> str:
    """The folder of layer `index` (named `name`) inside a vector folder."""
    return f"{index:03d}_{_safe(name)}"


def readme_text(manifest: dict, intro: str) -> str:
    rows, cols = manifest["array"]["rows"], manifest["array"]["cols"]
    lines = [f"# qsim golden vectors\n\n{intro}\n",
             f"Array: {rows} x {cols} (R = {rows} lanes for activation inputs, C = {cols} for the "
             "rest). `manifest.json` lists every layer with its TOSA operators, scalar attributes "
             "and tensors (file names, shape, dtype, element bits, lanes, words).\n",
             "## Tensor roles\n",
             "input, input_b (MATMUL B), weight, bias, accumulator (TOSA CONV2D/DEPTHWISE_CONV2D/"
             "FULLY_CONNECTED/MATMUL output: int32 sums with the bias, the input of RESCALE), "
             "array_sums (accumulator - bias wrapped to int32: the array's accumulator buffer "
             "before the requantization unit adds the bias), multiplier, shift, rescaled "
             "(RESCALE output before a CLAMP), output; host operators: input, input_1, ..., "
             "attribute tensors by attribute name (e.g. table), output.\n",
             "Fused NPU layers: output = clamp(apply_scale_32(accumulator, multiplier, shift, "
             "double_round) + output_zp, clamp_min, clamp_max) with the layer's `scalars` "
             "(TOSA 0.30 RESCALE 2.13 followed by CLAMP).\n",
             "## Hex layout\n", LAYOUT_DOC,
             "## Layers\n", "| dir | op | output shape |", "|---|---|---|"]
    for layer in manifest["layers"]:
        shape = layer["tensors"].get("output", {}).get("shape")
        lines.append(f"| {layer['dir']} | {layer['op']} | {shape} |")
    return "\n".join(lines) + "\n"


# -- a quantized model ------------------------------------------------------------------------

def model_layers(graph, inputs: dict, backend: str = "kernels") -> list[LayerVectors]:
    """Runs `graph` on `inputs` and returns the vectors of every layer."""
    return layers_of(graph, run_values(graph, inputs, backend))


def run_values(graph, inputs: dict, backend: str = "kernels") -> dict:
    """Every tensor of one run of `graph` (a graph without control flow) on `inputs`."""
    for op in graph.ops:
        if op.subgraphs:
            raise UnsupportedError(f"{op.kind.name} {op.name!r} has subgraphs; golden vectors "
                                   "cover graphs without control flow")
    return execute(graph, inputs, backend)


def layers_of(graph, values: dict) -> list[LayerVectors]:
    """The vectors of every layer (group_ops) from the tensors of one run."""
    layers = []
    for group in group_ops(graph):
        steps = [Step(op=op.kind.short_name, attrs=dict(op.attrs),
                      inputs=[values[n] for n in op.inputs], outputs=[values[n] for n in op.outputs],
                      input_names=op.inputs, output_names=op.outputs, label=op.name)
                 for op in group]
        layers.append(build_layer(group[-1].outputs[0], steps))
    return layers


def export_model_vectors(model: LoweredModel, source: str, inputs: dict, input_text: str, config,
                         out) -> tuple[Path, list]:
    """`qsim export-vectors [QMODEL]`: vectors of every layer of `model` (described as `source`
    in the manifest) from one kernels-backend run on the integer `inputs` (`input_text`)."""
    layers = model_layers(model.graph, inputs, backend="kernels")
    header = {"qsim": __version__, "model": model.graph.name, "source": source,
              "input": input_text, "backend": "kernels",
              "config": {"name": config.name, "dataflow": config.dataflow.value}}
    intro = (f"Golden vectors of model `{model.graph.name}` ({source}) on input: {input_text}; "
             "every value computed by qsim's Cython kernels (bit-exact with the TOSA 0.30 "
             "reference).")
    return write_vectors(layers, out, config.rows, config.cols, header, intro), layers
