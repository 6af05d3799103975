"""Reading an ONNX file: the protobuf, its opsets, attributes and tensors as numpy arrays.

Every way a file can be broken is a DataError naming the file (and the tensor or node), never
a protobuf or numpy traceback: a truncated or malformed protobuf, a tensor whose stored size
disagrees with its dims, external data outside the model's folder or missing. Tensor sizes
are checked against `limits.check_tensor_size` before anything is allocated.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from .. import ir
from ..errors import DataError, InvalidGraphError, Location, UnsupportedError
from ..limits import check_tensor_size
from ..tensorfile import resolve_tensor_path

# The opsets of the default domain qsim reads (onnx.defs gives each operator's version there).
MIN_OPSET, MAX_OPSET = 11, 21
DEFAULT_DOMAINS = ("", "ai.onnx")

# TensorProto element types qsim holds → ir dtypes (float16/64, bfloat16, strings, complex and
# 8-bit floats have no float execution in qsim: a tensor of those is an UnsupportedError).
_P = onnx.TensorProto
ELEMENT_DTYPES = {
    _P.FLOAT: ir.DType.F32, _P.UINT8: ir.DType.U8, _P.INT8: ir.DType.I8, _P.UINT16: ir.DType.U16,
    _P.INT16: ir.DType.I16, _P.INT32: ir.DType.I32, _P.INT64: ir.DType.I64, _P.BOOL: ir.DType.BOOL,
    _P.DOUBLE: ir.DType.F64, _P.FLOAT16: ir.DType.F16,
}
# the typed repeated field each element type is stored in when raw_data is absent (onnx.proto)
_TYPED_FIELD = {
    _P.FLOAT: "float_data", _P.DOUBLE: "double_data", _P.INT64: "int64_data",
    _P.INT32: "int32_data", _P.INT16: "int32_data", _P.INT8: "int32_data", _P.UINT16: "int32_data",
    _P.UINT8: "int32_data", _P.BOOL: "int32_data", _P.FLOAT16: "int32_data",
}


def element_type_name(code: int) -> str:
    try:
        return _P.DataType.Name(code)
    except ValueError:
        return f"element type {code}"


def dtype_of(code: int, what: str, location: Location, hint: str = "") -> ir.DType:
    dtype = ELEMENT_DTYPES.get(code)
    if dtype is None:
        raise UnsupportedError(f"{what} has element type {element_type_name(code)}", location=location,
                               hint=hint or "qsim reads float32, integer and bool tensors; convert the "
                                            "model to float32 first")
    return dtype


@dataclass(frozen=True)
class ModelFile:
    """A parsed model: the protobuf, where it lives, and the default domain's opset."""
    path: str
    folder: str
    proto: Any          # onnx.ModelProto
    opset: int          # version of the default domain
    opsets: dict        # domain → version (every domain the model imports)

    @property
    def location(self) -> Location:
        return Location(self.path)


def read_model(path: str) -> ModelFile:
    """Parses the file at `path`; checks the size first and the default domain's opset."""
    location = Location(path)
    try:
        size = os.path.getsize(path)
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}", location=location) from None
    check_tensor_size([size], 1, f"ONNX file {path}", location)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}", location=location) from None
    proto = parse_model_bytes(blob, path)
    opsets = {}
    for entry in proto.opset_import:
        domain = "" if entry.domain in DEFAULT_DOMAINS else entry.domain
        opsets[domain] = int(entry.version)
    if "" not in opsets:
        raise DataError(f"{path} imports no opset of the default ONNX domain", location=location,
                        hint="an ONNX model lists opset_import entries; export it again")
    opset = opsets[""]
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError(f"{path} uses opset {opset} of the default domain; qsim reads opsets "
                               f"{MIN_OPSET} to {MAX_OPSET}", location=location,
                               hint="convert it: onnx.version_converter.convert_version(model, 17)")
    return ModelFile(path, os.path.dirname(os.path.abspath(path)), proto, opset, opsets)


def parse_model_bytes(blob: bytes, name: str) -> Any:
    """A ModelProto from bytes; anything protobuf refuses is a DataError."""
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(blob)
    except (DecodeError, ValueError, RuntimeError) as err:   # RuntimeError: the C++ parser's refusals
        raise DataError(f"{name} is not a valid ONNX protobuf: {err}", location=Location(name),
                        hint="the file is truncated or not an ONNX model; export it again") from None
    if not proto.HasField("graph"):
        raise DataError(f"{name} holds no graph", location=Location(name),
                        hint="the file is empty, truncated or not an ONNX model")
    _check_text(proto, name)
    return proto


def _check_text(proto: Any, name: str) -> None:
    """ONNX is proto2, whose parser hands out a string field holding bad UTF-8 as bytes: every
    name qsim reads must be text (op types, domains, node/tensor/attribute names, data keys)."""
    g = proto.graph
    fields = [("opset domain", e.domain) for e in proto.opset_import]
    for i, node in enumerate(g.node):
        where = f"node #{i}"
        fields += [(f"{where} op_type", node.op_type), (f"{where} name", node.name),
                   (f"{where} domain", node.domain)]
        fields += [(f"{where} input", n) for n in node.input] + [(f"{where} output", n) for n in node.output]
        fields += [(f"{where} attribute name", a.name) for a in node.attribute]
    for kind, infos in (("graph input", g.input), ("graph output", g.output)):
        fields += [(kind, vi.name) for vi in infos]
        fields += [(f"{kind} dimension", d.dim_param) for vi in infos
                   for d in vi.type.tensor_type.shape.dim]
    for t in g.initializer:
        fields.append(("initializer name", t.name))
        fields += [("external data entry", v) for e in t.external_data for v in (e.key, e.value)]
    fields.append(("graph name", g.name))
    for what, value in fields:
        if not isinstance(value, str):
            raise DataError(f"{name}: a {what} is not valid UTF-8 text ({bytes(value)[:40]!r})",
                            location=Location(name), hint="the file is damaged; export the model again")


def attributes(node: Any, where: str, location: Location, schema: Any = None) -> dict[str, Any]:
    """A node's attributes as Python values: ints, floats, str (decoded), lists of those,
    TensorProto for tensor attributes; graph-valued attributes (If/Loop bodies) are refused.

    `schema` (onnx.defs.OpSchema of the node's operator at the model's opset): every attribute
    must be one the operator defines, stored with the kind the definition gives (an `axes` of
    FLOAT where INTS is defined is refused here, once for every converter, naming the node, the
    attribute and both kinds), and every required attribute present. So a converter reading
    `ctx.attr("axis")` always gets the schema's kind."""
    if schema is not None:
        check_attribute_kinds(node, schema, where, location)
    out = {}
    for attr in node.attribute:
        kind = attr.type
        A = onnx.AttributeProto
        if kind == A.INT:
            value = int(attr.i)
        elif kind == A.FLOAT:
            value = float(attr.f)
        elif kind == A.STRING:
            value = attr.s.decode("utf-8", errors="replace")
        elif kind == A.INTS:
            value = [int(v) for v in attr.ints]
        elif kind == A.FLOATS:
            value = [float(v) for v in attr.floats]
        elif kind == A.STRINGS:
            value = [s.decode("utf-8", errors="replace") for s in attr.strings]
        elif kind == A.TENSOR:
            value = attr.t
        else:
            raise UnsupportedError(f"{where}: attribute '{attr.name}' is of kind {_kind_name(kind)}",
                                   location=location,
                                   hint="qsim reads numeric, string and tensor attributes; control flow "
                                        "(If, Loop, Scan bodies) is not supported")
        out[attr.name] = value
    return out


def schema_of(op_type: str, opset: int) -> Any:
    """The definition of a default-domain operator at `opset` (onnx.defs), or None if ONNX has none."""
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _kind_name(kind: int) -> str:
    A = onnx.AttributeProto
    return A.AttributeType.Name(kind) if kind in A.AttributeType.values() else str(kind)


def check_attribute_kinds(node: Any, schema: Any, where: str, location: Location) -> None:
    """Each attribute of `node` is defined by `schema` with the kind it is stored with, each
    name appears once, and every required attribute is there (InvalidGraphError otherwise)."""
    defined = schema.attributes
    seen = set()
    for attr in node.attribute:
        spec = defined.get(attr.name)
        if spec is None:
            known = ", ".join(sorted(defined)) or "none"
            raise InvalidGraphError(
                f"{where}: attribute '{attr.name}' is not an attribute of {node.op_type} "
                f"(version {schema.since_version})", location=location,
                hint=f"the attributes {node.op_type} defines at this opset: {known}")
        if attr.name in seen:
            raise InvalidGraphError(f"{where}: attribute '{attr.name}' is given twice", location=location,
                                    hint="ONNX nodes name each attribute once")
        seen.add(attr.name)
        expected = int(spec.type)   # OpSchema.AttrType numbers the kinds as AttributeProto does
        if int(attr.type) != expected:
            raise InvalidGraphError(
                f"{where}: attribute '{attr.name}' is stored as {_kind_name(attr.type)}, but {node.op_type} "
                f"defines it as {_kind_name(expected)}", location=location,
                hint="the exporter wrote the attribute with the wrong type; store it as the operator's "
                     "definition says (onnx.helper.make_attribute infers the kind from the Python value)")
    missing = sorted(name for name, spec in defined.items() if spec.required and name not in seen)
    if missing:
        raise InvalidGraphError(f"{where}: required attribute(s) {', '.join(repr(m) for m in missing)} missing",
                                location=location, hint=f"{node.op_type} needs them at this opset")


def tensor_array(model: ModelFile, tensor: Any, what: str) -> np.ndarray:
    """The value of a TensorProto (initializer or Constant attribute) as a numpy array."""
    location = model.location
    dims = [int(d) for d in tensor.dims]
    if any(d < 0 for d in dims):
        raise DataError(f"{what} has negative dims {dims}", location=location)
    dtype = dtype_of(tensor.data_type, what, location)
    storage = dtype.numpy
    count = check_tensor_size(dims, storage.itemsize, what, location) // max(storage.itemsize, 1)
    if any(d == 0 for d in dims):
        count = 0
    nbytes = count * storage.itemsize
    if tensor.data_location == _P.EXTERNAL:
        blob = _external_bytes(model, tensor, what, nbytes)
    elif tensor.HasField("raw_data"):
        blob = tensor.raw_data
    else:
        field = getattr(tensor, _TYPED_FIELD[tensor.data_type])
        if len(field) != count:
            raise DataError(f"{what} holds {len(field)} values for dims {dims} ({count} values)",
                            location=location, hint="the tensor is damaged; export the model again")
        if tensor.data_type == _P.FLOAT16:     # stored as the 16-bit patterns in int32_data
            return np.asarray(field, dtype=np.uint16).view(np.float16).reshape(dims)
        return np.asarray(field, dtype=storage).reshape(dims)
    if len(blob) != nbytes:
        raise DataError(f"{what} holds {len(blob)} bytes for dims {dims} of {dtype} ({nbytes} bytes)",
                        location=location, hint="the tensor is damaged or truncated; export the model again")
    # raw_data is little-endian (onnx.proto); bools are one byte each
    return np.frombuffer(blob, dtype=storage.newbyteorder("<")).astype(storage).reshape(dims)


def _external_bytes(model: ModelFile, tensor: Any, what: str, nbytes: int) -> bytes:
    """The bytes of external data: a file inside the model's folder, at offset/length."""
    location = model.location
    info = {entry.key: entry.value for entry in tensor.external_data}
    rel = info.get("location", "")
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") else nbytes
    except ValueError:
        raise DataError(f"{what}: external data offset/length {info.get('offset')!r}/{info.get('length')!r} "
                        "are not whole numbers", location=location) from None
    full = resolve_tensor_path(model.folder, rel, f"{what} (external data)", location)
    if not os.path.isfile(full):
        raise DataError(f"{what}: external data file {full} is missing", location=location,
                        hint="copy the data file next to the .onnx file (onnx.save_model writes it there)")
    if offset < 0 or length != nbytes:
        raise DataError(f"{what}: external data length {length} at offset {offset} does not hold "
                        f"{nbytes} bytes", location=location, hint="the data file belongs to another model")
    size = os.path.getsize(full)
    if offset + length > size:
        raise DataError(f"{what}: external data file {full} has {size} bytes, fewer than offset {offset} "
                        f"+ length {length}", location=location, hint="the data file is truncated")
    with open(full, "rb") as f:
        f.seek(offset)
        return f.read(length)
