"""Cycle model of N cores sharing the DRAM port (hw/cores.py, hw/arbiter.py).

Each core follows the single-core schedule (qsim/npu/cycle_model.py: instruction i held from
d_{i-1} + 1, dispatched when its unit and its waits allow) with one more condition: a DRAM
instruction (LOAD, STORE, LOADW, VRUN) also needs the port. The port is free in cycle t when no
core's DRAM unit is busy in t; a transfer dispatched at T with duration D holds it until
T + D + 1 (the same rule as a core's own DMA unit). In a free cycle the requesting cores
(those whose DRAM instruction could dispatch but for the port) are granted round-robin: the
first after the last core granted, in index order wrapping around (core 0 first).

Non-DRAM instructions of a core depend only on that core, so each core runs ahead to its next
DRAM instruction and the cores meet only at the port: the loop grants one transfer at a time,
in the order the arbiter grants them. With one core the port is the core's own DMA unit and
the schedule is exactly cycle_model.schedule's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hw.params import Geometry
from ..cycle_model import _configured, instr_duration, instr_unit, vrun_configs


@dataclass(frozen=True)
class CoreTiming:
    """One core's part of a co-scheduled run."""
    dispatch: np.ndarray        # cycle each instruction dispatched
    cycles: int                 # the first cycle this core is idle with nothing left to run
    arbitration_cycles: int     # cycles its DRAM instructions waited for the port (sum)
    grants: int                 # its DRAM transfers (one grant each)


class _Core:
    def __init__(self, geom: Geometry, instrs, dram):
        self.geom, self.instrs = geom, instrs
        self.configs = vrun_configs(geom, instrs, dram) if _configured(instrs) else {}
        self.dispatch = np.zeros(len(instrs), np.int64)
        self.free = {"dma": 0, "compute": 0}
        self.index, self.prev, self.waited, self.grants = 0, 0, 0, 0
        self.ready = None           # cycle the held DRAM instruction first requests the port

    def _earliest(self, instr) -> int:
        unit = instr_unit(instr)
        t = self.prev + 1
        if unit:
            t = max(t, self.free[unit])
        if instr.wait_dma:
            t = max(t, self.free["dma"])
        if instr.wait_compute:
            t = max(t, self.free["compute"])
        return t

    def issue(self, t: int) -> int:
        """Dispatches the held instruction at t; returns the cycle its unit is free again."""
        instr = self.instrs[self.index]
        unit = instr_unit(instr)
        if unit:
            self.free[unit] = t + instr_duration(self.geom, instr, self.configs.get(self.index)) + 1
        self.dispatch[self.index] = self.prev = t
        self.index += 1
        return self.free[unit] if unit else t

    def run_to_port(self) -> None:
        """Dispatches every instruction up to the next DRAM one, which then waits in `ready`."""
        self.ready = None
        while self.index < len(self.instrs):
            instr = self.instrs[self.index]
            t = self._earliest(instr)
            if instr_unit(instr) == "dma":
                self.ready = t
                return
            self.issue(t)

    def timing(self) -> CoreTiming:
        end = max(self.prev + 1, self.free["dma"], self.free["compute"])
        return CoreTiming(self.dispatch, int(end), int(self.waited), self.grants)


def co_schedule(geom: Geometry, programs: list[tuple[list, np.ndarray]]) -> list[CoreTiming]:
    """The timing of every core running its (instructions, initial DRAM image) at once, cycle 0
    the first after reset for all (an empty program: idle from cycle 1, as on one core)."""
    cores = [_Core(geom, instrs, dram) for instrs, dram in programs]
    for core in cores:
        core.run_to_port()
    port_free, last = 0, len(cores) - 1
    while True:
        waiting = [k for k, c in enumerate(cores) if c.ready is not None]
        if not waiting:
            break
        t = max(port_free, min(cores[k].ready for k in waiting))
        asking = {k for k in waiting if cores[k].ready <= t}
        winner = next((last + step) % len(cores) for step in range(1, len(cores) + 1)
                      if (last + step) % len(cores) in asking)
        core = cores[winner]
        core.waited += t - core.ready
        core.grants += 1
        port_free = core.issue(t)
        last = winner
        core.run_to_port()
    return [c.timing() for c in cores]
