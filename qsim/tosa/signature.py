"""Operator definitions: the data each TOSA 0.30 operator section declares (spec 2.x).

An `OperatorDef` holds the operator's spec name, its Argument table (Input,
Attribute and Output rows in table order, with the spec's names), its
"Supported Data Types" table (`Mode`s, integer modes of the Base Inference
profile, plus fp32 where noted), a `check` function (the ERROR_IF pseudocode
and shape inference) and the reference implementation (`ref`).

Both entry points use these definitions: `qsim.tosa.run` (numpy arrays) and the
ir verifier (ir.Tensor dtypes and shapes), so an op is validated the same way
wherever it appears.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InvalidGraphError
from ..ir import DType

# Spec names of qsim's DTypes (table 4), for messages.
SPEC_TYPE_NAMES = {
    DType.BOOL: "bool_t", DType.I4: "int4_t", DType.I8: "int8_t", DType.U8: "uint8_t",
    DType.I16: "int16_t", DType.U16: "uint16_t", DType.I32: "int32_t", DType.I48: "int48_t",
    DType.F16: "fp16_t", DType.F32: "fp32_t",
}


def spec_type_name(dtype: DType) -> str:
    return SPEC_TYPE_NAMES.get(dtype, str(dtype))


def _storage_name(dtype: DType) -> str:
    if dtype is DType.I48:
        return "int48"
    if dtype is DType.I4:
        return "int4"
    return dtype.numpy.name


# DType properties looked up once, keyed by id(): validation runs on every qsim.tosa.run call
# (W3 budget ~50 us) and hashing an Enum member runs Python code. Members are singletons.
STORAGE_NAMES = {id(dt): _storage_name(dt) for dt in DType}
STORAGE_DTYPES = {id(dt): dt.numpy for dt in DType}
INT_RANGES = {id(dt): (int(dt.min), int(dt.max)) for dt in DType if not dt.is_float}
FLOAT_TYPES = frozenset(id(dt) for dt in DType if dt.is_float)


def storage_name(dtype: DType) -> str:
    """The `out_t`-style name of a type: numpy storage name, or "int48"/"int4" for those two."""
    return STORAGE_NAMES[id(dtype)]


class AttrKind(enum.Enum):
    INT = "int"          # python int (int32_t, uint6_t scalars)
    INTS = "ints"        # tuple of python ints (int32_t* lists), fixed `length` or any
    BOOL = "bool"        # python bool
    SCALAR = "scalar"    # python int of a type variable (zero points, clamp bounds, pad_const)
    ARRAY = "array"      # numpy array of a type variable (weight, bias, multiplier, shift, table)
    ENUM = "enum"        # one of `choices` (RESIZE mode)
    GRAPH = "graph"      # an ir.Graph (control flow)
    PAIRS = "pairs"      # tuple of (int, int) pairs: PAD padding [rank(input1), 2]


@dataclass(frozen=True)
class Arg:
    """An Input or Output row: spec name, type variable, allowed ranks."""
    name: str
    type_var: str
    ranks: tuple[int, ...] | None = None   # None: any rank
    variadic: bool = False                 # a tensor_list_t / list of tensors (CONCAT input1)


@dataclass(frozen=True)
class Attr:
    """An Attribute row. For ARRAY/SCALAR `type_var` names a type variable of the mode
    (or a fixed DType short name prefixed with '=', e.g. '=i32').
    `binds_type`: the array's dtype selects the mode (weights, CONST values)."""
    name: str
    kind: AttrKind
    type_var: str | None = None
    length: int | None = None
    choices: tuple[str, ...] = ()
    binds_type: bool = False


@dataclass(frozen=True)
class Mode:
    """One row of a Supported Data Types table."""
    name: str
    types: dict[str, DType]
    profile: str = "BI"   # "BI" (Any) or "MI" (floating point, main inference)

    def describe(self) -> str:
        return f"{self.name} (" + ", ".join(f"{k}={spec_type_name(v)}" for k, v in self.types.items()) + ")"


@dataclass
class Call:
    """One validated call: the chosen mode, input shapes, normalized attrs.

    `label` names the operator (and the op instance in a graph) in every message.
    """
    opdef: "OperatorDef"
    mode: Mode
    shapes: list[tuple[int, ...]]
    attrs: dict[str, Any]
    label: str
    out_shapes: list[tuple[int, ...]] | None = None   # set by the check (shape inference)
    out_types: list[DType] | None = None              # set only where the mode does not say (control flow)
    in_types: list[DType] | None = None               # the input tensors' types (variadic lists flattened)

    def type(self, type_var: str) -> DType:
        return self.mode.types[type_var]

    def error_if(self, condition: bool, spec_condition: str, subject: str) -> None:
        """Raises InvalidGraphError when a spec ERROR_IF condition holds."""
        if condition:
            raise InvalidGraphError(
                f"{self.label}: ERROR_IF({spec_condition}) holds for {subject} "
                f"(spec {self.opdef.section})",
                hint="the graph is not a valid TOSA 0.30 graph: change the operator's "
                     "attributes or tensor shapes so the condition no longer holds")


Check = Callable[[Call], list[tuple[int, ...]]]
Reference = Callable[[list, dict], list]


@dataclass(frozen=True)
class OperatorDef:
    name: str
    section: str
    inputs: tuple[Arg, ...]
    attrs: tuple[Attr, ...]
    outputs: tuple[Arg, ...]
    modes: tuple[Mode, ...]
    check: Check
    ref: Reference
    doc: str = ""
    # where an attribute value picks the mode (RESIZE: mode=BILINEAR/NEAREST): (raw attrs, Mode) -> bool
    mode_filter: Callable[[dict, Mode], bool] | None = None

    @property
    def out_type_var(self) -> str:
        return self.outputs[0].type_var

    def attr(self, name: str) -> Attr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)


OPERATORS: dict[str, OperatorDef] = {}


def define(opdef: OperatorDef) -> OperatorDef:
    """Registers an operator definition under its spec name (qsim.tosa's __init__ registers
    every definition as the ir kind 'tosa.NAME' once all are defined: verify.register_kinds)."""
    if opdef.name in OPERATORS:
        raise ValueError(f"TOSA operator {opdef.name} defined twice")
    OPERATORS[opdef.name] = opdef
    return opdef


def modes(*rows: tuple, names: tuple[str, ...]) -> tuple[Mode, ...]:
    """Builds Modes from table rows: (mode name, type per name in `names`...)."""
    out = []
    for row in rows:
        profile = "MI" if any(isinstance(t, DType) and t.is_float for t in row[1:]) else "BI"
        out.append(Mode(row[0], dict(zip(names, row[1:])), profile))
    return tuple(out)


I4, I8, U8, I16, U16, I32, I48, BOOL, F32 = (DType.I4, DType.I8, DType.U8, DType.I16, DType.U16,
                                             DType.I32, DType.I48, DType.BOOL, DType.F32)
