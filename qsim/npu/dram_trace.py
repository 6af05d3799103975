"""The DRAM request sequence of a program (the address of every read and write the RTL's
DMAs present, in order), for the DRAM timing model (qsim/npu/dram.py).

Only one DRAM unit runs at a time (hw/top.py: LOAD, STORE, LOADW and VRUN share one
dispatch slot), so the sequence is the program order of its DRAM instructions, each one's
requests in its own issue order: LOAD reads dram_addr + k*stride, STORE writes there
(k < count), LOADW reads the transactions that move bytes (qsim/npu/array/window.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import UsageError
from ..hw.isa import Opcode
from ..hw.params import Geometry
from ..hw.window_isa import unpack_window
from .array.window import transactions
from .cycle_model import _configured, vrun_configs
from .dram import DramTiming, stall_cycles


def dram_requests(geom: Geometry, instrs, dram=None) -> np.ndarray:
    configs = vrun_configs(geom, instrs, dram) if _configured(instrs) else {}
    parts = []
    for index, instr in enumerate(instrs):
        if instr.opcode in (Opcode.LOAD, Opcode.STORE):
            k = np.arange(instr.get("count"), dtype=np.int64)
            parts.append(instr.get("dram_addr") + k * instr.get("dram_stride"))
        elif instr.opcode is Opcode.LOADW:
            tr = transactions(unpack_window(configs[index]), instr.get("count"), geom.rows)
            parts.append(tr.addr[tr.nbytes > 0])
        elif instr.opcode is Opcode.VRUN:
            raise UsageError("DRAM timing does not model the vector DMA (VRUN) yet",
                             hint="run vector layers without the 'dram' key (ideal memory)")
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def program_dram_stalls(geom: Geometry, instrs, dram, timing: DramTiming | None) -> int:
    """Cycles the program's DRAM requests wait on the row buffers (0 with the ideal memory)."""
    return 0 if timing is None else stall_cycles(dram_requests(geom, instrs, dram), timing)
