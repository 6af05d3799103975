"""Cycles of the embedded model on the NPU with the ideal memory and with the DRAM timing
profiles (qsim/npu/dram/profiles.toml), on the model engine (equal to the RTL's by the tests
in tests/npu/test_dram_timing.py). Prints a markdown table for reports/dram.md.

    PYTHONPATH=. python benchmarks/dram_timing.py [--config 16x16] [--engine model]
    PYTHONPATH=. python benchmarks/dram_timing.py --resnet18 [--config 16x16]

--resnet18: the 20 convolutions of ResNet-18 at 224x224 (benchmarks/_resnet18_layers.py,
seeded synthetic int8 data) as array layers, summed, instead of the embedded model.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from qsim.commands.quantized_model import default_input
from qsim.npu.config import load_config
from qsim.npu.dram import profile_timing, profiles
from qsim.npu.program import run_graph_on_npu
from qsim.quant.pipeline import embedded_quantized_model


def _resnet18_cycles(config, engine: str) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    from _resnet18_layers import resnet18_convs, synthetic
    from qsim.npu.layers import run_layer
    total = 0
    for layer in resnet18_convs():
        x, conv, rescale, clamp = synthetic(layer)
        total += run_layer(config.geometry, "CONV2D", [x], conv, rescale=rescale, clamp=clamp,
                           engine=engine, name=layer.name).cycles
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="16x16")
    parser.add_argument("--engine", default="model")
    parser.add_argument("--resnet18", action="store_true")
    args = parser.parse_args()
    base = load_config(args.config)
    if args.resnet18:
        run_cycles = lambda config: _resnet18_cycles(config, args.engine)   # noqa: E731
    else:
        model = embedded_quantized_model()
        feeds = default_input(model)

        def run_cycles(config):
            run = run_graph_on_npu(model.graph, feeds, config, engine=args.engine)
            assert run.verified
            return run.total_cycles
    print(f"| memory | cycles | DRAM stall cycles | vs ideal | latency at {base.clock_mhz:g} MHz (us) |")
    print("|---|---|---|---|---|")
    ideal = None
    for name in ["ideal", *profiles()]:
        timing = None if name == "ideal" else profile_timing(name, base.clock_mhz)
        config = dataclasses.replace(base, dram=timing)
        cycles = run_cycles(config)
        ideal = ideal or cycles
        print(f"| {name} | {cycles:,} | {cycles - ideal:,} | {cycles / ideal:.3f}x | "
              f"{cycles / base.clock_mhz:.2f} |", flush=True)


if __name__ == "__main__":
    main()
