"""`qsim run`: execute a float model, or a quantized model written by `qsim quantize`, on numpy
inputs; print a summary of the outputs and write them (--output) or every tensor (--dump).

Both kinds run on the one executor (qsim.runtime); the inputs are read by the one reader of
`--input [NAME=]X.npy` (qsim.userdata.read_inputs); float inputs of a quantized model are
quantized with its input parameters first (qmodel.integer_inputs)."""
from __future__ import annotations

import argparse
import os
import zipfile
from typing import Mapping

import numpy as np

from .. import ir
from ..atomic import atomic_directory, atomic_file
from ..errors import UsageError
from ..loader import load, model_kind
from ..outpath import TENSOR_DUMP, check_output
from ..quant import qmodel
from ..kernels.backend import Backend
from ..runtime.executor import execute
from ..quant.calibration.model_inputs import check_index_ranges
from ..userdata import read_inputs
from .arguments import input_files

NAME = "run"
HELP = "execute a model on numpy inputs: a float model, or a quantized model written by qsim quantize"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model folder, main.sknd, graph.nnef, .tgz or .onnx")
    parser.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                        help="an input array (.npy), in graph input order or by name; repeatable")
    parser.add_argument("--output", metavar="OUT.npy|OUT.npz",
                        help="write the outputs: OUT.npy holds the one output of a model that has "
                             "one; OUT.npz every output, keyed by output name")
    parser.add_argument("--dump", metavar="DIR", help="write every tensor as DIR/<tensor name>.npy")
    parser.add_argument("--backend", choices=[b.value for b in Backend], default=Backend.KERNELS.value,
                        help="quantized models: Cython kernels or the numpy TOSA reference "
                             "(same bits; default kernels)")


def run(args: argparse.Namespace) -> int:
    inputs = [("model", args.model), *input_files(args.input)]
    if args.dump is not None:
        check_output(args.dump, "--dump", inputs, replaces=TENSOR_DUMP)
    if args.output is not None:
        check_output(args.output, "--output", inputs, outputs=[("--dump folder", args.dump)],
                     folder=False, suffixes=OUTPUT_SUFFIXES)
        output_suffix(args.output)
    specs = args.input or []
    if qmodel.is_quantized_model(args.model):
        model = qmodel.load_quantized_model(args.model)
        graph = model.graph
        arrays = qmodel.integer_inputs(model, read_inputs(graph.inputs, specs))
    else:
        model = None
        graph = load(args.model)
        arrays = read_inputs(graph.inputs, specs)
        batch = onnx_batch(args.model, graph, arrays)
        if batch is not None:
            graph = load(args.model, batch=batch)
        check_index_ranges(graph, arrays, "--input")     # token ids within their embedding tables
    if args.output is not None:
        check_output_count(args.output, graph, inputs)
    values = execute(graph, arrays, backend=Backend(args.backend), keep=_kept(graph, args.dump))
    write_outputs(graph, values, args.output, args.dump)
    print(summary(graph, values))
    if model is not None:
        for name in graph.outputs:
            print(qmodel.dequantized_summary(name, values[name], model.output_quant[name]))
    return 0


def _kept(graph: ir.Graph, dump: str | None):
    """What the run keeps: every tensor for --dump, else the outputs only (all that is printed
    and written), so the intermediates go as soon as nothing reads them."""
    return None if dump is not None else graph.outputs


def onnx_batch(path: str, graph: ir.Graph, arrays: Mapping[str, np.ndarray]) -> int | None:
    """The batch an ONNX model loaded at batch 1 is to be loaded at instead: the first input's
    array extent on the one axis where it differs from the input's shape and the input has
    extent 1 there (the batch axis: the leading one, or a sequence-first [S, 1, E] input's
    axis 1; the importer gives a dynamic batch dimension that extent, a fixed one stays and the
    executor then reports the shape mismatch). None for other models or a batch of 1."""
    if model_kind(path) != "onnx" or not graph.inputs or graph.inputs[0] not in arrays:
        return None
    array, shape = arrays[graph.inputs[0]], graph.tensor(graph.inputs[0]).shape
    if array.ndim != len(shape) or array.ndim == 0:
        return None
    differing = [a for a in range(array.ndim) if array.shape[a] != shape[a]]
    if len(differing) != 1 or shape[differing[0]] != 1 or array.shape[differing[0]] == 0:
        return None
    return int(array.shape[differing[0]])


OUTPUT_SUFFIXES = (".npy", ".npz")


def output_suffix(path: str) -> str:
    """The format `--output path` names: .npy (one array) or .npz (an archive); another suffix
    is a usage error (it would hold a format its name does not say)."""
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in OUTPUT_SUFFIXES:
        raise UsageError(f"--output {path}: {'the suffix ' + repr(suffix) if suffix else 'no suffix'} "
                         "names no output format qsim writes",
                         hint="name the file .npy (the one output of a model that has one) or "
                              ".npz (every output, keyed by output name)")
    return suffix.lower()


def check_output_count(path: str, graph: ir.Graph, inputs) -> None:
    """A .npy file holds one array: refused for a model without exactly one output."""
    if output_suffix(path) == ".npy" and len(graph.outputs) != 1:
        names = ", ".join(graph.outputs) or "none"
        archive = os.path.splitext(path)[0] + ".npz"
        try:
            check_output(archive, "--output", inputs, folder=False)
            place = f"use --output {archive}"
        except UsageError:
            place = "name an .npz file for --output"
        raise UsageError(f"--output {path}: the model has {len(graph.outputs)} outputs ({names}); "
                         "a .npy file holds one array",
                         hint=f"{place}: an archive of every output, keyed by output name")


def _save_archive(f, arrays: Mapping[str, np.ndarray]) -> None:
    """An .npz archive (numpy.savez's format: one NAME.npy member per array, uncompressed),
    written directly so that any output name is a key (savez takes them as keyword
    arguments, where 'file' or 'allow_pickle' would clash)."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def _file_name(tensor_name: str) -> str:
    return tensor_name.replace("/", "_") + ".npy"


def write_outputs(graph: ir.Graph, values: Mapping[str, np.ndarray], output: str | None,
                  dump: str | None) -> None:
    """`--output` (.npy: the one output; .npz: every output by name) and `--dump` (a folder of
    every tensor), each replacing its target only when complete (qsim.atomic)."""
    if output:
        outs = {n: values[n] for n in graph.outputs}
        with atomic_file(output) as tmp, open(tmp, "wb") as f:
            if output_suffix(output) == ".npy":
                np.save(f, outs[graph.outputs[0]])
            else:
                _save_archive(f, outs)
    if dump:
        with atomic_directory(dump, command=TENSOR_DUMP.command) as tmpdir:
            for name, value in values.items():
                np.save(tmpdir / _file_name(name), value)


def summary(graph: ir.Graph, values: Mapping[str, np.ndarray]) -> str:
    """One line per graph output: dtype, shape and (numbers) min, max, mean."""
    lines = []
    for name in graph.outputs:
        v = values[name]
        stats = (f" min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"
                 if v.size and v.dtype.kind in "iuf" else "")
        lines.append(f"{name}: {v.dtype}{list(v.shape)}{stats}")
    return "\n".join(lines)
