"""SCALE-Sim (PyPI `scalesim`, benchmark-only: `pip install scalesim`) on the same layers,
array and dataflow as benchmarks/npu.py.

SCALE-Sim counts cycles from address traces: it builds per-fold "demand matrices" (one row
per cycle) and, for the full run, simulates double-buffered SRAMs against a DRAM bandwidth.
Two modes:
- compute: SCALE-Sim's compute model only (systolic_compute_ws demand matrices). Its compute
  cycles are the demand-matrix rows minus one; for WS that is
  ceil(K/R) * ceil(N/C) * (2R + C + M - 2) - 1 (checked against the formula here).
- full: SCALE-Sim's whole run (compute + memory system, user bandwidth): total and stall
  cycles per layer, from its COMPUTE_REPORT. Slow (minutes per ResNet layer on this machine).

SCALE-Sim has no padding parameter: the IFMAP it is given is the padded input
(size + pad_top + pad_bottom), so its output size and M match the TOSA layer's.
scalesim 3.0.0 calls int() on 1-element arrays (int(max(array))), which NumPy 2 rejects; the
two memory modules get a module-level `max` that returns a NumPy scalar (shim below).
"""
from __future__ import annotations

import contextlib
import io
import math
import tempfile
import time
from pathlib import Path

import numpy as np

CONFIG = """[general]
run_name = {name}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_kb}
FilterSramSzkB: {filter_kb}
OfmapSramSzkB: {ofmap_kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bandwidth}
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bandwidth}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bandwidth}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""

# 20 layout columns SCALE-Sim parses per layer (unused without a custom layout)
LAYOUT_ROW = "1,1,1,1,1,1,0,1,2,0,1,2,0,1,2,3,0,1,2,3"


def available() -> str | None:
    """SCALE-Sim's version, or None when the package is not installed."""
    try:
        from importlib.metadata import version
        import scalesim  # noqa: F401
        return version("scalesim")
    except Exception:
        return None


def ws_formula(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """The WS compute cycles SCALE-Sim's compute model produces (issue 5)."""
    return math.ceil(k / rows) * math.ceil(n / cols) * (2 * rows + cols + m - 2) - 1


def _write_inputs(folder: Path, layers, config) -> tuple[Path, Path, Path]:
    cfg = folder / "qsim.cfg"
    cfg.write_text(CONFIG.format(
        name="qsim_resnet18", rows=config.rows, cols=config.cols,
        ifmap_kb=max(1, config.input_buffer_bytes // 1024),
        filter_kb=max(1, config.weight_buffer_bytes // 1024),
        ofmap_kb=max(1, config.accumulator_buffer_bytes // 4 // 1024),
        bandwidth=config.dram_bytes_per_cycle, dataflow=config.dataflow.value))
    topo = folder / "resnet18.csv"
    lines = ["Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
             "Num Filter, Strides,"]
    for layer in layers:
        padded = layer.size + layer.pad[0] + layer.pad[1]
        lines.append(f"{layer.name},{padded},{padded},{layer.kernel},{layer.kernel},"
                     f"{layer.in_channels},{layer.out_channels},{layer.stride},")
    topo.write_text("\n".join(lines) + "\n")
    layout = folder / "layout.csv"
    layout.write_text("Layer name," + ",".join(f"c{i}" for i in range(20)) + ",\n"
                      + "".join(f"{layer.name},{LAYOUT_ROW},\n" for layer in layers))
    return cfg, topo, layout


def _numpy2_shim() -> None:
    import scalesim.memory.double_buffered_scratchpad_mem as scratchpad
    import scalesim.memory.read_buffer as read_buffer

    def scalar_max(*args):
        values = args[0] if len(args) == 1 else [np.max(a) for a in args]
        return np.max(np.asarray(values))
    read_buffer.max = scalar_max
    scratchpad.max = scalar_max


def compute_cycles(layers, config) -> tuple[list[dict], float]:
    """SCALE-Sim's compute model per layer: [{"compute_cycles", "m", "formula"}], seconds."""
    from scalesim.layout_utils import layouts
    from scalesim.scale_config import scale_config
    from scalesim.single_layer_sim import single_layer_sim
    from scalesim.topology_utils import topologies
    results = []
    with tempfile.TemporaryDirectory(prefix="qsim-scalesim-") as tmp:
        cfg_path, topo_path, layout_path = _write_inputs(Path(tmp), layers, config)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            cfg = scale_config()
            cfg.read_conf_file(str(cfg_path))
            topo = topologies()
            topo.load_arrays(topofile=str(topo_path))
            layout = layouts()
            layout.load_arrays(layoutfile=str(layout_path))
            for i, layer in enumerate(layers):
                sim = single_layer_sim()
                sim.set_params(layer_id=i, config_obj=cfg, topology_obj=topo, layout_obj=layout,
                               verbose=False)
                _, ifmap = sim.op_mat_obj.get_ifmap_matrix()
                _, filt = sim.op_mat_obj.get_filter_matrix()
                _, ofmap = sim.op_mat_obj.get_ofmap_matrix()
                sim.compute_system.set_params(config_obj=cfg, ifmap_op_mat=ifmap, filter_op_mat=filt,
                                              ofmap_op_mat=ofmap)
                demand, _, _ = sim.compute_system.get_demand_matrices()
                m, k, n = ifmap.shape[0], filt.shape[0], filt.shape[1]
                results.append({"compute_cycles": int(demand.shape[0]) - 1, "m": m, "k": k, "n": n,
                                "formula": ws_formula(m, k, n, config.rows, config.cols)})
                del sim, demand
        seconds = time.perf_counter() - start
    return results, seconds


def full_run(layers, config) -> tuple[list[dict], float]:
    """SCALE-Sim's whole simulation (memory system included): per layer total/stall cycles."""
    from scalesim.scale_sim import scalesim
    _numpy2_shim()
    with tempfile.TemporaryDirectory(prefix="qsim-scalesim-") as tmp:
        cfg_path, topo_path, layout_path = _write_inputs(Path(tmp), layers, config)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            sim = scalesim(save_disk_space=True, verbose=False, config=str(cfg_path),
                           topology=str(topo_path), layout=str(layout_path))
            sim.run_scale(top_path=str(Path(tmp) / "out"))
        seconds = time.perf_counter() - start
        results = []
        for layer_sim in sim.runner.single_layer_sim_object_list:
            total_with_prefetch, total, stalls, util, mapping, compute_util = \
                layer_sim.get_compute_report_items()[:6]
            results.append({"total_cycles_with_prefetch": int(total_with_prefetch),
                            "total_cycles": int(total), "stall_cycles": int(stalls),
                            "compute_cycles": int(total) - int(stalls),
                            "utilization_percent": float(util)})
    return results, seconds
