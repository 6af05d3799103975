"""Validation shared by `qsim.tosa.run` and the ir verifier: mode matching, attribute
normalization, rank checks, then the operator's ERROR_IF checks and shape inference.

Normalized attributes (what reference functions and kernels receive):
  INT -> python int; INTS -> tuple of python ints; BOOL -> python bool;
  SCALAR -> python int (python bool for bool_t); ENUM -> upper-case str;
  ARRAY -> C-contiguous numpy array in the storage dtype of its type
  (weight int8, bias int32 or int64 for int48_t, table int8/int16,
  multiplier and shift int32); GRAPH -> ir.Graph.
  Plus `out_t` (storage name of the first output's type: "int8", "int32",
  "int48", "bool", ...) and, for operators with a weight, `weight_t`
  ("int8" or "int4").
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import InvalidGraphError, UsageError
from ..ir import DType, Graph
from .signature import (FLOAT_TYPES, INT_RANGES, STORAGE_DTYPES, STORAGE_NAMES, AttrKind, Call, Mode, OperatorDef,
                        spec_type_name, storage_name)

_INT32 = np.dtype(np.int32)

EXTRA_KEYS = ("out_t", "weight_t")     # not spec attributes: type selectors (docs/tosa.md)

_NUMPY_TO_DTYPE = {
    np.dtype(np.bool_): DType.BOOL, np.dtype(np.int8): DType.I8, np.dtype(np.uint8): DType.U8,
    np.dtype(np.int16): DType.I16, np.dtype(np.uint16): DType.U16, np.dtype(np.int32): DType.I32,
    np.dtype(np.int64): DType.I48,  # TOSA has no int64: int64 arrays hold int48_t values
    np.dtype(np.float32): DType.F32,
}


def contiguous(array: np.ndarray, dtype=None) -> np.ndarray:
    """C-contiguous array of `dtype`, keeping rank 0 (np.ascontiguousarray makes it rank 1)."""
    array = np.asarray(array, dtype=dtype)
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def dtype_of_array(array: np.ndarray, what: str, label: str) -> DType:
    try:
        return _NUMPY_TO_DTYPE[array.dtype]
    except KeyError:
        raise UsageError(f"{label}: {what} is a {array.dtype} array, which no TOSA type is stored in",
                         hint="use bool, int8, uint8, int16, uint16, int32, int64 (for int48_t) "
                              "or float32 arrays") from None


def parse_type_name(value: Any, key: str, label: str) -> DType:
    """`out_t`/`weight_t` values: a numpy dtype (name), a DType, or "int48"/"int4"."""
    if isinstance(value, DType):
        dt = value
    else:
        name = value.name if isinstance(value, np.dtype) else (
            np.dtype(value).name if isinstance(value, type) else str(value))
        try:
            dt = DType.from_name(name)
        except UsageError:
            dt = None
        if dt is DType.I64:
            dt = None   # int64 is only the storage of int48
        if dt is None:
            raise UsageError(f"{label}: {key}={value!r} is not a TOSA type name",
                             hint="use a numpy dtype name (int8, uint8, int16, uint16, int32, bool, "
                                  "float32) or 'int48' / 'int4'")
    return dt


_IINFO: dict[np.dtype, tuple[int, int]] = {}


def _type_range(dt) -> tuple[int, int]:
    rng = INT_RANGES.get(id(dt))
    return rng if rng is not None else (int(dt.min), int(dt.max))


def _as_int(value: Any, name: str, label: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
            return int(value)
        raise UsageError(f"{label}: attribute {name}={value!r} must be an integer",
                         hint=f"pass {name} as a python int")
    return int(value)


def _normalize_attr(call_mode: Mode, attr, value: Any, attrs: dict, label: str) -> Any:
    kind = attr.kind
    name = attr.name
    if kind is AttrKind.INT:
        return _as_int(value, name, label)
    if kind is AttrKind.BOOL:
        if not isinstance(value, (bool, np.bool_)):
            raise UsageError(f"{label}: attribute {name}={value!r} must be a bool",
                             hint=f"pass {name}=True or {name}=False")
        return bool(value)
    if kind is AttrKind.INTS:
        if type(value) is tuple and all(type(v) is int for v in value):    # the common, fast case
            if attr.length is None or len(value) == attr.length:
                return value
        arr = np.asarray(value)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise UsageError(f"{label}: attribute {name}={value!r} must be a list of integers",
                             hint=f"pass {name} as a tuple of ints")
        ints = tuple(int(v) for v in arr.tolist())
        if attr.length is not None and len(ints) != attr.length:
            raise InvalidGraphError(f"{label}: attribute {name} has {len(ints)} values, the spec "
                                    f"gives it shape [{attr.length}]",
                                    hint=f"pass {attr.length} integers for {name}")
        return ints
    if kind is AttrKind.PAIRS:
        arr = np.asarray(value)
        if arr.ndim != 2 or arr.shape[1] != 2 or (arr.size and arr.dtype.kind not in "iu"):
            raise InvalidGraphError(f"{label}: attribute {name} must be integer pairs of shape [rank, 2], "
                                    f"got {value!r}", hint=f"pass {name} as ((before, after), ...) per axis")
        return tuple((int(a), int(b)) for a, b in arr.tolist())
    if kind is AttrKind.ENUM:
        text = str(value).upper()
        if text not in attr.choices:
            raise InvalidGraphError(f"{label}: attribute {name}={value!r} is not one of "
                                    + ", ".join(attr.choices))
        return text
    if kind is AttrKind.GRAPH:
        if not isinstance(value, Graph):
            raise UsageError(f"{label}: attribute {name} must be an ir.Graph, got {type(value).__name__}")
        return value
    dt = _resolve_type(call_mode, attr.type_var, attrs)
    if kind is AttrKind.SCALAR:
        if dt is DType.BOOL:
            if not isinstance(value, (bool, np.bool_)) and value not in (0, 1):
                raise UsageError(f"{label}: attribute {name}={value!r} must be a bool")
            return bool(value)
        if id(dt) in FLOAT_TYPES:
            return float(value)
        v = _as_int(value, name, label)
        lo, hi = _type_range(dt)
        if not lo <= v <= hi:
            raise InvalidGraphError(f"{label}: attribute {name}={v} is outside the range of its type "
                                    f"{spec_type_name(dt)} [{lo}, {hi}]")
        return v
    # ARRAY
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if dt is DType.BOOL:
        if arr.dtype != np.bool_:
            raise UsageError(f"{label}: attribute {name} must be a bool array, got {arr.dtype}")
        return contiguous(arr)
    if id(dt) in FLOAT_TYPES:
        return contiguous(arr, np.float32)
    if arr.dtype.kind not in "iu":
        raise UsageError(f"{label}: attribute {name} must be an integer array, got {arr.dtype}",
                         hint=f"pass {name} as a numpy array of {spec_type_name(dt)} values")
    lo, hi = _type_range(dt)
    info = _IINFO.get(arr.dtype)
    if info is None:
        info = _IINFO[arr.dtype] = (int(np.iinfo(arr.dtype).min), int(np.iinfo(arr.dtype).max))
    if (info[0] < lo or info[1] > hi) and arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise InvalidGraphError(f"{label}: attribute {name} has values in [{int(arr.min())}, "
                                f"{int(arr.max())}], outside its type {spec_type_name(dt)} [{lo}, {hi}]")
    storage = _INT32 if attr.type_var in ("mul_t", "uint6_t") else STORAGE_DTYPES[id(dt)]
    return contiguous(arr, storage)


def _resolve_type(mode: Mode, type_var: str, attrs: dict) -> DType:
    if type_var in mode.types:
        return mode.types[type_var]
    if type_var == "mul_t":      # RESCALE: if (scale32) mul_t=int32_t else mul_t=int16_t
        return DType.I32 if attrs.get("scale32") else DType.I16
    if type_var == "uint6_t":
        return _UINT6
    if type_var.startswith("="):
        return DType.from_name(type_var[1:])
    raise KeyError(type_var)


class _Uint6:
    """uint6_t (shift amounts): 0..63. Only used for range checks."""
    min, max, is_float = 0, 63, False
    numpy = np.dtype(np.int32)

    def __str__(self):
        return "uint6_t"


_UINT6 = _Uint6()
_SPEC_NAME_UINT6 = "uint6_t"


@dataclass(frozen=True)
class _Static:
    """Per-operator facts bind() needs on every call, computed once."""
    spec_names: tuple[str, ...]
    name_set: frozenset
    n_fixed: int
    variadic: bool
    norm_order: tuple            # scalars/flags before arrays (multiplier's type depends on scale32)
    binders: tuple               # attributes whose array dtype selects the mode
    has_weight: bool
    single_output: bool


_STATIC: dict[str, _Static] = {}
_MODE_CACHE: dict[tuple, Mode] = {}


def _static(opdef: OperatorDef) -> _Static:
    st = _STATIC.get(opdef.name)
    if st is None:
        names = tuple(a.name for a in opdef.attrs)
        st = _Static(names, frozenset(names) | frozenset(EXTRA_KEYS),
                     sum(1 for a in opdef.inputs if not a.variadic), any(a.variadic for a in opdef.inputs),
                     tuple(sorted(opdef.attrs, key=lambda a: a.kind in (AttrKind.ARRAY, AttrKind.SCALAR))),
                     tuple(a for a in opdef.attrs if a.binds_type), "weight" in names,
                     bool(opdef.outputs) and not opdef.outputs[0].variadic)
        _STATIC[opdef.name] = st
    return st


def bind(opdef: OperatorDef, in_types: Sequence[DType], shapes: Sequence[tuple[int, ...]],
         attrs: dict, label: str, out_type: DType | None = None) -> Call:
    """Validates one call; returns the Call with its mode, normalized attrs and output shapes.

    `in_types`/`shapes`: the input tensors (variadic lists flattened). `out_type`:
    the first output's type when the caller knows it (attrs["out_t"] or a graph tensor).
    """
    if not isinstance(attrs, dict):
        raise UsageError(f"{label}: attrs must be a dict of attribute name -> value, "
                         f"got {type(attrs).__name__}")
    st = _static(opdef)
    spec_names = st.spec_names
    if not st.name_set.issuperset(attrs):
        unknown = [k for k in attrs if k not in st.name_set]
        raise UsageError(f"{label}: unknown attribute(s) {', '.join(map(repr, unknown))}",
                         hint=f"{opdef.name} (spec {opdef.section}) has attributes: "
                              + (", ".join(spec_names) or "none") + "; plus out_t where the output "
                              "type is not implied by the inputs")
    missing = [k for k in spec_names if k not in attrs]
    if missing:
        raise UsageError(f"{label}: missing attribute(s) {', '.join(missing)}",
                         hint=f"{opdef.name} (spec {opdef.section}) needs every attribute: "
                              + ", ".join(spec_names))
    n_given = len(in_types)
    if (not st.variadic and n_given != st.n_fixed) or (st.variadic and n_given < st.n_fixed):
        raise UsageError(f"{label}: got {n_given} input tensor(s), {opdef.name} takes "
                         + ("at least " if st.variadic else "") + f"{st.n_fixed}: "
                         + ", ".join(a.name + ("[]" if a.variadic else "") for a in opdef.inputs))
    arg_of_input = _inputs_to_args(opdef, n_given) if st.variadic else opdef.inputs
    # Known types: inputs, type-binding attributes, out_t
    known: dict[str, tuple[DType, str]] = {}

    def know(var: str, dt: DType, what: str) -> None:
        if var == "any":
            return
        if var in known and known[var][0] is not dt:
            raise InvalidGraphError(f"{label}: {what} is {spec_type_name(dt)} but {known[var][1]} is "
                                    f"{spec_type_name(known[var][0])}; both are {var}",
                                    hint=_modes_hint(opdef))
        known.setdefault(var, (dt, what))

    for i, (arg, dt) in enumerate(zip(arg_of_input, in_types)):
        know(arg.type_var, dt, f"input {arg.name}" + (f"[{i - opdef.inputs.index(arg)}]" if arg.variadic else ""))
    weight_t = attrs.get("weight_t")
    for a in st.binders:
        arr = attrs[a.name]
        if not isinstance(arr, np.ndarray):
            raise UsageError(f"{label}: attribute {a.name} must be a numpy array, "
                             f"got {type(arr).__name__}")
        dt = dtype_of_array(arr, f"attribute {a.name}", label)
        if a.name == "weight" and weight_t is not None:
            wt = parse_type_name(weight_t, "weight_t", label)
            if wt is DType.I4 and dt is DType.I8:
                dt = DType.I4
            elif wt is not dt:
                raise UsageError(f"{label}: weight_t={weight_t!r} does not match the weight array "
                                 f"({arr.dtype})", hint="int4 weights are held in int8 arrays")
        know(a.type_var, dt, f"attribute {a.name}")
    if weight_t is not None and not st.has_weight:
        raise UsageError(f"{label}: weight_t is given but {opdef.name} has no weight")
    if out_type is not None and st.single_output:
        know(opdef.out_type_var, out_type, "output " + opdef.outputs[0].name)
    mode = _match_mode(opdef, known, attrs, label)
    # Ranks
    for arg, shape in zip(arg_of_input, shapes):
        if arg.ranks is not None and len(shape) not in arg.ranks:
            raise InvalidGraphError(f"{label}: input {arg.name} has rank {len(shape)} (shape "
                                    f"{list(shape)}), {opdef.name} needs rank "
                                    + " or ".join(map(str, arg.ranks)))
    norm: dict[str, Any] = {}
    for a in st.norm_order:
        norm[a.name] = _normalize_attr(mode, a, attrs[a.name], norm, label)
    norm = {name: norm[name] for name in spec_names}
    if st.single_output:
        norm["out_t"] = STORAGE_NAMES[id(mode.types[opdef.out_type_var])]
    if st.has_weight:
        norm["weight_t"] = STORAGE_NAMES[id(mode.types["weight_t"])]
    call = Call(opdef, mode, [tuple(int(d) for d in s) for s in shapes], norm, label,
                in_types=list(in_types))
    call.out_shapes = opdef.check(call)
    return call


def _match_mode(opdef: OperatorDef, known: dict, attrs: dict, label: str) -> Mode:
    """The one Supported Data Types row consistent with the known types (cached)."""
    key = (opdef.name, tuple((v, id(dt)) for v, (dt, _) in known.items()),
           str(attrs.get("mode", "")) if opdef.mode_filter is not None else "")
    mode = _MODE_CACHE.get(key)
    if mode is not None:
        return mode
    matching = [m for m in opdef.modes
                if all(m.types.get(v) is dt for v, (dt, _) in known.items())
                and (opdef.mode_filter is None or opdef.mode_filter(attrs, m))]
    if not matching:
        got = ", ".join(f"{v}={spec_type_name(dt)} ({what})" for v, (dt, what) in known.items())
        raise InvalidGraphError(f"{label}: no supported data type mode of {opdef.name} has {got}",
                                hint=_modes_hint(opdef))
    if len(matching) > 1:
        raise UsageError(f"{label}: the input types fit {len(matching)} modes of {opdef.name}: "
                         + "; ".join(m.describe() for m in matching),
                         hint="say which with attrs['out_t'] (e.g. out_t='int8')")
    _MODE_CACHE[key] = matching[0]
    return matching[0]


def _inputs_to_args(opdef: OperatorDef, n: int):
    """The Arg row of each given input (a variadic row takes the surplus)."""
    n_fixed = sum(1 for a in opdef.inputs if not a.variadic)
    out = []
    for arg in opdef.inputs:
        out.extend([arg] * ((n - n_fixed) if arg.variadic else 1))
    return out


def _modes_hint(opdef: OperatorDef) -> str:
    return (f"{opdef.name} (spec {opdef.section}) supports: "
            + "; ".join(m.describe() for m in opdef.modes))


def output_types(call: Call) -> list[DType]:
    """The type of each output (from the mode; control flow sets call.out_types itself)."""
    if call.out_types is not None:
        return list(call.out_types)
    return [call.mode.types[o.type_var] for o in call.opdef.outputs]
