"""reports/tflite.md, reports/tflite.json and reports/tflite_cycles.png from benchmarks/tflite.py's
results (one dict: the run header and, per model, what run_model returned)."""
from __future__ import annotations

import json
from pathlib import Path

from qsim.atomic import atomic_write_text

from _tflite_match import largest_differences

PLOT_MODEL = "mobilenet_v2"       # the per-layer plot's model (falls back to the first with both sides)


def short(name: str, width: int = 48) -> str:
    """A TFLite tensor name cut to its last ';'-part and `width` characters (the converter joins
    every fused TF op's name into one)."""
    name = name.split(";")[0]
    return name if len(name) <= width else "…" + name[-(width - 1):]


def error_text(message: str, width: int = 400) -> str:
    """qsim's message (its first line, which names the file, operator and cause) without the
    traceback or hint that follow."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower() and not line.startswith("File ")), lines[-1])
    return first[:width]


def unconverted_builtins(message: str, ops: list[dict]) -> list[str]:
    """The model's builtins missing from the list qsim's unsupported-builtin hint gives ("qsim
    converts A, B, ..."); [] when the message has no such list."""
    marker = "qsim converts "
    if marker not in message:
        return []
    listed = message.split(marker, 1)[1].splitlines()[0]
    supported = {name.strip(" .") for name in listed.split(",")}
    return sorted({op["builtin"] for op in ops} - supported)


def summary_line(r: dict) -> str:
    parts = [r["model"]]
    if "parity" in r:
        t = r["parity"]["total"]
        parts.append(f"parity {t['differing']}/{t['elements']} differ, max {t['max_lsb']} LSB")
    for acc, c in r.get("compare", {}).items():
        parts.append(f"{acc}: Vela {c['vela_cycles']:,} vs qsim {c['qsim_config']} {c['qsim_cycles']:,} cycles")
    if "error" in r:
        parts.append(f"stopped at {r['error']['stage']}: {error_text(r['error']['message'], 200)}")
    return "; ".join(parts)


def _parity_rows(models: dict) -> list[str]:
    lines = ["| model | inputs | operator outputs compared | not compared | elements | differing | max LSB | "
             "differences start at (operators) | model output differing |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in models.items():
        if "parity" not in r:
            lines.append(f"| {name} | – | – | – | – | – | – | – | not run: {r.get('error', {}).get('stage', '?')} |")
            continue
        p, t = r["parity"], r["parity"]["total"]
        out = p["model_output"]
        out_text = f"{out['differing']} of {out['elements']}" if out else "not compared"
        lines.append(f"| {name} | {p['inputs']} | {len(p['tensors'])} | {len(p['not_compared'])} | "
                     f"{t['elements']:,} | {t['differing']:,} | {t['max_lsb']} | {len(p.get('origins', []))} | {out_text} |")
    return lines


def _parity_details(models: dict) -> list[str]:
    lines = []
    for name, r in models.items():
        if "parity" not in r:
            continue
        p = r["parity"]
        lines += [f"**{name}** per operator type:", "",
                  "| builtin | elements | differing | max LSB |", "|---|---:|---:|---:|"]
        lines += [f"| {b} | {v['elements']:,} | {v['differing']:,} | {v['max_lsb']} |"
                  for b, v in p["by_builtin"].items()]
        by_index = {row["index"]: row for row in p["tensors"]}
        start = [by_index[i] for i in p.get("origins", [])]
        differing = sum(1 for row in p["tensors"] if row["differing"])
        if differing:
            lines += ["", f"{differing} operator outputs differ; differences start at {len(start)} operators whose "
                      "inputs are all exact (the others receive a differing input and pass it on):", ""]
            lines += [f"- #{row['index']} {row['builtin']} `{short(row['output'])}`: {row['differing']:,} of "
                      f"{row['elements']:,} elements, max {row['max_lsb']} LSB, qsim the higher in "
                      f"{row.get('higher', 0):,}" for row in start[:12]]
            if len(start) > 12:
                lines.append(f"- and {len(start) - 12} more")
        if p["not_compared"]:
            lines += ["", "Not compared:", ""]
            lines += [f"- #{row['index']} {row['builtin']} `{short(row['output'])}`: {row['why']}"
                      for row in p["not_compared"][:12]]
            if len(p["not_compared"]) > 12:
                lines.append(f"- and {len(p['not_compared']) - 12} more")
        lines.append("")
    return lines


def _origin_causes(models: dict) -> list[str]:
    from _tflite_text import ORIGIN_CAUSES
    builtins: dict[str, list[str]] = {}
    for name, r in models.items():
        rows = {row["index"]: row for row in r.get("parity", {}).get("tensors", [])}
        for index in r.get("parity", {}).get("origins", []):
            builtins.setdefault(rows[index]["builtin"], []).append(name)
    if not builtins:
        return []
    lines = ["Where differences start, by operator type:", ""]
    for builtin, names in builtins.items():
        cause = ORIGIN_CAUSES.get(builtin, "no cause established yet: the operator's lowering against LiteRT's "
                                           "reference kernel is to be checked on this model's tensors.")
        lines.append(f"- **{builtin}** ({', '.join(sorted(set(names)))}): {cause}")
    return lines + [""]


def _cycle_rows(models: dict) -> list[str]:
    lines = ["| model | accelerator | Vela cycles | Vela SRAM bytes | Vela off-chip bytes | Vela CPU ops | qsim array | "
             "qsim cycles | qsim DRAM bytes | qsim / Vela cycles | MACs |",
             "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|"]
    totals: dict[str, list[int]] = {}
    notes: list[str] = []
    for name, r in models.items():
        for acc, v in r.get("vela", {}).items():
            npu = next((n for n in r.get("npu", {}).values() if n["accelerator"] == acc and n["engine"] == "model"), None)
            off = v["dram_bytes"] + v["offchip_flash_bytes"]
            q = (f"{npu['config']['rows']}x{npu['config']['cols']} | {npu['total_cycles']:,} | {npu['dram_bytes']:,} | "
                 f"{npu['total_cycles'] / v['cycles_total']:.2f}") if npu else "– | – | – | –"
            lines.append(f"| {name} | {acc} | {v['cycles_total']:,} | {v['sram_bytes']:,} | {off:,} | "
                         f"{', '.join(v['cpu_ops']) or 'none'} | {q} | {v['nn_macs']:,} |")
            if npu:
                t = totals.setdefault(acc, [0, 0, 0, 0, 0])
                for k, value in enumerate((v["cycles_total"], v["sram_bytes"], off, npu["total_cycles"], npu["dram_bytes"])):
                    t[k] += value
    for name, r in models.items():
        for key, run in r.get("npu", {}).items():
            if run["engine"] != "model":
                model_run = r["npu"].get(key.rsplit("-", 1)[0] + "-model", {})
                same = "equal to" if run["total_cycles"] == model_run.get("total_cycles") else "DIFFERENT from"
                notes.append(f"{name} on qsim's {run['engine']} engine ({key.rsplit('-', 1)[0]}, the RTL): "
                             f"{run['total_cycles']:,} cycles, {same} the cycle model's; every layer verified "
                             f"against the kernels: {run['all_verified']}; {run['seconds']} s.")
    for acc, t in totals.items():
        lines.append(f"| **total (models both ran)** | {acc} | {t[0]:,} | {t[1]:,} | {t[2]:,} | | | {t[3]:,} | {t[4]:,} | "
                     f"{t[3] / t[0]:.2f} | |")
    return lines + ([""] + notes if notes else [])


def _by_builtin(models: dict) -> list[str]:
    """Cycles per operator type over every model both sides ran, per accelerator."""
    sums: dict[tuple[str, str], dict] = {}
    for r in models.values():
        for acc, c in r.get("compare", {}).items():
            for row in c["per_op"]:
                t = sums.setdefault((acc, row["builtin"]), dict.fromkeys(
                    ("ops", "macs", "vela", "vela_mem", "qsim", "stall", "fill"), 0))
                t["ops"] += 1
                t["macs"] += row["macs"]
                t["vela"] += row["vela_cycles"]
                t["vela_mem"] += row["vela_cycles"] if row["vela_cycles"] > row["vela_npu_cycles"] else 0
                t["qsim"] += row["qsim_cycles"]
                t["stall"] += row["qsim_stall_cycles"]
                t["fill"] += row["qsim_fill_drain_cycles"]
    lines = ["| accelerator / qsim array | builtin | operators | MACs | Vela cycles | of which memory-bound operators | "
             "qsim cycles | qsim stall / fill-drain share | MACs per cycle Vela / qsim |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for (acc, builtin), t in sorted(sums.items(), key=lambda kv: (kv[0][0], -kv[1]["vela"] - kv[1]["qsim"])):
        share = f"{t['stall'] / t['qsim']:.0%} / {t['fill'] / t['qsim']:.0%}" if t["qsim"] else "–"
        lines.append(f"| {acc} | {builtin} | {t['ops']} | {t['macs']:,} | {t['vela']:,} | {t['vela_mem']:,} | "
                     f"{t['qsim']:,} | {share} | {_rate(t['macs'], t['vela'])} / {_rate(t['macs'], t['qsim'])} |")
    return lines


def _cause(row: dict) -> str:
    """What the two sides' own breakdowns say about one operator's difference."""
    notes = []
    q, v = row["qsim_cycles"], row["vela_cycles"]
    if q and row["qsim_stall_cycles"] > 0.4 * q:
        notes.append(f"qsim waits for DRAM {row['qsim_stall_cycles'] / q:.0%} of its cycles")
    if q and row["qsim_fill_drain_cycles"] > 0.4 * q:
        notes.append(f"qsim fill/drain {row['qsim_fill_drain_cycles'] / q:.0%}")
    if v and max(row["vela_sram_access_cycles"], row["vela_offchip_access_cycles"]) > row["vela_npu_cycles"]:
        notes.append("Vela memory-bound (access cycles > compute)")
    if row["vela_rows"] == 0:
        notes.append("no Vela operation (removed or fused into a neighbour)")
    if row["qsim_layers"] == 0:
        notes.append("no qsim stage (fused into a neighbour or a host step)")
    return "; ".join(notes)


def _rate(macs: int, cycles: int) -> str:
    return f"{macs / cycles:.0f}" if cycles and macs else "–"


def _largest(models: dict, count: int = 6) -> list[str]:
    lines = []
    for name, r in models.items():
        for acc, c in r.get("compare", {}).items():
            lines += [f"**{name}, {acc} vs qsim {c['qsim_config']}** (operators with the largest |qsim - Vela|):", "",
                      "| # | builtin | output | MACs | Vela cycles (NPU / SRAM / off-chip access) | qsim cycles "
                      "(compute / fill-drain / stall) | MACs per cycle Vela / qsim | qsim / Vela | reading |",
                      "|---:|---|---|---:|---|---|---|---:|---|"]
            for row in largest_differences(c["per_op"], count):
                ratio = f"{row['qsim_cycles'] / row['vela_cycles']:.2f}" if row["vela_cycles"] else "–"
                lines.append(
                    f"| {row['index']} | {row['builtin']} | `{short(row['output'], 36)}` | {row['macs']:,} | "
                    f"{row['vela_cycles']:,} ({row['vela_npu_cycles']:,} / {row['vela_sram_access_cycles']:,} / "
                    f"{row['vela_offchip_access_cycles']:,}) | {row['qsim_cycles']:,} ({row['qsim_compute_cycles']:,} / "
                    f"{row['qsim_fill_drain_cycles']:,} / {row['qsim_stall_cycles']:,}) | "
                    f"{_rate(row['macs'], row['vela_cycles'])} / {_rate(row['macs'], row['qsim_cycles'])} | {ratio} | "
                    f"{_cause(row)} |")
            lines.append("")
    return lines


def plot(models: dict, path: Path) -> str | None:
    """Per-operator cycles, qsim beside Vela, of PLOT_MODEL (falls back to the first model with
    both sides): one panel per accelerator (U55-256 vs 16x16, U65-512 vs 16x32). None if no model
    has both sides."""
    name = PLOT_MODEL if models.get(PLOT_MODEL, {}).get("compare") else next(
        (n for n, r in models.items() if r.get("compare")), None)
    if name is None:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    compares = models[name]["compare"]
    width = max(8.0, 0.16 * len(models[name]["ops"]) + 2)
    fig, axes = plt.subplots(len(compares), 1, figsize=(width, 4.2 * len(compares)), squeeze=False)
    for ax, (accelerator, c) in zip(axes[:, 0], compares.items()):
        rows = [r for r in c["per_op"] if r["vela_cycles"] or r["qsim_cycles"]]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [r["vela_cycles"] for r in rows], 0.4, label=f"Vela, {accelerator}")
        ax.bar([i + 0.2 for i in x], [r["qsim_cycles"] for r in rows], 0.4,
               label=f"qsim NPU {c['qsim_config']} (model engine)")
        ax.set_yscale("log")
        ax.set_xticks(list(x), [f"{r['index']} {r['builtin'].replace('DEPTHWISE_CONV_2D', 'DW').replace('CONV_2D', 'CONV')}"
                                for r in rows], rotation=90, fontsize=6)
        ax.set_ylabel("cycles (log)")
        ax.set_title(f"{name}: cycles per TFLite operator, {accelerator} (Vela {c['vela_cycles']:,}, "
                     f"qsim {c['qsim_config']} {c['qsim_cycles']:,} in total)", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return name


def write_report(doc: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    models = doc["models"]
    json_path, md_path, png_path = out / "tflite.json", out / "tflite.md", out / "tflite_cycles.png"
    atomic_write_text(json_path, json.dumps(doc, indent=1, default=str) + "\n")
    plotted = plot(models, png_path)
    from _tflite_text import EXPLANATION, header_lines
    lines = header_lines(doc)
    lines += ["## Parity: qsim's integer run vs LiteRT's reference kernels", ""] + _parity_rows(models) + [""]
    from _tflite_text import PARITY_HISTORY
    lines += PARITY_HISTORY + _parity_details(models) + _origin_causes(models)
    lines += ["## Cycles and bytes: qsim's NPU beside Vela at the same MACs per cycle", ""] + _cycle_rows(models) + [""]
    if plotted:
        lines += [f"![per-operator cycles of {plotted}](tflite_cycles.png)", ""]
    lines += ["## Cycles per operator type (all models both sides ran)", "",
              "Vela's memory-bound operators: those whose estimate is set by memory access, not by the MAC "
              "engine (Op Cycles > NPU cycles).", ""] + _by_builtin(models) + [""]
    lines += EXPLANATION + ["## Largest per-operator differences", ""] + _largest(models)
    errors = {n: r["error"] for n, r in models.items() if "error" in r}
    if errors:
        lines += ["## Models qsim did not finish", ""]
        for n, e in errors.items():
            missing = unconverted_builtins(e["message"], models[n].get("ops", []))
            lines.append(f"- **{n}** at {e['stage']}: `{error_text(e['message'])}`"
                         + (f"; builtins of this model qsim does not convert: {', '.join(missing)}" if missing else ""))
        lines.append("")
    atomic_write_text(md_path, "\n".join(lines) + "\n")
    return [json_path, md_path] + ([png_path] if plotted else [])
