"""Fuzz target `area-table`: technology tables for the area estimate (qsim.npu.area), the packaged
45 nm / 7 nm files mutated as text or with their area values replaced by extremes and wrong
types, read by qsim.npu.area.load_area_table (a DataError is a good outcome)."""
from __future__ import annotations

import random
from importlib import resources

from . import mutate
from .runner import Case

VALUES = ("0", "-1", "1e400", "nan", "inf", "-inf", "1.5", "true", '"x"', "[]", "{}", "0.0", "5e-324",
          "9223372036854775808", "1979-05-27", "0.7", "1")


def packaged(name: str) -> bytes:
    return resources.files("qsim.npu").joinpath("tech", f"{name}.toml").read_bytes()


def edit_values(rng: random.Random, text: str) -> str:
    """Area lines (after [area_um2]) with values swapped for extremes, keys dropped or added."""
    lines, out, in_area = text.splitlines(), [], False
    for line in lines:
        if line.startswith("["):
            in_area = line.strip() in ("[area_um2]", "[sram_area]")
        if in_area and " = " in line and not line.startswith("#"):
            key = line.split(" = ", 1)[0]
            if rng.random() < 0.1:
                continue
            if rng.random() < 0.3:
                line = f"{key} = {rng.choice(VALUES)}"
        out.append(line)
    if rng.random() < 0.1:
        out.append(rng.choice(("[area_um2]\nnand3 = 1", "bogus = 1", "[area]\nx = 1")))
    return "\n".join(out) + "\n"


def gen_area_table(rng: random.Random, corpus) -> Case:
    base = packaged(rng.choice(("45nm", "7nm")))
    if rng.random() < 0.5:
        blob, kind = edit_values(rng, base.decode()).encode(), "values"
    else:
        blob, how = mutate.mutate_text(rng, base)
        kind = f"mutated:{how}"
    return Case("area-table", kind, {"tech.toml": blob}, call="load_area_table", call_arg="tech.toml")
