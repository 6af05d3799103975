"""Fuzz targets for the classes of issue 26 (tracebacks, hangs and memory blow-ups), each the
generator that would have found them:

  sknd-dynamic  every standard operator on inputs with dynamic extents (gen_dynamic.py).
  dat-extents   .dat headers mixing zero and huge extents, with the data length they imply (or
                not), read by qsim.tensorfile or as a variable of a model.
  onnx-attrs    ONNX models whose attributes are stored with another kind than the operator's
                schema, undefined or missing required ones, and whose graph outputs are dropped,
                made rank 0, duplicated, pointed at inputs, initializers or nothing, and MatMul
                with 1-D operands; `qsim check`, `run`, now and then `quantize`.
  images        calibration image folders: real images of every mode, truncated and corrupt
                ones, and PNG/BMP headers declaring huge dimensions over a few bytes of data;
                `qsim quantize --calib FOLDER`.

`ROBUST_TARGETS`: name -> (generator, weight), named in registry.py.
"""
from __future__ import annotations

import io
import random
import struct
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper

from .gen_dynamic import gen_sknd_dynamic
from .gen_onnx import INPUT_SHAPES, SEEDS, _npy
from .runner import Case
from .targets import U32_EXTREMES, _model_argv, _under

# ------------------------------------------------------------------------- .dat extents

HUGE = (0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 20, 1 << 24)


def extents_dat(rng: random.Random) -> bytes:
    """A header whose extents mix zeros, ordinary and huge values; its data length is what the
    extents imply (mostly) or another extreme, and the data what fits a small file."""
    rank = rng.randint(1, 8)
    extents = [rng.choice((0, 0, 1, 2, 3) + HUGE) for _ in range(rank)]
    if rng.random() < 0.7:
        extents[rng.randrange(rank)] = 0
    code, bits = rng.choice(((0x00, 32), (0x00, 16), (0x00, 64), (0x01, 8), (0x01, 1), (0x03, 4), (0x05, 1),
                             (0x05, 8), (0x10, 8)))
    count = 1
    for e in extents:
        count *= e
    implied = (count * bits + 7) // 8
    data_len = implied if rng.random() < 0.8 else rng.choice(U32_EXTREMES)
    params = bytearray(32)
    if code == 0x10:
        struct.pack_into("<ff", params, 0, -1.0, 1.0)
    header = (b"N\xef\x01\x00" + struct.pack("<II", data_len & 0xFFFFFFFF, rank)
              + struct.pack("<8I", *(extents + [0] * (8 - rank))) + struct.pack("<II", bits, code)
              + bytes(params) + bytes(44))
    have = data_len if data_len <= 1 << 12 else rng.randrange(64)
    return header + bytes(rng.randrange(256) for _ in range(have))


def gen_dat_extents(rng: random.Random, corpus) -> Case:
    blob = extents_dat(rng)
    if rng.random() < 0.7:
        return Case("dat-extents", "read", {"t.dat": blob}, call="read_tensor", call_arg="t.dat")
    files = _under("m", {**corpus.tiny, rng.choice(("f.dat", "w.dat", "b.dat")): blob})
    return Case("dat-extents", "in-model", files, argv=_model_argv(rng, "m", [1, 1, 4, 4], files))


# ------------------------------------------------------------------------- ONNX attributes, outputs

A = onnx.AttributeProto
KIND_VALUES = {A.INT: 2, A.FLOAT: 0.5, A.STRING: "x", A.INTS: [1, -1], A.FLOATS: [1.0], A.STRINGS: ["a"],
               A.TENSOR: helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])}


def _mutate_attribute(rng: random.Random, model: onnx.ModelProto) -> str:
    nodes = list(model.graph.node)
    node = rng.choice(nodes)
    pick = rng.random()
    if pick < 0.6 and node.attribute:
        index = rng.randrange(len(node.attribute))
        name = node.attribute[index].name
        kind = rng.choice([k for k in KIND_VALUES if k != node.attribute[index].type])
        del node.attribute[index]
        node.attribute.append(helper.make_attribute(name, KIND_VALUES[kind]))
        return f"attr-kind:{node.op_type}.{name}:{A.AttributeType.Name(kind)}"
    if pick < 0.75:
        schema_attrs = _schema_attributes(node.op_type, model)
        name = rng.choice(sorted(schema_attrs) + ["bogus"]) if schema_attrs else "bogus"
        kind = rng.choice(sorted(KIND_VALUES))
        node.attribute.append(helper.make_attribute(name, KIND_VALUES[kind]))
        return f"attr-added:{node.op_type}.{name}"
    if pick < 0.85 and node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]
        return f"attr-removed:{node.op_type}"
    attr = helper.make_attribute("axis", 1)
    attr.type = rng.choice((A.UNDEFINED, A.GRAPH, A.SPARSE_TENSOR, A.TYPE_PROTO))
    node.attribute.append(attr)
    return f"attr-odd-kind:{node.op_type}"


def _schema_attributes(op_type: str, model: onnx.ModelProto) -> dict:
    try:
        return dict(onnx.defs.get_schema(op_type, model.opset_import[0].version, "").attributes)
    except onnx.defs.SchemaError:
        return {}


def _mutate_outputs(rng: random.Random, model: onnx.ModelProto) -> str:
    g = model.graph
    what = rng.choice(("none", "scalar", "duplicate", "input", "initializer", "ghost", "intermediate", "type"))
    if not len(g.output):
        return "outputs:none"
    if what == "none":
        del g.output[:]
    elif what == "scalar":
        last = g.output[0].name
        g.node.append(helper.make_node("ReduceMean", [last], ["scalar_out"], keepdims=0))
        g.output.append(helper.make_tensor_value_info("scalar_out", TensorProto.FLOAT, []))
    elif what == "duplicate":
        g.output.append(g.output[0])
    elif what == "input":
        g.output.append(helper.make_tensor_value_info(g.input[0].name, TensorProto.FLOAT, None))
    elif what == "initializer" and len(g.initializer):
        g.output.append(helper.make_tensor_value_info(rng.choice(list(g.initializer)).name, TensorProto.FLOAT, None))
    elif what == "ghost":
        g.output.append(helper.make_tensor_value_info("ghost", TensorProto.FLOAT, None))
    elif what == "intermediate":
        node = rng.choice(list(g.node))
        g.output.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None))
    elif what == "type":
        g.output[0].type.tensor_type.elem_type = rng.choice((TensorProto.INT64, TensorProto.STRING, 0, 40))
    return f"outputs:{what}"


def _vector_matmul(rng: np.random.Generator) -> onnx.ModelProto:
    """MatMul with 1-D operands on either side (numpy semantics), as a graph input or a constant."""
    f = np.float32
    nodes = [helper.make_node("MatMul", ["x", "v"], ["xv"]), helper.make_node("MatMul", ["u", "x"], ["ux"]),
             helper.make_node("MatMul", ["xv", "w"], ["y"])]
    inits = [onnx.numpy_helper.from_array(rng.normal(size=4).astype(f), "v"),
             onnx.numpy_helper.from_array(rng.normal(size=3).astype(f), "u"),
             onnx.numpy_helper.from_array(rng.normal(size=(3, 2)).astype(f), "w")]
    graph = helper.make_graph(nodes, "vm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("ux", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def gen_onnx_attrs(rng: random.Random, corpus) -> Case:
    seeds = SEEDS + (_vector_matmul,)
    seed = rng.choice(seeds)
    model = seed(np.random.default_rng(rng.randrange(2 ** 32)))
    kinds = []
    for _ in range(rng.randint(1, 2)):
        mutate = _mutate_attribute if rng.random() < 0.6 else _mutate_outputs
        kinds.append(mutate(rng, model))
    files = {"m.onnx": model.SerializeToString()}
    shape = INPUT_SHAPES.get(seed.__name__, [1, 3, 4])
    command = rng.choices(("check", "run", "quantize"), (55, 40, 5))[0]
    argv = {"check": ["check", "m.onnx"], "run": ["run", "m.onnx", "--input", "x.npy"],
            "quantize": ["quantize", "m.onnx", "--calib", "c.npy", "-o", "out", "-q"]}[command]
    if command == "run":
        files["x.npy"] = _npy(shape, rng)
    elif command == "quantize":
        files["c.npy"] = _npy([3] + shape[1:], rng)
    return Case("onnx-attrs", f"{seed.__name__.strip('_')}:{'+'.join(kinds)}:{command}", files, argv=argv,
                timeout_s=60 if command == "quantize" else None)


# ------------------------------------------------------------------------- image folders


def _png_header_only(width: int, height: int, color: int = 2, depth: int = 8) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _bmp_header_only(width: int, height: int) -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + 16, 0, 0, 54) + info + bytes(16)


def _real_image(rng: random.Random, fmt: str) -> bytes:
    from PIL import Image
    mode = rng.choice(("L", "RGB", "RGBA", "I;16", "1", "P")) if fmt == "PNG" else rng.choice(("L", "RGB"))
    size = (rng.randint(1, 40), rng.randint(1, 40))
    data = np.random.default_rng(rng.randrange(2 ** 32))
    if mode in ("RGB", "RGBA"):
        image = Image.fromarray(data.integers(0, 256, size[::-1] + (len(mode),)).astype(np.uint8), mode)
    elif mode == "I;16":
        image = Image.fromarray(data.integers(0, 65536, size[::-1]).astype(np.uint16))
    else:
        image = Image.fromarray(data.integers(0, 256, size[::-1]).astype(np.uint8), "L").convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def _image_file(rng: random.Random) -> tuple[str, bytes, str]:
    pick = rng.random()
    if pick < 0.45:
        fmt = rng.choice(("PNG", "BMP", "JPEG"))
        blob = _real_image(rng, fmt)
        if rng.random() < 0.2:
            blob = blob[:rng.randrange(len(blob))]
            return f".{fmt.lower()}", blob, "truncated"
        return f".{fmt.lower()}", blob, "real"
    if pick < 0.75:
        width, height = rng.choice(((100000, 100000), (12000, 12000), (30000, 1), (1, 2 ** 31 - 1), (65535, 65535),
                                   (0, 10), (2 ** 32 - 1, 2 ** 32 - 1), (5000, 5000)))
        return ".png", _png_header_only(width, height, rng.choice((0, 2, 6)), rng.choice((8, 16))), \
            "png-header-huge" if width * height > 1 << 24 else "png-header-only"
    if pick < 0.9:
        width, height = rng.choice(((100000, 100000), (40000, -40000), (2 ** 31 - 1, 1), (0, 0), (12000, 12000)))
        return ".bmp", _bmp_header_only(width, height), "bmp-header-only"
    blob = bytearray(_real_image(rng, "PNG"))
    for _ in range(rng.randint(1, 6)):
        blob[rng.randrange(len(blob))] = rng.randrange(256)
    return ".png", bytes(blob), "flipped"



def _relu_model(channels: int) -> bytes:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def gen_images(rng: random.Random, corpus) -> Case:
    files = {"m.onnx": _relu_model(rng.choice((1, 3)))}
    kinds = []
    for i in range(rng.randint(1, 4)):
        suffix, blob, kind = _image_file(rng)
        files[f"imgs/i{i}{suffix}"] = blob
        kinds.append(kind)
    if rng.random() < 0.2:
        files["imgs/labels.txt"] = "".join(f"i{i}{s} {rng.randint(0, 9)}\n" for i, s in
                                           enumerate(k.split(".")[-1] for k in files if k.startswith("imgs/i"))
                                           ).encode()
    argv = ["quantize", "m.onnx", "--calib", "imgs", "-o", "out", "-q"]
    if rng.random() < 0.3:
        argv = ["--max-memory", rng.choice(("64M", "512M", "1G"))] + argv
    return Case("images", "+".join(sorted(set(kinds))), files, argv=argv, timeout_s=60)


ROBUST_TARGETS = {
    "sknd-dynamic": (gen_sknd_dynamic, 15),
    "dat-extents": (gen_dat_extents, 10),
    "onnx-attrs": (gen_onnx_attrs, 15),
    "images": (gen_images, 5),
}
