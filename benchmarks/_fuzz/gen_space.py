"""Fuzz target `explore-space`: the design-space file of `qsim explore --space-file` (a TOML
[space] table of value lists), generated from its keys and values or mutated from a valid one,
read by qsim.explore.space.load_space (with the configuration parser it hands the terms to)."""
from __future__ import annotations

import random

from . import mutate
from .runner import Case

KEYS = ("size", "rows", "cols", "dataflow", "input_buffer_bytes", "weight_buffer_bytes",
        "accumulator_buffer_bytes", "dram_bytes_per_cycle", "clock_mhz", "precision", "colour", "")
VALUES = ("8", "16", "0", "-4", "1e9", "3.5", "2147483648", '"ws"', '"os"', '"int8"', '"16x8"',
          '"sqnr:30"', '"sqnr:"', '"ws,os"', '""', "true", "[8]", "{}", "nan", "inf")
VALID = b'[space]\nsize = [8, 16]\ndataflow = ["ws", "os"]\nprecision = ["int8", "16x8"]\n'


def random_space(rng: random.Random) -> bytes:
    lines = ["[space]"] if rng.random() < 0.9 else [rng.choice(["[npu]", "[Space]", "", "[space.x]"])]
    for _ in range(rng.randint(0, 5)):
        values = ", ".join(rng.choice(VALUES) for _ in range(rng.randint(0, 4)))
        value = f"[{values}]" if rng.random() < 0.85 else rng.choice(VALUES)
        lines.append(f"{rng.choice(KEYS)} = {value}")
    return ("\n".join(lines) + "\n").encode()


def gen_space(rng: random.Random, corpus) -> Case:
    if rng.random() < 0.6:
        blob, kind = random_space(rng), "generated"
    else:
        blob, how = mutate.mutate_text(rng, VALID)
        kind = f"mutated:{how}"
    return Case("explore-space", kind, {"space.toml": blob}, call="load_space", call_arg="space.toml")
