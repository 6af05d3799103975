"""The throughput report of `qsim simulate`: report.json, a SCALE-Sim-style CSV, PNG plots, HTML.

The NPU stage returns a run (qsim.npu.program.GraphRun); `throughput_report` turns it into
per-layer `LayerThroughput`s with their energy (qsim.npu.energy), this module derives the
totals that follow from them by definition (sums, latency at the clock, GOPS, energy per
inference) and writes the files.
"""
from __future__ import annotations

import csv
import functools
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import atomic_file
from ..npu.energy import EnergyTable, energy_by_component, load_tech
from ..npu.cores.summary import CORE_NOTE_PREFIX, core_note
from ..npu.program import GraphRun
from .forked import render_all
from .html import Page
from .layer_plots import FIGURES, plot_png
from .provenance import energy_sentence, engine_sentences, host_arithmetic, host_arithmetic_warning

# Columns of SCALE-Sim's COMPUTE_REPORT.csv, in its order, for side-by-side use.
SCALESIM_COMPUTE_COLUMNS = ("LayerID", "Total Cycles", "Stall Cycles", "Overall Util %",
                            "Mapping Efficiency %", "Compute Util %")


@dataclass(frozen=True)
class LayerThroughput:
    """One layer on the NPU. `unit`: "array" (systolic array), "vector" (vector unit) or "host"."""
    name: str
    op: str
    unit: str
    macs: int
    compute_cycles: int
    fill_drain_cycles: int
    stall_cycles: int
    mapping_efficiency: float          # fraction of PEs holding useful work while computing
    dram_input_bytes: int
    dram_weight_bytes: int
    dram_output_bytes: int
    verified: bool | None = None       # None: not compared (e.g. host op)
    rtl: bool = False                  # values and cycles came from an RTL engine
    energy_by_component_pj: dict[str, float] = field(default_factory=dict)   # qsim.npu.energy
    events: dict[str, int] = field(default_factory=dict)                     # counts behind it
    mapping: str = ""                  # array layers: the loop order/tile of each GEMM (qsim/npu/mapping)

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.fill_drain_cycles + self.stall_cycles

    @property
    def dram_bytes(self) -> int:
        return self.dram_input_bytes + self.dram_weight_bytes + self.dram_output_bytes

    @property
    def energy_pj(self) -> float:
        return sum(self.energy_by_component_pj.values())


@dataclass(frozen=True)
class ThroughputReport:
    model: str
    engine: str
    config: dict[str, Any]             # at least rows, cols, dataflow, clock_mhz, dram_bytes_per_cycle
    layers: tuple[LayerThroughput, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    tech: dict[str, Any] = field(default_factory=dict)   # the energy table used (name, figures)

    @property
    def pes(self) -> int:
        return int(self.config["rows"]) * int(self.config["cols"]) * int(self.config.get("cores", 1))

    @property
    def total_cycles(self) -> int:
        return sum(layer.cycles for layer in self.layers)

    @property
    def total_macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def latency_s(self) -> float:
        return self.total_cycles / (float(self.config["clock_mhz"]) * 1e6)

    @property
    def inferences_per_s(self) -> float:
        return 1.0 / self.latency_s if self.total_cycles else float("inf")

    @property
    def gops(self) -> float:
        """Achieved giga-operations per second (one MAC = 2 operations)."""
        return 2.0 * self.total_macs / self.latency_s / 1e9 if self.total_cycles else 0.0

    @property
    def total_energy_pj(self) -> float:
        return sum(layer.energy_pj for layer in self.layers)

    @property
    def host_warning(self) -> str:
        """'' or the clause saying which arithmetic ran on the host, uncounted (every summary has it)."""
        return host_arithmetic_warning(self.layers)

    def total_line(self) -> str:
        """The summary line: the console's, report.json's `summary`, report.html's first paragraph."""
        cfg = self.config
        line = (f"total: {self.total_cycles} cycles, {self.total_macs} MACs on {cfg['rows']}x"
                f"{cfg['cols']} {cfg['dataflow']} at {cfg['clock_mhz']:g} MHz: latency "
                f"{self.latency_s * 1e6:.2f} us, {self.inferences_per_s:.0f} inferences/s, "
                f"{self.gops:.2f} GOPS; engine {self.engine}")
        return line + (f"; WARNING: {self.host_warning}" if self.host_warning else "")

    @property
    def energy_by_component_pj(self) -> dict[str, float]:
        """Whole-run energy per component, components in the layers' order."""
        total: dict[str, float] = {}
        for layer in self.layers:
            for key, value in layer.energy_by_component_pj.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def utilization(self, layer: LayerThroughput) -> float:
        """MACs done over MAC slots available during the layer (all its cycles)."""
        return layer.macs / (self.pes * layer.cycles) if layer.cycles and layer.unit == "array" else 0.0

    def compute_utilization(self, layer: LayerThroughput) -> float:
        busy = layer.cycles - layer.stall_cycles
        return layer.macs / (self.pes * busy) if busy and layer.unit == "array" else 0.0

    def to_json(self) -> dict[str, Any]:
        layers = []
        for layer in self.layers:
            row = asdict(layer)
            row.update(cycles=layer.cycles, utilization=self.utilization(layer),
                       dram_bytes=layer.dram_bytes, energy_pj=layer.energy_pj)
            layers.append(row)
        return {"model": self.model, "engine": self.engine, "config": self.config,
                "layers": layers, "total_cycles": self.total_cycles, "total_macs": self.total_macs,
                "latency_ms": self.latency_s * 1e3, "inferences_per_s": self.inferences_per_s,
                "gops": self.gops, "all_verified": all(l.verified is not False for l in self.layers),
                # one run of the model on one input is one inference (as latency_ms counts it)
                "total_energy_pj": self.total_energy_pj, "energy_per_inference_pj": self.total_energy_pj,
                "energy_by_component_pj": self.energy_by_component_pj, "tech": self.tech,
                "summary": self.total_line(),
                "host_arithmetic_layers": [layer.name for layer in host_arithmetic(self.layers)],
                "notes": list(self.notes)}

    def scalesim_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(SCALESIM_COMPUTE_COLUMNS)
        for i, layer in enumerate(self.layers):
            writer.writerow([i, layer.cycles, layer.stall_cycles,
                             f"{100 * self.utilization(layer):.4f}",
                             f"{100 * layer.mapping_efficiency:.4f}",
                             f"{100 * self.compute_utilization(layer):.4f}"])
        return buf.getvalue()


def dram_label(timing) -> str:
    """The memory a report's cycles assume: 'ideal', a profile name, or the explicit timing."""
    if timing is None:
        return "ideal"
    return timing.profile or (f"tRCD {timing.trcd}, tRP {timing.trp}, tCL {timing.tcl} cycles, "
                              f"{timing.banks} banks of {timing.row_bytes} B rows")


def throughput_report(model_name: str, run: GraphRun, tech: EnergyTable | None = None) -> ThroughputReport:
    config = run.config
    tech = load_tech(None) if tech is None else tech
    layers = []
    for s in run.stages:
        layers.append(LayerThroughput(
            name=s.stage.name, op=s.stage.op_text, unit=s.stage.unit.value, macs=s.macs,
            compute_cycles=s.compute_cycles, fill_drain_cycles=s.fill_drain_cycles,
            stall_cycles=s.stall_cycles,
            mapping_efficiency=s.macs / s.mac_slots if s.mac_slots else 0.0,
            dram_input_bytes=s.dram_input_bytes, dram_weight_bytes=s.dram_weight_bytes,
            dram_output_bytes=s.dram_output_bytes, verified=s.verified, rtl=s.rtl,
            energy_by_component_pj=energy_by_component(s.events, tech, config.geometry),
            events=s.events.to_json(),
            mapping=", ".join(sorted(set(s.layer.mappings))) if s.layer is not None else ""))
    notes = [f"{s.stage.name}: {s.stage.note}" for s in run.stages if s.stage.note]
    notes += engine_sentences(layers, run.engine.value)
    notes += [s.mismatch for s in run.stages if s.mismatch]
    cfg = {"name": config.name, "rows": config.rows, "cols": config.cols,
           "dataflow": config.dataflow.value, "input_buffer_bytes": config.input_buffer_bytes,
           "weight_buffer_bytes": config.weight_buffer_bytes,
           "accumulator_buffer_bytes": config.accumulator_buffer_bytes,
           "dram_bytes_per_cycle": config.dram_bytes_per_cycle, "clock_mhz": config.clock_mhz,
           "dram": dram_label(config.dram), "cores": config.cores, "mapping": config.mapping.text}
    if core_note(run):
        notes.append(core_note(run))
    notes.append(energy_sentence(layers, tech.name, tech.source))
    return ThroughputReport(model=model_name, engine=run.engine.value, config=cfg,
                            layers=tuple(layers), notes=tuple(notes), tech=tech.to_json())



def summary_lines(report: ThroughputReport) -> list[str]:
    """The console table: one line per layer, then the totals."""
    head = (f"{'layer':<22} {'op':<28} {'unit':<6} {'MACs':>9} {'cycles':>8} {'compute':>8} "
            f"{'fill/dr':>8} {'stall':>7} {'util%':>6} {'DRAM B':>8} {'nJ':>8}  verified")
    lines = [head, "-" * len(head)]
    for layer in report.layers:
        verified = {True: "yes", False: "MISMATCH", None: "-"}[layer.verified]
        lines.append(f"{layer.name[:22]:<22} {layer.op[:28]:<28} {layer.unit:<6} {layer.macs:>9} "
                     f"{layer.cycles:>8} {layer.compute_cycles:>8} {layer.fill_drain_cycles:>8} "
                     f"{layer.stall_cycles:>7} {100 * report.utilization(layer):>6.1f} "
                     f"{layer.dram_bytes:>8} {layer.energy_pj / 1e3:>8.2f}  {verified}")
    lines.append("-" * len(head))
    lines.append(report.total_line())
    lines += [note for note in report.notes if note.startswith(CORE_NOTE_PREFIX)]    # several cores
    parts = ", ".join(f"{name} {pj / 1e3:.1f}" for name, pj in report.energy_by_component_pj.items() if pj)
    lines.append(f"energy ({report.tech.get('name', '?')}): {report.total_energy_pj / 1e3:.2f} nJ per "
                 f"inference ({parts} nJ)")
    return lines



# The report's PNG plots (qsim.report.layer_plots), in the HTML's order.
PLOTS = {name: alt for name, (_, alt) in FIGURES.items()}
DOCUMENTS = "documents"         # the part holding report.json, compute_report.csv, report.html
PARTS = (DOCUMENTS, *PLOTS)     # render_part's parts: independent, so each can be a task


def _html(report: ThroughputReport) -> str:
    page = Page(f"qsim throughput report: {report.model}")
    page.paragraph(report.total_line(), css="note")
    cfg = report.config
    page.table(["measure", "value"], [
        ["engine", report.engine],
        ["array", f"{cfg['rows']} x {cfg['cols']} ({cfg.get('dataflow', '?')})"],
        ["clock", f"{cfg['clock_mhz']} MHz"],
        ["DRAM timing", cfg.get("dram", "ideal")],
        ["total cycles", report.total_cycles],
        ["latency", f"{report.latency_s * 1e3:.4g} ms"],
        ["inferences/s", f"{report.inferences_per_s:.4g}"],
        ["GOPS", f"{report.gops:.4g}"],
        ["energy table", f"{report.tech.get('name', '?')}: {report.tech.get('description', '')}"],
        ["energy per inference", f"{report.total_energy_pj / 1e3:.4g} nJ"],
        ["all layers verified", "yes" if report.to_json()["all_verified"] else "NO"],
        ["arithmetic on the host", report.host_warning or "none"],
    ])
    for note in report.notes:
        page.paragraph(note, css="note")
    page.heading("Layers").table(
        ["layer", "op", "unit", "RTL", "MACs", "cycles", "compute", "fill/drain", "stall", "util %",
         "DRAM bytes", "energy nJ", "verified"],
        [[l.name, l.op, l.unit, "yes" if l.rtl else "no", l.macs, l.cycles, l.compute_cycles,
          l.fill_drain_cycles, l.stall_cycles, round(100 * report.utilization(l), 2), l.dram_bytes,
          l.energy_pj / 1e3, {True: "yes", False: "MISMATCH", None: "-"}[l.verified]]
         for l in report.layers])
    total = report.total_energy_pj
    page.heading("Energy by component").table(
        ["component", "nJ", "share %"],
        [[name, pj / 1e3, 100 * pj / total if total else 0.0]
         for name, pj in report.energy_by_component_pj.items()])
    for file, alt in PLOTS.items():
        page.image(file, alt)
    return page.render()


def render_part(report: ThroughputReport, part: str) -> dict[str, bytes]:
    """One part of the report's files, file name -> bytes: DOCUMENTS (JSON, CSV, HTML) or one
    plot. A sweep renders every part of every point as a task, so the plotting (the largest
    per-point cost after the layers of a small model) spreads evenly over the workers."""
    if part == DOCUMENTS:
        return {"report.json": (json.dumps(report.to_json(), indent=2) + "\n").encode(),
                "compute_report.csv": report.scalesim_csv().encode(),
                "report.html": _html(report).encode()}
    return {part: plot_png(report, part)}


def write_throughput_report(report: ThroughputReport, out_dir: str | Path) -> dict[str, Path]:
    """Writes report.json, compute_report.csv, report.html and the PNG plots into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    # the parts in two processes when this one may fork (qsim.report.forked): the plots are a
    # fixed cost that a fast simulation of a deep network would otherwise wait for in turn
    for name, data in render_all(PARTS, functools.partial(render_part, report)).items():
        paths[name] = out / name
        with atomic_file(paths[name]) as tmp:
            tmp.write_bytes(data)
    return paths
