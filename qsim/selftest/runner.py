"""Runs every self check on one seed and prints a line per check (`qsim selftest`)."""
from __future__ import annotations

import time
from typing import TextIO

import numpy as np

from ..errors import MismatchError, UsageError
from ..kernels.cpu_features import detected_features, supported_isas
from ..kernels.extensions import load_all
from .arith_checks import check_apply_scale
from .compare import SelfCheck
from .kernel_checks import KERNEL_CHECKS


CHECKS: list[SelfCheck] = [
    SelfCheck("TOSA apply_scale_32/16 vs unbounded integers", check_apply_scale),
    *KERNEL_CHECKS,
]


def check_seed(seed) -> int:
    """The seed as an int; numpy's generators take only non-negative integers."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise UsageError(f"selftest seed {seed!r} is not an integer", hint="use --seed N with an integer N >= 0")
    if seed < 0:
        raise UsageError(f"selftest seed {seed} is negative", hint="use --seed N with an integer N >= 0")
    return int(seed)


def run_selftest(seed: int = 0, out: TextIO | None = None) -> bool:
    """Runs every registered check; prints one line per check. True when all pass."""
    seed = check_seed(seed)

    def say(text: str) -> None:
        if out is not None:
            print(text, file=out, flush=True)

    load_all()      # a missing or broken build: KernelsUnavailableError before any check
    feats = detected_features()
    say("qsim selftest: CPU features " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in feats.items())
        + "; kernel paths checked: " + ", ".join(isa.value for isa in supported_isas()))
    ok = True
    for check in CHECKS:
        rng = np.random.default_rng(seed)
        start = time.perf_counter()
        try:
            n = check.run(rng)
        except MismatchError as err:
            ok = False
            say(f"  FAIL {check.name}: {err.message}")
            continue
        say(f"  ok   {check.name}: {n} elements equal ({time.perf_counter() - start:.2f} s)")
    say("qsim selftest: " + ("all checks passed" if ok else "FAILED"))
    return ok
