"""One round of a multi-core layer: a program per core, run at once on one engine, with the
cycle model's co-schedule (schedule.py) as the reference every RTL run must equal, core by core.

Each core's cycle count is its own (the first cycle it is idle with its program done); the
round takes as long as its slowest core. Values: each program's output region of its own image.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import MismatchError, UsageError
from ...hw.params import Geometry
from ..array.compile import Program
from ..cycle_model import CycleStats, cycle_stats, execute
from ..engines import Engine
from .schedule import CoreTiming, co_schedule


@dataclass
class CoreRun:
    """One core's program in a round."""
    output: np.ndarray
    stats: CycleStats            # total_cycles: this core's cycles in the round, arbitration waits included
    timing: CoreTiming


def run_round(geom: Geometry, programs: list[Program], engine="model", what: str = "round") -> list[CoreRun]:
    """Runs program k on core k, all at once, sharing DRAM; checks every core's RTL cycle count
    against the co-schedule."""
    engine = Engine.parse(engine)
    if geom.dram is not None:
        raise UsageError("several cores with DRAM timing are not modelled",
                         hint="use cores = 1 with a DRAM profile, or no DRAM profile with cores > 1")
    drams = [p.dram.copy() for p in programs]
    timings = co_schedule(geom, [(p.instrs, p.dram) for p in programs])
    if engine is Engine.MODEL:
        for program, dram in zip(programs, drams):
            execute(geom, program.instrs, dram)
        cycles = [t.cycles for t in timings]
    elif engine is Engine.AMARANTH:
        from .testbench import run_amaranth_cores     # deferred: amaranth's simulator
        cycles = run_amaranth_cores(geom, [(p.instrs, d) for p, d in zip(programs, drams)])
    else:
        from .verilator import run_verilator_cores    # deferred: builds need amaranth and Verilator
        cycles = run_verilator_cores(geom, [(p.instrs, d) for p, d in zip(programs, drams)])
    runs = []
    for k, (program, dram, timing, got) in enumerate(zip(programs, drams, timings, cycles)):
        if got != timing.cycles:
            raise MismatchError(f"{what}: core {k} of {len(programs)} took {got} cycles on the {engine.value} "
                                f"engine, the cycle model predicts {timing.cycles}",
                                hint="the multi-core RTL (hw/cores.py) and qsim/npu/cores/schedule.py disagree")
        stats = cycle_stats(geom, program.instrs, program.dram)
        stats.total_cycles = timing.cycles
        stats.stall_cycles = timing.cycles - stats.compute_cycles - stats.fill_drain_cycles
        runs.append(CoreRun(program.output(dram), stats, timing))
    return runs
