"""How a CVM operator is described: OpDef (signature, checks, precision rule, reference).

Every operator module (reduce, broadcast, nn, elemwise, transform, nms) builds
OpDefs and hands them to `define`, which also registers the ir OpKind
"cvm.<name>" so `Graph.verify()` checks CVM ops (see graph.py for the verifier).

Conventions shared by all operators:
- shapes are tuples of positive ints (a zero extent is rejected: CVM TShapes of
  real tensors are non-empty, and several formulas — max, slice — need it);
- `infer(chk, shapes, attrs) -> out_shapes` validates attributes against the
  formalization's ranges and the input shapes, raising InvalidGraphError via chk;
- `precision(chk, precs, shapes, attrs) -> out_precs` is the output precision rule
  (an upper bound: every output value fits it);
- `reference(inputs, attrs) -> outputs` gets int64 arrays (optional inputs as None)
  and returns int64 arrays; it is a direct transcription of the formula.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import InvalidGraphError, UsageError

MAX_ATTR = 4096   # the formalization's max_attr
MIN_ATTR = 0      # the formalization's min_attr


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()

Shape = tuple[int, ...]


class Checker:
    """Raises the errors of one operator application, naming operator, tensor and attribute."""

    def __init__(self, op: str, input_names: Sequence[str], labels: Mapping[str, str] | None = None):
        self.op = f"cvm.{op}"
        self.input_names = list(input_names)
        self.labels = dict(labels or {})
        self.values: dict[str, Any] = {}   # attributes as validated (ints, bools, int tuples)

    def tensor(self, name: str) -> str:
        """'input X' or 'input X (tensor conv1.x)' when the graph tensor name is known."""
        label = self.labels.get(name)
        return f"input {name}" + (f" (tensor {label!r})" if label else "")

    def fail(self, message: str, hint: str | None = None):
        raise InvalidGraphError(f"{self.op}: {message}", hint=hint)

    def require(self, cond: bool, message: str, hint: str | None = None) -> None:
        if not cond:
            self.fail(message, hint)

    # ---- attributes -------------------------------------------------------------------
    def int_attr(self, attrs, name, lo=None, hi=None, *, bound_doc: str = "") -> int:
        """An int attribute in [lo, hi) (either bound may be None = unbounded)."""
        v = attrs[name]
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            self.fail(f"attribute '{name}' = {v!r} is not an integer")
        v = int(v)
        self._range(name, v, lo, hi, bound_doc)
        self.values[name] = v
        return v

    def bool_attr(self, attrs, name) -> bool:
        v = attrs[name]
        if not isinstance(v, (bool, np.bool_)):
            self.fail(f"attribute '{name}' = {v!r} is not a boolean", hint="use true or false")
        self.values[name] = bool(v)
        return bool(v)

    def ints_attr(self, attrs, name, *, length: int | None = None, lo=None, hi=None,
                  expand: bool = False, bound_doc: str = "") -> tuple[int, ...]:
        """A TShape-like attribute: a tuple of ints, each in [lo, hi).

        `expand`: a single int (or 1-tuple) stands for `length` copies, as the
        formalization allows for max_pool2d's padding.
        """
        v = attrs[name]
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            v = (int(v),)
        if isinstance(v, np.ndarray):
            v = tuple(v.tolist())
        if not isinstance(v, (tuple, list)) or any(
                isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) for x in v):
            self.fail(f"attribute '{name}' = {v!r} is not a tuple of integers")
        v = tuple(int(x) for x in v)
        if expand and length is not None and len(v) == 1:
            v = v * length
        if length is not None and len(v) != length:
            self.fail(f"attribute '{name}' = {list(v)} has {len(v)} values; it takes {length}")
        for i, x in enumerate(v):
            self._range(f"{name}[{i}]", x, lo, hi, bound_doc, whole=(name, v))
        self.values[name] = v
        return v

    def _range(self, name, v, lo, hi, bound_doc, whole=None):
        if (lo is not None and v < lo) or (hi is not None and v >= hi):
            lo_s = "-inf" if lo is None else str(lo)
            hi_s = "+inf" if hi is None else str(hi)
            shown = f"attribute '{whole[0]}' = {list(whole[1])}: {name} = {v}" if whole else \
                f"attribute '{name}' = {v}"
            doc = f" ({bound_doc})" if bound_doc else ""
            self.fail(f"{shown} is outside [{lo_s}, {hi_s}){doc}",
                      hint=f"choose a value in [{lo_s}, {hi_s})")

    def axis(self, value: int, rank: int, what: str, lo: int | None = None, hi: int | None = None) -> int:
        """An axis in [lo, hi) (default [-rank, rank)) made non-negative by adding rank."""
        lo = -rank if lo is None else lo
        hi = rank if hi is None else hi
        if not lo <= value < hi:
            self.fail(f"{what} = {value} is outside [{lo}, {hi}) for a rank-{rank} input",
                      hint=f"axes of a rank-{rank} tensor are in [{lo}, {hi})")
        return value + rank if value < 0 else value

    # ---- shapes -----------------------------------------------------------------------
    def rank(self, shapes, index: int, rank: int, layout: str = "") -> Shape:
        s = shapes[index]
        name = self.input_names[index]
        if len(s) != rank:
            self.fail(f"{self.tensor(name)} has shape {list(s)} (rank {len(s)}); it must have rank {rank}"
                      + (f" ({layout})" if layout else ""))
        return s


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    infer: Callable[..., list[Shape]]
    precision: Callable[..., list[int]]
    reference: Callable[[list, dict], list[np.ndarray]]
    optional: frozenset[str] = frozenset()
    variadic: bool = False         # one input name standing for M >= 1 tensors (concatenate)
    doc: str = ""
    kernel: Callable[[list, dict], list[np.ndarray]] | None = field(default=None, compare=False)

    def normalize_attrs(self, attrs: Mapping[str, Any] | None) -> dict:
        """Defaults filled in; unknown or missing attributes are UsageErrors naming the fix."""
        attrs = dict(attrs or {})
        unknown = sorted(set(attrs) - set(self.attrs))
        if unknown:
            known = ", ".join(self.attrs) or "none"
            raise UsageError(f"cvm.{self.name}: unknown attribute(s) {', '.join(unknown)}",
                             hint=f"cvm.{self.name} takes the attributes: {known}")
        out = {}
        for name, default in self.attrs.items():
            if name in attrs:
                out[name] = attrs[name]
            elif default is REQUIRED:
                raise UsageError(f"cvm.{self.name}: attribute '{name}' is required",
                                 hint=f"pass attrs={{'{name}': ...}}")
            else:
                out[name] = default
        return out


OPS: dict[str, OpDef] = {}


def define(opdef: OpDef, *aliases: str) -> OpDef:
    """Adds an operator (and aliases sharing its definition); qsim.cvm registers the ir OpKinds
    of all of them once they are defined (graph.register_kinds)."""
    for name in (opdef.name,) + aliases:
        OPS[name] = opdef
    return opdef


def lookup(name: str) -> OpDef:
    key = name[4:] if name.startswith("cvm.") else name
    try:
        return OPS[key]
    except KeyError:
        raise UsageError(f"unknown CVM operator {name!r}",
                         hint="CVM operators: " + ", ".join(sorted(OPS))) from None


def same_precision(chk, precs, shapes, attrs):
    """Rule for operators that only move or select values of input 0."""
    return [precs[0]]
