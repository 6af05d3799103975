"""The auto observer's choice: which of its candidate ranges (AutoObserver.candidates) each
tensor keeps, by the error the range causes downstream on calibration samples.

Two measures (choose_observers):
- per tensor, by its consumers (downstream_errors): a range's error on the tensor itself (what
  the MSE observer minimizes) is not what the network pays: rounding noise is independent from
  value to value and partly averages out in a convolution's sum, while clipping an outlier moves
  every output that reads it by the same sign. So the tensor is rounded to each candidate's grid
  (dequantize(quantize(x))), every op reading it is run again on that value with its other
  inputs float, and the candidate's score is the sum over consumers of noise / signal. A tensor
  no float op reads (a graph output, or read only by control flow) is scored on itself. The
  least-score candidates make the per-tensor plan;
- at the outputs (PlanRunner, plan_score): a plan is run as a whole, every materialized
  activation rounded to its grid, and scored per output against the best candidate plan there.
  The per-tensor plan and each candidate applied to every tensor (the uniform plans) are
  scored; the best is refined group by group (refinement_groups), rerunning from each group's
  first op only.

Only scales and zero points change: the quantized model is lowered and replayed as with any
fixed observer (bit-exact). Cost: per tensor, one consumer run per distinct candidate on
LOCAL_SAMPLES samples; per plan, one float run per scored sample (AUTO_SAMPLES at most); per
refinement group, at most one partial run per other candidate.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...runtime.executor import execute, run_op
from ...skriptnd.compose import dynattr
from ..params import QuantScheme, dequantize, params_from_range, quantize
from .observers import AutoObserver, ObserverKind

FALLBACK = ObserverKind.PERCENTILE.value   # where nothing can be measured: the default before auto
AUTO_SAMPLES = 16         # calibration samples the plans are scored on (the first ones)
LOCAL_SAMPLES = 8         # of which the per-tensor (consumer error) choice is measured on


def candidate_params(observer: AutoObserver, scheme: QuantScheme) -> dict[str, ir.QuantInfo]:
    """{label: parameters} of the observer's candidates (AutoObserver.labels() order)."""
    return {label: params_from_range(lo, hi, scheme, source="calibration", what=observer.name)
            for label, (lo, hi) in observer.candidates(scheme).items()}


def _distinct(cands: dict[str, ir.QuantInfo]) -> dict[str, str]:
    """{label: the first label with the same scale and zero point}."""
    first: dict[tuple, str] = {}
    out = {}
    for label, q in cands.items():
        key = (tuple(np.atleast_1d(q.scale).tolist()), tuple(np.atleast_1d(q.zero_point).tolist()))
        out[label] = first.setdefault(key, label)
    return out


def _float(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def _consumers(graph: ir.Graph) -> dict[str, list[ir.Op]]:
    """Ops reading each tensor, control flow left out (its bodies capture values by name)."""
    readers: dict[str, list[ir.Op]] = {}
    for op in graph.ops:
        if op.kind.name.startswith("control."):
            continue
        for name in dict.fromkeys(n for n in op.inputs if n):
            readers.setdefault(name, []).append(op)
    return readers


def _rounded(x: np.ndarray, q: ir.QuantInfo) -> np.ndarray:
    return dequantize(quantize(x, q), q).astype(x.dtype)


def downstream_errors(graph: ir.Graph, candidates: dict[str, dict[str, ir.QuantInfo]],
                      feeds: list[dict[str, np.ndarray]], backend: str = "kernels") -> dict[str, dict[str, float]]:
    """{tensor: {label: score}}: each candidate's summed relative consumer-output error over
    `feeds` (module docstring). Tensors with a single candidate are not measured."""
    readers = _consumers(graph)
    same = {t: _distinct(c) for t, c in candidates.items()}
    measured = {t: {label: c[label] for label in dict.fromkeys(same[t].values())}
                for t, c in candidates.items() if len(set(same[t].values())) > 1}
    noise = {t: {label: {} for label in c} for t, c in measured.items()}
    signal: dict[str, dict[str, float]] = {t: {} for t in measured}
    for feed in feeds:
        values = execute(graph, feed, backend)
        for t, cands in measured.items():
            x = values.get(t)
            if not _float(x):
                continue
            ops = [op for op in readers.get(t, ()) if any(_float(values.get(o)) for o in op.outputs)]
            for op in ops:
                for o in op.outputs:
                    if _float(values.get(o)):
                        signal[t][o] = signal[t].get(o, 0.0) + float(np.sum(np.square(values[o], dtype=np.float64)))
            if not ops:
                signal[t][t] = signal[t].get(t, 0.0) + float(np.sum(np.square(x, dtype=np.float64)))
            for label, q in cands.items():
                xq = _rounded(x, q)
                sums = noise[t][label]
                if not ops:
                    sums[t] = sums.get(t, 0.0) + float(np.sum(np.square(xq - x, dtype=np.float64)))
                for op in ops:
                    outs = run_op(graph, op, [xq if n == t else (values[n] if n else None) for n in op.inputs],
                                  backend, values)
                    for o, got in zip(op.outputs, outs):
                        if _float(values.get(o)):
                            sums[o] = sums.get(o, 0.0) + _squared_error(got, values[o])
    scores = {t: {label: sum(e / signal[t][o] if signal[t][o] > 0 and np.isfinite(e) else
                             (0.0 if e == 0 else np.inf) for o, e in per_out.items())
                  for label, per_out in noise[t].items()}
              for t in measured}
    return {t: {label: score[same[t][label]] for label in candidates[t]} for t, score in scores.items()}


def _squared_error(got, want) -> float:
    """sum((got - want)^2), where equal values (the same infinity: an attention mask's -inf
    scores, or both NaN) are no error; inf - inf would make the sum NaN, and a NaN score would
    make every candidate of the tensor look equally bad."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where((got == want) | (np.isnan(got) & np.isnan(want)), 0.0, got - want)
    return float(np.sum(diff * diff))


# A layer's output read only by a relu/clamp or batch norm is never materialized: the lowering
# folds the batch norm into the layer and the relu/clamp into its RESCALE (lowering/
# float_patterns.py), so only the last tensor of such a chain has a grid.
LAYERS = frozenset({"nn.conv", "nn.deconv", "nn.linear", "nn.batch_norm"})
ABSORBERS = frozenset({"nn.relu", "math.clamp", "nn.batch_norm"})


def fused_away(graph: ir.Graph) -> set[str]:
    """Tensors the lowering does not materialize (the comment above)."""
    readers = _consumers(graph)
    out = set()
    for op in graph.ops:
        if op.kind.name in LAYERS and len(op.outputs) == 1:
            after = readers.get(op.outputs[0], [])
            if (len(after) == 1 and after[0].kind.name in ABSORBERS and after[0].inputs[0] == op.outputs[0]
                    and not (after[0].kind.name == "nn.relu" and after[0].attrs.get("alpha"))
                    and op.outputs[0] not in graph.outputs):
                out.add(op.outputs[0])
    return out


def plan_error(graph: ir.Graph, plan: dict[str, ir.QuantInfo], feeds: list[dict[str, np.ndarray]],
               references: list[dict[str, np.ndarray]], backend: str = "kernels") -> float:
    """The graph outputs' summed noise / signal over `feeds` when every tensor of `plan` is
    rounded to its grid as the float graph runs (weights float): what the activation ranges
    of `plan` cost at the network's outputs."""
    return sum(PlanRunner(graph, feeds, references, backend).run(plan)[0].ratios())


class PlanRunner:
    """Runs the float graph on the scored samples with a plan's tensors rounded to their grids
    (dequantize(quantize(x)), weights float) and returns each output's noise / signal.

    A run may start at a cut (an op index) from the live values of an earlier run at that cut
    (`snapshots`), which is exact when the two plans agree on every tensor produced before it:
    the refinement pass changes one segment of the graph at a time and reruns only from there."""

    def __init__(self, graph: ir.Graph, feeds, references, backend: str = "kernels", cuts=(0,)):
        self.graph, self.feeds, self.references, self.backend = graph, feeds, references, backend
        self.cuts = sorted(set(cuts) | {0})
        last_read = {n: i for i, op in enumerate(graph.ops) for n in op.inputs if n}
        last_read.update(dict.fromkeys(graph.outputs, len(graph.ops)))
        produced = dict.fromkeys(graph.inputs, -1) | {n: i for i, op in enumerate(graph.ops) for n in op.outputs}
        # the values a run from `cut` needs: produced before it, read at or after it
        self.live = {c: [n for n, i in produced.items() if i < c and last_read.get(n, -1) >= c] for c in self.cuts}
        self.constants = {n: t.data for n, t in graph.tensors.items() if t.is_constant}

    def run(self, plan: dict[str, ir.QuantInfo], start: int = 0, snapshots=None):
        """(Errors: each output's noise and signal per sample, {cut >= start: [live values per
        sample]})."""
        graph, ops = self.graph, self.graph.ops
        noise = np.zeros((len(self.feeds), len(graph.outputs)))
        signal = np.zeros_like(noise)
        kept = {c: [] for c in self.cuts if c >= start}
        for i, (feed, ref) in enumerate(zip(self.feeds, self.references)):
            values = dict(self.constants)
            if start == 0:
                for name in graph.inputs:
                    values[name] = _rounded_if(np.asarray(feed[name], graph.tensor(name).dtype.numpy), plan.get(name))
            else:
                values.update(snapshots[start][i])
            for k in range(start, len(ops)):
                if k in kept:
                    kept[k].append({n: values[n] for n in self.live[k]})
                op = ops[k]
                outs = run_op(graph, op, [values[n] if n else None for n in op.inputs], self.backend, values)
                for out, v in zip(op.outputs, outs):
                    values[out] = _rounded_if(v, plan.get(out))
            for j, out in enumerate(graph.outputs):
                if _float(ref[out]):
                    diff = np.asarray(values[out], np.float64) - ref[out]
                    noise[i, j] = float(np.sum(diff * diff))
                    signal[i, j] = float(np.sum(np.square(ref[out], dtype=np.float64)))
        return Errors(noise, signal), kept


class Errors:
    """Each output's noise and signal power per scored sample (arrays [samples, outputs])."""

    def __init__(self, noise: np.ndarray, signal: np.ndarray):
        self.noise, self.signal = noise, signal

    def ratios(self, samples=slice(None)) -> list[float]:
        """Each output's noise / signal over `samples` (outputs without signal left out)."""
        n, s = self.noise[samples].sum(axis=0), self.signal[samples].sum(axis=0)
        return [float(a / b) for a, b in zip(n, s) if b > 0]


# An output whose error is below this relative noise power (120 dB) counts as exact: the plan
# scores take logarithms, and no plan is better for being nearer to 0 there.
EXACT = 1e-12


def log_errors(errors: list[float]) -> np.ndarray | None:
    """log10 of each output's noise / signal; None when one is not finite (a rounded plan drove
    a log or rsqrt to inf/NaN: such a plan never wins)."""
    if not errors or not all(np.isfinite(errors)):
        return None
    return np.log10(np.maximum(errors, EXACT))


def plan_score(logs: np.ndarray | None, reference: np.ndarray) -> tuple[float, float]:
    """A plan's score, less is better: (its worst output's loss against that output's best
    candidate plan, in log10 units; the mean of its outputs' log errors). Normalized per output,
    so each output weighs the same whatever its scale: a sum of noise / signal would let the
    worst output decide alone (MTCNN ONet's box at 26 dB against its face probability at 48 dB:
    150x the noise) and leave the others' ranges to chance. For one output both terms order
    plans as its error does."""
    if logs is None:
        return (np.inf, np.inf)
    return (float(np.max(logs - reference)), float(np.mean(logs)))


def better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether score a beats score b by more than IMPROVES (the worst loss first, then the mean)."""
    return a[0] < b[0] - IMPROVES or (a[0] <= b[0] + IMPROVES and a[1] < b[1] - IMPROVES)


def _rounded_if(x, q):
    return x if q is None or not _float(x) else _rounded(x, q)


SEGMENTS = 4        # the refinement's segments of the graph (in op order, equal tensor counts)
MAX_GROUPS = 12     # at most this many (segment, outputs reached) groups, else segments only
IMPROVES = 0.005    # a change is kept when it lowers the score (plan_score) by more than this (log10
                    # units: 0.05 dB), on all the samples and on neither half worse (choose_observers)


def reached_outputs(graph: ir.Graph) -> dict[str, frozenset]:
    """{tensor: the graph outputs its value flows to}."""
    reach: dict[str, frozenset] = {o: frozenset([o]) for o in graph.outputs}
    for op in reversed(graph.ops):
        down = frozenset().union(*(reach.get(o, frozenset()) for o in op.outputs))
        for n in op.inputs:
            if n:
                reach[n] = reach.get(n, frozenset()) | down
    return reach


def refinement_groups(graph: ir.Graph, tensors) -> list[tuple[int, list[str]]]:
    """[(cut, tensors)]: the plan's tensors in SEGMENTS runs of the op order, each split by the
    set of outputs its tensors reach (a multi-output model's heads get their own ranges); cut is
    the first op index producing one of them (0 for graph inputs), where a rerun starts."""
    at = dict.fromkeys(graph.inputs, 0) | {n: i for i, op in enumerate(graph.ops) for n in op.outputs}
    order = sorted((t for t in tensors if t in at), key=lambda t: (at[t], t))
    if not order:
        return []
    size = -(-len(order) // SEGMENTS)
    segments = [order[i:i + size] for i in range(0, len(order), size)]
    reach = reached_outputs(graph)
    split = [[g for key in dict.fromkeys(reach.get(t, frozenset()) for t in seg)
              for g in [[t for t in seg if reach.get(t, frozenset()) == key]]] for seg in segments]
    chosen = split if sum(map(len, split)) <= MAX_GROUPS else [[seg] for seg in segments]
    return [(min(at[t] for t in g), g) for parts in chosen for g in parts]


def choose_observers(graph: ir.Graph, observers: dict[str, AutoObserver], scheme: QuantScheme,
                     feeds: list[dict[str, np.ndarray]], backend: str = "kernels") -> dict[str, str]:
    """Sets each observer's `chosen` label and returns {tensor: label}.

    Candidate plans: per tensor, the label of least consumer error on the first LOCAL_SAMPLES of
    `feeds` (downstream_errors; the first label on a tie); and each fixed label applied to every
    tensor (the uniform plans). Each is run as a whole on all of `feeds` and scored at the outputs
    (score: each output's noise / signal against its best candidate plan's, the worst output first). The best one is then
    refined: per group of tensors (refinement_groups: a segment of the graph, split by the
    outputs its tensors reach), each other label is tried with the rest fixed and kept when the
    outputs gain. Why: a consumer's error is not what the outputs pay once errors compound over
    many layers; a clipping that suits most samples can ruin a rare one (one crop in 16 lost 9 dB
    on GoogLeNet with 99.9th-percentile ranges), which only the outputs over many samples show;
    and early and late layers, or two heads, may want different ranges. So the result is never
    worse, on the calibration samples, than the best single observer's (its uniform plan).
    """
    if any(dynattr.has_runtime(v) for op in graph.ops for v in op.attrs.values()):
        # attributes resolved from run-time extents: its ops cannot be rerun one at a time here
        return _keep(observers, {}, FALLBACK)
    candidates = {name: candidate_params(obs, scheme) for name, obs in observers.items() if obs.count}
    scores = downstream_errors(graph, candidates, feeds[:LOCAL_SAMPLES], backend)
    per_tensor = {}
    for name, cands in candidates.items():
        score = scores.get(name)
        per_tensor[name] = next(iter(cands)) if not score else min(
            score, key=lambda k: (score[k], list(cands).index(k)))
    plans = {"per-tensor": per_tensor} | {label: dict.fromkeys(candidates, label) for label in AutoObserver.labels()}
    references = [execute(graph, feed, backend, keep=graph.outputs) for feed in feeds]
    hidden = fused_away(graph)
    groups = refinement_groups(graph, [n for n in candidates if n not in hidden])
    if any(op.kind.name.startswith("control.") for op in graph.ops):
        groups = [(0, g) for _, g in groups]     # its bodies read values by name: rerun from the start
    runner = PlanRunner(graph, feeds, references, backend, cuts=[c for c, _ in groups])

    def params(plan):
        return {n: candidates[n][label] for n, label in plan.items() if n not in hidden}

    # a rounded plan may drive a float op to inf/NaN (an rsqrt of a variance rounded to 0): that
    # plan scores large or non-finite and loses; numpy's warnings about it would only alarm
    # the scores on all samples and on each half (even, odd): a refinement step must gain on all
    # and lose on neither half, so a change that only one or two samples favour is not taken
    subsets = [slice(None)] + ([slice(0, None, 2), slice(1, None, 2)] if len(feeds) > 1 else [])
    # a rounded plan may drive a float op to inf/NaN (an rsqrt of a variance rounded to 0): that
    # plan scores large or non-finite and loses; numpy's warnings about it would only alarm
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        logs = {}
        best_key, snaps = None, None
        for key, plan in plans.items():          # only the best plan's live values are kept
            errors, kept = runner.run(params(plan))
            logs[key] = [log_errors(errors.ratios(s)) for s in subsets]
            if logs[key][0] is not None and (best_key is None or logs[key][0].mean() < logs[best_key][0].mean()):
                best_key, snaps = key, kept
        finite = [v for v in logs.values() if v[0] is not None and all(x is not None for x in v)]
        if not finite:
            return _keep(observers, {}, FALLBACK)
        # each output's best candidate plan, on each subset
        references = [np.min([v[i] for v in finite], axis=0) for i in range(len(subsets))]
        best = None                              # the first of equal scores wins: labels() order
        for key in plans:
            got = [plan_score(x, r) for x, r in zip(logs[key], references)]
            if best is None or better(got[0], best[0]):
                best, plan = got, dict(plans[key])
        if plan != plans[best_key]:              # rerun to keep the chosen plan's live values
            snaps = runner.run(params(plan))[1]
        for cut, group in groups:
            for label in AutoObserver.labels():
                if all(plan[t] == label for t in group):
                    continue
                trial = plan | dict.fromkeys(group, label)
                errors, kept = runner.run(params(trial), cut, snaps)
                got = [plan_score(log_errors(errors.ratios(s)), r) for s, r in zip(subsets, references)]
                if better(got[0], best[0]) and not any(better(b, g) for b, g in zip(best[1:], got[1:])):
                    best, plan, snaps = got, trial, {**snaps, **kept}
    return _keep(observers, plan, ObserverKind.MINMAX.value)


def _keep(observers: dict[str, AutoObserver], plan: dict[str, str], default: str) -> dict[str, str]:
    """Sets each observer's `chosen` label (the plan's, else `default`); returns them."""
    chosen = {}
    for name, obs in observers.items():
        obs.chosen = chosen[name] = plan.get(name, default)
    return chosen
