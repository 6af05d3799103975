"""cocotb tests: one per layer that the driver runs. Each drives the DUT with the layer's
inputs (for the qsim NPU: its programs and DRAM images, built from the golden input, weight,
bias and requantization vectors) and checks every element the DUT wrote against the golden
tensor in vectors/. A failure names the layer, the vector file and the first differing element.

The testbench folder is $QSIM_TB_DIR (run.py sets it), else this file's folder.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import cocotb

from golden_check import PROGRAMS, MANIFEST, load_layers, mismatch
from npu_driver import QsimNpuDriver

TB_DIR = Path(os.environ.get("QSIM_TB_DIR") or Path(__file__).resolve().parent)
LAYERS = load_layers(TB_DIR)
RUN = [layer for layer in LAYERS if layer.programs]
ONLY = os.environ.get("QSIM_TB_LAYERS")          # comma-separated layer folders, for a quick rerun
if ONLY:
    RUN = [layer for layer in RUN if layer.folder in ONLY.split(",") or layer.test_name in ONLY.split(",")]


def make_driver(dut) -> QsimNpuDriver:
    """The driver of this testbench: replace it for a DUT with another interface (npu_driver.py)."""
    programs = json.loads((TB_DIR / PROGRAMS / MANIFEST).read_text())
    return QsimNpuDriver(dut, instr_bytes=programs["instr_bytes"], port_bytes=programs["dram_port_bytes"])


@cocotb.test()
@cocotb.parametrize(name=[layer.test_name for layer in RUN])
async def layer(dut, name: str) -> None:
    layer = next(lay for lay in RUN if lay.test_name == name)
    driver = make_driver(dut)
    expected = layer.golden(TB_DIR)
    actual, cycles = await driver.run_layer(layer, expected.shape, expected.dtype)
    problem = mismatch(layer, layer.check, expected, np.asarray(actual))
    assert problem is None, problem
    dut._log.info("layer %r (%s, %s unit): %d elements of %s equal the golden vectors, %d cycles",
                  layer.name, layer.op, layer.unit, expected.size, layer.check, sum(cycles))
