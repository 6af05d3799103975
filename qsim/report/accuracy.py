"""The accuracy report of `qsim quantize`: report.json, PNG plots and an HTML page.

The quantizer computes an `AccuracyReport` (qsim.quant.accuracy: float vs integer execution on
the same inputs); this module only writes it out, atomically, into one folder.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from ..atomic import atomic_write_text
from ..quant.accuracy import AccuracyReport
from .html import Page


class ReportSection(Protocol):
    """A further part of the report (e.g. report/precision_plan.py's)."""

    def json(self) -> dict: ...

    def render(self, page: Page, out_dir: Path) -> None: ...


# Above this many tensors one bar per tensor makes an image tens of thousands of pixels tall
# (0.28 inch each) that takes longer to draw than the quantization took (seen: ~3,000 tensors of
# an unrolled LSTM) and that nobody can read; such a model gets the compact form instead.
MOST_BARS = 150
# how many of the lowest-SQNR tensors the compact form names
NAMED_LOWEST = 12


def _plot_sqnr(report: AccuracyReport, path: Path) -> None:
    if len(report.tensors) > MOST_BARS:
        _plot_sqnr_compact(report, path)
    else:
        _plot_sqnr_bars(report, path)


def _plot_sqnr_compact(report: AccuracyReport, path: Path) -> None:
    """Every tensor as a point (graph order on x, SQNR on y) in a fixed-size figure; the outputs
    and the NAMED_LOWEST lowest tensors are marked and named. report.json keeps every figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outputs = {o.name for o in report.outputs}
    finite = [t.sqnr_db for t in report.tensors if math.isfinite(t.sqnr_db)]
    cap = (max(finite) + 10.0) if finite else 100.0
    values = np.array([t.sqnr_db if math.isfinite(t.sqnr_db) else cap for t in report.tensors])
    index = np.arange(len(values))
    fig, ax = plt.subplots(figsize=(11, 5))
    colors = ["#c44" if v < 20 else "#e9a23b" if v < 30 else "#3b7dd8" for v in values]
    ax.scatter(index, values, s=6, c=colors, linewidths=0)
    lowest = [int(i) for i in np.argsort(values, kind="stable")[:NAMED_LOWEST]]
    marked = [i for i, t in enumerate(report.tensors) if t.name in outputs]
    for i in lowest + [i for i in marked if i not in lowest]:
        name = report.tensors[i].name + (" (output)" if i in marked else "")
        ax.annotate(f"{name}: {values[i]:.1f} dB", (index[i], values[i]), fontsize=7,
                    xytext=(4, -3 if i in lowest else 4), textcoords="offset points",
                    fontweight="bold" if i in marked else "normal")
    ax.scatter(index[marked], values[marked], s=40, facecolors="none", edgecolors="black")
    ax.set_xlabel(f"tensor, in graph order ({len(values)} tensors; each one's SQNR is in report.json)")
    ax.set_ylabel("SQNR (dB), float vs dequantized integer")
    ax.set_title(f"{report.model}: per-tensor SQNR (outputs circled, the {NAMED_LOWEST} lowest named)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_sqnr_bars(report: AccuracyReport, path: Path) -> None:
    """One named bar per tensor, in graph order (models of up to MOST_BARS tensors)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outputs = {o.name for o in report.outputs}
    names = [f"{t.name} (output)" if t.name in outputs else t.name for t in report.tensors]
    finite = [t.sqnr_db for t in report.tensors if math.isfinite(t.sqnr_db)]
    cap = (max(finite) + 10.0) if finite else 100.0
    values = [t.sqnr_db if math.isfinite(t.sqnr_db) else cap for t in report.tensors]
    height = max(3.0, 0.28 * len(names) + 1.2)
    fig, ax = plt.subplots(figsize=(8, height))
    colors = ["#c44" if v < 20 else "#e9a23b" if v < 30 else "#3b7dd8" for v in values]
    bars = ax.barh(range(len(names)), values, color=colors)
    for bar, t in zip(bars, report.tensors):
        if not math.isfinite(t.sqnr_db):      # no error at all: drawn at the cap, labelled
            bar.set_hatch("//")
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " exact",
                    va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for label, t in zip(ax.get_yticklabels(), report.tensors):
        if t.name in outputs:
            label.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlabel("SQNR (dB), float vs dequantized integer; higher is better")
    ax.set_title(f"{report.model}: per-tensor SQNR")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_histograms(report: AccuracyReport, path: Path, most: int = 12) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_hist = [t for t in report.tensors if t.error_counts]
    outputs = {o.name for o in report.outputs}
    # the scored outputs first (what a user reads), then the lowest-SQNR tensors
    worst = ([t for t in with_hist if t.name in outputs]
             + sorted((t for t in with_hist if t.name not in outputs), key=lambda t: t.sqnr_db))[:most]
    cols = 3
    rows = max(1, math.ceil(len(worst) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.6 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for ax, t in zip(axes.flat, worst):
        ax.set_visible(True)
        edges = np.asarray(t.error_edges)
        ax.stairs(np.asarray(t.error_counts), edges, fill=True, color="#3b7dd8")
        ax.set_title(f"{t.name} ({t.sqnr_db:.1f} dB)", fontsize=8)
        ax.set_xlabel("error (LSB)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{report.model}: error histograms of the scored outputs and the lowest-SQNR tensors")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100.0 * x:.2f} %"


def write_accuracy_report(report: AccuracyReport, out_dir: str | Path,
                          sections: Sequence[ReportSection] = ()) -> dict[str, Path]:
    """Writes report.json, sqnr.png, errors.png and report.html into `out_dir`; each of
    `sections` adds its report.json entries and its part of the page (after the accuracy)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "sqnr_plot": out / "sqnr.png",
             "error_plot": out / "errors.png", "html": out / "report.html"}
    data = report.to_json()
    for section in sections:
        data.update(section.json())
    atomic_write_text(paths["json"], json.dumps(data, indent=2) + "\n")
    _plot_sqnr(report, paths["sqnr_plot"])
    _plot_histograms(report, paths["error_plot"])

    page = Page(f"qsim accuracy report: {report.model}")
    primary = report.primary_output
    of = f" ('{primary}')" if primary is not None and len(report.outputs) > 1 else ""
    page.table(["measure", "value"], [
        ["evaluation samples", report.eval_samples],
        [f"float top-1{of}", _pct(report.float_top1)],
        [f"integer top-1{of}", _pct(report.int8_top1)],
        [f"top-1 agreement (float vs integer){of}", _pct(report.top1_agreement)],
    ] + [[k, v] for k, v in sorted(report.settings.items())])
    for warning in report.warnings:
        page.paragraph("Warning: " + warning, css="bad")
    for note in report.notes:
        page.paragraph(note, css="note")
    if report.outputs:
        page.heading("Per-output accuracy")
        page.table(["output", "per sample", "scored as", "SQNR (dB)", "max error (LSB)", "within 1 LSB",
                    "top-1 agreement", "float top-1", "integer top-1"],
                   [[o.name, "x".join(map(str, o.sample_shape)) or "scalar",
                     f"class vector ({o.reason})" if o.top1_agreement is not None else f"values ({o.reason})",
                     "exact" if not math.isfinite(o.sqnr_db) else round(o.sqnr_db, 2),
                     round(o.max_error_lsb, 2), _pct(o.within_one_lsb), _pct(o.top1_agreement),
                     _pct(o.float_top1), _pct(o.int8_top1)] for o in report.outputs])
    page.heading("Per-tensor SQNR").image(paths["sqnr_plot"].name, "per-tensor SQNR")
    page.table(["tensor", "op", "SQNR (dB)"],
               [[t.name, t.op, "exact" if not math.isfinite(t.sqnr_db) else round(t.sqnr_db, 2)]
                for t in report.tensors])
    page.heading("Error histograms").image(paths["error_plot"].name, "error histograms")
    for section in sections:
        section.render(page, out)
    atomic_write_text(paths["html"], page.render())
    return paths
