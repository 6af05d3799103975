"""The NPU options `qsim simulate` and `qsim explore` share: the base configuration, the engine,
the input the NPU runs, the energy (and area) table and where the tasks run. One definition, so
that both commands spell and explain them alike; each passes what differs (the engine's default
and the words for its tasks)."""
from __future__ import annotations

import argparse

from .arguments import add_pool_arguments

CONFIG_HELP = ("a TOML file or a preset (8x8, 16x16, 32x32; append :os for output-stationary and/or "
               ":ddr4-3200 / :lpddr4-4266 for DRAM timing, off by default); default 16x16")
ENGINES = {"verilator": "verilator (RTL compiled with Verilator, build cached)",
           "model": "model (numpy cycle model)",
           "amaranth": "amaranth (Amaranth's simulator, small arrays)"}


def add_npu_arguments(p: argparse.ArgumentParser, *, config_role: str, engine_default: str,
                      engine_role: str, input_default: str, tasks: str) -> None:
    """--config, --engine, --input, --tech, --workers and --scheduler. `config_role`: what the
    configuration is to the command; `engine_role`: what the engine does in it; `input_default`:
    the input without --input; `tasks`: what runs as the pool's tasks (add_pool_arguments)."""
    p.add_argument("--config", default="16x16", metavar="CFG", help=f"{config_role}: {CONFIG_HELP}")
    engines = [f"{ENGINES[engine_default]}, the default"] + [v for k, v in ENGINES.items() if k != engine_default]
    p.add_argument("--engine", default=engine_default, metavar="ENGINE",
                   help=f"{engine_role}: " + ", ".join(engines))
    p.add_argument("--input", action="append", metavar="[NAME=]X.npy",
                   help="model input the NPU runs: float (quantized with the model's input scale) or "
                        "integer (used as is); in graph input order or by name, one per model input "
                        f"(repeatable); default: {input_default}")
    p.add_argument("--tech", metavar="NAME|FILE",
                   help="per-event energy (and area) table: 45nm (default), 7nm, or a TOML file of the "
                        "same form (docs/npu.md, Energy)")
    add_pool_arguments(p, tasks)
