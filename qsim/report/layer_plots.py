"""The PNG plots of a throughput report (qsim.report.throughput): cycles, PE utilization and
energy per layer, and the roofline.

Bounded for deep networks: a per-layer plot shows at most MAX_BARS bars. With more layers it
shows the MAX_BARS - 1 layers that cost the most (in network order, so the profile still reads
left to right) and one last bar, "other N layers", holding the sum of the rest: every cycle
and picojoule of the run is in the plot, and its title says what was kept. The figures keep a
bounded width (at most ~1.8 k px), and drawing them costs about the same for 50 or 5,000
layers (measured in reports/plot_scale.md: before, a 70-layer RegNet's plots took ~70 s and
the cycles plot was 34,000 px wide). The roofline draws every layer as one scatter (one
artist, not one per point) and names only the costliest.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable, Sequence

MAX_BARS = 40                   # per-layer bars in one plot, "other" included
ROOFLINE_NAMES = 12             # layers named on the roofline (the costliest by cycles)
LABEL_CHARS = 24                # layer names are cut to this on the axes
DPI = 100
HEADROOM = 1.3                  # y axis top / tallest stacked bar: room for a legend in rows

# One colour per qsim.npu.energy.COMPONENTS entry (other names fall back to grey).
COMPONENT_COLORS = {"mac": "#3b7dd8", "input_buffer": "#6fb36f", "weight_buffer": "#2e7d32",
                    "param_buffer": "#9c27b0", "accumulator_buffer": "#e9a23b",
                    "output_buffer": "#f4d03f", "dram": "#c44", "vector": "#555"}
CYCLE_KINDS = (("compute", "compute_cycles", "#3b7dd8"), ("fill/drain", "fill_drain_cycles", "#e9a23b"),
               ("memory stall", "stall_cycles", "#c44"))


@dataclass(frozen=True)
class Bar:
    """One bar of a per-layer plot: a layer, or the sum of several ("other")."""
    label: str
    layers: tuple           # the report's LayerThroughput records it stands for


def layer_bars(layers: Sequence, cost: Callable[[object], float], limit: int = MAX_BARS) -> list[Bar]:
    """`layers` as at most `limit` bars: all of them when they fit, else the limit - 1 with the
    largest `cost` in their order (ties: the earlier layer) and one bar for the others."""
    if len(layers) <= limit:
        return [Bar(_label(layer.name), (layer,)) for layer in layers]
    ranked = sorted(range(len(layers)), key=lambda i: (-cost(layers[i]), i))
    kept = set(ranked[:limit - 1])
    bars = [Bar(_label(layers[i].name), (layers[i],)) for i in sorted(kept)]
    rest = tuple(layer for i, layer in enumerate(layers) if i not in kept)
    return bars + [Bar(f"other {len(rest)} layers", rest)]


def kept_text(bars: list[Bar], total: int, by: str, rest: str = "summed") -> str:
    """What a plot of `bars` shows, for its title: '' when it shows every layer."""
    if len(bars) == total:
        return ""
    return f" ({len(bars) - 1} of {total} layers, the largest by {by}; the rest {rest})"


def _label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 3] + "..."


def _pyplot():
    import matplotlib                   # deferred: matplotlib takes ~1 s to import
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt     # deferred: as above
    return plt


def png(fig) -> bytes:
    buffer = io.BytesIO()
    # zlib level 1: a fifth less encoding time than the default 6, for files ~10 % larger
    fig.savefig(buffer, format="png", dpi=DPI, pil_kwargs={"compress_level": 1})
    _pyplot().close(fig)
    return buffer.getvalue()


def _fit(fig, bottom: float = 1.5, left: float = 0.85, top: float = 0.5, right: float = 0.4,
         gap: float = 0.75) -> None:
    """Fixed margins in inches (room for layer names cut to LABEL_CHARS, rotated 60 degrees, and
    for the title): matplotlib's tight_layout measures every label by drawing the figure
    once more, which was a third of a plot's time."""
    width, height = fig.get_size_inches()
    columns = max(1, len(fig.axes))
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap * columns / (width - left - right))


def _width(bars: int, extra: float = 0.0) -> float:
    """Inches: 0.35 per bar, 6 at least; MAX_BARS bars make ~16 in (~1.8 k px at DPI)."""
    return max(6.0, 0.35 * bars + 2) + extra


def _bar_axis(ax, bars: list[Bar]) -> range:
    """The x axis of `bars`: one label per bar, rotated, under it. Drawn as plain texts, not
    ticks: a matplotlib tick is two lines and two texts, and 40 of them per axis were a fifth
    of a plot's time."""
    x = range(len(bars))
    ax.set_xticks([])
    ax.set_xlim(-0.6, len(bars) - 0.4)
    under = ax.get_xaxis_transform()        # x in data, y in axis fractions
    for i, bar in zip(x, bars):
        ax.text(i, -0.02, bar.label, transform=under, rotation=60, rotation_mode="anchor",
                ha="right", va="center", fontsize=7)
    return x


def _legend(ax, columns: int) -> None:
    """The series' legend in rows across the top of `ax`, over the headroom _stacked leaves
    (not loc="best": matplotlib times that search and warns when it is slow)."""
    ax.legend(loc="upper left", ncol=columns, fontsize=7, framealpha=0.9)


def draw_bars(ax, x, heights, bottoms, color: str, label: str | None = None) -> None:
    """Bars of width 0.8 at `x` from `bottoms` up by `heights`, as one collection (one artist
    per series, not one rectangle each: the rectangles were another fifth of a plot's time)."""
    from matplotlib.collections import PolyCollection     # deferred: matplotlib is slow to import
    boxes = [[(i - 0.4, b), (i + 0.4, b), (i + 0.4, b + h), (i - 0.4, b + h)]
             for i, h, b in zip(x, heights, bottoms)]
    ax.add_collection(PolyCollection(boxes, facecolors=color, edgecolors="none", label=label))


def _stacked(ax, bars: list[Bar], parts: list[tuple[str, Callable, str]]) -> None:
    """Stacked bars: for each (label, value of a layer, colour) of `parts`, the sum over each
    bar's layers."""
    bottom = [0.0] * len(bars)
    for label, value, color in parts:
        vals = [sum(value(layer) for layer in b.layers) for b in bars]
        draw_bars(ax, range(len(bars)), vals, bottom, color, label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    # collections do not scale the axis; the room above the tallest bar holds the legend
    ax.set_ylim(0, HEADROOM * max(bottom, default=0) or 1)


def _layer_axes(plt, bars: list[Bar], height: float, extra: list[float] = ()):
    """A figure for per-layer `bars`: the layers' axis, then (when the last bar is "other") an
    axis of its own for it, since the sum of hundreds of layers would flatten the others to
    nothing on a shared scale; then one axis per `extra` width ratio. Returns (fig, layers'
    axis with its bars, the other bar's axis or None, extra axes)."""
    other = bars[-1] if bars and len(bars[-1].layers) > 1 else None
    named = bars[:-1] if other is not None else bars
    ratios = [max(1, len(named))] + ([3] if other is not None else []) + [3 * r for r in extra]
    width = _width(len(bars), 1.2 * len(extra))
    fig, axes = plt.subplots(1, len(ratios), figsize=(width, height), squeeze=False,
                             gridspec_kw={"width_ratios": ratios})
    axes = list(axes[0])
    ax = axes.pop(0)
    _bar_axis(ax, named)
    other_ax = axes.pop(0) if other is not None else None
    if other_ax is not None:
        _bar_axis(other_ax, [other])
        other_ax.set_title("the rest, summed\n(own scale)", fontsize=8)
    return fig, (ax, named), (other_ax, other), axes


def cycles_figure(report):
    """Cycles per layer, stacked compute / fill-drain / memory stall."""
    plt = _pyplot()
    bars = layer_bars(report.layers, lambda layer: layer.cycles)
    fig, (ax, named), (other_ax, other), _ = _layer_axes(plt, bars, 4)
    parts = [(label, lambda layer, attr=attr: getattr(layer, attr), color) for label, attr, color in CYCLE_KINDS]
    _stacked(ax, named, parts)
    if other_ax is not None:
        _stacked(other_ax, [other], parts)
    ax.set_ylabel("cycles")
    ax.set_title(f"{report.model} on {report.config['rows']}x{report.config['cols']} "
                 f"({report.config.get('dataflow', '?')}): cycles per layer"
                 f"{kept_text(bars, len(report.layers), 'cycles')}", fontsize=9)
    _legend(ax, len(CYCLE_KINDS))
    _fit(fig)
    return fig


def utilization_figure(report):
    """PE utilization of the array layers; an "other" bar is the rest's MACs over their PE
    slots (the utilization of those layers taken together)."""
    plt = _pyplot()
    array = [layer for layer in report.layers if layer.unit == "array"]
    bars = layer_bars(array, lambda layer: layer.cycles)
    fig, ax = plt.subplots(figsize=(_width(len(bars)), 3.5))
    x = _bar_axis(ax, bars)
    heights = [100 * group_utilization(report, b.layers) for b in bars]
    draw_bars(ax, x, heights, [0.0] * len(heights), "#3b7dd8")
    ax.set_ylabel("PE utilization (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"PE utilization per layer (array layers){kept_text(bars, len(array), 'cycles', 'together')}",
                 fontsize=9)
    _fit(fig)
    return fig


def group_utilization(report, layers: Sequence) -> float:
    """MACs over MAC slots of `layers` together (report.utilization of one layer)."""
    cycles = sum(layer.cycles for layer in layers)
    return sum(layer.macs for layer in layers) / (report.pes * cycles) if cycles else 0.0


def roofline_figure(report):
    plt = _pyplot()
    clock_hz = float(report.config["clock_mhz"]) * 1e6
    peak_gops = 2.0 * report.pes * clock_hz / 1e9
    bw_gbs = float(report.config["dram_bytes_per_cycle"]) * clock_hz / 1e9
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    shown = [l for l in report.layers if l.macs and l.dram_bytes and l.cycles]
    pts = [(2.0 * l.macs / l.dram_bytes, 2.0 * l.macs / (l.cycles / clock_hz) / 1e9) for l in shown]
    if pts:
        lo = min(p[0] for p in pts) / 4
        hi = max(max(p[0] for p in pts) * 4, 4 * peak_gops / bw_gbs)
    else:
        lo, hi = 0.1, 1000.0
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak_gops, bw_gbs * v) for v in xs], color="#222", label="roof")
    if pts:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#3b7dd8")
    named = sorted(range(len(shown)), key=lambda i: (-shown[i].cycles, i))[:ROOFLINE_NAMES]
    for i in named:
        ax.annotate(_label(shown[i].name), pts[i], fontsize=6, alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # plain numbers on the log axes: matplotlib's default writes 10^k with mathtext, whose
    # parser costs more to build (once per process) than the rest of the plot
    from matplotlib.ticker import LogFormatter     # deferred: as _pyplot
    for axis in (ax.xaxis, ax.yaxis):
        # LogFormatter writes plain text and, like the default, labels some minor ticks when
        # the axis spans under a decade or two
        axis.set_major_formatter(LogFormatter())
        axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.set_xlabel("arithmetic intensity (ops / DRAM byte)")
    ax.set_ylabel("GOPS")
    names = "" if len(named) == len(shown) else f"; the {len(named)} costliest of {len(shown)} named"
    ax.set_title(f"roofline: peak {peak_gops:.1f} GOPS, DRAM {bw_gbs:.1f} GB/s{names}", fontsize=9)
    ax.grid(alpha=0.3)          # major lines only: fewer lines to draw on two log axes
    _fit(fig, bottom=0.6)
    return fig


def energy_figure(report):
    """Energy per layer stacked by component (the rest summed, on its own axis, past
    MAX_BARS), and the run's total by component."""
    plt = _pyplot()
    bars = layer_bars(report.layers, lambda layer: layer.energy_pj)
    totals = report.energy_by_component_pj
    fig, (left, named), (other_ax, other), (right,) = _layer_axes(plt, bars, 4.5, extra=[1.0])
    parts = [(component, lambda layer, c=component: layer.energy_by_component_pj.get(c, 0.0) / 1e3,
              COMPONENT_COLORS.get(component, "#999")) for component in totals]
    _stacked(left, named, parts)
    if other_ax is not None:
        _stacked(other_ax, [other], parts)
    base = 0.0
    for component, total in totals.items():
        draw_bars(right, [0], [total / 1e3], [base], COMPONENT_COLORS.get(component, "#999"))
        base += total / 1e3
    right.set_xlim(-0.6, 0.6)
    right.set_ylim(0, 1.05 * base or 1)
    left.set_ylabel("energy (nJ)")
    left.set_title(f"energy per layer ({report.tech.get('name', '?')})"
                   f"{kept_text(bars, len(report.layers), 'energy')}", fontsize=9)
    if totals:
        _legend(left, 4)
    right.set_xticks([0], ["total"])
    right.set_title(f"total {report.total_energy_pj / 1e3:,.0f} nJ", fontsize=9)
    _fit(fig)
    return fig


# The report's PNG plots: file name -> (figure maker, alt text), in the HTML's order.
FIGURES = {"cycles.png": (cycles_figure, "cycles per layer"),
           "utilization.png": (utilization_figure, "utilization"),
           "roofline.png": (roofline_figure, "roofline"),
           "energy.png": (energy_figure, "energy per layer and component")}


def plot_png(report, name: str) -> bytes:
    """The plot `name` (a FIGURES key) of `report` as PNG bytes."""
    make, _ = FIGURES[name]
    return png(make(report))
