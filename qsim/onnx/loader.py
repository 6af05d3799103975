"""`qsim.onnx.load(path)`: an ONNX model as a float ir.Graph of NNEF 2.0 standard operators.

Steps: parse the protobuf and check the opset (protobuf.py); give the graph inputs static
shapes (a dynamic first dimension is the batch the caller gives, default 1); keep the nodes
the outputs depend on, in a dependency order (an undefined input or a cycle is refused,
naming the node); convert node by node (convert*.py) with each operator's definition version
from onnx.defs, folding nodes whose inputs are all constants with numpy; name the outputs
after the ONNX outputs; verify.

Tensor and op names are the model's own (ONNX tensor names, node names), so messages and
`qsim run --dump` speak the model's language; tensors qsim adds get `<onnx name>.<what>`.
"""
from __future__ import annotations

import heapq
import os
from typing import Any, Mapping

import numpy as np
import onnx

from .. import ir
from ..limits import MemoryUse, counting
from ..errors import InvalidGraphError, QsimError, UnsupportedError, UsageError
from .builder import Builder, NodeContext, Value, constant_value
# each operator family registers its converters and folders (convert_base.py) when imported
from . import convert, convert_constant, convert_layout, convert_nn  # noqa: F401
# after convert_nn: it wraps convert_nn's window converters (1-D inputs on a unit axis)
from . import convert_rearrange, convert_unit_axis  # noqa: F401
from . import convert_recurrent  # noqa: F401  (LSTM, GRU)
from .convert_base import CONVERTERS, FOLDERS
from .qdq import attach_annotations, has_qdq, strip_qdq
from .protobuf import ModelFile, attributes, dtype_of, read_model, tensor_array

# element types a graph input may have (float data, or indices for Gather / embeddings)
_INPUT_DTYPES = (ir.DType.F32, ir.DType.I64, ir.DType.I32, ir.DType.BOOL)


def load(path: str, *, batch: int = 1, input_shapes: Mapping[str, Any] | None = None) -> ir.Graph:
    """Loads the ONNX model at `path`. `batch` replaces a dynamic first dimension of the graph
    inputs; `input_shapes` gives whole shapes by input name (for other dynamic dimensions)."""
    path = os.fspath(path)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
        raise UsageError(f"batch {batch!r} is not a positive whole number")
    model = read_model(path)
    if not has_qdq(model):
        return _Importer(model, batch, dict(input_shapes or {})).run()
    # a QDQ model: the float graph without the pairs, their parameters as annotations (qdq.py)
    model, annotations = strip_qdq(model)
    graph = _Importer(model, batch, dict(input_shapes or {})).run()
    return attach_annotations(graph, annotations).verify()


# dim_param names that mark a dynamic dimension as the batch where it is not the first one (a
# sequence-first [S, N, E] transformer input: torch's batch_first=False layout)
_BATCH_NAMES = ("n", "b", "bs", "batch", "batch_size", "batchsize", "batch_dim")


def _batch_axis(dims) -> int | None:
    """The input's batch axis: a dynamic first dimension, else the one dynamic dimension whose
    name is a batch name (_BATCH_NAMES, case-insensitive); None when there is none."""
    dynamic = [i for i, d in enumerate(dims) if not (d.HasField("dim_value") and d.dim_value > 0)]
    if not dynamic:
        return None
    if dynamic[0] == 0:
        return 0
    named = [i for i in dynamic if dims[i].dim_param.strip().lower() in _BATCH_NAMES]
    return named[0] if len(named) == 1 else None


class _Importer:
    def __init__(self, model: ModelFile, batch: int, input_shapes: dict):
        self.model = model
        self.graph = model.proto.graph
        self.batch = batch
        self.input_shapes = input_shapes
        self.builder = Builder(model.location)
        self.values: dict[str, Value] = {}
        self.initializers = {t.name: t for t in self.graph.initializer}
        self.input_names: set[str] = set()
        self.constants = MemoryUse("the constants of the model import")

    def fail(self, message: str, hint: str | None = None, kind=InvalidGraphError):
        raise kind(message, location=self.model.location, hint=hint)

    def run(self) -> ir.Graph:
        # the constants an import holds (initializers read, sub-graphs folded) count against the
        # command's memory budget: check_tensor_size refuses the one that would pass it
        with counting(self.constants):
            return self._run()

    def _run(self) -> ir.Graph:
        g = self.graph
        if len(g.sparse_initializer):
            self.fail("the model has sparse initializers", kind=UnsupportedError,
                      hint="store the weights densely (onnx.numpy_helper)")
        reserved = self.builder.reserved
        reserved.update(self.initializers)
        reserved.update(i.name for i in g.input)
        for node in g.node:
            reserved.update(n for n in node.output if n)
        inputs = [self._graph_input(vi) for vi in g.input if vi.name not in self.initializers]
        self.input_names = set(inputs)
        nodes = self._schedule()
        for index, node in nodes:
            self._convert(index, node)
        outputs = [self._graph_output(vi) for vi in g.output]
        name = g.name or os.path.splitext(os.path.basename(self.model.path))[0]
        return self.builder.finish(name, inputs, outputs).verify()

    # ---- graph inputs and outputs

    def _graph_input(self, vi) -> str:
        name = vi.name
        where = f"graph input '{name}'"
        if not vi.type.HasField("tensor_type"):
            self.fail(f"{where} is not a tensor", kind=UnsupportedError,
                      hint="qsim reads models whose inputs are tensors (no sequences or maps)")
        ttype = vi.type.tensor_type
        dtype = dtype_of(ttype.elem_type, where, self.model.location)
        if dtype not in _INPUT_DTYPES:
            self.fail(f"{where} is {dtype}", kind=UnsupportedError,
                      hint="qsim runs float32 models (integer inputs for indices); convert the model")
        if name in self.input_shapes:
            shape = tuple(int(d) for d in self.input_shapes[name])
            if any(d <= 0 for d in shape):
                raise UsageError(f"the shape {list(shape)} given for {where} has extents that are not positive")
        else:
            if not ttype.HasField("shape"):
                self.fail(f"{where} has no shape", kind=UnsupportedError,
                          hint="give its shape with input_shapes={name: [...]}, or export with a fixed shape")
            shape = []
            dims = list(ttype.shape.dim)
            batch_axis = _batch_axis(dims)
            for i, dim in enumerate(dims):
                if dim.HasField("dim_value") and dim.dim_value > 0:
                    shape.append(int(dim.dim_value))
                elif i == batch_axis:
                    shape.append(self.batch)    # a dynamic batch dimension
                else:
                    label = dim.dim_param or "?"
                    self.fail(f"{where} has a dynamic dimension {i} ('{label}')", kind=UnsupportedError,
                              hint="qsim needs static shapes beyond the batch (a dynamic first dimension, or "
                                   "one named like a batch: N, B, batch...): export with a fixed shape, or "
                                   "give input_shapes={" + repr(name) + ": [...]}")
        self.values[name] = self.builder.add(name, dtype, shape)
        return name

    def _graph_output(self, vi) -> str:
        name = vi.name
        value = self.values.get(name)
        if value is None:
            self.fail(f"graph output '{name}' is produced by no node, input or initializer")
        if value.name == name and not value.is_constant and name not in self.input_names:
            return name
        # an output that is a constant, a graph input or another tensor's alias gets a copy
        ctx = NodeContext(self.builder, "Identity", f"output {name}", "", self.model.opset, 1, {}, [value],
                          [name], self.model)
        if value.is_constant and value.name == name:     # the output keeps the name, the data gets another
            value = Value(self.builder.fresh(f"{name}.value"), value.dtype, value.shape, value.data)
            self.builder.reserved.add(value.name)
        out_name = name if name not in self.builder.tensors and name not in self.input_names \
            else self.builder.fresh(name)
        return ctx.emit("math.iden", [value], {}, [(value.dtype, value.shape)], [out_name])[0].name

    # ---- node order

    def _schedule(self) -> list[tuple[int, Any]]:
        """The nodes the graph outputs depend on, in an order where each follows its producers."""
        nodes = list(self.graph.node)
        producer: dict[str, int] = {}
        for i, node in enumerate(nodes):
            for out in node.output:
                if not out:
                    continue
                if out in producer or out in self.initializers or out in self.values:
                    self.fail(f"tensor '{out}' has two definitions (node '{self._label(i, node)}' and another "
                              "node, input or initializer)", hint="ONNX graphs define each tensor once")
                producer[out] = i
        defined = set(self.initializers) | set(self.values)
        needed, stack = set(), [vi.name for vi in self.graph.output]
        while stack:
            name = stack.pop()
            i = producer.get(name)
            if i is None or i in needed:
                continue
            needed.add(i)
            stack.extend(n for n in nodes[i].input if n)
        waiting: dict[int, int] = {}
        readers: dict[str, list[int]] = {}
        for i in sorted(needed):
            missing = 0
            for name in set(n for n in nodes[i].input if n):
                if name in producer:
                    missing += 1
                    readers.setdefault(name, []).append(i)
                elif name not in defined:
                    self.fail(f"node '{self._label(i, nodes[i])}' ({nodes[i].op_type}) reads '{name}', which no "
                              "node, graph input or initializer defines",
                              hint="the model is incomplete; export it again")
            waiting[i] = missing
        ready = [i for i, m in waiting.items() if m == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append((i, nodes[i]))
            for out in nodes[i].output:
                for j in readers.get(out, ()):
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready, j)
        if len(order) != len(needed):
            stuck = min(i for i, m in waiting.items() if m > 0)
            self.fail(f"node '{self._label(stuck, nodes[stuck])}' ({nodes[stuck].op_type}) is part of a cycle",
                      hint="ONNX graphs are acyclic; the model is damaged")
        return order

    @staticmethod
    def _label(index: int, node) -> str:
        return node.name or f"{node.op_type}_{index}"

    # ---- nodes

    def _value(self, name: str) -> Value | None:
        if not name:
            return None
        value = self.values.get(name)
        if value is None:   # an initializer, read on first use
            value = constant_value(name, tensor_array(self.model, self.initializers[name], f"initializer '{name}'"))
            self.values[name] = value
            self.constants.add(value.data.nbytes)
        return value

    def _convert(self, index: int, node) -> None:
        label = self._label(index, node)
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        opset = self.model.opsets.get(domain)
        where = f"node '{label}' ({node.op_type}, domain {domain or 'ai.onnx'}"
        if opset is None:
            self.fail(f"{where}): the model imports no opset of domain '{domain}'")
        where += f", opset {opset})"
        if domain:
            self.fail(f"{where}: operators of domain '{domain}' are not supported", kind=UnsupportedError,
                      hint="qsim reads the default ONNX domain; export without custom or contrib operators")
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:
            self.fail(f"{where}: ONNX defines no operator {node.op_type!r} at opset {opset}",
                      kind=UnsupportedError, hint="check the op type and the model's opset_import")
        if node.op_type not in CONVERTERS:
            self.fail(f"{where}: qsim has no conversion of {node.op_type}", kind=UnsupportedError,
                      hint="supported operators: " + ", ".join(sorted(CONVERTERS)))
        _check_required_inputs(schema, node, where, self.model.location)
        attrs = attributes(node, where, self.model.location, schema)
        inputs = [self._value(n) for n in node.input]
        ctx = NodeContext(self.builder, node.op_type, label, domain, opset, schema.since_version, attrs, inputs,
                          list(node.output), self.model)
        present = [v for v in inputs if v is not None]
        if present and all(v.is_constant for v in present) and node.op_type in FOLDERS:
            arrays = self._fold(ctx, [None if v is None else v.data for v in inputs])
            results = [constant_value(name, a) for name, a in zip(node.output, arrays)]
        else:
            results = CONVERTERS[node.op_type](ctx)     # constants too: Constant, ConstantOfShape, Range
        self.constants.add(_new_constant_bytes(results, present))
        for name, value in zip(node.output, results):
            if name:
                self.values[name] = value

    def _fold(self, ctx: NodeContext, arrays: list) -> list[np.ndarray]:
        # the folders that enlarge (ConstantOfShape, Expand, Tile, Concat, ...) check their result's
        # size themselves; any other result is at most its largest input, checked here first
        largest = max((a.nbytes for a in arrays if a is not None), default=0)
        self.constants.check(largest, f"the result of {ctx.where}", self.model.location)
        try:
            return [np.asarray(a) for a in FOLDERS[ctx.op_type](ctx, arrays)]
        except QsimError:
            raise
        except (ValueError, TypeError, IndexError, OverflowError) as err:
            # the folders check shapes first; numpy refusing is a model the checks did not foresee
            ctx.fail(f"cannot fold the constant inputs {[None if a is None else list(a.shape) for a in arrays]}: "
                     f"{err}")


def _new_constant_bytes(results: list, inputs: list) -> int:
    """The bytes of the constant results that are new data: a view (Reshape, Squeeze, Slice...)
    or an input passed through (Identity) shares memory already counted."""
    held = [v.data for v in inputs if v.is_constant]
    total = 0
    for value in results:
        if value is None or not value.is_constant:
            continue
        data = value.data
        if data.flags.owndata and not any(data is h for h in held):
            total += data.nbytes
    return total


def _check_required_inputs(schema, node, where: str, location) -> None:
    """Every input the operator's definition requires (onnx.defs: option Single) is given."""
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for i, param in enumerate(schema.inputs):
        if param.option == single and (i >= len(node.input) or not node.input[i]):
            raise InvalidGraphError(f"{where}: required input {i} ('{param.name}') is missing", location=location,
                                    hint=f"{node.op_type} needs its '{param.name}' input")
