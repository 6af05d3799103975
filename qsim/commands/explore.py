"""`qsim explore`: a float model, its calibration and evaluation data and a design space
(NPU configuration keys of `qsim simulate --sweep` and precisions) -> every point's accuracy,
latency, throughput, energy and area, the Pareto front, and the report folder (report.html,
report.json, points.csv, plots). Each precision is quantized once (here, the bit-exact integer
model scored on the evaluation data); the points run as tasks on the simulate command's pool
(qsim.explore.driver)."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from .. import zoo
from ..atomic import atomic_directory
from ..errors import UsageError
from ..explore.driver import Exploration, Variant, explore
from ..explore.space import load_space, plan_target_db
from ..npu.config import load_config
from ..cluster.distributed import open_pool
from ..npu.energy import load_tech
from ..npu.simulate import resolve_engine
from ..outpath import EXPLORE_REPORT, check_output
from ..progress import Progress
from ..quant.calibration.data import Samples
from ..quant.options import QuantizeOptions
from ..quant.params import Precision
from ..quant.pipeline import load_float_model, make_target, model_name_of, quantize_graph
from ..quant.precision_plan.scoring import AccuracyTarget
from ..quant.qmodel import integer_inputs
from ..quant.target import TargetKind
from ..report.explore import render
from ..report.precision_plan import plan_json
from .arguments import add_pool_arguments, pool_scheduler, whole_number
from .precision_search import PlanRequest, choose_plan
from .quantize import model_samples
from .quantized_model import read_inputs

NAME = "explore"
HELP = "explore a design space of NPU configurations and precisions: accuracy, latency, energy, area, Pareto front"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="float model (NNEF/ONNX; default: the embedded Fashion-MNIST CNN)")
    p.add_argument("--calib", metavar="DATA", help="calibration inputs (.npy/.npz/image folder; "
                   "default for the embedded model: its calibration images)")
    p.add_argument("--eval", metavar="DATA", help="evaluation inputs with labels for accuracy "
                   "(default for the embedded model: its 1000 embedded test images; else the "
                   "calibration data)")
    p.add_argument("--eval-limit", type=whole_number(1), metavar="N", help="score at most N samples")
    p.add_argument("--space", nargs="+", metavar="KEY=V1,V2",
                   help="the space: precision=int8,16x8,sqnr:DB and the keys of `qsim simulate "
                        "--sweep` (size, rows, cols, dataflow, *_buffer_bytes, dram_bytes_per_cycle, "
                        "clock_mhz)")
    p.add_argument("--space-file", metavar="SPACE.toml",
                   help="the space as a TOML [space] table of lists (--space terms override its keys)")
    p.add_argument("--config", default="16x16", metavar="CFG",
                   help="base NPU configuration the space varies (TOML file or preset; default 16x16)")
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="the input every point simulates (default: the first evaluation sample)")
    p.add_argument("--engine", default="model", metavar="ENGINE",
                   help="engine of the search: model (default, numpy cycle model), verilator, amaranth")
    p.add_argument("--verify-engine", default="verilator", metavar="ENGINE",
                   help="engine every Pareto point is rerun on and compared with (default verilator)")
    p.add_argument("--no-verify-pareto", action="store_true", help="do not rerun the Pareto points")
    p.add_argument("--area", action="store_true",
                   help="synthesize every geometry for its area (qsim.npu.area; minutes per geometry)")
    p.add_argument("--tech", metavar="NAME|FILE", help="energy and area table: 45nm (default), 7nm, or a TOML file")
    add_pool_arguments(p, "the points' layers")
    p.add_argument("-o", "--out", metavar="OUT", help="report folder (default qsim-out/<model>-explore/)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _data(model: str | None, calib: str | None, evaluation: str | None, eval_limit: int | None):
    """(float graph, name, calibration samples, evaluation samples): those of `qsim quantize`
    (the embedded model: its calibration images and its 1000 embedded test images); without
    --eval, the calibration data is scored."""
    path = zoo.default_model().path if model is None else Path(model)
    graph = load_float_model(path)
    calib_samples, eval_samples, _ = model_samples(graph, model, calib, evaluation, subset_only=True)
    eval_samples = eval_samples if eval_samples is not None else calib_samples
    if eval_samples is not None and eval_limit is not None and eval_limit < len(eval_samples):
        eval_samples = replace(eval_samples, inputs=eval_samples.inputs[:eval_limit],
                               labels=None if eval_samples.labels is None else eval_samples.labels[:eval_limit])
    return graph, model_name_of(path), calib_samples, eval_samples


def quantize_variant(graph, name: str, calib: Samples, evaluation: Samples, precision: str,
                     config_spec: str, input_specs: list[str] | None, quiet: bool) -> Variant:
    """One precision: quantized once, scored on `evaluation` by the integer kernels."""
    options = QuantizeOptions(show_progress=not quiet)
    detail = {}
    db = plan_target_db(precision)
    if db is None:
        options = replace(options, precision=Precision(precision))
    else:
        request = PlanRequest(AccuracyTarget(db, None), config_spec, "cycles", None)
        options, section = choose_plan(graph, calib, evaluation, options, request, name)
        detail["plan"] = plan_json(section.choice)
    result = quantize_graph(graph, calib, evaluation, options, make_target(TargetKind.TOSA, options), name)
    report = result.report
    accuracy, kind = ((report.int8_top1, "integer top-1 against the labels") if report.int8_top1 is not None
                      else (report.top1_agreement, "integer top-1 agreement with the float model"))
    detail["output_sqnr_db"] = {o.name: o.sqnr_db for o in report.outputs}
    detail["eval_samples"] = report.eval_samples
    model = result.model
    if input_specs or evaluation is None:
        feeds, _ = read_inputs(model, input_specs)     # none: the embedded test image (or a clear error)
    else:
        feeds = integer_inputs(model, {model.graph.inputs[0]: evaluation.inputs[:1]})
    return Variant(precision, model, feeds, accuracy, kind, detail)


def explore_command(model: str | None, terms: list[str] | None, space_file: str | None = None,
                    config_spec: str = "16x16", calib: str | None = None, evaluation: str | None = None,
                    eval_limit: int | None = None, input_specs: list[str] | None = None,
                    engine: str = "model", verify_engine: str | None = "verilator", area: bool = False,
                    tech: str | None = None, workers: int | None = 1, scheduler: str | None = None,
                    out: str | None = None, quiet: bool = True) -> tuple[Path, Exploration]:
    """The whole `qsim explore` job; the report folder appears complete or not at all."""
    search = resolve_engine(engine, None)
    check = resolve_engine(verify_engine, None) if verify_engine else None
    space = load_space(space_file, terms, load_config(config_spec))
    table = load_tech(tech)
    graph, name, calib_samples, eval_samples = _data(model, calib, evaluation, eval_limit)
    target = Path(out) if out is not None else Path("qsim-out") / f"{name}-explore"
    check_output(out if out is not None else target, "-o", [("model", model), ("space", space_file)],
                 replaces=EXPLORE_REPORT, default=out is None)
    variants = [quantize_variant(graph, name, calib_samples, eval_samples, p, config_spec, input_specs, quiet)
                for p in space.precisions]
    with open_pool(workers, scheduler) as pool:
        bar = Progress(f"explore {len(space.points)} points ({search.value}, {pool.what}) tasks", None,
                       enabled=not quiet)
        try:
            result = explore(name, variants, list(space.configs), search, check, pool, table, area, tech, bar)
        finally:
            bar.close()
    doc = {"model": name, "engine": result.engine, "verify_engine": result.verify_engine,
           "accuracy_kind": variants[0].accuracy_kind, "objectives": [list(o) for o in result.objectives],
           "notes": result.notes + [f"accuracy per precision, the same on every configuration (the NPU is "
                                    f"bit-exact with the integer kernels it was scored on)"],
           "precisions": {v.precision: dict(v.detail, accuracy=v.accuracy) for v in variants},
           "points": result.points, "tech": table.name}
    with atomic_directory(target, command=EXPLORE_REPORT.command) as tmp:
        for file, data in render(doc).items():
            (tmp / file).write_bytes(data)
    return target, result


def point_line(p: dict) -> str:
    """One point of the command's summary; '*' marks the Pareto points."""
    accuracy = "n/a" if p["accuracy"] is None else f"{100 * p['accuracy']:.2f} %"
    area = "n/a" if p["area_mm2"] is None else f"{p['area_mm2']:.3f} mm2"
    rtl = p["rtl"]
    check = "" if rtl is None else f"  {rtl['engine']} {'equal' if rtl['agree'] else 'DIFFERENT'}"
    return (f"{p['name']:<28} {'*' if p['pareto'] else ' '} acc {accuracy:>8}  {p['total_cycles']:>9} cycles  "
            f"{p['latency_ms']:.4f} ms  {p['energy_per_inference_pj'] / 1e3:>9.2f} nJ  {area}{check}")


def run(args: argparse.Namespace) -> int:
    if not args.space and not args.space_file:
        raise UsageError("no design space: pass --space KEY=V1,V2 ... or --space-file SPACE.toml",
                         hint="e.g. qsim explore --space size=8,16 dataflow=ws,os precision=int8,16x8")
    scheduler = pool_scheduler(args)
    target, result = explore_command(
        args.model, args.space, args.space_file, args.config, args.calib, args.eval, args.eval_limit,
        args.input, args.engine, None if args.no_verify_pareto else args.verify_engine, args.area,
        args.tech, args.workers, scheduler, args.out, args.quiet)
    for p in result.points:
        print(point_line(p))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{len(result.pareto)} Pareto points of {len(result.points)}; wrote {target}/")
    return 0 if result.agreed else 1
