"""qsim's command line (the only module that reads argv).

Each subcommand is declared in `build_parser()` and handled by a `cmd_<name>`
function here that calls into the stage that does the work. A QsimError is
printed as a message (exit 2); any other exception is an internal error (exit 1).
"""
from __future__ import annotations

import argparse
import os
import sys

from . import limits, threads
from .version import __version__
from .errors import QsimError, UsageError


def _whole_number(minimum: int):
    """An argparse type: a whole number >= minimum (argparse reports others with exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value
    parse.__name__ = f"whole number >= {minimum}"
    return parse


def _input_files(specs: list[str] | None) -> list[tuple[str, str]]:
    """The files `--input [NAME=]X.npy` options may name, as (what, path) inputs."""
    pairs = []
    for spec in specs or []:
        pairs.append(("--input", spec))
        _, sep, path = spec.partition("=")
        if sep:
            pairs.append(("--input", path))
    return pairs


def cmd_selftest(args: argparse.Namespace) -> int:
    from .selftest import run_selftest
    return 0 if run_selftest(seed=args.seed, out=sys.stdout) else 1


def cmd_run(args: argparse.Namespace) -> int:
    from .outpath import TENSOR_DUMP, check_output
    from .quant import qmodel
    from .skriptnd import execute
    inputs = [("model", args.model), *_input_files(args.input)]
    if args.dump is not None:
        check_output(args.dump, "--dump", inputs, replaces=TENSOR_DUMP)
    if args.output is not None:
        check_output(args.output, "--output", inputs, outputs=[("--dump folder", args.dump)],
                     folder=False)
    if qmodel.is_quantized_model(args.model):
        return _run_quantized(args)
    print(execute.run_float_model(args.model, args.input or [], args.output, args.dump))
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from .quant.observers import ObserverKind
    from .quant.params import Granularity, Precision
    from .quant.pipeline import QuantizeOptions, quantize_command, summary_lines
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


def _run_quantized(args: argparse.Namespace) -> int:
    from .quant import qmodel
    from .runtime.executor import execute as run_integer
    from .skriptnd import execute
    model = qmodel.load_quantized_model(args.model)
    arrays = qmodel.integer_inputs(model, execute.read_inputs(model.graph, args.input or []))
    values = run_integer(model.graph, arrays, backend=args.backend)
    execute.write_outputs(model.graph, values, args.output, args.dump)
    print(execute.summarize(model.graph, values))
    for name in model.graph.outputs:
        print(qmodel.dequantized_summary(name, values[name], model.output_quant[name]))
    return 0


def cmd_export_rtl(args: argparse.Namespace) -> int:
    from .npu.config import load_config
    from .npu.export import export_rtl
    from .outpath import check_output
    config = load_config(args.config)
    check_output(args.out, "--out", [("NPU configuration", args.config)])
    out = export_rtl(config, args.out)
    print(f"wrote {out}/qsim_npu.v, README.md, npu.toml ({config.name}, "
          f"{config.dataflow.name.lower()})")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from .npu.simulate import simulate_command, summary_lines
    result = simulate_command(args.model, args.config, args.engine, args.input, args.out,
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


def cmd_export_vectors(args: argparse.Namespace) -> int:
    from .npu.config import load_config
    from .outpath import check_output
    config = load_config(args.config)
    check_output(args.out, "--out", [("quantized model", args.model),
                                     ("NPU configuration", args.config),
                                     *_input_files(args.input)])
    if args.corner_cases is not None:
        if args.model or args.input:
            raise UsageError("--corner-cases generates its own layers; it takes no QMODEL or --input",
                             hint="run export-vectors twice: once for the model, once for corner cases")
        from .npu.corner_cases import export_corner_cases
        out, cases = export_corner_cases(args.corner_cases, args.seed, config, args.out)
        print(f"wrote {out}: {len(cases)} corner-case layers (seed {args.seed}), manifest.json, README.md")
        return 0
    from .npu.vectors import export_model_vectors
    out, layers = export_model_vectors(args.model, args.input, config, args.out)
    npu = sum(layer.kind == "npu" for layer in layers)
    print(f"wrote {out}: {len(layers)} layers ({npu} on the NPU array), manifest.json, README.md")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .skriptnd.check import check_model
    keep = [k.strip() for k in (args.keep or "").split(",") if k.strip()]
    if args.keep is not None and not keep:
        raise UsageError(f"--keep {args.keep!r} names no operator",
                         hint="give comma-separated operator names, e.g. --keep nn.softmax,nn.conv")
    print(check_model(args.model, all_graphs=args.all, graph=args.graph, keep=keep))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim",
        description="Bit-exact integer quantization of NNEF models (TOSA 0.30, CVM), "
                    "with Cython kernels and a cycle-simulated systolic-array NPU.")
    parser.add_argument("--version", action="version", version=f"qsim {__version__}")
    parser.add_argument("--max-tensor-bytes", metavar="SIZE",
                        help="refuse any single tensor, constant or container member larger than "
                             "SIZE bytes (K/M/G/T suffixes; default 4G, or $QSIM_MAX_TENSOR_BYTES)")
    parser.add_argument("--threads", metavar="N",
                        help="compute on N threads (float BLAS and integer kernels; results are "
                             "the same for any N; default all cores, or $QSIM_THREADS)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("selftest", help="check the compiled kernels against the numpy reference "
                                        "on seeded random cases")
    p.add_argument("--seed", type=_whole_number(0), default=0, help="random seed (default 0)")
    p.set_defaults(handler=cmd_selftest)

    p = sub.add_parser("run", help="execute a model on numpy inputs: a float model, or a "
                                   "quantized model written by qsim quantize")
    p.add_argument("model", metavar="MODEL", help="model folder, main.sknd, graph.nnef or .tgz")
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="an input array (.npy), in graph input order or by name; repeatable")
    p.add_argument("--output", metavar="OUT", help="write the output (.npy; .npz when several)")
    p.add_argument("--dump", metavar="DIR", help="write every tensor as DIR/<tensor name>.npy")
    p.add_argument("--backend", choices=("kernels", "reference"), default="kernels",
                   help="quantized models: Cython kernels or the numpy TOSA reference "
                        "(same bits; default kernels)")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("quantize", help="quantize a float model to a bit-exact integer model "
                                        "(TOSA 0.30 or CVM) and report its accuracy")
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
    p.add_argument("--calib-limit", type=_whole_number(1), metavar="N",
                   help="use at most N calibration samples")
    p.add_argument("--eval-limit", type=_whole_number(1), metavar="N",
                   help="evaluate at most N samples")
    p.add_argument("--subset", action="store_true",
                   help="embedded model: evaluate on the embedded 1000-image subset only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=cmd_quantize)

    p = sub.add_parser("export-rtl", help="write the NPU's Verilog with a README of its ports "
                                          "and instruction format")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="NPU configuration: a TOML file or a preset (8x8, 16x16, 32x32; "
                        "append :os for output-stationary); default 16x16")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    p.set_defaults(handler=cmd_export_rtl)
    p = sub.add_parser("simulate", help="run a quantized model on the cycle-simulated NPU, verify "
                                        "every layer against the kernels, report cycles")
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
    p.set_defaults(handler=cmd_simulate)
    p = sub.add_parser("export-vectors", help="write golden vectors (.npy, $readmemh .hex, JSON "
                                              "manifest) of every layer, or seeded corner cases")
    p.add_argument("model", nargs="?", metavar="QMODEL",
                   help="quantized model folder from qsim quantize (default: the embedded model)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="NPU configuration for the hex lane packing: a TOML file or a preset "
                        "(8x8, 16x16, 32x32); default 16x16")
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="model input (float: quantized with the model's input scale; or integer); "
                        "default: the first embedded test image")
    p.add_argument("--corner-cases", type=_whole_number(1), metavar="N",
                   help="instead of a model: N seeded corner-case layers (saturation, zero-point "
                        "extremes, rounding ties, int32 limits, long K, ...)")
    p.add_argument("--seed", type=_whole_number(0), default=0, help="corner-case seed (default 0)")
    p.set_defaults(handler=cmd_export_vectors)
    p = sub.add_parser("check", help="parse and compose a model (.sknd, model folder, graph.nnef, "
                                     ".tgz) and summarize it, or report located errors")
    p.add_argument("model", help="a .sknd file, a folder with main.sknd or graph.nnef, or a .tgz/.tar")
    p.add_argument("--all", action="store_true", help="compose every graph of the main module")
    p.add_argument("--graph", help="compose the graph of this name (default: the first)")
    p.add_argument("--keep", help="comma-separated compound operators to keep whole, e.g. nn.softmax")
    p.set_defaults(handler=cmd_check)
    return parser


# Options whose values name files or folders (an --input may be NAME=PATH).
PATH_OPTIONS = ("model", "calib", "eval", "out", "input", "output", "dump", "config", "tech", "vcd")
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 4095     # Linux limits on one component and a whole path


def check_path_arguments(args: argparse.Namespace) -> None:
    """Refuses a path the operating system cannot name (a component over 255 bytes, a path over
    4095, a NUL byte) before any command uses it, so no file call fails deep inside a stage."""
    for option in PATH_OPTIONS:
        values = getattr(args, option, None)
        for value in values if isinstance(values, list) else [values]:
            if not isinstance(value, str):
                continue
            path = value.partition("=")[2] if option == "input" and "=" in value else value
            raw = os.fsencode(path)
            flag = "MODEL" if option == "model" else f"--{option}"
            shown = path if len(path) <= 60 else path[:60] + "..."
            if b"\0" in raw or len(raw) > PATH_MAX_BYTES or \
                    any(len(part) > NAME_MAX_BYTES for part in raw.split(b"/")):
                raise UsageError(f"{flag} {shown!r} is not a path this system can open (a name over "
                                 f"{NAME_MAX_BYTES} bytes, a path over {PATH_MAX_BYTES}, or a NUL byte)",
                                 hint="give a shorter path")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        print("qsim: usage error: no command given\n  hint: qsim quantize runs the main job on the "
              "embedded model; qsim COMMAND --help explains a command", file=sys.stderr)
        return 2
    # --max-tensor-bytes holds for this run (and the worker processes it starts) only
    previous_limit = os.environ.get(limits.MAX_TENSOR_BYTES_ENV)
    try:
        if args.max_tensor_bytes is not None:
            limits.parse_byte_size(args.max_tensor_bytes, "--max-tensor-bytes")
            os.environ[limits.MAX_TENSOR_BYTES_ENV] = args.max_tensor_bytes
        if args.threads is not None:
            threads.set_threads(args.threads)
        check_path_arguments(args)
        return int(args.handler(args) or 0)
    except QsimError as err:
        print(f"qsim: {err.format()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qsim: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous_limit is None:
            os.environ.pop(limits.MAX_TENSOR_BYTES_ENV, None)
        else:
            os.environ[limits.MAX_TENSOR_BYTES_ENV] = previous_limit


if __name__ == "__main__":
    sys.exit(main())
