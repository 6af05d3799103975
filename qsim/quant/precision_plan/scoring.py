"""How accurate one lowering is, in the two measures a precision target is written in:
the output SQNR (dB; the lowest over the graph's outputs) and, for a class-vector output, the
top-1 agreement drop (percentage points of evaluation samples whose integer argmax differs
from the float one). The float outputs are computed once; each plan runs its integer graph
on the same samples."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ... import ir
from ...errors import UsageError
from ...runtime.executor import execute
from ..evaluation.evaluate import float_view, quantize_feed
from ..evaluation.scoring import class_vector_extent
from ..lowering.float_side import LoweredModel


@dataclass(frozen=True)
class PlanAccuracy:
    sqnr_db: float                  # lowest over the outputs (inf: exact)
    agreement: float | None         # top-1 agreement of the first class-vector output (0..1)

    @property
    def drop_points(self) -> float | None:
        return None if self.agreement is None else 100.0 * (1.0 - self.agreement)

    def to_json(self) -> dict:
        return {"sqnr_db": self.sqnr_db if math.isfinite(self.sqnr_db) else None,
                "top1_agreement": self.agreement, "top1_drop_points": self.drop_points}


@dataclass(frozen=True)
class AccuracyTarget:
    """At least `sqnr_db` of output SQNR and/or at most `max_drop_points` of top-1 drop."""
    sqnr_db: float | None = None
    max_drop_points: float | None = None

    def __post_init__(self):
        if self.sqnr_db is None and self.max_drop_points is None:
            raise UsageError("a precision target needs --target-sqnr DB or --max-drop PT")
        for flag, value in (("--target-sqnr", self.sqnr_db), ("--max-drop", self.max_drop_points)):
            if value is not None and not math.isfinite(value):
                raise UsageError(f"{flag} {value}: must be a finite number")
        if self.max_drop_points is not None and not 0 <= self.max_drop_points < 100:
            raise UsageError(f"--max-drop {self.max_drop_points}: a drop in percentage points "
                             "must be in [0, 100)", hint="e.g. --max-drop 1 for at most one point")

    def met(self, acc: PlanAccuracy) -> bool:
        if self.sqnr_db is not None and not acc.sqnr_db >= self.sqnr_db:
            return False
        # (no class output: a drop target cannot be met; the command refuses it before searching)
        return self.max_drop_points is None or (acc.drop_points is not None
                                                and acc.drop_points <= self.max_drop_points + 1e-9)

    def describe(self) -> str:
        parts = ([f"output SQNR >= {self.sqnr_db:g} dB"] if self.sqnr_db is not None else []) + (
            [f"top-1 agreement drop <= {self.max_drop_points:g} points"]
            if self.max_drop_points is not None else [])
        return " and ".join(parts)

    def to_json(self) -> dict:
        return {"sqnr_db": self.sqnr_db, "max_drop_points": self.max_drop_points}


def describe(acc: PlanAccuracy) -> str:
    sqnr = "exact" if not math.isfinite(acc.sqnr_db) else f"{acc.sqnr_db:.2f} dB"
    drop = "" if acc.drop_points is None else f", top-1 drop {acc.drop_points:.2f} points"
    return f"SQNR {sqnr}{drop}"


BATCH = 32        # samples per integer run at most: a 16x8 plan's activations are twice int8's


class PlanScorer:
    """Scores lowerings of `graph` on `feeds` (float input feeds, batch 1 each). With
    `rebatch(integer graph, n) -> graph or None` (quant.rebatch.rebatched_graph) the samples
    run as one batch where the integer graph allows it (each sample gets the batch-1 bits)."""

    def __init__(self, graph: ir.Graph, feeds: list[dict[str, np.ndarray]], backend: str = "kernels",
                 rebatch: Callable[[ir.Graph, int], ir.Graph | None] | None = None):
        if not feeds:
            raise UsageError("no evaluation samples to score a precision plan on")
        self.graph, self.feeds, self.backend, self.rebatch = graph, feeds, backend, rebatch
        self.reference = [execute(graph, feed, backend, keep=graph.outputs) for feed in feeds]
        self.classes = next((name for name in graph.outputs
                             if class_vector_extent(graph.tensor(name).shape[1:]) is not None), None)

    def _integer_outputs(self, model: LoweredModel):
        """Each sample's integer output values (by integer name), BATCH samples at a time
        where the integer graph can be rebatched, else one at a time."""
        int_outputs = [model.tensor_map[n].name for n in self.graph.outputs]
        graphs: dict[int, ir.Graph | None] = {}
        for start in range(0, len(self.feeds), BATCH):
            chunk = self.feeds[start:start + BATCH]
            if len(chunk) not in graphs:
                graphs[len(chunk)] = (self.rebatch(model.graph, len(chunk))
                                      if self.rebatch is not None and len(chunk) > 1 else None)
            big = graphs[len(chunk)]
            if big is None:
                for feed in chunk:
                    yield execute(model.graph, quantize_feed(model, feed), self.backend, keep=int_outputs)
                continue
            stacked = {k: np.concatenate([f[k] for f in chunk]) for k in chunk[0]}
            values = execute(big, quantize_feed(model, stacked), self.backend, keep=int_outputs)
            for i in range(len(chunk)):
                yield {k: v[i:i + 1] for k, v in values.items()}

    def __call__(self, model: LoweredModel) -> PlanAccuracy:
        signal = {n: 0.0 for n in self.graph.outputs}
        noise = dict(signal)
        agree = 0
        for values, ref in zip(self._integer_outputs(model), self.reference):
            for name in self.graph.outputs:
                f = np.asarray(ref[name], np.float64)
                q = float_view(model, name, values).reshape(f.shape)
                signal[name] += float(np.sum(f * f))
                noise[name] += float(np.sum((q - f) ** 2))
                if name == self.classes:
                    agree += int(np.argmax(f) == np.argmax(q))
        sqnr = min(_db(signal[n], noise[n]) for n in self.graph.outputs)
        return PlanAccuracy(sqnr, agree / len(self.feeds) if self.classes is not None else None)


def _db(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf
