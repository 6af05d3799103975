"""Loading an NNEF 1.0 model: a folder, a graph.nnef file, or a .tar/.tgz container (5.1).

The container holds graph.nnef, one `.dat` file per variable label ('conv1/filter' →
conv1/filter.dat) and optionally graph.quant. Variable data are read with qsim.tensorfile;
quantized tensor files (codes 0x10/0x11) give their real values, and linear ones also a
QuantInfo(source="tensor file"); a graph.quant line for the same tensor wins (7.1: the file's
algorithm interprets the stored data, graph.quant's is the one for computation).
"""
from __future__ import annotations

import io
import os
import tarfile
from typing import Iterable

import numpy as np

from .. import ir
from ..errors import DataError, Location, SemanticError, UsageError
from ..tensorfile import ItemCode, Quantizer, read_tensor_file
from .compose import Composer
from .parser import parse_document
from .quantfile import min_max_quant, read_quant_file

_TAR_SUFFIXES = (".tgz", ".tar.gz", ".tar")


class ModelSource:
    """The files of a model, from a folder or a tar container, by relative path."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self._members: dict[str, bytes] | None = None
        if os.path.isdir(self.path):
            self.root = self.path
        elif os.path.isfile(self.path) and self.path.endswith(_TAR_SUFFIXES):
            self.root = None
            self._members = _read_tar(self.path)
        elif os.path.isfile(self.path):
            self.root = os.path.dirname(self.path) or "."
            self.graph_file = os.path.basename(self.path)
        else:
            raise UsageError(f"no NNEF model at {self.path}",
                             hint="give a model folder, its graph.nnef, or a .tgz/.tar container")
        if not hasattr(self, "graph_file"):
            self.graph_file = "graph.nnef"

    def display(self, rel: str) -> str:
        if self._members is not None:
            return f"{self.path}!{rel}"
        return os.path.join(self.root, rel)

    def read(self, rel: str) -> bytes | None:
        rel = rel.replace("\\", "/")
        if self._members is not None:
            return self._members.get(rel)
        full = os.path.join(self.root, *rel.split("/"))
        if not os.path.isfile(full):
            return None
        with open(full, "rb") as f:
            return f.read()


def _read_tar(path: str) -> dict[str, bytes]:
    try:
        with tarfile.open(path, "r:*") as tar:
            members = {}
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                name = os.path.normpath(member.name).replace("\\", "/").lstrip("./")
                data = tar.extractfile(member).read()
                members[name] = data
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"cannot read container {path}: {err}", location=Location(path),
                        hint="NNEF containers are (optionally gzip-compressed) tar archives (5)") from None
    # a container may wrap everything in one top folder: strip it
    if "graph.nnef" not in members:
        tops = {n.split("/", 1)[0] for n in members if "/" in n}
        graphs = [n for n in members if n.endswith("/graph.nnef") and n.count("/") == 1]
        if len(graphs) == 1 and len(tops) == 1:
            prefix = graphs[0][: -len("graph.nnef")]
            members = {n[len(prefix):]: d for n, d in members.items() if n.startswith(prefix)}
    return members


def load_nnef1(path: str, keep: Iterable[str] | None = None) -> ir.Graph:
    """Loads an NNEF 1.0 model into an ir.Graph of NNEF 2.0 operators.

    `keep`: names of 1.0 compound fragments to convert whole (None: every compound that has a
    2.0 operator, e.g. linear, max_pool, softmax; () expands all compounds into primitives).
    """
    source = ModelSource(path)
    text = source.read(source.graph_file)
    if text is None:
        raise DataError(f"{source.display(source.graph_file)} is missing",
                        location=Location(source.display(source.graph_file)),
                        hint="an NNEF model folder or container holds graph.nnef (5.1)")
    graph_name = source.display(source.graph_file)
    document = parse_document(_decode(text, graph_name), graph_name)

    def load_variable(label: str, shape: tuple, item: str, loc: Location):
        return _load_variable(source, label, shape, item, loc)

    composer = Composer(document, load_variable, None if keep is None else frozenset(keep))
    graph = composer.compose()
    quant_text = source.read("graph.quant")
    if quant_text is None:
        return graph.verify()
    quant_name = source.display("graph.quant")
    env = composer.env
    entries = read_quant_file(_decode(quant_text, quant_name), quant_name, lambda n: n in env)
    tensors = dict(graph.tensors)
    for ident, quant in entries.items():
        name = env[ident].name
        if name not in tensors:
            continue  # an identifier whose tensor nothing uses
        t = tensors[name]
        if t.dtype is not ir.DType.F32:
            raise SemanticError(f"'{ident}' is a {t.dtype} tensor; quantization applies to scalar tensors",
                                location=Location(quant_name))
        tensors[name] = ir.Tensor(t.name, t.dtype, t.shape, data=t.data, quant=quant, max_shape=t.max_shape)
    return ir.Graph(graph.name, graph.inputs, graph.outputs, graph.ops, tensors).verify()


def _decode(blob: bytes, name: str) -> str:
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{name} is not UTF-8 text (byte {err.start})", location=Location(name)) from None


def _load_variable(source: ModelSource, label: str, shape: tuple, item: str, loc: Location):
    rel = label.replace("\\", "/") + ".dat"
    blob = source.read(rel)
    display = source.display(rel)
    if blob is None:
        raise DataError(f"variable '{label}' has no data file {display}", location=loc,
                        hint="variables are stored as <label>.dat next to graph.nnef (5.1)")
    stream = io.BytesIO(blob)
    stream.name = display
    try:
        tf = read_tensor_file(stream, expected_shape=shape)
    except DataError as err:
        raise DataError(err.message, location=err.location, hint=(err.hint or "") +
                        f" (variable '{label}' declared at {loc})") from None
    code = tf.header.code
    quant = None
    if item == "scalar":
        if code in (ItemCode.INTEGER, ItemCode.SIGNED_INTEGER, ItemCode.BOOL):
            raise DataError(f"{display}: holds {code.name.lower()} items but variable '{label}' is "
                            "tensor<scalar>", location=Location(display), hint=f"declared at {loc}")
        values = tf.values().astype(np.float32)
        stored = tf.quantization
        if stored is not None and stored.algorithm is Quantizer.LINEAR:
            quant = min_max_quant(stored.min, stored.max, stored.bits, False, False, "tensor file")
    elif item == "integer":
        if tf.items.dtype.kind not in "iu":
            raise DataError(f"{display}: holds {tf.items.dtype} items but variable '{label}' is "
                            "tensor<integer>", location=Location(display), hint=f"declared at {loc}")
        values = tf.items.astype(np.int64)
    else:
        values = tf.items.astype(np.bool_)
    return values, quant
