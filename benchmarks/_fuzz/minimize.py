"""Shrinks a failing case's text file while it fails the same way (same failure key).

Greedy delta debugging over lines, then over tokens: try dropping chunks (halves, quarters,
... single items); keep a drop when the case still ends in the same class, exception type and
innermost qsim frame. Each try is one forked run, so a site costs at most `budget` runs.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Callable

from . import mutate
from .runner import Case, Result

# The file a target's generators vary, by target (the others come from seeds unchanged).
SUBJECTS = ("m/main.sknd", "model.sknd", "m/graph.nnef", "m/graph.quant", "npu.toml")

_counter = itertools.count(10 ** 9)


def subject_of(case: Case) -> str | None:
    for rel in SUBJECTS:
        if rel in case.files and (case.target != "quant" or rel == "m/graph.quant"):
            return rel
    return None


def minimize(case: Case, key: str, run: Callable[[list[tuple[int, Case]]], list[Result]],
             budget: int = 60, seconds: float = 40.0) -> tuple[Case, int]:
    """The smallest variant found of `case` that still fails with `key`, and the runs spent."""
    rel = subject_of(case)
    if rel is None:
        return case, 0
    deadline = time.monotonic() + seconds
    spent = 0

    def fails(blob: bytes) -> bool:
        nonlocal spent
        spent += 1
        trial = dataclasses.replace(case, files={**case.files, rel: blob})
        (res,) = run([(next(_counter), trial)])
        return res.failure_key == key

    best = case.files[rel]
    for split in (lambda b: b.split(b"\n"), mutate._tokens):
        join = b"\n" if split is not mutate._tokens else b""
        items = split(best)
        chunk = max(1, len(items) // 2)
        while chunk >= 1 and spent < budget and time.monotonic() < deadline:
            i, changed = 0, False
            while i < len(items) and spent < budget and time.monotonic() < deadline:
                trial = items[:i] + items[i + chunk:]
                if trial and fails(join.join(trial)):
                    items, changed = trial, True
                else:
                    i += chunk
            if not changed:
                chunk //= 2
        best = join.join(items)
    return dataclasses.replace(case, files={**case.files, rel: best}), spent
