"""qsim's one IR: DType, QuantInfo, Tensor, OpKind, Op, Graph.

Every stage after the front end speaks `Graph`. Float and integer graphs are the
same types, told apart by dtypes and op kinds. Objects are immutable; a pass
returns a new Graph (use `dataclasses.replace`) and never edits its input.

Op kinds come from a closed registry keyed by qualified name (`tosa.CONV2D`,
`nn.conv`, `cvm.conv2d`): `OpKind.get(name)` fails for a name nobody
registered, so an op can never carry an unchecked string.
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from .errors import InvalidGraphError, UsageError


class DType(enum.Enum):
    """Element types. Value = (short name, bits, signed, integer, numpy storage dtype).

    Storage: i4 is held in int8 arrays, i48 in int64 arrays (values must stay in
    the narrower range; `DType.check_range` tells).
    """
    BOOL = ("bool", 1, False, True, "bool")
    I4 = ("i4", 4, True, True, "int8")
    I8 = ("i8", 8, True, True, "int8")
    U8 = ("u8", 8, False, True, "uint8")
    I16 = ("i16", 16, True, True, "int16")
    U16 = ("u16", 16, False, True, "uint16")
    I32 = ("i32", 32, True, True, "int32")
    I48 = ("i48", 48, True, True, "int64")
    I64 = ("i64", 64, True, True, "int64")
    F16 = ("f16", 16, True, False, "float16")
    F32 = ("f32", 32, True, False, "float32")
    F64 = ("f64", 64, True, False, "float64")

    @property
    def short(self) -> str:
        return self.value[0]

    @property
    def bits(self) -> int:
        return self.value[1]

    @property
    def signed(self) -> bool:
        return self.value[2]

    @property
    def is_integer(self) -> bool:
        return self.value[3] and self is not DType.BOOL

    @property
    def is_float(self) -> bool:
        return not self.value[3]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype arrays of this type are stored in."""
        return np.dtype(self.value[4])

    @property
    def min(self) -> int:
        """Smallest value (TOSA table 4: int4 is symmetric, -7..7)."""
        if self is DType.BOOL:
            return 0
        if not self.is_integer:
            return -np.inf
        if self is DType.I4:
            return -7
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        if self is DType.BOOL:
            return 1
        if not self.is_integer:
            return np.inf
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def __str__(self) -> str:
        return self.short

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    @classmethod
    def from_name(cls, name: str) -> "DType":
        """Accepts short names (`i8`), numpy names (`int8`) and TOSA names (`int8_t`, `int48`)."""
        key = str(name).strip().lower()
        if key.endswith("_t"):
            key = key[:-2]
        aliases = {"int4": "i4", "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16",
                   "int32": "i32", "int48": "i48", "int64": "i64", "float16": "f16", "fp16": "f16",
                   "float32": "f32", "fp32": "f32", "float64": "f64", "fp64": "f64",
                   "bool_": "bool", "boolean": "bool"}
        key = aliases.get(key, key)
        for dt in cls:
            if dt.short == key:
                return dt
        raise UsageError(f"unknown dtype {name!r}",
                         hint="use one of " + ", ".join(d.short for d in cls))

    @classmethod
    def from_numpy(cls, dtype: Any) -> "DType":
        """The natural DType of a numpy dtype (int8 → i8, never i4; int64 → i64)."""
        dt = np.dtype(dtype)
        for cand in (cls.BOOL, cls.I8, cls.U8, cls.I16, cls.U16, cls.I32, cls.I64,
                     cls.F16, cls.F32, cls.F64):
            if cand.numpy == dt:
                return cand
        raise UsageError(f"numpy dtype {dt} has no qsim DType")

    def check_range(self, array: np.ndarray) -> bool:
        """True when every element of `array` is representable in this type."""
        if not self.is_integer or array.size == 0:
            return True
        return bool(array.min() >= self.min and array.max() <= self.max)


@dataclass(frozen=True)
class QuantInfo:
    """How integer values of a tensor map to real numbers: real = scale * (q - zero_point).

    `scale`/`zero_point` are scalars (per tensor) or 1-D arrays along `axis` (per channel).
    `source` says where the parameters came from: "annotation" (@quantize),
    "graph.quant", "calibration", or "derived" (computed by a lowering rule).
    """
    scale: Any
    zero_point: Any = 0
    axis: int | None = None
    bits: int = 8
    signed: bool = True
    symmetric: bool = False
    source: str = "calibration"

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def scales(self) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.scale, dtype=np.float64))

    def zero_points(self) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.zero_point, dtype=np.int64))


Dim = int | None  # None: a dynamic extent (see Tensor.max_shape for its bound)


@dataclass(frozen=True)
class Tensor:
    """A named value. `data` is set for constants (and @variable tensors)."""
    name: str
    dtype: DType
    shape: tuple[Dim, ...]
    data: np.ndarray | None = field(default=None, compare=False, repr=False)
    quant: QuantInfo | None = None
    max_shape: tuple[int, ...] | None = None  # upper bounds of dynamic extents

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def size(self) -> int | None:
        if not self.is_static:
            return None
        return int(np.prod(self.shape, dtype=np.int64))


Verifier = Callable[["Op", "Graph"], None]


@dataclass(frozen=True, eq=False)
class OpKind:
    """A registered operator kind. Identity is by qualified name; one instance per name."""
    name: str                       # qualified: "tosa.CONV2D", "nn.conv", "cvm.dense"
    verifier: Verifier | None = None  # checks one op's dtypes/shapes/attrs; raises QsimError
    doc: str = ""

    # cached (the name never changes): the executor asks both for every op it runs
    @functools.cached_property
    def dialect(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else ""

    @functools.cached_property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        return f"OpKind({self.name})"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        # Pickled by name: the receiving process (a Dask worker) gets its own registered
        # instance, so identity comparisons hold there too, and no verifier or doc travels.
        return (_op_kind_named, (self.name,))

    @staticmethod
    def get(name: str) -> "OpKind":
        try:
            return _OP_KINDS[name]
        except KeyError:
            raise UsageError(f"unknown operator kind {name!r}",
                             hint="operator kinds are registered by their dialect module "
                                  "(qsim.tosa, qsim.cvm, the SkriptND stdlib); import it first") from None

    @staticmethod
    def registered(prefix: str = "") -> list["OpKind"]:
        return [k for n, k in sorted(_OP_KINDS.items()) if n.startswith(prefix)]


_OP_KINDS: dict[str, OpKind] = {}


def register_op_kind(name: str, verifier: Verifier | None = None, doc: str = "") -> OpKind:
    """Registers (or returns the already registered) kind `name`.

    Registering the same name twice with a different verifier replaces the
    verifier only if none was set, so a module imported twice is harmless.
    """
    if "." not in name:
        raise ValueError(f"op kind names are qualified (dialect.NAME), got {name!r}")
    existing = _OP_KINDS.get(name)
    if existing is not None:
        if existing.verifier is None and verifier is not None:
            object.__setattr__(existing, "verifier", verifier)
        if not existing.doc and doc:
            object.__setattr__(existing, "doc", doc)
        return existing
    kind = OpKind(name, verifier, doc)
    _OP_KINDS[name] = kind
    return kind


def _op_kind_named(name: str) -> OpKind:
    """Unpickling an OpKind: the registered kind of that name. In a process whose dialect module
    has not registered it yet, the name is registered bare; the dialect's own registration
    later completes that same instance (register_op_kind), so identity is kept either way."""
    return _OP_KINDS.get(name) or register_op_kind(name)


@dataclass(frozen=True, eq=False)
class Op:
    """One operator application. `inputs`/`outputs` are tensor names in the graph.

    `attrs` holds attribute values (python ints/floats/bools/strings, tuples, or
    numpy arrays for tensor-valued attributes such as TOSA weights in the Base
    Inference profile). `subgraphs` holds control-flow bodies by role
    ("then_graph", "else_graph", "cond_graph", "body_graph", ...).
    `name` is the scoped label for reports (e.g. "block1.conv").
    `definition` is the SkriptND operator definition of an operator a model defines itself
    (kind `main.<name>` or `<module>.<name>`), so float execution runs its @lower body without
    a global registry: two loaded models may define operators of the same name differently.
    """
    kind: OpKind
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    subgraphs: Mapping[str, "Graph"] = field(default_factory=dict)
    name: str = ""
    definition: Any = field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.kind, OpKind):
            raise TypeError(f"Op.kind must be an OpKind, got {type(self.kind).__name__}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    def __repr__(self) -> str:
        return f"Op({self.kind.name}, {list(self.inputs)} -> {list(self.outputs)}, name={self.name!r})"

    @property
    def label(self) -> str:
        return self.name or (self.outputs[0] if self.outputs else self.kind.name)


@dataclass(frozen=True, eq=False)
class Graph:
    """A graph: ops in a valid execution order over named tensors."""
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ops: tuple[Op, ...]
    tensors: Mapping[str, Tensor]

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise InvalidGraphError(f"graph {self.name!r} has no tensor {name!r}") from None

    def producer(self, name: str) -> Op | None:
        for op in self.ops:
            if name in op.outputs:
                return op
        return None

    def consumers(self, name: str) -> list[Op]:
        return [op for op in self.ops if name in op.inputs]

    def constants(self) -> dict[str, Tensor]:
        return {n: t for n, t in self.tensors.items() if t.is_constant}

    def verify(self) -> "Graph":
        """Checks structure, then every op with its kind's verifier. Returns self.

        Structure: every referenced tensor exists; each tensor is produced once
        (by an op, or as a graph input, or as a constant); ops read only tensors
        already defined; graph outputs are defined; constant data matches the
        declared dtype and shape.
        """
        defined: set[str] = set()
        for name in self.inputs:
            if name not in self.tensors:
                raise InvalidGraphError(f"graph {self.name!r}: input {name!r} is not a tensor of the graph")
            if name in defined:
                raise InvalidGraphError(f"graph {self.name!r}: input {name!r} is listed twice")
            defined.add(name)
        for name, t in self.tensors.items():
            if name != t.name:
                raise InvalidGraphError(f"graph {self.name!r}: tensor stored as {name!r} is named {t.name!r}")
            if t.is_constant:
                _check_constant(self.name, t)
                defined.add(name)
        for op in self.ops:
            for name in op.inputs:
                if name == "":
                    continue  # an omitted optional input
                if name not in self.tensors:
                    raise InvalidGraphError(f"{op.kind.name} {op.label!r} reads unknown tensor {name!r}")
                if name not in defined:
                    raise InvalidGraphError(f"{op.kind.name} {op.label!r} reads {name!r} before it is produced",
                                            hint="ops must be listed in execution order")
            for name in op.outputs:
                if name not in self.tensors:
                    raise InvalidGraphError(f"{op.kind.name} {op.label!r} writes unknown tensor {name!r}")
                if name in defined:
                    raise InvalidGraphError(f"{op.kind.name} {op.label!r} writes {name!r}, "
                                            "which is already defined (tensors have one producer)")
                defined.add(name)
            if op.kind.verifier is not None:
                op.kind.verifier(op, self)
        for name in self.outputs:
            if name not in defined:
                raise InvalidGraphError(f"graph {self.name!r}: output {name!r} is never produced")
        return self

    def summary(self) -> str:
        lines = [f"graph {self.name}: {len(self.ops)} ops, {len(self.tensors)} tensors"]
        for name in self.inputs:
            t = self.tensors[name]
            lines.append(f"  input  {name}: {t.dtype}{list(t.shape)}")
        for name in self.outputs:
            t = self.tensors[name]
            lines.append(f"  output {name}: {t.dtype}{list(t.shape)}")
        return "\n".join(lines)


def _check_constant(graph_name: str, t: Tensor) -> None:
    data = t.data
    if not isinstance(data, np.ndarray):
        raise InvalidGraphError(f"graph {graph_name!r}: constant {t.name!r} data is not a numpy array")
    if t.is_static and tuple(data.shape) != tuple(t.shape):
        raise InvalidGraphError(f"graph {graph_name!r}: constant {t.name!r} has data of shape "
                                f"{list(data.shape)} but is declared {list(t.shape)}")
    if data.dtype != t.dtype.numpy:
        raise InvalidGraphError(f"graph {graph_name!r}: constant {t.name!r} is declared {t.dtype} "
                                f"(stored as {t.dtype.numpy}) but its data is {data.dtype}")
    if not t.dtype.check_range(data):
        raise InvalidGraphError(f"graph {graph_name!r}: constant {t.name!r} has values outside "
                                f"{t.dtype} range [{t.dtype.min}, {t.dtype.max}]")
