"""Arm's Ethos-U compiler (Vela, `pip install ethos-u-vela`, 5.2) for benchmarks/tflite.py: the
command, and readers of the two CSV files it writes with --verbose-performance.

`OUT/<network>_per-layer.csv`, one row per NPU (or CPU) operation Vela schedules, in order:
  Original Operator  the TFLite builtin the row comes from (CamelCase: Conv2D, AvgPool, Softmax)
  NNG Operator      Vela's own operation (a Softmax becomes ~26 elementwise and LUT operations;
                    a fused activation is a separate row with 0 cycles)
  Op Cycles         the operation's estimated cycles; NPU the compute part; SRAM AC, DRAM AC,
                    OnFlash AC, OffFlash AC the memory-access cycles per memory (cycles, not bytes)
  MAC Count, Name   (Name: the operation's output tensor, the TFLite tensor name for the row
                    that writes the original operator's output)
`OUT/<network>_summary_<system config>.csv`, one row: clock (core_clock, Hz), cycles_total,
cycles_npu, the bytes read and written per memory (sram_total_bytes, dram_total_bytes,
off_chip_flash_total_bytes, ...), the memory areas used (sram_memory_used, KiB), nn_macs.
Vela gives bytes only per network; per layer it gives access cycles.
"""
from __future__ import annotations

import csv
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

ACCELERATORS = ("ethos-u55-256", "ethos-u65-512")

_NUMERIC = {"Op Cycles": "cycles", "NPU": "npu_cycles", "SRAM AC": "sram_access_cycles",
            "DRAM AC": "dram_access_cycles", "OnFlash AC": "onchip_flash_access_cycles",
            "OffFlash AC": "offchip_flash_access_cycles", "MAC Count": "macs"}


@dataclass(frozen=True)
class VelaRow:
    original_op: str
    vela_op: str
    target: str              # "NPU" or "CPU"
    name: str
    cycles: int
    npu_cycles: int
    sram_access_cycles: int
    dram_access_cycles: int
    onchip_flash_access_cycles: int
    offchip_flash_access_cycles: int
    macs: int


@dataclass(frozen=True)
class VelaResult:
    accelerator: str
    rows: list[VelaRow]
    summary: dict            # the summary CSV's columns: numbers as float, the rest as str
    seconds: float


class VelaFormatError(ValueError):
    """A Vela CSV without the columns this reader needs (another Vela version)."""


def parse_per_layer(text: str) -> list[VelaRow]:
    reader = csv.DictReader(io.StringIO(text))
    needed = {"Original Operator", "NNG Operator", "Target", "Name", *_NUMERIC}
    missing = needed - set(reader.fieldnames or ())
    if missing:
        raise VelaFormatError(f"per-layer CSV lacks columns {sorted(missing)}; has {reader.fieldnames}")
    rows = []
    for line, record in enumerate(reader, start=2):
        try:
            numbers = {field: int(round(float(record[col]))) for col, field in _NUMERIC.items()}
        except (TypeError, ValueError):
            raise VelaFormatError(f"per-layer CSV line {line}: a number column is not a number: "
                                  f"{record}") from None
        rows.append(VelaRow(original_op=record["Original Operator"].strip(),
                            vela_op=record["NNG Operator"].strip(), target=record["Target"].strip(),
                            name=record["Name"].strip(), **numbers))
    return rows


def parse_summary(text: str) -> dict:
    records = list(csv.DictReader(io.StringIO(text)))
    if len(records) != 1:
        raise VelaFormatError(f"summary CSV has {len(records)} data rows, expected 1")

    def value(text: str):
        try:
            return float(text)
        except ValueError:
            return text
    summary = {key.strip(): value(v.strip()) for key, v in records[0].items()}
    for key in ("cycles_total", "core_clock"):
        if not isinstance(summary.get(key), float):
            raise VelaFormatError(f"summary CSV lacks the number {key!r}")
    return summary


def vela_command(tflite: Path, accelerator: str, out_dir: Path) -> list[str]:
    """Vela with its default system configuration for the accelerator (the vela.ini shipped
    with it: U55 High_End_Embedded, Shared_Sram, 500 MHz; U65 Client_Server, Dedicated_Sram_384KB,
    1 GHz)."""
    return ["vela", str(tflite), "--accelerator-config", accelerator, "--verbose-performance",
            "--output-dir", str(out_dir)]


def run_vela(tflite: Path, accelerator: str, out_dir: Path) -> VelaResult:
    import time
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    done = subprocess.run(vela_command(tflite, accelerator, out_dir), capture_output=True, text=True,
                          timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"vela {accelerator} on {tflite.name} exited {done.returncode}: "
                           f"{done.stderr.strip()[-2000:] or done.stdout.strip()[-2000:]}")
    per_layer = out_dir / f"{tflite.stem}_per-layer.csv"
    summaries = sorted(out_dir.glob(f"{tflite.stem}_summary_*.csv"))
    if not per_layer.exists() or len(summaries) != 1:
        raise RuntimeError(f"vela wrote {sorted(p.name for p in out_dir.iterdir())} in {out_dir}, "
                           f"expected {per_layer.name} and one summary CSV")
    return VelaResult(accelerator, parse_per_layer(per_layer.read_text()),
                      parse_summary(summaries[0].read_text()), seconds)
