"""`qsim quantize`: quantize a float model to a bit-exact integer model (TOSA 0.30 or CVM), write
the quantized-model folder and its accuracy report, and print a summary."""
from __future__ import annotations

import argparse

from ..quant.observers import ObserverKind
from ..quant.params import Granularity, Precision
from ..quant.pipeline import QuantizeOptions, quantize_command, summary_lines
from .arguments import whole_number

NAME = "quantize"
HELP = "quantize a float model to a bit-exact integer model (TOSA 0.30 or CVM) and report its accuracy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="float model: folder with main.sknd or graph.nnef, a .sknd file, "
                        "graph.nnef or .tgz (default: the embedded Fashion-MNIST CNN)")
    p.add_argument("--calib", metavar="DATA", help="calibration inputs: .npy, .npz or a folder "
                   "of images (required with MODEL; default: the embedded calibration images)")
    p.add_argument("--eval", metavar="DATA", help="evaluation inputs (.npy/.npz/image folder, "
                   "with labels for top-1 accuracy); default: the Fashion-MNIST test set for "
                   "the embedded model, else the calibration data")
    p.add_argument("-o", "--out", metavar="OUT",
                   help="output folder (default qsim-out/<model>-int8/ here)")
    p.add_argument("--target", choices=("tosa", "cvm"), default="tosa",
                   help="integer operator set (default tosa)")
    p.add_argument("--cvm-precision", type=int, default=8, choices=range(2, 9), metavar="P",
                   help="--target cvm: activation precision in bits, 2..8 (default 8)")
    p.add_argument("--observer", choices=("minmax", "percentile", "mse"), default="percentile",
                   help="range observer for calibrated tensors (default percentile: the 99.99th percentile range)")
    p.add_argument("--precision", choices=("int8", "16x8"), default="int8",
                   help="int8, or 16x8: int16 activations, int8 weights (default int8)")
    p.add_argument("--weights", choices=("per-channel", "per-tensor"), default="per-channel",
                   help="weight scale granularity (default per-channel)")
    p.add_argument("--rounding", choices=("single", "double"), default="single",
                   help="RESCALE rounding; double reproduces TFLite (default single)")
    p.add_argument("--no-bias-correction", action="store_true",
                   help="keep the float biases (default: correct each output channel's mean "
                        "shift caused by weight rounding, from calibration channel means)")
    p.add_argument("--weight-rounding", choices=("nearest", "adaptive"),
                   help="int8 weights: adaptive: per weight floor or ceiling, whichever gives each "
                        "layer the least output error on the calibration data; or nearest "
                        "(default adaptive; CVM rounds to nearest)")
    p.add_argument("--backend", choices=("kernels", "reference"), default="kernels",
                   help="integer execution during evaluation (default kernels)")
    p.add_argument("--calib-limit", type=whole_number(1), metavar="N",
                   help="use at most N calibration samples")
    p.add_argument("--eval-limit", type=whole_number(1), metavar="N",
                   help="evaluate at most N samples")
    p.add_argument("--subset", action="store_true",
                   help="embedded model: evaluate on the embedded 1000-image subset only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    options = QuantizeOptions(
        observer=ObserverKind(args.observer), precision=Precision(args.precision),
        weight_granularity=Granularity(args.weights), double_round=args.rounding == "double",
        bias_correction=not args.no_bias_correction, weight_rounding=args.weight_rounding,
        backend=args.backend, calib_limit=args.calib_limit, eval_limit=args.eval_limit,
        show_progress=not args.quiet)
    result = quantize_command(args.model, args.calib, args.out, options, evaluation=args.eval,
                              subset_only=args.subset, target=args.target,
                              cvm_precision=args.cvm_precision)
    print("\n".join(summary_lines(result)))
    return 0
