"""`qsim export-rtl`: write the NPU's Verilog with a README of its ports and instruction format."""
from __future__ import annotations

import argparse

from ..npu.config import load_config
from ..npu.export import export_rtl
from ..outpath import RTL, check_output

NAME = "export-rtl"
HELP = "write the NPU's Verilog with a README of its ports and instruction format"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="16x16", metavar="CFG",
                        help="NPU configuration: a TOML file or a preset (8x8, 16x16, 32x32; "
                             "append :os for output-stationary); default 16x16")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (new, empty, or an earlier export-rtl output, which is replaced)")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    check_output(args.out, "--out", [("NPU configuration", args.config)], replaces=RTL)
    out = export_rtl(config, args.out)
    print(f"wrote {out}/qsim_npu.v, README.md, npu.toml ({config.name}, "
          f"{config.dataflow.name.lower()})")
    return 0
