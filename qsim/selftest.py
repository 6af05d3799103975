"""`qsim selftest`: seeded checks that this installation computes the right bits.

Each check compares two independent computations of the same integers (e.g. the
compiled kernels against the numpy reference, or the int64 reference helpers
against unbounded Python integers) and returns how many elements it compared.
A failing check raises MismatchError with the first differing element.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TextIO

import numpy as np

from .errors import MismatchError, UsageError


@dataclass(frozen=True)
class SelfCheck:
    name: str
    run: Callable[[np.random.Generator], int]   # returns the number of elements compared


def assert_equal_arrays(what: str, expected: np.ndarray, actual: np.ndarray) -> int:
    """Raises MismatchError naming the first differing index; returns the element count."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape:
        raise MismatchError(f"{what}: shape {list(actual.shape)} != expected {list(expected.shape)}")
    diff = np.argwhere(expected != actual)
    if diff.size:
        idx = tuple(int(i) for i in diff[0])
        raise MismatchError(f"{what}: element {list(idx)} is {actual[idx]} but the reference gives "
                            f"{expected[idx]} ({len(diff)} of {expected.size} elements differ)")
    return int(expected.size)


def _check_apply_scale(rng: np.random.Generator) -> int:
    from .tosa.arith import apply_scale_16, apply_scale_32
    n = 0
    for _ in range(200):
        shift = int(rng.integers(2, 63))
        multiplier = int(rng.integers(0, 1 << 31))
        bound = 1 << (shift - 2)
        lim = min(bound, 1 << 31)
        values = rng.integers(-lim, lim, size=64, dtype=np.int64)
        values = np.clip(values, -(1 << 31), (1 << 31) - 1)
        for double_round in (False, True):
            got = apply_scale_32(values, multiplier, shift, double_round)
            want = []
            for v in values.tolist():
                r = 1 << (shift - 1)
                if double_round and shift > 31:
                    r += (1 << 30) if v >= 0 else -(1 << 30)
                want.append((v * multiplier + r) >> shift)   # unbounded Python ints
            n += assert_equal_arrays(f"apply_scale_32(shift={shift}, double_round={double_round})",
                                     np.array(want, dtype=np.int64), got.astype(np.int64))
        m16 = int(rng.integers(0, 1 << 15))
        s16 = int(rng.integers(32, 63))  # keeps |result| < 2^31 for |value| < 2^47
        v48 = rng.integers(-(1 << 47), 1 << 47, size=64, dtype=np.int64)
        want16 = [(v * m16 + (1 << (s16 - 1))) >> s16 for v in v48.tolist()]
        n += assert_equal_arrays(f"apply_scale_16(shift={s16})", np.array(want16, dtype=np.int64),
                                 apply_scale_16(v48, m16, s16).astype(np.int64))
    return n


def _kernel_checks() -> list[SelfCheck]:
    from .kernels.selfcheck import SELF_CHECKS
    return [SelfCheck(name, fn) for name, fn in SELF_CHECKS]


CHECKS: list[SelfCheck] = [
    SelfCheck("TOSA apply_scale_32/16 vs unbounded integers", _check_apply_scale),
    *_kernel_checks(),
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

    from .kernels.extensions import load_all
    from .kernels.cpu_features import detected_features, supported_isas
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
