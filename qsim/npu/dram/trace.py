"""The DRAM request sequence of a program (the address of every read and write the RTL's
DMAs present, in order), for the DRAM timing model (qsim/npu/dram/timing.py).

Only one DRAM unit runs at a time (hw/top.py: LOAD, STORE, LOADW and VRUN share one
dispatch slot), so the sequence is the program order of its DRAM instructions, each one's
requests in its own issue order: LOAD reads dram_addr + k*stride, STORE writes there
(k < count), LOADW reads the transactions that move bytes (qsim/npu/array/window.py), VRUN
reads its operands' transactions and writes its results, merged by busy cycle with a cycle's
write first (hw/vdma.py; qsim/npu/vector/model.py gives both cycles).
"""
from __future__ import annotations

import numpy as np

from ...hw.isa import Opcode
from ...hw.params import Geometry
from ...hw.window_isa import unpack_window
from ..array.window import transactions
from ..cycle_model import _configured, vrun_configs
from .timing import DramTiming, stall_cycles
from ..vector.model import (STREAM_LEVELS, VECTOR_LATENCY_CYCLES, _addresses, _levels, stream_operand,
                           vrun_emits, vrun_issue_cycles, vrun_transactions)


def _operand_reads(config, prefix: str, dram) -> np.ndarray:
    """[beats, transactions] read addresses of one operand: one per beat (contiguous lanes or a
    broadcast), or one per lane (a gather); indirect A at its row: beat + index * a_lane."""
    lanes, nbytes, lane = config.field("lanes"), config.field(f"{prefix}_bytes"), config.field(f"{prefix}_lane")
    beat = _addresses(config.field(f"{prefix}_base"), _levels(config),
                      [config.field(f"{prefix}_step{i}") for i in range(STREAM_LEVELS)])
    if prefix == "a" and config.field("a_indirect"):
        index = stream_operand(config, dram, "b")[:, 0]
        return ((beat + index * lane) & 0xFFFFFFFF)[:, None]
    if lane in (0, nbytes):
        return beat[:, None]
    return (beat[:, None] + lane * np.arange(lanes)[None, :]) & 0xFFFFFFFF


def vrun_requests(config, bytes_per_cycle: int, dram) -> np.ndarray:
    """A VRUN's read and write addresses in the order the memory sees them."""
    cost, last, gap = vrun_transactions(config)
    issue = vrun_issue_cycles(cost, bytes_per_cycle, gap)
    order = ("b", "a") if config.field("a_indirect") else ("a", "b")
    reads = np.concatenate([_operand_reads(config, p, dram) for p in order
                            if p == "a" or config.field("b_on")], axis=1).reshape(-1)
    emitting = np.flatnonzero(vrun_emits(config))
    writes = _addresses(config.field("o_base"), _levels(config, "o_"),
                        [config.field(f"o_step{i}") for i in range(STREAM_LEVELS)])[:emitting.size]
    when = np.concatenate([issue[last][emitting] + 2 + VECTOR_LATENCY_CYCLES, issue])
    kind = np.concatenate([np.zeros(writes.size, np.int64), np.ones(reads.size, np.int64)])
    order_ = np.lexsort((kind, when))
    return np.concatenate([writes, reads])[order_]


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
            parts.append(vrun_requests(configs[index], geom.dram_bytes_per_cycle, dram))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def program_dram_stalls(geom: Geometry, instrs, dram, timing: DramTiming | None) -> int:
    """Cycles the program's DRAM requests wait on the row buffers (0 with the ideal memory)."""
    return 0 if timing is None else stall_cycles(dram_requests(geom, instrs, dram), timing)
