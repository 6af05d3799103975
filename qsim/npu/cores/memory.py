"""The one DRAM the cores share, as the RTL testbenches hold it: every core's program image at
its own base (hw/cores.py adds base<k> to core k's addresses), in core order, each region
starting 64-byte aligned and followed by at least one DRAM port word of zeros, so that a read
running past the end of a core's image sees zeros as on one core (sim_amaranth.py,
harness.cpp: reads past the end return zeros)."""
from __future__ import annotations

import numpy as np

ALIGN = 64


def bases(sizes: list[int], port_bytes: int) -> list[int]:
    out, start = [], 0
    for size in sizes:
        out.append(start)
        start += -(-(size + port_bytes) // ALIGN) * ALIGN
    return out


def shared_image(drams: list[np.ndarray], port_bytes: int) -> tuple[np.ndarray, list[int]]:
    """The shared memory holding `drams` (uint8) and each one's base."""
    starts = bases([d.size for d in drams], port_bytes)
    total = starts[-1] + -(-(drams[-1].size + port_bytes) // ALIGN) * ALIGN if drams else 0
    memory = np.zeros(total, np.uint8)
    for start, dram in zip(starts, drams):
        memory[start:start + dram.size] = dram
    return memory, starts


def scatter(memory: np.ndarray, starts: list[int], drams: list[np.ndarray]) -> None:
    """Copies each core's region of `memory` back into its own image (in place)."""
    for start, dram in zip(starts, drams):
        dram[...] = memory[start:start + dram.size]
