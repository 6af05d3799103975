"""The NPU's vector unit: a cycle-cost model for the TOSA operators the array does not run.

The vector unit is modelled, not built in RTL: its values are the kernels' (qsim.tosa on
the kernels backend, applied to the NPU's own input tensors) and its cycles follow this
documented cost (docs/npu.md, "Vector unit"):

    lanes          = array columns C (one int8/int16/int32 element operation per lane per cycle)
    work           = element operations of the operator (WORK below)
    compute_cycles = ceil(work / lanes)
    memory_cycles  = ceil(dram_bytes / B)      (inputs + tensor attributes read, output written;
                                                B = dram_bytes_per_cycle)
    fill_drain     = VECTOR_PIPELINE_CYCLES    (DRAM read latency + the write-back register)
    stall_cycles   = max(0, memory_cycles - compute_cycles)   (streaming overlaps the two)
    cycles         = compute + fill_drain + stall

Operators that only reinterpret a tensor's shape (RESHAPE, IDENTITY, CONST) run on the
host at no cost: the bytes in DRAM are already the result.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VECTOR_PIPELINE_CYCLES = 2
HOST_OPS = frozenset({"RESHAPE", "IDENTITY", "CONST"})
# Operators whose work is counted over their input (reductions) rather than their output.
_INPUT_WORK = frozenset({"REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_ALL",
                         "REDUCE_ANY", "ARGMAX"})


@dataclass(frozen=True)
class VectorCost:
    work: int                 # element operations
    compute_cycles: int
    fill_drain_cycles: int
    stall_cycles: int
    dram_input_bytes: int     # activations read
    dram_weight_bytes: int    # tensor attributes read (TABLE contents, ...)
    dram_output_bytes: int

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.fill_drain_cycles + self.stall_cycles


def _window_area(attrs) -> int:
    kernel = attrs.get("kernel", (1, 1))
    return int(np.prod(kernel))


def work_of(op: str, attrs, inputs, outputs) -> int:
    """Element operations: pooling reads kernel-area elements per output (+1 for the
    average's scaling), reductions touch every input element, everything else one
    operation (compute or move) per output element."""
    out_elements = sum(int(np.size(o)) for o in outputs)
    if op == "MAX_POOL2D":
        return out_elements * _window_area(attrs)
    if op == "AVG_POOL2D":
        return out_elements * (_window_area(attrs) + 1)
    if op in _INPUT_WORK:
        return sum(int(np.size(i)) for i in inputs if i is not None)
    return out_elements


def vector_cost(op: str, attrs, inputs, outputs, lanes: int, bytes_per_cycle: int) -> VectorCost:
    """The cost of one operator on the vector unit (module docstring)."""
    work = work_of(op, attrs, inputs, outputs)
    read = sum(int(np.asarray(i).nbytes) for i in inputs if i is not None)
    attr_bytes = sum(int(v.nbytes) for v in attrs.values() if isinstance(v, np.ndarray))
    written = sum(int(np.asarray(o).nbytes) for o in outputs)
    compute = -(-work // lanes)
    memory = -(-(read + attr_bytes + written) // bytes_per_cycle)
    return VectorCost(work=work, compute_cycles=compute, fill_drain_cycles=VECTOR_PIPELINE_CYCLES,
                      stall_cycles=max(0, memory - compute), dram_input_bytes=read,
                      dram_weight_bytes=attr_bytes, dram_output_bytes=written)
