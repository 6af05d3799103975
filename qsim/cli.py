"""qsim's command line (the only module that reads argv).

Each subcommand is declared in `build_parser()` and handled by a `cmd_<name>`
function here that calls into the stage that does the work. A QsimError is
printed as a message (exit 2); any other exception is an internal error (exit 1).
"""
from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import QsimError


def cmd_selftest(args: argparse.Namespace) -> int:
    from .selftest import run_selftest
    return 0 if run_selftest(seed=args.seed, out=sys.stdout) else 1


def cmd_run(args: argparse.Namespace) -> int:
    from .skriptnd import execute
    graph = execute.load_model(args.model)
    values = execute.run_graph(graph, execute.read_inputs(graph, args.input or []))
    execute.write_outputs(graph, values, args.output, args.dump)
    print(execute.summarize(graph, values))
    return 0


def cmd_export_rtl(args: argparse.Namespace) -> int:
    from .npu.config import load_config
    from .npu.export import export_rtl
    config = load_config(args.config)
    out = export_rtl(config, args.out)
    print(f"wrote {out}/qsim_npu.v, README.md, npu.toml ({config.name}, "
          f"{config.dataflow.name.lower()})")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .skriptnd.check import check_model
    keep = [k for k in (args.keep or "").split(",") if k]
    print(check_model(args.model, all_graphs=args.all, graph=args.graph, keep=keep))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim",
        description="Bit-exact integer quantization of NNEF models (TOSA 0.30, CVM), "
                    "with Cython kernels and a cycle-simulated systolic-array NPU.")
    parser.add_argument("--version", action="version", version=f"qsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("selftest", help="check the compiled kernels against the numpy reference "
                                        "on seeded random cases")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(handler=cmd_selftest)

    p = sub.add_parser("run", help="execute a model on numpy inputs (float models: the "
                                   "SkriptND standard operators)")
    p.add_argument("model", metavar="MODEL", help="model folder, main.sknd, graph.nnef or .tgz")
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="an input array (.npy), in graph input order or by name; repeatable")
    p.add_argument("--output", metavar="OUT", help="write the output (.npy; .npz when several)")
    p.add_argument("--dump", metavar="DIR", help="write every tensor as DIR/<tensor name>.npy")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("export-rtl", help="write the NPU's Verilog with a README of its ports "
                                          "and instruction format")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="NPU configuration: a TOML file or a preset (8x8, 16x16, 32x32; "
                        "append :os for output-stationary); default 16x16")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    p.set_defaults(handler=cmd_export_rtl)
    p = sub.add_parser("check", help="parse and compose a model (.sknd, model folder, graph.nnef, "
                                     ".tgz) and summarize it, or report located errors")
    p.add_argument("model", help="a .sknd file, a folder with main.sknd or graph.nnef, or a .tgz/.tar")
    p.add_argument("--all", action="store_true", help="compose every graph of the main module")
    p.add_argument("--graph", help="compose the graph of this name (default: the first)")
    p.add_argument("--keep", help="comma-separated compound operators to keep whole, e.g. nn.softmax")
    p.set_defaults(handler=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except QsimError as err:
        print(f"qsim: {err.format()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
