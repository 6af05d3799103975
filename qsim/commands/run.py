"""`qsim run`: execute a float model, or a quantized model written by `qsim quantize`, on numpy
inputs; print a summary of the outputs and write them (--output) or every tensor (--dump)."""
from __future__ import annotations

import argparse

from ..outpath import TENSOR_DUMP, check_output
from ..quant import qmodel
from ..runtime.executor import execute as run_integer
from ..skriptnd import execute
from .arguments import input_files

NAME = "run"
HELP = "execute a model on numpy inputs: a float model, or a quantized model written by qsim quantize"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model folder, main.sknd, graph.nnef or .tgz")
    parser.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                        help="an input array (.npy), in graph input order or by name; repeatable")
    parser.add_argument("--output", metavar="OUT", help="write the output (.npy; .npz when several)")
    parser.add_argument("--dump", metavar="DIR", help="write every tensor as DIR/<tensor name>.npy")
    parser.add_argument("--backend", choices=("kernels", "reference"), default="kernels",
                        help="quantized models: Cython kernels or the numpy TOSA reference "
                             "(same bits; default kernels)")


def run(args: argparse.Namespace) -> int:
    inputs = [("model", args.model), *input_files(args.input)]
    if args.dump is not None:
        check_output(args.dump, "--dump", inputs, replaces=TENSOR_DUMP)
    if args.output is not None:
        check_output(args.output, "--output", inputs, outputs=[("--dump folder", args.dump)],
                     folder=False)
    if qmodel.is_quantized_model(args.model):
        return _run_quantized(args)
    print(execute.run_float_model(args.model, args.input or [], args.output, args.dump))
    return 0


def _run_quantized(args: argparse.Namespace) -> int:
    model = qmodel.load_any_quantized(args.model)
    arrays = qmodel.integer_inputs(model, execute.read_inputs(model.graph, args.input or []))
    values = run_integer(model.graph, arrays, backend=args.backend)
    execute.write_outputs(model.graph, values, args.output, args.dump)
    print(execute.summarize(model.graph, values))
    for name in model.graph.outputs:
        print(qmodel.dequantized_summary(name, values[name], model.output_quant[name]))
    return 0
