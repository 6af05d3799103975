"""The sentences of a throughput report that say how its figures were made, generated from the
run's layer records (qsim.report.throughput.LayerThroughput), never written in advance: which
engine computed each unit's layers (the RTL or the numpy cycle model), which stages ran on
the host and why, and what the energy counts.

A layer's `rtl` flag says where its values and cycles came from (the engine that ran its
program, reported back by the task that ran it); `unit` says which part of the NPU ran it.
Every sentence below counts the layers it speaks of from those two fields, so a report
cannot say one thing in its notes and another in its layer table.
"""
from __future__ import annotations

from typing import Sequence

from ..npu.vector.ops import HOST_OPS

UNIT_NAMES = {"array": "systolic-array", "vector": "vector-unit"}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def engine_sentences(layers: Sequence, engine: str) -> list[str]:
    """One sentence per (unit, where its values and cycles came from) present in `layers`,
    then one for the host stages; `engine` is the run's engine name."""
    sentences = []
    for unit, name in UNIT_NAMES.items():
        on_unit = [layer for layer in layers if layer.unit == unit]
        on_rtl = sum(1 for layer in on_unit if layer.rtl)
        if on_rtl:
            sentences.append(f"{_count(on_rtl, name + ' layer')}: values and cycles from the RTL "
                             f"({engine} engine).")
        if len(on_unit) - on_rtl:
            sentences.append(f"{_count(len(on_unit) - on_rtl, name + ' layer')}: values and cycles "
                             "from the numpy cycle model (model engine; the same values and cycles as "
                             "the RTL, checked by the tests).")
    host = [layer for layer in layers if layer.unit == "host"]
    if host:
        moves = sum(1 for layer in host if layer.op in HOST_OPS)
        reasons = []
        if moves:
            reasons.append(f"{_count(moves, 'reshape')} (no data changes, so no work)")
        if len(host) - moves:
            reasons.append(f"{_count(len(host) - moves, 'operator')} neither NPU unit takes (each "
                           "one's note says why)")
        sentences.append(f"{_count(len(host), 'host stage')}: computed by the kernels on the host, "
                         f"no NPU cycles counted: {' and '.join(reasons)}.")
    return sentences


def energy_sentence(layers: Sequence, tech_name: str, tech_source: str) -> str:
    host = sum(1 for layer in layers if layer.unit == "host")
    return (f"energy: event counts of each stage's program (MACs, buffer words, DRAM bytes, vector "
            f"operations) x the '{tech_name}' table ({tech_source})"
            + (f"; the {_count(host, 'host stage')} count no events" if host else "") + " (docs/npu.md, Energy).")


def host_arithmetic(layers: Sequence) -> list:
    """The host stages that compute something (everything but the reshapes of HOST_OPS): work
    the NPU's cycles and energy leave out."""
    return [layer for layer in layers if layer.unit == "host" and layer.op not in HOST_OPS]


def host_arithmetic_warning(layers: Sequence) -> str:
    """'' when the host only reshapes; else the clause every summary line ends with."""
    host = host_arithmetic(layers)
    if not host:
        return ""
    ops = sorted({layer.op for layer in host})
    return (f"{_count(len(host), 'arithmetic layer')} ({', '.join(ops)}) on the host: not in the "
            "cycles or energy, which are understated")
