"""How the compiler maps each GEMM (NPU configuration key `mapping`, `qsim simulate --mapping`):
the fixed rule, or the search (search.py) with its objective. Kept apart from the search so
that the configuration can name a policy without importing the compiler."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import UsageError


class MappingMode(enum.Enum):
    FIXED = "fixed"
    SEARCH = "search"


class Objective(enum.Enum):
    CYCLES = "cycles"
    ENERGY = "energy"
    EDP = "edp"             # energy-delay product: cycles x pJ


@dataclass(frozen=True)
class MappingPolicy:
    """How the compiler maps each GEMM: the fixed rule, or the search with its objective
    (`tech`: the energy table the energy objectives read; None: the default, 45nm)."""
    mode: MappingMode = MappingMode.FIXED
    objective: Objective = Objective.EDP
    tech: str | None = None

    @property
    def text(self) -> str:
        return self.mode.value if self.mode is MappingMode.FIXED else f"search:{self.objective.value}"

    @staticmethod
    def parse(text: str) -> "MappingPolicy":
        """`fixed`, `search` (energy-delay) or `search:cycles|energy|edp`."""
        mode, _, objective = str(text).lower().partition(":")
        try:
            policy = MappingPolicy(MappingMode(mode), Objective(objective or Objective.EDP.value))
        except ValueError:
            raise UsageError(f"unknown mapping '{text}'",
                             hint="use fixed, search, search:cycles, search:energy or search:edp") from None
        if policy.mode is MappingMode.FIXED and objective:
            raise UsageError(f"mapping '{text}': the fixed rule has no objective",
                             hint="use fixed, or search:OBJECTIVE")
        return policy


FIXED_POLICY = MappingPolicy()
