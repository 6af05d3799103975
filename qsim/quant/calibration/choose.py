"""The auto observer's choice: which of its candidate ranges (AutoObserver.candidates) each
tensor keeps, by the error the range causes downstream on calibration samples.

Two measures, two kinds of plan (choose_observers):
- per tensor, by its consumers (downstream_errors): a range's error on the tensor itself (what
  the MSE observer minimizes) is not what the network pays: rounding noise is independent from
  value to value and partly averages out in a convolution's sum, while clipping an outlier moves
  every output that reads it by the same sign. So the tensor is rounded to each candidate's grid
  (dequantize(quantize(x))), every op reading it is run again on that value with its other
  inputs float, and the candidate's score is the sum over consumers of noise / signal. A tensor
  no float op reads (a graph output, or read only by control flow) is scored on itself. The
  least-score candidates make the per-tensor plan;
- at the outputs (plan_error): the per-tensor plan and each candidate applied to every tensor
  (the uniform plans) are run as a whole, every materialized activation rounded to its grid, and
  the plan of least output noise / signal over the scored samples is kept.

Only scales and zero points change: the quantized model is lowered and replayed as with any
fixed observer (bit-exact). Cost: per tensor, one consumer run per distinct candidate on
LOCAL_SAMPLES samples; per plan, one float run per scored sample (AUTO_SAMPLES at most).
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
                            diff = np.asarray(got, np.float64) - values[o]
                            sums[o] = sums.get(o, 0.0) + float(np.sum(diff * diff))
    scores = {t: {label: sum(e / signal[t][o] if signal[t][o] > 0 and np.isfinite(e) else
                             (0.0 if e == 0 else np.inf) for o, e in per_out.items())
                  for label, per_out in noise[t].items()}
              for t in measured}
    return {t: {label: score[same[t][label]] for label in candidates[t]} for t, score in scores.items()}


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
    noise = dict.fromkeys(graph.outputs, 0.0)
    signal = dict.fromkeys(graph.outputs, 0.0)
    for feed, ref in zip(feeds, references):
        values = {n: t.data for n, t in graph.tensors.items() if t.is_constant}
        for name in graph.inputs:
            values[name] = _rounded_if(np.asarray(feed[name], graph.tensor(name).dtype.numpy), plan.get(name))
        for op in graph.ops:
            outs = run_op(graph, op, [values[n] if n else None for n in op.inputs], backend, values)
            for out, v in zip(op.outputs, outs):
                values[out] = _rounded_if(v, plan.get(out))
        for out in graph.outputs:
            if _float(ref[out]):
                diff = np.asarray(values[out], np.float64) - ref[out]
                noise[out] += float(np.sum(diff * diff))
                signal[out] += float(np.sum(np.square(ref[out], dtype=np.float64)))
    return sum(noise[o] / signal[o] for o in graph.outputs if signal[o] > 0)


def _rounded_if(x, q):
    return x if q is None or not _float(x) else _rounded(x, q)


def choose_observers(graph: ir.Graph, observers: dict[str, AutoObserver], scheme: QuantScheme,
                     feeds: list[dict[str, np.ndarray]], backend: str = "kernels") -> dict[str, str]:
    """Sets each observer's `chosen` label and returns {tensor: label}.

    Per tensor, the label of least consumer error on the first LOCAL_SAMPLES of `feeds`
    (downstream_errors; the first label on a tie) makes the per-tensor plan; each fixed label
    applied to every tensor makes a uniform plan. Whichever plan costs the network's outputs the
    least on all of `feeds` (plan_error) is kept. Why both: a consumer's error is not what the
    outputs pay once errors compound over many layers, and a clipping that suits most samples
    can ruin a rare one (one crop in 16 lost 9 dB on GoogLeNet with 99.9th-percentile ranges),
    which only the outputs over many samples show; so the result is never worse, on the
    calibration samples, than the best single observer's.
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
    # a rounded plan may drive a float op to inf/NaN (an rsqrt of a variance rounded to 0): that
    # plan scores large or non-finite and loses; numpy's warnings about it would only alarm
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        errors = {key: plan_error(graph, {n: candidates[n][label] for n, label in plan.items() if n not in hidden},
                                  feeds, references, backend)
                  for key, plan in plans.items()}
    finite = {k: e for k, e in errors.items() if np.isfinite(e)}   # a log or sqrt of a rounded 0
    if not finite:
        return _keep(observers, {}, FALLBACK)
    best = min(finite, key=lambda k: (finite[k], list(plans).index(k)))
    return _keep(observers, plans[best], ObserverKind.MINMAX.value)


def _keep(observers: dict[str, AutoObserver], plan: dict[str, str], default: str) -> dict[str, str]:
    """Sets each observer's `chosen` label (the plan's, else `default`); returns them."""
    chosen = {}
    for name, obs in observers.items():
        obs.chosen = chosen[name] = plan.get(name, default)
    return chosen
