"""Which graph outputs the accuracy report scores, and how (`qsim quantize --score-output`).

Every scored output gets element-wise figures (SQNR, largest error and the share of elements
within one quantization step of float). An output is also scored as a classification (top-1
agreement float vs integer, top-1 accuracy against labels) when its values per sample are a
class vector (one axis of K >= 2 extents, every other extent 1: [N, K], [N, K, 1, 1]) and

- it is the model's only output (a classifier's logits), or
- a softmax produces it (MTCNN's face probability next to its box regression) or reads it
  (the logits of a model that also outputs their softmax), or
- labels are given for it (`labels/NAME` in an .npz, or unnamed labels, see below).

A class-vector shape alone is not enough: MTCNN's box regression [N, 4] has one too, and the
report of a multi-output model took argmax over outputs[0] before this rule (OLD_RULE_WARNING).

Unnamed labels (`labels`/`y` in an .npz, labels.txt in an image folder) belong to every
classification output when they have the same class count (logits and their softmax); with
none, to the first scored output with a class-vector shape; with different class counts, the
labels must be named.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Collection, Sequence

from ... import ir
from ...errors import DataError, UsageError

# producers whose output is a probability vector over classes
_CLASS_PRODUCERS = frozenset({"nn.softmax"})
_NO_RULE = "several outputs, no softmax, no labels"


class OutputRole(Enum):
    CLASSES = "classes"   # element-wise figures and top-1
    VALUES = "values"     # element-wise figures only (regression, feature maps, ...)


@dataclass(frozen=True)
class ScoredOutput:
    name: str
    sample_shape: tuple[int, ...]     # the output's shape without the batch axis
    role: OutputRole
    reason: str                       # why the role: "only output", "softmax", "labels", ...

    @property
    def classes(self) -> int:
        return math.prod(self.sample_shape)


def class_vector_extent(sample_shape: Sequence[int]) -> int | None:
    """K when the per-sample shape holds exactly one extent K >= 2 and every other extent is 1."""
    big = [d for d in sample_shape if d != 1]
    return big[0] if len(big) == 1 and big[0] >= 2 else None


def _outputs_listing(graph: ir.Graph) -> str:
    return ", ".join(f"'{n}' {list(graph.tensor(n).shape)}" for n in graph.outputs)


def choose_outputs(graph: ir.Graph, requested: Sequence[str] = (), labelled: Collection[str] = (),
                   unnamed_labels: bool = False) -> tuple[ScoredOutput, ...]:
    """The outputs to score (`requested`, default all, in the graph's order) with their roles.
    `labelled`: outputs with named labels; `unnamed_labels`: labels that name no output."""
    outputs = list(graph.outputs)
    for what, names in (("--score-output", requested), ("labels for", labelled)):
        for name in names:
            if name not in outputs:
                kind = UsageError if what == "--score-output" else DataError
                raise kind(f"{what} {name!r}: the model has no output of that name",
                           hint=f"the model's outputs: {_outputs_listing(graph)}")
    names = [n for n in outputs if n in set(requested)] if requested else outputs
    scored = []
    for name in names:
        dims = [int(d) for d in graph.tensor(name).shape]
        if dims:    # the batch axis: the first of extent 1 (axis 1 of a sequence-first [S, 1, E])
            del dims[dims.index(1) if 1 in dims else 0]
        sample_shape = tuple(dims)
        producer = graph.producer(name)
        extent = class_vector_extent(sample_shape)
        if extent is None:
            if name in labelled:
                raise DataError(f"labels for output {name!r}: its values per sample {list(sample_shape)} "
                                "are not a class vector", hint="labels are class ids of an output [N, K]")
            reason = "not a class vector"
        elif len(outputs) == 1:
            reason = "only output"
        elif producer is not None and producer.kind.name in _CLASS_PRODUCERS:
            reason = "softmax"
        elif any(op.kind.name in _CLASS_PRODUCERS for op in graph.consumers(name)):
            reason = "logits of a softmax"
        elif name in labelled:
            reason = "labels"
        else:
            reason = _NO_RULE
        role = OutputRole.VALUES if reason in ("not a class vector", _NO_RULE) else OutputRole.CLASSES
        scored.append(ScoredOutput(name, sample_shape, role, reason))
    if unnamed_labels:
        scored = _give_unnamed_labels(scored, graph)
    return tuple(scored)


def _give_unnamed_labels(scored: list[ScoredOutput], graph: ir.Graph) -> list[ScoredOutput]:
    classes = [s for s in scored if s.role is OutputRole.CLASSES]
    if len({s.classes for s in classes}) > 1:
        raise UsageError("the labels name no output and the class-vector outputs have different "
                         "class counts (" + ", ".join(f"'{s.name}' {s.classes}" for s in classes) + ")",
                         hint="store labels per output in the .npz as 'labels/<output name>'")
    if classes:
        return scored
    for i, s in enumerate(scored):
        if class_vector_extent(s.sample_shape) is not None:
            scored[i] = ScoredOutput(s.name, s.sample_shape, OutputRole.CLASSES, "labels")
            return scored
    raise DataError("labels are given but no scored output is a class vector",
                    hint=f"labels are class ids of an output [N, K]; the model's outputs: {_outputs_listing(graph)}")


def label_targets(scored: Sequence[ScoredOutput]) -> tuple[str, ...]:
    """The outputs unnamed labels belong to: every classification output when they all have the
    same class count (logits and their softmax), else none (choose_outputs refuses them)."""
    classes = [s for s in scored if s.role is OutputRole.CLASSES]
    return tuple(s.name for s in classes) if len({s.classes for s in classes}) == 1 else ()


def old_rule_warning(graph: ir.Graph, scored: Sequence[ScoredOutput]) -> str | None:
    """A warning for a model with several outputs whose first one is not scored as a class
    vector (MTCNN: outputs[0] is the box regression), where a reader, or a tool that takes
    outputs[0] as the prediction (earlier qsim reports did), would misread the figures. A
    single output that is not a class vector misleads nobody: its SQNR is what is reported."""
    first = graph.outputs[0]
    role = next((s.role for s in scored if s.name == first), None)
    if role is OutputRole.CLASSES or len(graph.outputs) == 1:
        return None
    shape = [int(d) for d in graph.tensor(first).shape[1:]]
    return (f"outputs[0] '{first}' (values per sample {shape}) is not a class vector: it has no "
            "top-1 figure, only SQNR and LSB errors; the model's class output, if any, is another "
            "one. Choose the outputs to score with --score-output.")


def check_label_range(name: str, labels, classes: int, where: str = "labels") -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise DataError(f"{where} of output {name!r} must be class ids in [0, {classes}), got "
                        f"{int(labels.min())}..{int(labels.max())}",
                        hint="labels are class indices of the output's class axis")
