"""DRAM timing of the NPU's modelled memory: the row-buffer model and its profiles (timing.py,
profiles.toml) and the request sequence of a program (trace.py)."""
from .timing import (SHAPE_KEYS, TIMING_KEYS, DramTiming, RowBuffers, ns_to_cycles, profile_timing,
                     profiles, stall_cycles)

__all__ = ["SHAPE_KEYS", "TIMING_KEYS", "DramTiming", "RowBuffers", "ns_to_cycles", "profile_timing",
           "profiles", "stall_cycles"]
