"""The executor's plan of a graph: its steps in order, what each step checks and stores, and,
when the caller keeps only some tensors, which values may go after each step.

A step is one op of execution_order(graph) (a conv and the relu/clamp after it are one step,
float_ops/fusion.py) with what the executor needs at run time worked out once per graph and
keep set (plans are cached: graphs are immutable):
- `outputs`: (name, rank, declared shape, storage dtype) of each output, for the shape check;
- `dynamic`: the op has attributes that depend on dynamic extents (2.6.1);
- `release`: the tensors whose last reader this step is (or which nobody reads, released by
  the step that makes them), when they are not kept: the executor drops them right after the
  step, so an inference holds only the live activations;
- `unmade`: outputs the step does not make at all: the conv output of a fused conv + bound when
  nobody reads it, it is not kept and the caller's callback does not ask for it; the op then
  writes the bounded values into its own buffer (bounds.BOUND_ONLY) instead of writing two
  arrays. Likewise the int32 accumulators (and the RESCALE output before a CLAMP) of a fused
  integer conv + RESCALE (+ CLAMP) when none of them is read, kept or streamed
  (int_fusion.RESCALE_ONLY); otherwise that step makes them all;
- a zero layout.pad read only by a conv, its output neither kept nor streamed, is no step at
  all: the conv pads by itself (pad_folding.py, the same bits);
- `streamed`: the outputs the executor passes to the caller's on_value callback (all of them
  unless the caller names the ones it wants: execute's `stream`).

Who reads a tensor: the ops that name it as an input, and a control-flow op for every outer
tensor its subgraphs capture (captures are subgraph inputs under the outer tensor's name,
runners/control.py). Constants are never released (the graph holds them anyway).
"""
from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..errors import UsageError
from ..skriptnd.compose import dynattr
from .float_ops.bounds import BOUND_ONLY, THEN_BOUND
from .float_ops.fusion import execution_order
from .int_fusion import RESCALE_ONLY, THEN_RESCALE
from .pad_folding import fold_pads


@dataclass(frozen=True)
class Step:
    op: ir.Op
    outputs: tuple[tuple[str, int, tuple, np.dtype], ...]
    dynamic: bool
    release: tuple[str, ...] = ()
    unmade: frozenset = frozenset()
    streamed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    keep: frozenset | None            # None: every tensor is kept
    dynamic: bool                     # some step has runtime-dependent attributes


_PLANS_PER_GRAPH = 8                  # distinct keep sets remembered per graph
_plans: "weakref.WeakKeyDictionary[ir.Graph, dict]" = weakref.WeakKeyDictionary()


def check_keep(graph: ir.Graph, keep) -> frozenset | None:
    """The keep argument of execute() as a set of tensor names (None: keep everything)."""
    if keep is None:
        return None
    if isinstance(keep, (str, bytes)):
        keep = [keep]
    names = list(keep)
    unknown = [n for n in names if not isinstance(n, str) or n not in graph.tensors]
    if unknown:
        raise UsageError(f"graph '{graph.name}': keep names {', '.join(map(repr, unknown))}, which "
                         f"{'is' if len(unknown) == 1 else 'are'} not a tensor of the graph",
                         hint="keep takes tensor names of the graph, e.g. its outputs: "
                              + ", ".join(graph.outputs))
    return frozenset(names)


STREAM_ALL = "all"        # plan_for's `stream`: a callback sees every op output


def plan_for(graph: ir.Graph, keep: frozenset | None, stream: frozenset | str | None) -> Plan:
    """The plan for running `graph` keeping `keep` (None: all); `stream`: the op outputs a
    callback sees (STREAM_ALL: every one; None: no callback). Every streamed output is made,
    though not every one is kept."""
    key = (keep, stream)
    cache = _plans.setdefault(graph, {})
    plan = cache.get(key)
    if plan is None:
        if len(cache) >= _PLANS_PER_GRAPH:
            cache.pop(next(iter(cache)))
        plan = cache[key] = _make_plan(graph, keep, stream)
    return plan


def check_stream(graph: ir.Graph, stream) -> frozenset:
    """execute's stream argument as a set of tensor names that ops produce."""
    names = [stream] if isinstance(stream, (str, bytes)) else list(stream)
    unknown = [n for n in names if not isinstance(n, str) or n not in graph.tensors]
    if unknown:
        raise UsageError(f"graph '{graph.name}': stream names {', '.join(map(repr, unknown))}, which "
                         f"{'is' if len(unknown) == 1 else 'are'} not a tensor of the graph",
                         hint="stream takes names of tensors the graph's ops produce")
    return frozenset(names)


def _reads(graph: ir.Graph, op: ir.Op) -> set[str]:
    names = {n for n in op.inputs if n}
    for sub in op.subgraphs.values():
        names.update(n for n in sub.inputs if n in graph.tensors)      # captured outer tensors
    return names


def _make_plan(graph: ir.Graph, keep: frozenset | None, stream: frozenset | str | None) -> Plan:
    def streamed(name: str) -> bool:
        return stream == STREAM_ALL or (stream is not None and name in stream)

    order = fold_pads(graph, execution_order(graph), keep, streamed, _reads)
    last_read: dict[str, int] = {}
    for i, op in enumerate(order):
        for name in _reads(graph, op):
            last_read[name] = i
    steps = []
    for i, op in enumerate(order):
        unmade: frozenset = frozenset()
        if keep is not None and not streamed(op.outputs[0]) and THEN_BOUND in op.attrs and \
                op.outputs[0] not in keep and op.outputs[0] not in last_read:
            op = dataclasses.replace(op, attrs={**op.attrs, BOUND_ONLY: True})
            unmade = frozenset(op.outputs[:1])
        if keep is not None and THEN_RESCALE in op.attrs and \
                not any(n in keep or n in last_read or streamed(n) for n in op.outputs[:-1]):
            op = dataclasses.replace(op, attrs={**op.attrs, RESCALE_ONLY: True})
            unmade = frozenset(op.outputs[:-1])
        release: list[str] = []
        if keep is not None:
            release = [n for n in _reads(graph, op) if last_read[n] == i and n not in keep
                       and not graph.tensor(n).is_constant]
            release += [n for n in op.outputs if n not in last_read and n not in keep and n not in unmade]
        outputs = tuple((n, graph.tensor(n).rank, tuple(graph.tensor(n).shape), graph.tensor(n).dtype.numpy)
                        for n in op.outputs)
        steps.append(Step(op, outputs, any(dynattr.has_runtime(v) for v in op.attrs.values()),
                          tuple(sorted(set(release))), unmade, tuple(n for n in op.outputs if streamed(n))))
    if keep is not None:      # graph inputs nobody reads: gone before the first step
        unread = tuple(n for n in graph.inputs if n not in last_read and n not in keep)
        if unread and steps:
            steps[0] = dataclasses.replace(steps[0], release=steps[0].release + unread)
    return Plan(tuple(steps), keep, any(s.dynamic for s in steps))
