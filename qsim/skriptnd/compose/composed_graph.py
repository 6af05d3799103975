"""The graph a composition builds (NNEF 2.0 draft chapter 3): `ComposedGraphBuilder` collects one
(sub)graph's tensors and ops under unique names, `Frame` is one operator or graph body being
composed into it. composer.py and control.py (control-flow subgraphs) both build with them."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import ir
from ...errors import Location
from ...limits import check_tensor_size
from .. import ast
from ..values import Dyn, TensorValue, error, is_pack, show, static_bound, type_of

DTYPES = {"real": ir.DType.F32, "int": ir.DType.I64, "bool": ir.DType.BOOL}
NUMPY = {"real": np.float32, "int": np.int64, "bool": np.bool_}


@dataclass
class Frame:
    """One operator (or graph) body being composed."""
    module: str
    op: ast.OperatorDef
    qualname: str
    scope: str                      # tensor name prefix, '' or 'conv1.'
    env: dict
    public: bool                    # inputs/outputs/intermediates reachable by scoped name (2.10)
    where: str
    output_names: dict = field(default_factory=dict)    # declared output → name chosen by the caller
    quant: list = field(default_factory=list)


class ComposedGraphBuilder:
    """Collects the tensors and ops of one composed (sub)graph under unique names; a control-flow
    subgraph has its enclosing graph's builder as parent."""

    def __init__(self, name: str, parent: "ComposedGraphBuilder | None" = None):
        self.name = name
        self.parent = parent                         # enclosing graph of a control-flow subgraph
        self.tensors: dict[str, ir.Tensor] = {}
        self.ops: list[ir.Op] = []
        # shared with subgraphs: scoped names, annotations and missing variable data are per model
        self.accessible: dict[str, str] = parent.accessible if parent else {}   # scoped → tensor name
        self.quant: dict[str, ir.QuantInfo] = parent.quant if parent else {}
        self.missing_data: list[str] = parent.missing_data if parent else []
        # dynamic extent symbol → (graph input, axis), for attributes evaluated at run time (dynattr.py)
        self.symbols: dict[str, tuple] = parent.symbols if parent else {}
        self.labels: dict[str, int] = {}

    def taken(self, name: str) -> bool:
        builder = self
        while builder is not None:
            if name in builder.tensors:
                return True
            builder = builder.parent
        return False

    def lookup(self, name: str) -> ir.Tensor:
        builder = self
        while builder is not None:
            if name in builder.tensors:
                return builder.tensors[name]
            builder = builder.parent
        raise KeyError(name)

    def unique(self, name: str) -> str:
        """`name`, or `name_k` with the smallest k making it unique here and in enclosing graphs."""
        if not self.taken(name):
            return name
        k = 1
        while self.taken(f"{name}_{k}"):
            k += 1
        return f"{name}_{k}"

    def captures(self, extra=()) -> list[str]:
        """Tensors of enclosing graphs this subgraph reads; they are copied in as its inputs."""
        produced = set(self.tensors)
        caps: list[str] = []
        for op in self.ops:
            for n in op.inputs:
                if n and n not in produced and n not in caps:
                    caps.append(n)
        for n in extra:
            if n not in produced and n not in caps:
                caps.append(n)
        for n in caps:
            self.tensors[n] = self.parent.lookup(n)
        return caps

    def unique_label(self, label: str) -> str:
        n = self.labels.get(label, 0)
        self.labels[label] = n + 1
        return label if n == 0 else f"{label}_{n}"

    def tensor(self, name: str, dtype: str, shape: tuple, data=None, loc: Location | None = None) -> TensorValue:
        if dtype not in DTYPES:
            raise error(f"tensor '{name}' of type {dtype}: qsim graphs hold real, int and bool tensors", loc)
        name = self.unique(name)
        # every tensor of a composed graph passes here: refuse one the executors could never
        # allocate now, at the declaration or invocation that makes it (a run-time extent counts
        # with its upper bound where one is known)
        bounds = [static_bound(d) for d in shape]
        check_tensor_size([d for d in bounds if d is not None], NUMPY[dtype]().itemsize, f"tensor '{name}'", loc)
        dims = tuple(None if isinstance(d, Dyn) else int(d) for d in shape)
        max_shape = None
        if any(d is None for d in dims):
            max_shape = tuple(-1 if d is None else int(d) for d in bounds)
        self.tensors[name] = ir.Tensor(name, DTYPES[dtype], dims, data=data, max_shape=max_shape)
        return TensorValue(name, dtype, tuple(shape), data)

    def constant(self, name: str, value, loc: Location) -> TensorValue:
        """A compile-time scalar passed where a tensor is expected: a 0-d constant (2.10)."""
        t = type_of(value)
        if t not in NUMPY or isinstance(value, Dyn):
            raise error(f"cannot pass {show(value)} as a tensor argument", loc)
        if _holds_tensor(value):
            raise error("a list holding a tensor is not a tensor argument: tensors are combined by "
                        "operators, e.g. layout.stack or layout.concat", loc)
        data = tensor_data(value, t, "a compile-time tensor argument", loc)
        return self.tensor(name, t, (), data, loc)

    def finish(self, inputs, outputs) -> ir.Graph:
        tensors = {}
        for name, t in self.tensors.items():
            q = self.quant.get(name)
            tensors[name] = t if q is None else ir.Tensor(t.name, t.dtype, t.shape, t.data, q, t.max_shape)
        return ir.Graph(self.name, tuple(inputs), tuple(outputs), tuple(self.ops), tensors)


def _holds_tensor(value) -> bool:
    """Whether a (nested) compile-time list holds a tensor anywhere (walked without recursion)."""
    pending = [value]
    while pending:
        v = pending.pop()
        if isinstance(v, TensorValue):
            return True
        if isinstance(v, (list, tuple)):
            pending.extend(v)
    return False


def tensor_data(value, dtype: str, what: str, loc) -> np.ndarray:
    """Compile-time value(s) as the data of a `dtype` tensor. Compile-time ints are unbounded
    (2.3), tensors are int64 and float32: an int must fit 64 bits, or (for a real tensor) the
    float range."""
    for v in (value if is_pack(value) else (value,)):
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        if dtype == "int" and not -2 ** 63 <= v < 2 ** 63:
            raise error(f"{what}: the int {show(v)} does not fit a 64-bit int tensor", loc)
        if dtype == "real" and abs(v) >= 2 ** 1024:
            raise error(f"{what}: the int {show(v)} is beyond the range of reals", loc)
    return np.asarray(value, dtype=NUMPY[dtype])
