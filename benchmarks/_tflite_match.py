"""Pure parts of benchmarks/tflite.py: which TFLite operator a Vela row or a qsim layer belongs to,
per-operator sums, and the element counts of the parity table. No TensorFlow, LiteRT or Vela
needed (tests/test_benchmark_tflite.py checks them on hand-made inputs).

Matching. The unit both compilers are compared on is the TFLite operator (its index, builtin and
output tensor name). Both name their work by output tensors: a Vela row by the tensor its
operation writes, a qsim layer by its (fused chain's last) output tensor. An item goes to
  1. the operator whose output has exactly its name;
  2. else the operator whose output name is the longest proper prefix of its name
     ("x/AvgPool_copy" for "x/AvgPool"), if the types agree;
  3. else (a decomposed operator's inner steps, named after another tensor: Vela's Softmax
     rows "logits/MatMul_softmax_3" before the row writing the softmax output) the operator of
     the next item matched by 1 or 2, if the types agree; else the first operator from the
     last matched one on whose type agrees;
  4. else none (reported as unmatched).
"Types agree" is the caller's predicate: Vela rows carry their original TFLite builtin; qsim
layers carry TOSA operators and agree with any operator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class TfliteOp:
    index: int
    builtin: str         # BuiltinOperator name as LiteRT prints it: CONV_2D, AVERAGE_POOL_2D
    output: str          # the first output tensor's name
    inputs: tuple[str, ...] = ()     # input tensor names (activations and constants)


# Vela's operator names (ethosu.vela.operation.Op) that are not the builtin's name with the
# underscores dropped
_VELA_ALIASES = {"avgpool": "averagepool2d", "maxpool": "maxpool2d", "concat": "concatenation",
                 "sigmoid": "logistic", "conv2dbias": "conv2d", "conv2dbackpropinput": "transposeconv",
                 "conv2dbackpropinputswitchedbias": "transposeconv", "blockconcat": "concatenation",
                 "concatsliceswrite": "concatenation", "resizenearestneighbor": "resizenearestneighbor",
                 "fullyconnected": "fullyconnected", "spacetodepth": "spacetodepth"}


def builtin_key(name: str) -> str:
    """One spelling for a TFLite builtin whether LiteRT (DEPTHWISE_CONV_2D) or Vela
    (DepthwiseConv2D, AvgPool) names it."""
    key = name.replace("_", "").lower()
    return _VELA_ALIASES.get(key, key)


def vela_type_agrees(row_original_op: str, op: TfliteOp) -> bool:
    return builtin_key(row_original_op) == builtin_key(op.builtin)


def match_items(ops: Sequence[TfliteOp], names: Sequence[str],
                agrees: Callable[[int, TfliteOp], bool]) -> list[int | None]:
    """For each item (its name, and agrees(item_index, op)), the index into `ops` it belongs
    to, or None; rules in the module docstring."""
    by_output = {op.output: k for k, op in enumerate(ops)}
    outputs_by_length = sorted(by_output, key=len, reverse=True)
    found: list[int | None] = []
    for i, name in enumerate(names):
        k = by_output.get(name)
        if k is None:
            k = next((by_output[o] for o in outputs_by_length
                      if len(o) < len(name) and name.startswith(o) and agrees(i, ops[by_output[o]])), None)
        found.append(k)
    result = list(found)
    last = 0
    for i, k in enumerate(found):
        if k is not None:
            last = k
            continue
        following = next((f for f in found[i + 1:] if f is not None), None)
        if following is not None and agrees(i, ops[following]):
            result[i] = following
        else:
            result[i] = next((j for j in range(last, len(ops)) if agrees(i, ops[j])), None)
        if result[i] is not None:
            last = result[i]
    return result


def renamed(ops: Sequence[TfliteOp], names: dict[str, str]) -> list[TfliteOp]:
    """The operators with their outputs under another naming (qsim's integer graph, whose
    tensor names are the TFLite names made identifiers: `names` is the quantized model's
    tensor_map, TFLite name -> integer tensor name); names without an entry kept."""
    return [TfliteOp(op.index, op.builtin, names.get(op.output, op.output), op.inputs) for op in ops]


def per_op_sums(ops: Sequence[TfliteOp], assignment: Sequence[int | None],
                values: Sequence[dict], keys: Sequence[str]) -> tuple[list[dict], dict]:
    """Sums of `keys` of the items per operator (operators in order, with `items`: how many rows
    fed it), and the sums of the unmatched items."""
    per_op = [dict({key: 0 for key in keys}, items=0) for _ in ops]
    unmatched = dict({key: 0 for key in keys}, items=0)
    for k, value in zip(assignment, values):
        into = unmatched if k is None else per_op[k]
        into["items"] += 1
        for key in keys:
            into[key] += value[key]
    return per_op, unmatched


@dataclass
class Parity:
    """Elements compared, elements differing and the largest difference in LSB of one tensor
    (or, summed, of one operator type or model)."""
    elements: int = 0
    differing: int = 0
    max_lsb: int = 0
    higher: int = 0          # of the differing elements, those where qsim's value is the larger

    def add(self, other: "Parity") -> None:
        self.elements += other.elements
        self.differing += other.differing
        self.max_lsb = max(self.max_lsb, other.max_lsb)
        self.higher += other.higher


def compare(ours: np.ndarray, theirs: np.ndarray) -> Parity:
    """Element counts of two integer tensors of one shape (int64 differences: no wrap-around)."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes differ: {ours.shape} vs {theirs.shape}")
    signed = ours.astype(np.int64) - theirs.astype(np.int64)
    diff = np.abs(signed)
    return Parity(int(diff.size), int(np.count_nonzero(diff)), int(diff.max()) if diff.size else 0,
                  int(np.count_nonzero(signed > 0)))


def parity_by_builtin(rows: Sequence[dict]) -> dict[str, Parity]:
    """Per-tensor rows ({"builtin", "elements", "differing", "max_lsb"}) summed per builtin, in
    order of first appearance."""
    out: dict[str, Parity] = {}
    for row in rows:
        out.setdefault(row["builtin"], Parity()).add(
            Parity(row["elements"], row["differing"], row["max_lsb"], row.get("higher", 0)))
    return out


def origins(ops: Sequence[TfliteOp], rows: Sequence[dict], produced: set[str]) -> list[dict]:
    """The compared operators (rows by "output") whose output differs although every input is
    exact: an input is exact when it is compared and equal, or when no operator produces it (a
    constant, or the graph input both sides receive as the same array). There differences start;
    an operator with a differing or uncompared input may only pass differences on."""
    by_output = {row["output"]: row for row in rows}
    found = []
    for op in ops:
        row = by_output.get(op.output)
        if row is None or not row["differing"]:
            continue
        if all((name in by_output and by_output[name]["differing"] == 0) or
               (name not in by_output and name not in produced) for name in op.inputs):
            found.append(row)
    return found


def largest_differences(per_op: Sequence[dict], count: int) -> list[dict]:
    """The `count` operators with the largest |qsim cycles - Vela cycles|, largest first
    (rows with "qsim_cycles" and "vela_cycles")."""
    return sorted(per_op, key=lambda r: abs(r["qsim_cycles"] - r["vela_cycles"]), reverse=True)[:count]
