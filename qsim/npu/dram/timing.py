"""DRAM timing: a row-buffer (open-page) model of the memory the NPU's DMAs talk to.

Off by default: without a `dram` key the memory is the ideal one (every request served in
the cycle it is made; only dram_bytes_per_cycle paces the DMAs), so every cycle figure of
a configuration without the key is the same as before the model existed.

With a profile (profiles.toml beside this module, or explicit keys) every DRAM
request (a DMA read of one port word, or a write) addresses bank b = (a // row_bytes) % banks,
row r = a // (row_bytes * banks), a its first byte. The request costs, before it is served:
  the bank's open row is r (a hit)           0 cycles (CAS pipelined behind the stream)
  the bank has no open row                   tRCD + tCL
  the bank has another row open (conflict)   tRP + tRCD + tCL
and leaves r open in b. The memory holds `dram_stall` high for that many cycles while the
request waits (hw/top.py): the whole NPU stands still, so the request order of a program is
the same as with the ideal memory and its cycles are the ideal ones plus the sum of the
costs (`stall_cycles`). That is a conservative model (a real controller lets compute run on
during a DMA's wait); it keeps the three engines equal by construction. Burst size is recorded
for the reports; bandwidth stays dram_bytes_per_cycle.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ...errors import UsageError

PROFILES_PATH = Path(__file__).with_name("profiles.toml")
TIMING_KEYS = ("trcd", "trp", "tcl")
SHAPE_KEYS = ("banks", "row_bytes", "burst_bytes")


@dataclass(frozen=True)
class DramTiming:
    """Row-buffer timing in NPU clock cycles."""
    trcd: int
    trp: int
    tcl: int
    banks: int
    row_bytes: int
    burst_bytes: int
    profile: str = ""

    def __post_init__(self):
        for key in TIMING_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 20:
                raise UsageError(f"DRAM timing '{key}' = {value!r} must be an integer number of cycles "
                                 f"in [0, {1 << 20}]", hint="negative latencies do not exist: use 0 or more")
        for key in SHAPE_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 24:
                raise UsageError(f"DRAM '{key}' = {value!r} must be a positive integer (at most {1 << 24})",
                                 hint="banks, row_bytes and burst_bytes come from the part's datasheet")

    @property
    def miss_cycles(self) -> int:
        return self.trcd + self.tcl

    @property
    def conflict_cycles(self) -> int:
        return self.trp + self.trcd + self.tcl

    def params(self) -> list[int]:
        """The integers the testbench memories take (qsim/npu/sim_amaranth.py, qsim/npu/harness.cpp), in this order."""
        return [self.trcd, self.trp, self.tcl, self.banks, self.row_bytes]


def profiles() -> dict[str, dict]:
    return tomllib.loads(PROFILES_PATH.read_text(encoding="utf-8"))


def ns_to_cycles(ns: float, clock_mhz: float) -> int:
    """ceil(ns * f): a time in nanoseconds as whole cycles at clock_mhz (exact decimal arithmetic)."""
    return math.ceil(Fraction(str(ns)) * Fraction(str(clock_mhz)) / 1000)


def profile_timing(name: str, clock_mhz: float) -> DramTiming:
    table = profiles()
    if name.lower() not in table:
        raise UsageError(f"unknown DRAM profile '{name}'", hint=f"profiles: {', '.join(table)} "
                         f"(qsim/npu/dram/profiles.toml), or give dram_trcd/dram_trp/dram_tcl/"
                         f"dram_banks/dram_row_bytes/dram_burst_bytes")
    p = table[name.lower()]
    return DramTiming(**{k: ns_to_cycles(p[f"{k}_ns"], clock_mhz) for k in TIMING_KEYS},
                      **{k: p[k] for k in SHAPE_KEYS}, profile=name.lower())


class RowBuffers:
    """The open row of every bank, request by request (the testbench memory's state)."""

    def __init__(self, timing: DramTiming):
        self.timing = timing
        self.open = [-1] * timing.banks

    def cost(self, addr: int) -> int:
        t = self.timing
        bank, row = (addr // t.row_bytes) % t.banks, addr // (t.row_bytes * t.banks)
        was, self.open[bank] = self.open[bank], row
        return 0 if was == row else t.miss_cycles if was < 0 else t.conflict_cycles


def stall_cycles(addrs: np.ndarray, timing: DramTiming) -> int:
    """Sum of RowBuffers.cost over the requests `addrs` in order, vectorised: a request's cost
    depends only on the previous request to its bank."""
    addrs = np.asarray(addrs, np.int64)
    if not addrs.size:
        return 0
    page = addrs // timing.row_bytes
    bank, row = page % timing.banks, page // timing.banks
    order = np.argsort(bank, kind="stable")
    b, r = bank[order], row[order]
    first = np.ones(len(b), bool)
    first[1:] = b[1:] != b[:-1]
    conflict = ~first
    conflict[1:] &= r[1:] != r[:-1]
    return int(first.sum()) * timing.miss_cycles + int(conflict.sum()) * timing.conflict_cycles
