"""The throughput report of `qsim simulate`: report.json, a SCALE-Sim-style CSV, PNG plots, HTML.

The NPU stage computes a `ThroughputReport` (qsim.npu.throughput: per-layer cycles, traffic and
energy, and their totals); this module only writes it out, atomically, into one folder.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..atomic import atomic_write_text
from ..npu.throughput import ThroughputReport
from .html import Page

# Columns of SCALE-Sim's COMPUTE_REPORT.csv, in its order, for side-by-side use.
SCALESIM_COMPUTE_COLUMNS = ("LayerID", "Total Cycles", "Stall Cycles", "Overall Util %",
                            "Mapping Efficiency %", "Compute Util %")


def scalesim_csv(report: ThroughputReport) -> str:
    """The layers as SCALE-Sim's COMPUTE_REPORT.csv (SCALESIM_COMPUTE_COLUMNS)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SCALESIM_COMPUTE_COLUMNS)
    for i, layer in enumerate(report.layers):
        writer.writerow([i, layer.cycles, layer.stall_cycles,
                         f"{100 * report.utilization(layer):.4f}",
                         f"{100 * layer.mapping_efficiency:.4f}",
                         f"{100 * report.compute_utilization(layer):.4f}"])
    return buf.getvalue()


def _plots(report: ThroughputReport, out: Path) -> dict[str, Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [layer.name for layer in report.layers]
    x = range(len(names))
    width = max(6.0, 0.35 * len(names) + 2)
    paths = {"cycles_plot": out / "cycles.png", "utilization_plot": out / "utilization.png",
             "roofline_plot": out / "roofline.png", "energy_plot": out / "energy.png"}

    fig, ax = plt.subplots(figsize=(width, 4))
    bottom = [0] * len(names)
    for label, attr, color in (("compute", "compute_cycles", "#3b7dd8"),
                               ("fill/drain", "fill_drain_cycles", "#e9a23b"),
                               ("memory stall", "stall_cycles", "#c44")):
        vals = [getattr(layer, attr) for layer in report.layers]
        ax.bar(x, vals, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(x), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("cycles")
    ax.set_title(f"{report.model} on {report.config['rows']}x{report.config['cols']} "
                 f"({report.config.get('dataflow', '?')}): cycles per layer")
    ax.legend()
    fig.tight_layout()
    fig.savefig(paths["cycles_plot"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(width, 3.5))
    ax.bar(x, [100 * report.utilization(layer) for layer in report.layers], color="#3b7dd8")
    ax.set_xticks(list(x), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("PE utilization (%)")
    ax.set_ylim(0, 100)
    ax.set_title("PE utilization per layer (array layers)")
    fig.tight_layout()
    fig.savefig(paths["utilization_plot"], dpi=110)
    plt.close(fig)

    clock_hz = float(report.config["clock_mhz"]) * 1e6
    peak_gops = 2.0 * report.pes * clock_hz / 1e9
    bw_gbs = float(report.config["dram_bytes_per_cycle"]) * clock_hz / 1e9
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    pts = [(2.0 * l.macs / l.dram_bytes, 2.0 * l.macs / (l.cycles / clock_hz) / 1e9, l.name)
           for l in report.layers if l.macs and l.dram_bytes and l.cycles]
    if pts:
        lo = min(p[0] for p in pts) / 4
        hi = max(max(p[0] for p in pts) * 4, 4 * peak_gops / bw_gbs)
    else:
        lo, hi = 0.1, 1000.0
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak_gops, bw_gbs * v) for v in xs], color="#222", label="roof")
    for ai, gops, name in pts:
        ax.scatter(ai, gops, s=14, color="#3b7dd8")
        ax.annotate(name, (ai, gops), fontsize=6, alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (ops / DRAM byte)")
    ax.set_ylabel("GOPS")
    ax.set_title(f"roofline: peak {peak_gops:.1f} GOPS, DRAM {bw_gbs:.1f} GB/s")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(paths["roofline_plot"], dpi=110)
    plt.close(fig)
    _energy_plot(report, paths["energy_plot"], plt)
    return paths


# One colour per qsim.npu.energy.COMPONENTS entry (other names fall back to grey).
COMPONENT_COLORS = {"mac": "#3b7dd8", "input_buffer": "#6fb36f", "weight_buffer": "#2e7d32",
                     "param_buffer": "#9c27b0", "accumulator_buffer": "#e9a23b",
                     "output_buffer": "#f4d03f", "dram": "#c44", "vector": "#555"}


def _energy_plot(report: ThroughputReport, path: Path, plt) -> None:
    """Left: energy per layer, stacked by component; right: the run's total by component."""
    names = [layer.name for layer in report.layers]
    x = range(len(names))
    totals = report.energy_by_component_pj
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(8.0, 0.35 * len(names) + 6), 4.5),
                                      gridspec_kw={"width_ratios": [3, 1]})
    bottom = [0.0] * len(names)
    base = 0.0
    for component, total in totals.items():
        color = COMPONENT_COLORS.get(component, "#999")
        vals = [layer.energy_by_component_pj.get(component, 0.0) / 1e3 for layer in report.layers]
        left.bar(x, vals, bottom=bottom, label=component, color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
        right.bar([0], [total / 1e3], bottom=[base], color=color)
        base += total / 1e3
    left.set_xticks(list(x), names, rotation=60, ha="right", fontsize=7)
    left.set_ylabel("energy (nJ)")
    tech = report.tech.get("name", "?")
    left.set_title(f"energy per layer ({tech})")
    if totals:
        left.legend(fontsize=7)
    right.set_xticks([0], ["total"])
    right.set_title(f"total {report.total_energy_pj / 1e3:,.0f} nJ", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_throughput_report(report: ThroughputReport, out_dir: str | Path) -> dict[str, Path]:
    """Writes report.json, compute_report.csv, cycles/utilization/roofline PNGs, report.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "csv": out / "compute_report.csv",
             "html": out / "report.html"}
    atomic_write_text(paths["json"], json.dumps(report.to_json(), indent=2) + "\n")
    atomic_write_text(paths["csv"], scalesim_csv(report))
    paths.update(_plots(report, out))

    page = Page(f"qsim throughput report: {report.model}")
    cfg = report.config
    page.table(["measure", "value"], [
        ["engine", report.engine],
        ["array", f"{cfg['rows']} x {cfg['cols']} ({cfg.get('dataflow', '?')})"],
        ["clock", f"{cfg['clock_mhz']} MHz"],
        ["total cycles", report.total_cycles],
        ["latency", f"{report.latency_s * 1e3:.4g} ms"],
        ["inferences/s", f"{report.inferences_per_s:.4g}"],
        ["GOPS", f"{report.gops:.4g}"],
        ["energy table", f"{report.tech.get('name', '?')}: {report.tech.get('description', '')}"],
        ["energy per inference", f"{report.total_energy_pj / 1e3:.4g} nJ"],
        ["all layers verified", "yes" if report.to_json()["all_verified"] else "NO"],
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
    for key, alt in (("cycles_plot", "cycles per layer"), ("utilization_plot", "utilization"),
                     ("roofline_plot", "roofline"), ("energy_plot", "energy per layer and component")):
        page.image(paths[key].name, alt)
    atomic_write_text(paths["html"], page.render())
    return paths
