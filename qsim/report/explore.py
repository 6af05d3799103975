"""The report of `qsim explore`: report.json (every point, the front, the objectives), points.csv
(one row per point), three plots (accuracy, energy and area against latency; the Pareto points
ringed and labelled) and report.html with the front's table and every point's."""
from __future__ import annotations

import csv
import html
import io
import json

CSV_COLUMNS = ("name", "precision", "rows", "cols", "dataflow", "input_buffer_bytes",
               "weight_buffer_bytes", "accumulator_buffer_bytes", "dram_bytes_per_cycle",
               "clock_mhz", "accuracy", "total_cycles", "latency_ms", "inferences_per_s",
               "energy_per_inference_pj", "area_mm2", "pareto", "all_verified", "rtl_engine",
               "rtl_agree", "host_arithmetic")
# (file, y key, y label, y scale): every plot has latency on x
PLOTS = (("accuracy_vs_latency.png", "accuracy", "accuracy (top-1, %)", 100.0),
         ("energy_vs_latency.png", "energy_per_inference_pj", "energy per inference (nJ)", 1e-3),
         ("area_vs_latency.png", "area_mm2", "area (mm²)", 1.0))


def csv_row(p: dict) -> dict:
    c = p["config"]
    row = {k: c.get(k) for k in CSV_COLUMNS if k in c}
    row.update({k: p.get(k) for k in ("name", "precision", "accuracy", "total_cycles", "latency_ms",
                                      "inferences_per_s", "energy_per_inference_pj", "pareto",
                                      "all_verified", "host_arithmetic")})
    row["area_mm2"] = p["area_mm2"] if p["area_mm2"] is not None else "n/a"
    row["rtl_engine"] = p["rtl"]["engine"] if p["rtl"] else ""
    row["rtl_agree"] = p["rtl"]["agree"] if p["rtl"] else ""
    return row


def points_csv(points: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for p in points:
        writer.writerow(csv_row(p))
    return out.getvalue()


def report_json(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def plot_png(points: list[dict], key: str, label: str, scale: float) -> bytes | None:
    """One y objective against latency; None when no point has a value for it (area not asked)."""
    shown = [p for p in points if isinstance(p.get(key), (int, float))]
    if not shown:
        return None
    if key == "energy_per_inference_pj":
        # nJ, uJ or mJ: whichever keeps the largest value under 10,000 (readable tick labels)
        largest = max(p[key] for p in shown)
        for unit, pj in (("nJ", 1e3), ("µJ", 1e6), ("mJ", 1e9)):
            if largest / pj < 1e4 or unit == "mJ":
                label, scale = f"energy per inference ({unit})", 1.0 / pj
                break
    import matplotlib                   # deferred: matplotlib takes ~1 s to import
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt     # deferred: as above
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    precisions = list(dict.fromkeys(p["precision"] for p in shown))
    markers = "os^DvP*X"
    for k, precision in enumerate(precisions):
        mine = [p for p in shown if p["precision"] == precision]
        ax.scatter([p["latency_ms"] for p in mine], [p[key] * scale for p in mine], s=28, alpha=0.75,
                   marker=markers[k % len(markers)], label=precision)
    front = sorted((p for p in shown if p["pareto"]), key=lambda p: p["latency_ms"])
    ax.scatter([p["latency_ms"] for p in front], [p[key] * scale for p in front], s=150,
               facecolors="none", edgecolors="#c0392b", linewidths=1.6, label="Pareto (all objectives)")
    for p in front:
        ax.annotate(p["name"], (p["latency_ms"], p[key] * scale), textcoords="offset points",
                    xytext=(5, 4), fontsize=7, color="#c0392b")
    ax.set_xlabel("latency per inference (ms)")
    ax.set_ylabel(label)
    ax.set_title(f"{label} vs latency ({len(shown)} points)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.4g}"
    return str(value)


def _table(points: list[dict]) -> str:
    head = ("point", "accuracy %", "cycles", "latency ms", "inferences/s", "energy nJ", "area mm²",
            "verified", "RTL check", "note")
    rows = []
    for p in points:
        rtl = p["rtl"]
        check = "" if rtl is None else (f"{rtl['engine']}: {'equal' if rtl['agree'] else 'DIFFERENT'} "
                                        f"({rtl['total_cycles']} cycles)")
        cells = (p["name"] + (" ★" if p["pareto"] else ""),
                 _fmt(None if p["accuracy"] is None else 100 * p["accuracy"], 4), p["total_cycles"],
                 _fmt(p["latency_ms"]), _fmt(p["inferences_per_s"], 4),
                 _fmt(p["energy_per_inference_pj"] / 1e3, 4), _fmt(p["area_mm2"]),
                 "yes" if p["all_verified"] else "NO", check, p.get("host_arithmetic") or "")
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")


def report_html(doc: dict, plots: list[str]) -> str:
    objectives = ", ".join(f"{k} {'↑' if d == 'max' else '↓'}" for k, d in doc["objectives"])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in doc["notes"])
    images = "".join(f'<p><img src="{html.escape(f)}" alt="{html.escape(f)}"></p>' for f in plots)
    pareto = [p for p in doc["points"] if p["pareto"]]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>qsim explore: {html.escape(doc['model'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child{{text-align:left}}</style>
</head><body>
<h1>qsim explore: {html.escape(doc['model'])}</h1>
<p>{len(doc['points'])} points on the {html.escape(doc['engine'])} engine;
Pareto front over {html.escape(objectives)}: {len(pareto)} points (★), each rerun on
{html.escape(doc['verify_engine'] or 'no second engine')}.
Accuracy: {html.escape(doc['accuracy_kind'])}.</p>
<ul>{notes}</ul>
<h2>Pareto front</h2>{_table(pareto)}
{images}
<h2>All points</h2>{_table(doc['points'])}
</body></html>
"""


def render(doc: dict) -> dict[str, bytes]:
    """Every file of the report folder, by name."""
    files = {"report.json": report_json(doc).encode(), "points.csv": points_csv(doc["points"]).encode()}
    plots = []
    for name, key, label, scale in PLOTS:
        png = plot_png(doc["points"], key, label, scale)
        if png is not None:
            files[name] = png
            plots.append(name)
    files["report.html"] = report_html(doc, plots).encode()
    return files
