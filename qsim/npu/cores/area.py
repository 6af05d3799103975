"""Area of N cores: N times one core's synthesis (qsim/npu/area.py) plus the shared port (the
arbiter and the port multiplexer, hw/cores.py SharedPort) synthesized by the same Yosys flow,
as the unit `arbiter`. The cores are identical, so one synthesis of the core serves all N."""
from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ...hw.params import Geometry
from ..area import TOP, Synthesis, _children_cpu, run_yosys

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
    rtlil = _lean_rtlil(SharedPort(geom, cores), TOP)
    with tempfile.TemporaryDirectory(prefix="qsim-area-port-") as tmp:
        work = Path(tmp)
        (work / "port.il").write_text(rtlil, encoding="utf-8")
        start, cpu = time.perf_counter(), _children_cpu()
        run_yosys(PORT_SCRIPT.format(rtlil="port.il", stat="stat.json"), work)
        seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
        stat = json.loads((work / "stat.json").read_text(encoding="utf-8"))
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
