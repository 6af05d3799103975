"""Quantized model folders: what `qsim quantize` writes and `qsim.load` / `qsim run` read.

A quantized model is an ordinary SkriptND model folder:

    main.sknd          the integer graph: `import tosa;` and one TOSA operator per line,
                       each tensor's scale / zero point / width as a @quantize entry
    <tensor>.dat       integer data of the weights, biases, multipliers, shifts, tables
    quantization.json  what the graph alone does not say: how float inputs map onto the
                       integer inputs (and outputs back), which float tensor each integer
                       tensor stands for (for per-tensor comparisons), and how it was made

Both targets (TOSA, CVM: quantization.json's settings.target, TOSA when absent) use this
one format. The integer graph is written in its target's text form (TOSA: tensor attributes
as @variable inputs, widths via @quantize, qsim.tosa.sknd_form) by the SkriptND writer;
loading reverses both, so `load_quantized_model(save_quantized_model(m, t, dir))` has the
same graph as `m`. Every folder is published through qsim.atomic.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import ir
from ..atomic import atomic_directory
from ..errors import DataError, UsageError
from ..loader import load
from ..skriptnd.writer import write_model_files
from ..textfile import decode_utf8
from ..userdata import check_nesting
from .lowering.float_side import Lowered, LoweredModel
from .lowering.integer_inputs import as_integer_input
from .params import dequantize, quantize
from .target import Target, TargetKind
from .cvm.target import CvmTarget
from .tosa.target import TosaTarget

METADATA_FILE = "quantization.json"
FORMAT = "qsim-quantized-model"
FORMAT_VERSION = 1


def _quant_json(q: ir.QuantInfo) -> dict:
    return {"scale": q.scale, "zero_point": q.zero_point, "bits": q.bits, "signed": q.signed}


def metadata(model: LoweredModel, source: str | None = None, settings: dict | None = None) -> dict:
    """The quantization.json document for `model` (plain JSON values only)."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "source_model": source,
        "settings": settings or {},
        # float input x enters the graph as clamp(round(x / scale) + zero_point) in its dtype;
        # an integer output y means (y - zero_point) * scale
        "inputs": {n: _quant_json(q) for n, q in model.input_quant.items()},
        "outputs": {n: _quant_json(q) for n, q in model.output_quant.items()},
        # float tensor -> integer tensor; `perm` is the integer tensor's axis order relative
        # to the float tensor's (NCHW models run NHWC inside)
        "tensor_map": {f: {"tensor": lw.name, "perm": list(lw.perm)}
                       for f, lw in model.tensor_map.items()},
    }


def write_quantized_model(model: LoweredModel, target: Target, folder: Path, *,
                          source: str | None = None, settings: dict | None = None) -> None:
    """Writes `model` into `folder`, a folder being built inside qsim.atomic.atomic_directory
    (which may hold other outputs, e.g. the report): main.sknd in the target's text form,
    the .dat files and quantization.json (settings as the target declares them)."""
    write_model_files(target.text_form(model.graph), Path(folder), header=target.model_header(source))
    doc = metadata(model, source, target.folder_settings(dict(settings or {})))
    (Path(folder) / METADATA_FILE).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def save_quantized_model(model: LoweredModel, target: Target, folder: str | Path, *,
                         source: str | None = None, settings: dict | None = None) -> Path:
    """Publishes `model` as the quantized-model folder `folder` (replaced atomically)."""
    folder = Path(folder)
    with atomic_directory(folder) as tmp:
        write_quantized_model(model, target, tmp, source=source, settings=settings)
    return folder


def is_quantized_model(path: str | Path) -> bool:
    return Path(path).is_dir() and (Path(path) / METADATA_FILE).is_file()


def read_metadata(folder: str | Path) -> dict:
    """quantization.json of `folder`, with the types of every entry the loaders use checked."""
    path = Path(folder) / METADATA_FILE
    hint = "is this a folder written by qsim quantize? Re-run qsim quantize to rewrite it"
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})", hint=hint) from None
    text = decode_utf8(data, str(path), what=METADATA_FILE, hint=hint)
    check_nesting(text, str(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})",
                        hint=hint) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{path}: not a qsim quantized-model description "
                        f"(\"format\" must be {FORMAT!r})", hint=hint)
    if doc.get("version") != FORMAT_VERSION:
        raise DataError(f"{path}: version {doc.get('version')!r} is not supported "
                        f"(this qsim reads version {FORMAT_VERSION})",
                        hint="re-run qsim quantize with this qsim")
    _check_entries(doc, str(path), hint)
    return doc


def _check_entries(doc: dict, where: str, hint: str) -> None:
    def fail(what: str) -> None:
        raise DataError(f"{where}: {what}", hint=hint)

    settings = doc.get("settings", {})
    if not isinstance(settings, dict):
        fail(f'"settings" must be an object, not {type(settings).__name__}')
    if settings.get("target", TargetKind.TOSA.value) not in [k.value for k in TargetKind]:
        fail(f'"settings.target" is {settings.get("target")!r}; expected '
             + " or ".join(f'"{k.value}"' for k in TargetKind))
    tensor_map = doc.get("tensor_map", {})
    if not isinstance(tensor_map, dict):
        fail(f'"tensor_map" must be an object, not {type(tensor_map).__name__}')
    for float_name, entry in tensor_map.items():
        perm = entry.get("perm", []) if isinstance(entry, dict) else None
        if (not isinstance(entry, dict) or not isinstance(entry.get("tensor"), str)
                or not isinstance(perm, list)
                or sorted(p for p in perm if type(p) is int) != list(range(len(perm)))):
            fail(f'tensor_map[{float_name!r}] must be {{"tensor": name, "perm": a permutation '
                 f'of 0..rank-1}}, got {entry!r}'[:300])


def _quant_from(graph: ir.Graph, names, where: str) -> dict[str, ir.QuantInfo]:
    out = {}
    for name in names:
        if name not in graph.tensors or graph.tensor(name).quant is None:
            raise DataError(f"{where}: tensor {name!r} has no @quantize entry in main.sknd")
        out[name] = graph.tensor(name).quant
    return out


TARGETS: dict[TargetKind, Target] = {TargetKind.TOSA: TosaTarget(), TargetKind.CVM: CvmTarget()}


def _declared_target(doc: dict) -> Target:
    """The target a checked quantization.json declares (TOSA when it names none: the format
    predates CVM)."""
    return TARGETS[TargetKind(doc.get("settings", {}).get("target", TargetKind.TOSA.value))]


def target_of(folder: str | Path) -> Target:
    """The target (operator set) of a quantized model folder."""
    return _declared_target(read_metadata(folder))


def load_quantized_model(folder: str | Path, expect: TargetKind | None = None) -> LoweredModel:
    """Reads a quantized-model folder (written by `qsim quantize`, either target; only
    `expect`'s when given). A float model, or anything else that is not such a folder, is a
    UsageError saying so."""
    folder = Path(folder)
    if not folder.exists():
        raise UsageError(f"no quantized model {str(folder)!r}",
                         hint="write one with qsim quantize -o DIR")
    if not is_quantized_model(folder):
        raise UsageError(f"{folder} is not a quantized model folder (no {METADATA_FILE}): a float "
                         "model, or not a model", hint="quantize it first: qsim quantize MODEL -o DIR")
    doc = read_metadata(folder)
    target = _declared_target(doc)
    if expect is not None and target.kind is not expect:
        raise DataError(f"{folder}: a {target.title} model, not a {TARGETS[expect].title} one",
                        hint=f"quantize the model with --target {expect.value}")
    graph = load(folder)
    if any(op.kind.dialect != target.dialect for op in graph.ops):
        raise DataError(f"{folder}: {METADATA_FILE} describes a {target.title} integer model, but "
                        "main.sknd holds other operators")
    where = str(folder / METADATA_FILE)
    tensor_map = {}
    for float_name, entry in doc.get("tensor_map", {}).items():
        name = entry.get("tensor") if isinstance(entry, dict) else None
        if name not in graph.tensors:
            raise DataError(f"{where}: tensor_map[{float_name!r}] names {name!r}, which main.sknd "
                            "does not have")
        tensor_map[float_name] = Lowered(name, graph.tensor(name).quant,
                                         tuple(int(a) for a in entry.get("perm", ())))
    return LoweredModel(graph, _quant_from(graph, graph.inputs, where),
                        _quant_from(graph, graph.outputs, where), tensor_map)


def _without_batch_axis(shape: tuple) -> tuple:
    """The input's shape without its batch axis: the first axis of extent 1 (the leading one of
    a batch-first input, axis 1 of a sequence-first [S, 1, E] one), the sample shape of
    calibration data (quant/calibration/model_inputs.py); `shape` itself when no axis is 1."""
    return shape if 1 not in shape else shape[:shape.index(1)] + shape[shape.index(1) + 1:]


def integer_inputs(model: LoweredModel, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's integer inputs from user arrays: a float array is quantized with the
    input's scale and zero point; an integer array must already have the input's dtype."""

    out = {}
    for name, value in arrays.items():
        t = model.graph.tensor(name)
        value = np.asarray(value)
        shape = tuple(int(d) for d in t.shape)
        sample = _without_batch_axis(shape)
        if tuple(value.shape) == sample and sample != shape:
            value = value.reshape(shape)        # one sample as calibration data holds it
        if tuple(value.shape) != shape:
            raise DataError(f"input {name!r}: array of shape {list(value.shape)}, the model "
                            f"takes {list(shape)}", hint="reshape the array to the input shape, or give one "
                            f"sample without its batch axis, as calibration data holds it: {list(sample)}")
        fixed = as_integer_input(value, t.dtype, name)   # token ids narrowed, masks bool: never quantized
        if fixed is not None:
            out[name] = fixed
        elif value.dtype.kind == "f":
            out[name] = quantize(value, model.input_quant[name], what=name).astype(t.dtype.numpy)
        elif value.dtype == t.dtype.numpy:
            out[name] = value
        else:
            raise DataError(f"input {name!r}: {value.dtype} array, the model takes {t.dtype.name} "
                            "(integer) or a float array to quantize",
                            hint=f"save the input as float32 or as {np.dtype(t.dtype.numpy).name}")
    return out


def dequantized_summary(name: str, value, quant: ir.QuantInfo) -> str:
    """One line: the integer output read as real numbers, and its argmax."""
    real = dequantize(np.asarray(value), quant)
    return (f"{name} dequantized (scale {quant.scale:.6g}, zero point {quant.zero_point}): "
            f"min {real.min():.6g} max {real.max():.6g}, argmax {int(np.argmax(real.reshape(-1)))}")
