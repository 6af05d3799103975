"""The three engines that run one NPU program: model (numpy), amaranth, verilator.

All three return the same DRAM contents and cycle count for the same program;
the RTL engines are checked against the model's schedule on every run.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import MismatchError, UsageError
from ..hw.params import Geometry
from .array.compile import Program
from .cycle_model import CycleStats, cycle_stats, execute
from .sim_verilator import run_verilator
from .dram import DramTiming
from .dram.trace import program_dram_stalls


class Engine(enum.Enum):
    MODEL = "model"
    AMARANTH = "amaranth"
    VERILATOR = "verilator"

    @classmethod
    def parse(cls, name) -> "Engine":
        if isinstance(name, Engine):
            return name
        try:
            return cls(str(name).lower())
        except ValueError:
            raise UsageError(f"unknown engine '{name}'",
                             hint=f"choose one of {', '.join(e.value for e in cls)}") from None


@dataclass
class ProgramRun:
    output: np.ndarray
    stats: CycleStats
    engine: Engine
    table_bytes: int = 0        # vector programs: bytes of tensor attributes (TABLE contents) read
    program: Program | None = None   # kept when the output mismatched: fault location and waveforms


def run_program(geom: Geometry, program: Program, engine="model", what: str = "program",
                dram_timing: DramTiming | None = None) -> ProgramRun:
    """`dram_timing` (default: geom.dram) None: the ideal memory; otherwise the row-buffer model (qsim/npu/dram/timing.py),
    whose waits stop the whole NPU and so add to the ideal cycles (counted as stall)."""
    engine = Engine.parse(engine)
    dram_timing = dram_timing if dram_timing is not None else geom.dram
    dram = program.dram.copy()
    stats = cycle_stats(geom, program.instrs, program.dram)
    waits = program_dram_stalls(geom, program.instrs, program.dram, dram_timing)
    stats.total_cycles += waits
    stats.stall_cycles += waits
    if engine is Engine.MODEL:
        execute(geom, program.instrs, dram)
        cycles = stats.total_cycles
    elif engine is Engine.AMARANTH:
        from .sim_amaranth import run_amaranth  # deferred: imports amaranth and elaborates the RTL (~0.4 s)
        cycles = run_amaranth(geom, program.instrs, dram, dram_timing=dram_timing)
    else:
        cycles = run_verilator(geom, program.instrs, dram, dram_timing=dram_timing)
    if cycles != stats.total_cycles:
        raise MismatchError(f"{what}: the {engine.value} engine took {cycles} cycles, the cycle "
                            f"model predicts {stats.total_cycles}",
                            hint="the RTL and qsim/npu/cycle_model.py disagree on the schedule")
    return ProgramRun(program.output(dram), stats, engine)
