"""QDQ models: an ONNX graph whose QuantizeLinear/DequantizeLinear pairs carry its quantization
(what `onnxruntime.quantization.quantize_static(quant_format=QDQ)` and PyTorch's exporter write).

qsim reads such a model as the float graph without the pairs, with the pairs' parameters as the
tensors' `@quantize` annotations (ir.QuantInfo, source "annotation"), as NNEF 1.0's graph.quant
does, so `qsim quantize` needs no calibration data:

- activation pair `x -> QuantizeLinear(s, zp) -> DequantizeLinear(s, zp) -> readers`: the readers
  read `x`, and `x` is annotated (s, zp). A DequantizeLinear output that is a graph output gives
  its name to `x`, so the model's outputs keep their names.
- weight `initializer (int8/uint8/int32) -> DequantizeLinear(s, zp, axis)`: a float initializer
  named after the DequantizeLinear output, holding (q - zp) * s in float32 as ONNX computes it,
  annotated (s, zp, axis). Requantizing it on that annotation gives back exactly the stored
  integers (|q| < 2^23: float32 keeps q * s to 2^-24 relative). int32 biases (scale
  input_scale * weight_scale) come through the same way with bits=32.
- fake-quantized constant `float initializer -> QuantizeLinear -> DequantizeLinear` (PyTorch
  QAT exports): quantized here exactly as QuantizeLinear defines it (round half to even,
  saturate), then as a weight.

A tensor no pair quantizes whose only reader is an operator that commutes with quantization
(MaxPool, Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Concat) with a quantized
output takes that output's parameters (the same result: the operator only selects or moves values).

uint8 tensors keep their unsigned annotation: calibrate.as_signed maps them exactly onto TOSA's
signed grid (q - 128, zero point - 128: the same real values), and unsigned weights are mapped
the same way here, so a uint8 weight must have zero point 128 (TOSA weights are symmetric).

Refused, naming the node (DataError for an inconsistent model, UnsupportedError for what qsim
cannot carry): a DequantizeLinear of a computed tensor no QuantizeLinear produced; a
QuantizeLinear whose output is read by anything but DequantizeLinear (an integer tensor in the
graph); a pair whose two nodes disagree, or one tensor quantized with two different parameter
sets (requantization); block quantization (opset 21 block_size); per-axis activations; element
types other than int8/uint8/int16/uint16 (and int32 for DequantizeLinear); scales or zero points
computed at run time.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from .. import ir
from ..errors import DataError, UnsupportedError
from .protobuf import ModelFile, attributes, element_type_name, schema_of, tensor_array

QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
_P = onnx.TensorProto
# quantized element types qsim carries: (bits, signed)
_INTEGER_TYPES = {_P.INT8: (8, True), _P.UINT8: (8, False), _P.INT16: (16, True),
                  _P.UINT16: (16, False), _P.INT32: (32, True)}
# operators whose result on quantized values is their result on the reals, quantized (they only
# select or move values): an input they alone read can take their output's quantization
GRID_KEEPING = ("MaxPool", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat")


def has_qdq(model: ModelFile) -> bool:
    return any(n.op_type in (QUANTIZE, DEQUANTIZE) and n.domain in ("", "ai.onnx")
               for n in model.proto.graph.node)


@dataclass(frozen=True)
class _Params:
    """A QuantizeLinear/DequantizeLinear node's parameters (ONNX: y = (x - zp) * scale)."""
    scale: np.ndarray        # float32, rank 0 (per tensor) or 1 (per axis)
    zero_point: np.ndarray   # int64, the shape of scale
    axis: int | None         # None per tensor; as written (may be negative) per axis
    elem: int                # TensorProto element type of the integer side

    @property
    def bits_signed(self) -> tuple[int, bool]:
        return _INTEGER_TYPES[self.elem]

    def same(self, other: "_Params") -> bool:
        return (self.elem == other.elem and self.axis == other.axis
                and self.scale.shape == other.scale.shape and np.array_equal(self.scale, other.scale)
                and np.array_equal(self.zero_point, other.zero_point))

    def describe(self) -> str:
        scale = self.scale.tolist() if self.scale.ndim else float(self.scale)
        zp = self.zero_point.tolist() if self.zero_point.ndim else int(self.zero_point)
        axis = "" if self.axis is None else f", axis {self.axis}"
        return f"scale {scale}, zero point {zp} ({element_type_name(self.elem)}{axis})"

    def quant(self, rank: int | None = None) -> ir.QuantInfo:
        bits, signed = self.bits_signed
        if self.axis is None:
            return ir.QuantInfo(float(self.scale), int(self.zero_point), None, bits, signed, False, "annotation")
        axis = self.axis + rank if self.axis < 0 else self.axis
        return ir.QuantInfo(self.scale.astype(np.float64), self.zero_point.copy(), axis, bits, signed, False,
                            "annotation")


@dataclass
class _Annotation:
    params: _Params
    where: str               # the node that gave it
    rank: int | None = None  # constants: the rank (per-axis annotations need it)


class _Stripper:
    def __init__(self, model: ModelFile):
        self.model = model
        g = model.proto.graph
        self.nodes = list(g.node)
        self.inits = {t.name: t for t in g.initializer}
        self.constant_nodes = {n.output[0]: n for n in self.nodes
                               if n.op_type == "Constant" and len(n.output) == 1}
        self.producer = {out: i for i, n in enumerate(self.nodes) for out in n.output if out}
        self.readers: dict[str, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for name in set(n.input):
                if name:
                    self.readers.setdefault(name, []).append(i)
        self.graph_inputs = {vi.name for vi in g.input}
        self.graph_outputs = [vi.name for vi in g.output]
        self.alias: dict[str, str] = {}           # DequantizeLinear output -> the tensor it stands for
        self.new_inits: dict[str, np.ndarray] = {}
        self.annotations: dict[str, _Annotation] = {}
        self.removed: set[int] = set()

    # ---- messages

    def where(self, i: int) -> str:
        n = self.nodes[i]
        return f"node '{n.name or f'{n.op_type}_{i}'}' ({n.op_type}, domain ai.onnx, opset {self.model.opset})"

    def fail(self, i: int, message: str, hint: str, unsupported: bool = False):
        kind = UnsupportedError if unsupported else DataError
        raise kind(f"{self.where(i)}: {message}", location=self.model.location, hint=hint)

    # ---- constants

    def is_constant(self, name: str) -> bool:
        return name in self.inits or name in self.constant_nodes

    def constant(self, i: int, name: str, what: str) -> tuple[np.ndarray, int]:
        """(data, element type) of an initializer or Constant output read by node i."""
        if name in self.inits:
            t = self.inits[name]
        elif name in self.constant_nodes:
            node = self.constant_nodes[name]
            attrs = attributes(node, f"Constant '{name}'", self.model.location, schema_of("Constant", self.model.opset))
            if "value" not in attrs:
                value = attrs.get("value_float", attrs.get("value_floats", attrs.get("value_int",
                                                                                    attrs.get("value_ints"))))
                if value is None:
                    self.fail(i, f"{what} '{name}' is a Constant without a numeric value", hint="export again")
                array = np.asarray(value)
                elem = _P.FLOAT if array.dtype.kind == "f" else _P.INT64
                return array.astype(np.float32 if elem == _P.FLOAT else np.int64), elem
            t = attrs["value"]
        else:
            self.fail(i, f"{what} '{name}' is computed at run time; qsim needs it at import",
                      hint="store quantization parameters as initializers (onnxruntime.quantization does)",
                      unsupported=True)
        if t.data_type not in _INTEGER_TYPES and t.data_type != _P.FLOAT:
            self.fail(i, f"{what} '{name}' has element type {element_type_name(t.data_type)}",
                      hint="qsim reads int8, uint8, int16, uint16 and int32 quantized tensors with float32 "
                           "scales (no 4-bit or float8 quantization)", unsupported=True)
        return tensor_array(self.model, t, f"{what} '{name}' of {self.where(i)}"), int(t.data_type)

    # ---- node parameters

    def params(self, i: int, data_elem: int | None) -> _Params:
        """The node's scale, zero point and axis; `data_elem` is the integer input's element type
        (DequantizeLinear of a constant) when known."""
        node = self.nodes[i]
        attrs = attributes(node, self.where(i), self.model.location, schema_of(node.op_type, self.model.opset))
        block = int(attrs.get("block_size", 0))
        if block:
            self.fail(i, f"block quantization (block_size {block}) is not supported",
                      hint="TOSA rescales per tensor or per output channel: quantize per tensor or per "
                           "channel (axis) instead", unsupported=True)
        if len(node.input) < 2 or not node.input[1]:
            self.fail(i, "has no scale input", hint="QuantizeLinear/DequantizeLinear need a scale")
        scale, scale_elem = self.constant(i, node.input[1], "scale")
        if scale_elem != _P.FLOAT:
            self.fail(i, f"scale has element type {element_type_name(scale_elem)}",
                      hint="qsim reads float32 scales", unsupported=True)
        if scale.ndim > 1:
            self.fail(i, f"scale has shape {list(scale.shape)} (block quantization)",
                      hint="quantize per tensor or per channel instead", unsupported=True)
        if scale.size == 1:
            scale = scale.reshape(())     # one scale: per tensor (onnxruntime writes biases' as [1])
        if len(node.input) > 2 and node.input[2]:
            zp, elem = self.constant(i, node.input[2], "zero point")
            if zp.size == 1 and scale.ndim == 0:
                zp = zp.reshape(())
            if elem == _P.FLOAT or zp.shape != scale.shape:
                self.fail(i, f"zero point {list(zp.shape)} {element_type_name(elem)} does not match scale "
                             f"{list(scale.shape)}", hint="the zero point is an integer tensor shaped like scale")
        else:
            if node.op_type == QUANTIZE:
                elem = int(attrs.get("output_dtype", 0)) or _P.UINT8   # ONNX: uint8 without a zero point
            else:
                elem = data_elem if data_elem is not None else _P.UINT8
            zp = np.zeros(scale.shape, dtype=np.int64)
        if data_elem is not None and data_elem != elem:
            self.fail(i, f"input is {element_type_name(data_elem)} but the zero point is "
                         f"{element_type_name(elem)}", hint="ONNX requires both of one type")
        if elem not in _INTEGER_TYPES or (elem == _P.INT32 and node.op_type == QUANTIZE):
            self.fail(i, f"quantizes to {element_type_name(elem)}",
                      hint="qsim reads int8, uint8, int16 and uint16 quantization (and int32 biases)",
                      unsupported=True)
        scale = scale.astype(np.float32)
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            self.fail(i, f"scale {scale.tolist()} is not positive and finite",
                      hint="a quantization scale is a positive number")
        axis = int(attrs.get("axis", 1)) if scale.ndim == 1 else None
        return _Params(scale, zp.astype(np.int64), axis, elem)

    # ---- the walk

    def annotate(self, name: str, params: _Params, i: int, rank: int | None = None) -> None:
        previous = self.annotations.get(name)
        if previous is None:
            self.annotations[name] = _Annotation(params, self.where(i), rank)
        elif not previous.params.same(params):
            self.fail(i, f"tensor '{name}' is quantized with {params.describe()}, but {previous.where} "
                         f"quantizes it with {previous.params.describe()}",
                      hint="qsim gives a tensor one scale and zero point; requantization (a second "
                           "QuantizeLinear with other parameters) is not supported")

    def constant_operand(self, i: int, name: str, params: _Params, quantizer: int | None = None) -> None:
        """DequantizeLinear i of a constant (weights, biases), or of QuantizeLinear `quantizer` of
        a float constant: a float initializer of its values."""
        quantize_first = quantizer is not None
        data, elem = self.constant(i, name, "quantized input" if not quantize_first else "input")
        out = self.nodes[i].output[0]
        if params.axis is not None:
            if not -data.ndim <= params.axis < data.ndim or data.shape[params.axis] != params.scale.size:
                self.fail(i, f"{params.scale.size} scales along axis {params.axis} do not fit "
                             f"'{name}' of shape {list(data.shape)}", hint="the model is inconsistent")
        shape = [1] * data.ndim
        axis = None if params.axis is None else params.axis % data.ndim
        if axis is not None:
            shape[axis] = -1
        scale = params.scale.reshape(shape) if axis is not None else params.scale
        zp = params.zero_point.reshape(shape) if axis is not None else params.zero_point
        if quantize_first:   # QuantizeLinear: saturate(round_half_even(x / scale) + zp)
            if elem != _P.FLOAT:
                self.fail(quantizer, f"quantizes '{name}', which is {element_type_name(elem)}",
                          hint="QuantizeLinear reads float32")
            if not np.all(np.isfinite(data)):
                self.fail(quantizer, f"quantizes '{name}', which holds non-finite values",
                          hint="QuantizeLinear of NaN or infinity has no integer value; fix the weights")
            bits, signed = params.bits_signed
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            with np.errstate(all="ignore"):
                q = np.clip(np.rint(data.astype(np.float32) / scale).astype(np.float64) + zp, lo, hi)
        else:
            q = data.astype(np.int64)
        values = ((q - zp).astype(np.float32) * scale).astype(np.float32)   # ONNX DequantizeLinear
        self.new_inits[out] = values
        if params.elem == _P.UINT8:    # onto TOSA's signed grid: same reals (calibrate.as_signed)
            params = dataclasses.replace(params, elem=_P.INT8, zero_point=params.zero_point - 128)
        self.annotate(out, params, i, data.ndim)

    def run(self) -> tuple[onnx.ModelProto, dict[str, ir.QuantInfo]]:
        pairs = []     # (DequantizeLinear index, tensor quantized)
        for i, node in enumerate(self.nodes):
            if node.op_type not in (QUANTIZE, DEQUANTIZE) or node.domain not in ("", "ai.onnx"):
                continue
            self.removed.add(i)
            if not node.input or not node.input[0] or len(node.output) < 1:
                self.fail(i, "has no input or output", hint="the model is damaged")
            if node.op_type == QUANTIZE:
                self.check_quantize(i)
                continue
            x = node.input[0]
            if self.is_constant(x):
                elem = self.inits[x].data_type if x in self.inits else None
                self.constant_operand(i, x, self.params(i, elem))
                continue
            q = self.producer.get(x)
            if q is None or self.nodes[q].op_type != QUANTIZE:
                what = "a graph input" if x in self.graph_inputs else (
                    f"the output of {self.where(q)}" if q is not None else "undefined")
                self.fail(i, f"reads '{x}', which is {what}, not the output of a QuantizeLinear or an "
                             "initializer", hint="qsim reads QDQ models: every DequantizeLinear of a computed "
                                                  "tensor follows a QuantizeLinear of the float tensor")
            p_dq, p_q = self.params(i, None), self.params(q, None)
            if not p_dq.same(p_q):
                self.fail(i, f"dequantizes with {p_dq.describe()}, but {self.where(q)} quantized with "
                             f"{p_q.describe()}", hint="a QuantizeLinear/DequantizeLinear pair shares its "
                                                       "scale and zero point")
            source = self.nodes[q].input[0]
            if self.is_constant(source):
                self.constant_operand(i, source, p_dq, quantizer=q)
                continue
            if p_dq.axis is not None:
                self.fail(i, f"quantizes activation '{source}' per axis ({p_dq.describe()})",
                          hint="TOSA rescales activations per tensor: one scale and zero point",
                          unsupported=True)
            self.alias[node.output[0]] = source
            pairs.append((i, source))
        for i, source in pairs:
            self.annotate(self.resolve(source), self.params(i, None), i)
        self.annotate_through_grid_keeping_ops()
        return self.rewritten()

    def annotate_through_grid_keeping_ops(self) -> None:
        """A tensor no pair quantizes, read only by an operator that commutes with quantization
        (max pooling, layout moves, concatenation: Q(op(v)) = op(Q(v)) for the monotone Q) whose
        output is quantized, takes that output's parameters: onnxruntime leaves such operators
        unquantized between a float operator and the next pair (e.g. PRelu -> MaxPool -> Q in
        MTCNN), and the result is the same either way."""
        readers: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            if i not in self.removed:
                for name in set(node.input):
                    if name:
                        readers.setdefault(self.resolve(name), []).append(i)
        changed = True
        while changed:
            changed = False
            for i, node in enumerate(self.nodes):
                if i in self.removed or node.op_type not in GRID_KEEPING or not node.output:
                    continue
                done = self.annotations.get(node.output[0])
                if done is None:
                    continue
                data_inputs = node.input if node.op_type == "Concat" else node.input[:1]
                for name in (self.resolve(n) for n in data_inputs if n):
                    if (name in self.annotations or self.is_constant(name) or name in self.graph_outputs
                            or readers.get(name) != [i]):
                        continue
                    self.annotations[name] = _Annotation(done.params, f"{done.where}, through {self.where(i)}")
                    changed = True

    def check_quantize(self, i: int) -> None:
        out = self.nodes[i].output[0]
        for j in self.readers.get(out, []):
            if self.nodes[j].op_type != DEQUANTIZE:
                self.fail(i, f"output '{out}' is read by {self.where(j)}, an integer tensor qsim cannot "
                             "carry through a float operator", hint="qsim reads QDQ models: every "
                             "QuantizeLinear is followed by DequantizeLinear", unsupported=True)
        if out in self.graph_outputs:
            self.fail(i, f"output '{out}' is a graph output (the model returns integers)",
                      hint="end the model with DequantizeLinear, as onnxruntime.quantization does",
                      unsupported=True)

    def resolve(self, name: str) -> str:
        seen = set()
        while name in self.alias and name not in seen:
            seen.add(name)
            name = self.alias[name]
        return name

    # ---- the float graph

    def rewritten(self) -> tuple[onnx.ModelProto, dict[str, ir.QuantInfo]]:
        g = self.model.proto.graph
        rename = {name: self.resolve(name) for name in self.alias}
        extra = []          # Identity nodes for outputs that alias a graph input or constant
        produced = {out for i, n in enumerate(self.nodes) if i not in self.removed for out in n.output}
        outputs = set(self.graph_outputs)
        for out in self.graph_outputs:
            if out not in rename:
                continue
            source = rename[out]
            if source in produced and source not in outputs and source not in self.graph_inputs:
                # the producer writes the output name directly; every reader follows
                for name, target in list(rename.items()):
                    if target == source:
                        rename[name] = out
                rename[source] = out
                if source in self.annotations:
                    self.annotations[out] = self.annotations.pop(source)
                outputs.add(out)
            else:
                extra.append(onnx.helper.make_node("Identity", [source], [out], name=f"{out}.copy"))
                if source in self.annotations:
                    self.annotations[out] = self.annotations[source]
                del rename[out]
        graph = onnx.GraphProto()
        graph.name = g.name
        graph.input.extend(g.input)
        graph.output.extend(g.output)
        used = set()
        for i, node in enumerate(self.nodes):
            if i in self.removed:
                continue
            copy = graph.node.add()
            copy.CopyFrom(node)
            for k, name in enumerate(copy.input):
                if name in rename:
                    copy.input[k] = rename[name]
            for k, name in enumerate(copy.output):
                if name in rename:
                    copy.output[k] = rename[name]
            used.update(copy.input)
        graph.node.extend(extra)
        used.update(n.input[0] for n in extra)
        graph.initializer.extend(t for t in g.initializer if t.name in used)
        graph.initializer.extend(numpy_helper.from_array(v, name) for name, v in self.new_inits.items()
                                 if name in used)
        proto = onnx.ModelProto()
        proto.ir_version = self.model.proto.ir_version
        proto.opset_import.extend(self.model.proto.opset_import)
        proto.graph.CopyFrom(graph)
        quants = {name: a.params.quant(a.rank) for name, a in self.annotations.items()}
        return proto, quants


@dataclass(frozen=True)
class QdqAnnotations:
    """What the pairs say, by tensor name of the stripped model: each tensor's QuantInfo, and
    the float values of the constants that came through DequantizeLinear."""
    quant: dict[str, ir.QuantInfo]
    constants: dict[str, np.ndarray]


def strip_qdq(model: ModelFile) -> tuple[ModelFile, QdqAnnotations]:
    """The model without its QuantizeLinear/DequantizeLinear nodes, and the annotations they give."""
    stripper = _Stripper(model)
    proto, quants = stripper.run()
    return dataclasses.replace(model, proto=proto), QdqAnnotations(quants, stripper.new_inits)


def attach_annotations(graph: ir.Graph, annotations: QdqAnnotations) -> ir.Graph:
    """`graph` with each annotated tensor's QuantInfo set. A constant the importer derived from an
    annotated one (named `<name>.<what>`, e.g. Gemm's filter transposed to [N, K]) gets the
    annotation when it holds the same values, or their transpose (the channel axis swapped)."""
    tensors = dict(graph.tensors)
    for name, quant in annotations.quant.items():
        t = tensors.get(name)
        if t is not None:
            tensors[name] = dataclasses.replace(t, quant=quant)
    for name, t in list(tensors.items()):
        if not t.is_constant or t.quant is not None or "." not in name:
            continue
        source = name.rsplit(".", 1)[0]
        quant, values = annotations.quant.get(source), annotations.constants.get(source)
        if quant is None or values is None or source in tensors:
            continue
        if t.data.shape == values.shape and np.array_equal(t.data, values):
            tensors[name] = dataclasses.replace(t, quant=quant)
        elif t.data.ndim == 1 and t.data.size == values.size and np.array_equal(t.data, values.reshape(-1)) \
                and (quant.axis is None or values.shape[quant.axis] == values.size):   # Gemm's C as a vector
            axis = None if quant.axis is None else 0
            tensors[name] = dataclasses.replace(t, quant=dataclasses.replace(quant, axis=axis))
        elif values.ndim == 2 and t.data.shape == values.T.shape and np.array_equal(t.data, values.T):
            axis = None if quant.axis is None else 1 - quant.axis
            tensors[name] = dataclasses.replace(t, quant=dataclasses.replace(quant, axis=axis))
    return ir.Graph(graph.name, graph.inputs, graph.outputs, graph.ops, tensors)


# producers whose float output is signed in general: a QuantizeLinear of theirs whose grid starts
# at 0 clips away every negative value, i.e. acts as a ReLU the graph no longer has
SIGNED_PRODUCERS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "BatchNormalization")


def folded_activation_warnings(model: ModelFile) -> list[str]:
    """Why the model's dequantized graph (the float graph qsim reads from a QDQ model) cannot be
    the float model it was exported from: onnxruntime's quantize_static removes a Relu (or a
    Clip at 0) before a QuantizeLinear and lets the pair's range [0, ...] do its work, so the
    QuantizeLinear of a Conv/Gemm/Add/... output has its zero point at the integer type's minimum.
    The stripped graph keeps that output's negative values, which the integer model clips: its
    figures measure the clipping, not the quantization. One message per finding, naming the
    tensors (the first five)."""
    stripper = _Stripper(model)
    folded = []
    for i, node in enumerate(stripper.nodes):
        if node.op_type != QUANTIZE or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        x = node.input[0]
        producer = stripper.producer.get(x)
        if stripper.is_constant(x) or producer is None:
            continue
        params = stripper.params(i, None)
        bits, signed = params.bits_signed
        lowest = -(1 << (bits - 1)) if signed else 0
        if stripper.nodes[producer].op_type in SIGNED_PRODUCERS and np.all(params.zero_point == lowest):
            folded.append(f"'{x}' ({stripper.nodes[producer].op_type})")
    if not folded:
        return []
    more = f" and {len(folded) - 5} more" if len(folded) > 5 else ""
    return [f"{len(folded)} QuantizeLinear(s) quantize a signed tensor on a grid that starts at 0 (zero point "
            f"at the type's minimum) with no Relu before them: {', '.join(folded[:5])}{more}. "
            "onnxruntime's quantize_static folds a Relu into such a pair, so the QDQ model's dequantized graph, "
            "which this report scores against, is not the float model (it lacks those ReLUs); "
            "pass --float-model MODEL.onnx to score against the float model"]
