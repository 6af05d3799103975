"""qsim's side of benchmarks/tflite.py: the CLI as a user runs it (`qsim quantize m.tflite -o Q`,
`qsim simulate Q --engine model`), and the integer run with every tensor kept for the
per-operator comparison with LiteRT.

NPU configurations at Vela's MACs per cycle: Ethos-U55-256 (256 MACs/cycle) -> a 16x16 array,
Ethos-U65-512 -> 16x32 (16 rows of K, 32 output-channel columns). Buffers as qsim's presets
(16 KiB input and weight, 64 KiB accumulators per 8x8, scaled with the array); DRAM bandwidth
and clock as Vela's system configuration for the same accelerator gives its SRAM (where Vela
keeps feature maps; qsim's one DRAM holds feature maps and weights): U55 High_End_Embedded
4 GB/s at 500 MHz = 8 B/cycle, U65 Client_Server 16 GB/s at 1 GHz = 16 B/cycle.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class NpuSetup:
    accelerator: str        # Vela's --accelerator-config it stands beside
    rows: int
    cols: int
    dram_bytes_per_cycle: int
    clock_mhz: float

    @property
    def name(self) -> str:
        return f"{self.rows}x{self.cols}"

    def toml(self) -> str:
        from qsim.hw.params import Dataflow
        from qsim.npu.config import NpuConfig
        kib = 1024
        return NpuConfig(name=self.name, rows=self.rows, cols=self.cols,
                         dataflow=Dataflow.WEIGHT_STATIONARY,
                         input_buffer_bytes=2 * kib * self.rows, weight_buffer_bytes=2 * kib * self.cols,
                         accumulator_buffer_bytes=8 * kib * self.cols,
                         dram_bytes_per_cycle=self.dram_bytes_per_cycle, clock_mhz=self.clock_mhz).to_toml()


SETUPS = (NpuSetup("ethos-u55-256", 16, 16, 8, 500.0), NpuSetup("ethos-u65-512", 16, 32, 16, 1000.0))


class QsimFailed(RuntimeError):
    """A qsim command exited non-zero; the message is its stderr (qsim's error text)."""


def _qsim(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "qsim", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)
    if done.returncode != 0 and not (done.returncode == 1 and args[0] == "simulate"):
        text = (done.stderr.strip() or done.stdout.strip())
        raise QsimFailed(f"qsim {args[0]} exited {done.returncode}: {text[-3000:]}")
    return done


def command_line(args: list[str]) -> str:
    return "qsim " + " ".join(args)


def quantize_args(tflite: Path, out: Path) -> list[str]:
    return ["quantize", str(tflite), "-o", str(out), "-q"]


def simulate_args(qmodel: Path, config: Path, engine: str, x: Path, out: Path) -> list[str]:
    return ["simulate", str(qmodel), "--config", str(config), "--engine", engine, "--input", str(x),
            "-o", str(out), "--workers", "1", "-q"]


def quantize(tflite: Path, out: Path) -> None:
    _qsim(quantize_args(tflite, out), timeout=3600)


def simulate(qmodel: Path, setup: NpuSetup, engine: str, x: np.ndarray, work: Path) -> dict:
    """`qsim simulate` on one int8 input; its report.json (exit 1, a layer not bit-exact with
    the kernels, still writes the report: `all_verified` says so)."""
    work.mkdir(parents=True, exist_ok=True)
    config, xfile = work / f"{setup.name}.toml", work / "input.npy"
    config.write_text(setup.toml())
    np.save(xfile, x)
    out = work / f"{setup.name}-{engine}"
    _qsim(simulate_args(qmodel, config, engine, xfile, out), timeout=7200)
    return json.loads((out / "report.json").read_text())


def integer_names(qmodel: Path) -> dict[str, str]:
    """The quantized model's tensor_map: source (TFLite) tensor name -> integer tensor name."""
    from qsim.quant.qmodel import read_metadata
    return {source: entry["tensor"] for source, entry in read_metadata(qmodel).get("tensor_map", {}).items()
            if isinstance(entry, dict) and "tensor" in entry}


def integer_run(qmodel: Path, x: np.ndarray) -> dict[str, list[np.ndarray]]:
    """qsim's integer execution (the kernels backend, every tensor kept) of one int8 input,
    keyed by the source model's tensor names (the quantized model's tensor_map): per name the
    integer tensor as qsim holds it (TOSA's NHWC, TFLite's layout too) and, where the map has
    a permutation, the same in the float graph's layout (the reader may build that NCHW); the
    comparison takes the one of the reference's shape."""
    from qsim.quant.qmodel import load_quantized_model
    from qsim.runtime.executor import execute

    model = load_quantized_model(qmodel)
    (name,) = model.graph.inputs
    values = execute(model.graph, {name: x.astype(model.graph.tensor(name).dtype.numpy)})
    out = {}
    for source, lowered in model.tensor_map.items():
        if lowered.name in values:
            value = values[lowered.name]
            out[source] = [value] + ([np.transpose(value, np.argsort(lowered.perm))] if lowered.perm else [])
    return out
