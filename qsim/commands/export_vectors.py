"""`qsim export-vectors`: golden vectors (.npy, $readmemh .hex, JSON manifest) of every layer of a
quantized model, or of seeded corner-case layers."""
from __future__ import annotations

import argparse

from ..errors import UsageError
from ..npu.config import load_config
from ..npu.corner_cases import export_corner_cases
from ..npu.golden_vectors import export_model_vectors
from ..outpath import check_output
from .arguments import input_files, whole_number

NAME = "export-vectors"
HELP = "write golden vectors (.npy, $readmemh .hex, JSON manifest) of every layer, or seeded corner cases"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="QMODEL",
                   help="quantized model folder from qsim quantize (default: the embedded model)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
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
    check_output(args.out, "--out", [("quantized model", args.model),
                                     ("NPU configuration", args.config),
                                     *input_files(args.input)])
    if args.corner_cases is not None:
        if args.model or args.input:
            raise UsageError("--corner-cases generates its own layers; it takes no QMODEL or --input",
                             hint="run export-vectors twice: once for the model, once for corner cases")
        out, cases = export_corner_cases(args.corner_cases, args.seed, config, args.out)
        print(f"wrote {out}: {len(cases)} corner-case layers (seed {args.seed}), manifest.json, README.md")
        return 0
    out, layers = export_model_vectors(args.model, args.input, config, args.out)
    npu = sum(layer.kind == "npu" for layer in layers)
    print(f"wrote {out}: {len(layers)} layers ({npu} on the NPU array), manifest.json, README.md")
    return 0
