"""`qsim export-vectors`: golden vectors (.npy, $readmemh .hex, JSON manifest) of every layer of a
quantized model, or of seeded corner-case layers; with --cocotb, the model's vectors inside a
runnable cocotb testbench (docs/cocotb.md)."""
from __future__ import annotations

import argparse

from ..errors import UsageError
from ..npu.cocotb_export import export_cocotb
from ..npu.config import load_config
from ..npu.corner_cases import export_corner_cases
from ..npu.golden_vectors import export_model_vectors
from ..outpath import GOLDEN_VECTORS, check_output
from .arguments import input_files, whole_number
from .quantized_model import load_npu_model, read_inputs

NAME = "export-vectors"
HELP = "write golden vectors (.npy, $readmemh .hex, JSON manifest) of every layer, or seeded corner cases"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="QMODEL",
                   help="quantized model folder from qsim quantize, or a model that carries its own "
                        "quantization (a .tflite or QDQ ONNX file: quantized in memory on its "
                        "parameters); default: the embedded model")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR", help="output directory (new, empty, or an earlier export-vectors output, which is replaced)")
    where.add_argument("--cocotb", metavar="DIR",
                       help="instead of --out: write a runnable cocotb testbench into DIR (new, "
                            "empty or an earlier export-vectors output): the vectors, the NPU programs computing them, and run.py, "
                            "which checks a DUT (by default qsim export-rtl's NPU) layer by layer")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="NPU configuration for the hex lane packing: a TOML file or a preset "
                        "(8x8, 16x16, 32x32); default 16x16")
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="model input (float: quantized with the model's input scale; or integer); "
                        "default: the first embedded test image")
    p.add_argument("--corner-cases", type=whole_number(1), metavar="N",
                   help="instead of a model: N seeded corner-case layers (saturation, zero-point "
                        "extremes, rounding ties, int32 limits, long K, ...)")
    p.add_argument("--seed", type=whole_number(0), default=0, help="corner-case seed (default 0)")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    option, out = ("--cocotb", args.cocotb) if args.cocotb is not None else ("--out", args.out)
    check_output(out, option, [("quantized model", args.model), ("NPU configuration", args.config),
                               *input_files(args.input)], replaces=GOLDEN_VECTORS)
    if args.cocotb is not None:
        if args.corner_cases is not None:
            raise UsageError("--cocotb writes a testbench for a model's layers; --corner-cases "
                             "writes vectors only", hint="drop --corner-cases, or use --out")
        loaded = load_npu_model(args.model)
        inputs, input_text = read_inputs(loaded.model, args.input)
        out, layers, checked = export_cocotb(loaded.model, loaded.source, inputs, input_text, config,
                                             args.cocotb)
        print(f"wrote {out}: cocotb testbench of {len(layers)} layers ({checked} run on the NPU and "
              f"checked); run it with: qsim export-rtl --config {out}/npu.toml --out RTL && "
              f"python {out}/run.py --verilog RTL/qsim_npu.v")
        return 0
    if args.corner_cases is not None:
        if args.model or args.input:
            raise UsageError("--corner-cases generates its own layers; it takes no QMODEL or --input",
                             hint="run export-vectors twice: once for the model, once for corner cases")
        out, cases = export_corner_cases(args.corner_cases, args.seed, config, args.out)
        print(f"wrote {out}: {len(cases)} corner-case layers (seed {args.seed}), manifest.json, README.md")
        return 0
    loaded = load_npu_model(args.model)
    inputs, input_text = read_inputs(loaded.model, args.input)
    out, layers = export_model_vectors(loaded.model, loaded.source, inputs, input_text, config, args.out)
    npu = sum(layer.kind == "npu" for layer in layers)
    print(f"wrote {out}: {len(layers)} layers ({npu} on the NPU array), manifest.json, README.md")
    return 0
