"""`qsim simulate`: run a quantized model on the cycle-simulated NPU (one configuration or a
sweep), verify every layer against the kernels, and print the cycle and energy summary."""
from __future__ import annotations

import argparse
import sys

from ..npu.engines import Engine
from ..npu.simulate import simulate_command, summary_lines

NAME = "simulate"
HELP = "run a quantized model on the cycle-simulated NPU, verify every layer against the kernels, report cycles"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="QMODEL",
                   help="quantized model folder from qsim quantize (default: the embedded model)")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="NPU configuration: a TOML file or a preset (8x8, 16x16, 32x32; append "
                        ":os for output-stationary); default 16x16")
    p.add_argument("--engine", default="verilator", metavar="ENGINE",
                   help="verilator (default; RTL compiled with Verilator, build cached), amaranth "
                        "(Amaranth's simulator, small arrays) or model (numpy cycle model)")
    p.add_argument("--input", metavar="X.npy",
                   help="model input: float (quantized with the model's input scale) or int8 "
                        "(used as is); default: the first embedded test image")
    p.add_argument("-o", "--out", metavar="OUT",
                   help="report folder (default qsim-out/<model>-npu/, -npu-sweep/ for sweeps)")
    p.add_argument("--sweep", nargs="+", metavar="KEY=V1,V2",
                   help="run the product of these configuration values in parallel, e.g. "
                        "size=8,16,32 dataflow=ws,os (keys: size, rows, cols, dataflow, "
                        "*_buffer_bytes, dram_bytes_per_cycle, clock_mhz)")
    p.add_argument("--vcd", metavar="FILE",
                   help="on a mismatch, write the waveform around the first wrong DRAM write")
    p.add_argument("--tech", metavar="NAME|FILE",
                   help="per-event energy table: 45nm (default), 7nm, or a TOML file of the same "
                        "form (docs/npu.md, Energy)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="run the layers (of every sweep point) as tasks on N local Dask worker "
                        "processes (default: one per core; 1: in this process, no cluster)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the tasks on an existing Dask cluster (default: $QSIM_SCHEDULER)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    # Engine.parse: names are case-insensitive; an unknown one is a UsageError naming the choices
    result = simulate_command(args.model, args.config, Engine.parse(args.engine), args.input, args.out,
                              sweep=args.sweep, vcd=args.vcd, show_progress=not args.quiet,
                              tech=args.tech, workers=args.workers, scheduler=args.scheduler)
    for report in result.reports:
        print("\n".join(summary_lines(report)))
    for point in result.sweep:
        print(f"{point['config']['name']:<24} {point['total_cycles']:>9} cycles  "
              f"{100 * point['array_utilization']:5.1f} % PE utilization  "
              f"{point['inferences_per_s']:>10.0f} inferences/s  "
              f"{point['energy_per_inference_pj'] / 1e3:>9.2f} nJ/inference  "
              f"{'verified' if point['all_verified'] else 'MISMATCH'}")
    for message in result.messages:
        print(message, file=sys.stderr)
    print(f"wrote {result.out}/ ({'every layer bit-exact with the kernels' if result.verified else 'VERIFICATION FAILED'})")
    return 0 if result.verified else 1
