"""The report of `qsim explore`: report.json (every point, the front, the objectives), points.csv
(one row per point), the plots (explore_plots: accuracy, energy and area against latency) and
report.html: what was explored and where, each precision's accuracy, the front's table and every
point's, with units chosen so that the numbers stay short (ms or µs, nJ to mJ)."""
from __future__ import annotations

import csv
import html
import io
import json

from .explore_plots import PLOTS, energy_unit, plot_png, short_name

CSV_COLUMNS = ("name", "precision", "rows", "cols", "dataflow", "input_buffer_bytes",
               "weight_buffer_bytes", "accumulator_buffer_bytes", "dram_bytes_per_cycle",
               "clock_mhz", "dram", "accuracy", "total_cycles", "latency_ms", "inferences_per_s",
               "energy_per_inference_pj", "area_mm2", "pareto", "all_verified", "rtl_engine",
               "rtl_agree", "host_arithmetic")
OBJECTIVE_NAMES = {"accuracy": "accuracy", "latency_ms": "latency", "energy_per_inference_pj": "energy",
                   "area_mm2": "area"}
# the configuration keys a space may vary, as the tables head them
CONFIG_COLUMNS = (("dram_bytes_per_cycle", "DRAM B/cycle"), ("dram", "DRAM timing"), ("clock_mhz", "clock MHz"),
                  ("input_buffer_bytes", "input buffer B"), ("weight_buffer_bytes", "weight buffer B"),
                  ("accumulator_buffer_bytes", "accumulator B"))


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


def _num(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"        # a clock of 1000.0 MHz is 1,000, not 1e+03
    return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:,.0f}"


def latency_text(ms: float) -> str:
    return f"{ms * 1e3:.3g} µs" if ms < 1.0 else f"{ms:.4g} ms"


def varied_keys(points: list[dict]) -> list[tuple[str, str]]:
    """The configuration columns whose value differs between points (the others are the base's)."""
    return [(k, head) for k, head in CONFIG_COLUMNS if len({p["config"].get(k) for p in points}) > 1]


def _table(points: list[dict], all_points: list[dict]) -> str:
    unit, pj = energy_unit(p["energy_per_inference_pj"] for p in all_points)
    extra = varied_keys(all_points)
    head = ("point", "precision", "array", "dataflow", *(h for _, h in extra), "accuracy %", "cycles",
            "latency", "inferences/s", f"energy {unit}", "area mm²", "layers verified", "RTL check", "note")
    rows = []
    for p in points:
        c, rtl = p["config"], p["rtl"]
        check = "—" if rtl is None else (f"{rtl['engine']}: {'equal' if rtl['agree'] else 'DIFFERENT'} "
                                         f"({rtl['total_cycles']:,} cycles)")
        cells = (short_name(p["name"]) + (" ★" if p["pareto"] else ""), p["precision"],
                 f"{c['rows']}x{c['cols']}", str(c["dataflow"]).lower(), *(_num(c.get(k)) for k, _ in extra),
                 "n/a" if p["accuracy"] is None else f"{100 * p['accuracy']:.2f}", f"{p['total_cycles']:,}",
                 latency_text(p["latency_ms"]), _num(p["inferences_per_s"], 4),
                 _num(p["energy_per_inference_pj"] / pj, 4), _num(p["area_mm2"], 4),
                 "yes" if p["all_verified"] else "NO", check, p.get("host_arithmetic") or "")
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")


def _precisions(doc: dict) -> str:
    rows = []
    for name, d in doc.get("precisions", {}).items():
        sqnr = ", ".join(f"{html.escape(o)} {v:.1f} dB" for o, v in (d.get("output_sqnr_db") or {}).items())
        accuracy = "n/a" if d.get("accuracy") is None else f"{100 * d['accuracy']:.2f} %"
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{accuracy}</td><td>{sqnr or 'n/a'}</td>"
                    f"<td>{d.get('eval_samples', 'n/a')}</td></tr>")
    return ("<table><tr><th>precision</th><th>accuracy</th><th>output SQNR</th><th>samples scored</th></tr>"
            + "".join(rows) + "</table>")


def _summary(doc: dict, pareto: list[dict]) -> str:
    objectives = ", ".join(f"{OBJECTIVE_NAMES.get(k, k)} {'↑' if d == 'max' else '↓'}" for k, d in doc["objectives"])
    n = len(doc["points"])
    check = (f"each rerun on {html.escape(doc['verify_engine'])} and compared stage by stage (cycles "
             "and values)" if doc["verify_engine"] else "not rerun on a second engine")
    where = f" Run on {html.escape(doc['pool'])}" if doc.get("pool") else ""
    wall = f" in {doc['wall_s']:.0f} s wall" if doc.get("wall_s") is not None else ""
    inputs = f" Input: {html.escape(doc['input'])}." if doc.get("input") else ""
    return (f"<p>{n} point{'s' * (n != 1)} on the {html.escape(doc['engine'])} engine, every layer verified "
            f"against the integer kernels. Pareto front over {html.escape(objectives)}: {len(pareto)} "
            f"point{'s' * (len(pareto) != 1)} (★), {check}.{where}{wall}{'.' if where or wall else ''}"
            f"{inputs} Accuracy: {html.escape(doc['accuracy_kind'])}.</p>")


def report_html(doc: dict, plots: list[str]) -> str:
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in doc["notes"])
    images = "".join(f'<p><img src="{html.escape(f)}" alt="{html.escape(f)}"></p>' for f in plots)
    pareto = [p for p in doc["points"] if p["pareto"]]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>qsim explore: {html.escape(doc['model'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin:0.5em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child{{text-align:left}}
th{{background:#f3f3f3}}</style>
</head><body>
<h1>qsim explore: {html.escape(doc['model'])}</h1>
{_summary(doc, pareto)}
<ul>{notes}</ul>
<h2>Precisions</h2>{_precisions(doc)}
<h2>Pareto front</h2>{_table(pareto, doc['points'])}
{images}
<h2>All points</h2>{_table(doc['points'], doc['points'])}
</body></html>
"""


def render(doc: dict) -> dict[str, bytes]:
    """Every file of the report folder, by name."""
    files = {"report.json": report_json(doc).encode(), "points.csv": points_csv(doc["points"]).encode()}
    plots = []
    for name, key, label in PLOTS:
        png = plot_png(doc["points"], key, label, doc["model"])
        if png is not None:
            files[name] = png
            plots.append(name)
    files["report.html"] = report_html(doc, plots).encode()
    return files
