"""The plots of `qsim explore`'s report: one objective against latency per plot. Readable at a
glance for a space of a few dozen points: the colour is the hardware (array size and dataflow),
the marker the precision; the points on the front of all objectives are ringed and named (short
names), and the dashed line is the front of the plot's own two objectives; a logarithmic
latency axis when the latencies span more than a decade; an accuracy axis never above 100 %;
energy and area from zero, so that the distances between points are their true proportions."""
from __future__ import annotations

import io

# (file, y key, y label): every plot has latency on x
PLOTS = (("accuracy_vs_latency.png", "accuracy", "accuracy"),
         ("energy_vs_latency.png", "energy_per_inference_pj", "energy per inference"),
         ("area_vs_latency.png", "area_mm2", "area"))
MARKERS = "os^DvP*X"
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
# config name parts as the plot labels write them
SHORT = (("-dram_bytes_per_cycle", "-dramB"), ("-clock_mhz", "-MHz"), ("_buffer_bytes", "B"))


def short_name(name: str) -> str:
    for long, short in SHORT:
        name = name.replace(long, short)
    return name


def energy_unit(values) -> tuple[str, float]:
    """(unit, pJ per unit): nJ, µJ or mJ, whichever keeps the largest value under 1,000."""
    largest = max(values, default=0.0)
    for unit, pj in (("nJ", 1e3), ("µJ", 1e6), ("mJ", 1e9)):
        if largest / pj < 1e3:
            return unit, pj
    return "mJ", 1e9


def _y_axis(key: str, label: str, shown: list[dict]) -> tuple[str, float]:
    """(axis label with its unit, factor from the point's value)."""
    if key == "accuracy":
        return f"{label} (%)", 100.0
    if key == "energy_per_inference_pj":
        unit, pj = energy_unit(p[key] for p in shown)
        return f"{label} ({unit})", 1.0 / pj
    return f"{label} (mm²)", 1.0


def hardware_of(p: dict) -> str:
    c = p["config"]
    return f"{c['rows']}x{c['cols']} {str(c['dataflow']).lower()}"


def pair_front(xy: list[tuple[float, float]], maximize: bool) -> list[tuple[float, float]]:
    """The points of `xy` no other beats in both x (lower) and y (higher with `maximize`, else
    lower), by x: the front of one plot's two objectives."""
    best, front = None, []
    for x, y in sorted(xy, key=lambda v: (v[0], -v[1] if maximize else v[1])):
        if best is None or (y > best if maximize else y < best):
            front.append((x, y))
            best = y
    return front


def plot_png(points: list[dict], key: str, label: str, model: str = "") -> bytes | None:
    """One y objective against latency; None when no point has a value for it (area not asked)."""
    shown = [p for p in points if isinstance(p.get(key), (int, float))]
    if not shown:
        return None
    ylabel, scale = _y_axis(key, label, shown)
    import matplotlib                   # deferred: matplotlib takes ~1 s to import
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt     # deferred: as above
    from matplotlib.lines import Line2D  # deferred: as above
    fig, ax = plt.subplots(figsize=(9.0, 5.0))
    hardware = list(dict.fromkeys(hardware_of(p) for p in shown))
    precisions = list(dict.fromkeys(p["precision"] for p in shown))
    for p in shown:
        ax.scatter(p["latency_ms"], p[key] * scale, s=36, alpha=0.8,
                   color=COLOURS[hardware.index(hardware_of(p)) % len(COLOURS)],
                   marker=MARKERS[precisions.index(p["precision"]) % len(MARKERS)])
    xy = [(p["latency_ms"], p[key] * scale) for p in shown]
    front2 = pair_front(xy, key == "accuracy")
    ax.step([x for x, _ in front2], [y for _, y in front2], where="post", color="#555", linestyle="--",
            linewidth=1.0)
    front = sorted((p for p in shown if p["pareto"]), key=lambda p: p["latency_ms"])
    ax.scatter([p["latency_ms"] for p in front], [p[key] * scale for p in front], s=170,
               facecolors="none", edgecolors="#c0392b", linewidths=1.6)
    for k, p in enumerate(front):
        ax.annotate(short_name(p["name"]), (p["latency_ms"], p[key] * scale), textcoords="offset points",
                    xytext=(6, 6 if k % 2 == 0 else -12), fontsize=7, color="#c0392b")
    latencies = [x for x, _ in xy]
    if min(latencies) > 0 and max(latencies) / min(latencies) > 10:
        from matplotlib.ticker import FuncFormatter, LogLocator  # deferred: as above
        ax.set_xscale("log")
        # plain numbers (2, 5, 10, 20 ...) instead of 2x10^0, whose labels ran into each other
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(3.0, 4.0, 6.0, 7.0, 8.0, 9.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    if key == "accuracy":
        _accuracy_limits(ax, [y for _, y in xy])
    else:
        # from zero: an axis fitted to the points made a 0.4 % area difference fill the plot
        ax.set_ylim(0, max(y for _, y in xy) * 1.12)
    ax.set_xlabel("latency per inference (ms)" + (", log scale" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{model + ': ' if model else ''}{label} vs latency ({len(shown)} points)")
    ax.grid(alpha=0.3, which="both")
    handles = ([Line2D([], [], linestyle="", marker="s", color=COLOURS[i % len(COLOURS)], label=h)
                for i, h in enumerate(hardware)]
               + [Line2D([], [], linestyle="", marker=MARKERS[i % len(MARKERS)], color="#444", label=pr)
                  for i, pr in enumerate(precisions)]
               + [Line2D([], [], linestyle="", marker="o", markersize=11, markerfacecolor="none",
                         markeredgecolor="#c0392b", label="Pareto, all objectives"),
                  Line2D([], [], linestyle="--", color="#555", label="front of these two")])
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _accuracy_limits(ax, values: list[float]) -> None:
    """Room around the points, but no tick above 100 % (equal accuracies gave ticks to 105)."""
    low, high = min(values), max(values)
    pad = max(0.5, 0.15 * (high - low))
    ax.set_ylim(low - pad, min(high + pad, 100.0 + pad / 4))
    ax.set_yticks([t for t in ax.get_yticks() if low - pad <= t <= 100.0])
