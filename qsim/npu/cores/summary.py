"""The per-core part of a run's report: every core's cycles over the array layers and its waits
for the DRAM port (qsim/npu/cores/layer.py), as one sentence."""
from __future__ import annotations

CORE_NOTE_PREFIX = "cores:"


def core_note(run) -> str | None:
    """None for one core; else e.g. 'cores: 2 sharing the DRAM port; array-layer cycles per core
    1,200 / 1,150 (of them waiting for the port 80 / 95); the array layers took 1,230'."""
    n = run.config.cores
    if n == 1:
        return None
    layers = [s.layer for s in run.stages if s.layer is not None and s.layer.core_cycles]
    cycles = [sum(layer.core_cycles[k] for layer in layers) for k in range(n)]
    waits = [sum(layer.arbitration_cycles[k] for layer in layers) for k in range(n)]
    return (f"{CORE_NOTE_PREFIX} {n} sharing the DRAM port; array-layer cycles per core "
            f"{' / '.join(f'{c:,}' for c in cycles)} (of them waiting for the port "
            f"{' / '.join(f'{w:,}' for w in waits)}); the array layers took "
            f"{sum(layer.cycles for layer in layers):,} (each round as long as its slowest core)")
