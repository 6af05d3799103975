"""Area of N cores: N times one core's synthesis (qsim/npu/area.py) plus the shared port (the
arbiter and the port multiplexer, hw/cores.py SharedPort) synthesized by the same Yosys flow,
as the unit `arbiter`. The cores are identical, so one synthesis of the core serves all N."""
from __future__ import annotations

from dataclasses import replace

from ...hw.params import Geometry
from ..area import TOP, Synthesis, yosys_stat

# qsim/npu/area.py's flow without the parameter buffer's memory_map (the port has no memory)
PORT_SCRIPT = f"""read_rtlil {{rtlil}}
synth -top {TOP} -run begin:fine
opt -fast -full
techmap
opt -fast
opt_clean
tee -q -o {{stat}} stat -json
"""
ARBITER_UNIT = "arbiter"


def port_cells(geom: Geometry, cores: int) -> tuple[dict[str, int], float, float]:
    """Generic-gate counts of the shared port of `cores` cores, and the Yosys wall and CPU seconds."""
    from ...hw.cores import SharedPort          # deferred: the HDL needs amaranth
    from ..export import _lean_rtlil            # deferred: amaranth's back end
    stat, seconds, cpu = yosys_stat(_lean_rtlil(SharedPort(geom, cores), TOP), PORT_SCRIPT)
    cells: dict[str, int] = {}
    for body in stat["modules"].values():       # flattened by synth: sub-modules are cells of the top
        for cell, n in body["num_cells_by_type"].items():
            if not cell.lstrip("\\").startswith(TOP):
                cells[cell] = cells.get(cell, 0) + n
    return cells, seconds, cpu


def scale_to_cores(core: Synthesis, cores: int, port: dict[str, int], seconds: float = 0.0,
                   cpu_seconds: float = 0.0) -> Synthesis:
    """`cores` copies of `core` plus the shared port's cells as the unit `arbiter`."""
    cells = {unit: {cell: n * cores for cell, n in counts.items()} for unit, counts in core.cells.items()}
    cells[ARBITER_UNIT] = dict(port)
    bits = {unit: n * cores for unit, n in core.sram_bits.items()}
    bits[ARBITER_UNIT] = 0
    return replace(core, cells=cells, sram_bits=bits, seconds=core.seconds + seconds,
                   cpu_seconds=core.cpu_seconds + cpu_seconds)
