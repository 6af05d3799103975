"""The sweep report of `qsim simulate --sweep`: one summary per configuration (sweep.json) and
sweep.png (cycles, PE utilization and energy per inference side by side, energy stacked by
component), from the points' ThroughputReports."""
from __future__ import annotations

import io

from .layer_plots import COMPONENT_COLORS
from .throughput import ThroughputReport


def sweep_summary(report: ThroughputReport) -> dict:
    """One point of sweep.json; `report` names the point's report.json in the sweep folder."""
    doc = report.to_json()
    return {"config": doc["config"], "total_cycles": doc["total_cycles"],
            "latency_ms": doc["latency_ms"], "inferences_per_s": doc["inferences_per_s"],
            "gops": doc["gops"], "all_verified": doc["all_verified"],
            "array_utilization": array_utilization(report),
            "energy_per_inference_pj": doc["energy_per_inference_pj"],
            "energy_by_component_pj": doc["energy_by_component_pj"], "tech": doc["tech"]["name"],
            "host_arithmetic": report.host_warning,     # "" or what the cycles and energy leave out
            "report": f"{report.config['name']}/report.json"}


def array_utilization(report: ThroughputReport) -> float:
    """MACs over the PE slots of the whole run (all layers' cycles)."""
    return report.total_macs / (report.pes * report.total_cycles) if report.total_cycles else 0.0


def sweep_plot_png(points: list[dict]) -> bytes:
    """sweep.png for the summaries `points`, as PNG bytes (a task like the points' reports)."""
    import matplotlib                   # deferred: matplotlib takes ~1 s to import
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt     # deferred: as above
    names = [p["config"]["name"] for p in points]
    x = range(len(names))
    fig, (left, right, energy) = plt.subplots(1, 3, figsize=(max(11.0, 1.6 * len(names) + 5), 4))
    left.bar(x, [p["total_cycles"] for p in points], color="#3b7dd8")
    left.set_ylabel("total cycles")
    left.set_title("cycles per inference")
    right.bar(x, [100 * p["array_utilization"] for p in points], color="#e9a23b")
    right.set_ylabel("PE utilization over the run (%)")
    right.set_title("utilization")
    base = [0.0] * len(names)
    components = list(points[0]["energy_by_component_pj"]) if points else []
    for component in components:
        vals = [p["energy_by_component_pj"].get(component, 0.0) / 1e3 for p in points]
        energy.bar(x, vals, bottom=base, label=component, color=COMPONENT_COLORS.get(component, "#999"))
        base = [b + v for b, v in zip(base, vals)]
    energy.set_ylabel("energy per inference (nJ)")
    energy.set_title(f"energy ({points[0]['tech'] if points else '?'})")
    if components:
        energy.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for ax in (left, right, energy):
        ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
