"""Loading an NNEF 1.0 model: a folder, a graph.nnef file, or a .tar/.tgz container (5.1).

The container holds graph.nnef, one `.dat` file per variable label ('conv1/filter' →
conv1/filter.dat) and optionally graph.quant. Variable data are read with qsim.tensorfile;
quantized tensor files (codes 0x10/0x11) give their real values, and linear ones also a
QuantInfo(source="tensor file"); a graph.quant line for the same tensor wins (7.1: the file's
algorithm interprets the stored data, graph.quant's is the one for computation).
"""
from __future__ import annotations

import os
import tempfile
from typing import Iterable

import numpy as np

from .. import ir
from ..errors import DataError, Location, SemanticError, UsageError
from ..limits import check_tensor_size
from ..tensorfile import ItemCode, Quantizer, read_tensor_file, resolve_tensor_path
from .compose import Composer
from .container import unpack_container
from .parser import parse_document
from .quantfile import min_max_quant, read_quant_file
from ..textfile import decode_utf8

_TAR_SUFFIXES = (".tgz", ".tar.gz", ".tar")


class ModelSource:
    """The files of a model by relative path: a folder, or a container unpacked into a private
    temporary folder (container.py) for as long as the `with` block lasts.

    Every file a model names resolves inside its root (tensorfile.resolve_tensor_path), and
    messages name container members as `model.tgz!conv1/filter.dat`.
    """

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.graph_file = "graph.nnef"
        self._unpacked: tempfile.TemporaryDirectory | None = None
        if os.path.isdir(self.path):
            self.root = self.path
        elif os.path.isfile(self.path) and self.path.lower().endswith(_TAR_SUFFIXES):
            try:
                self._unpacked = tempfile.TemporaryDirectory(prefix="qsim-nnef1-", ignore_cleanup_errors=True)
            except OSError as err:
                raise DataError(f"cannot make a temporary folder to unpack {self.path}: {err.strerror}",
                                location=Location(self.path),
                                hint="set TMPDIR to a writable folder with room for the model") from None
            try:
                self.root = unpack_container(self.path, self._unpacked.name)
            except BaseException:
                self._unpacked.cleanup()
                raise
        elif os.path.isfile(self.path):
            self.root = os.path.dirname(self.path) or "."
            self.graph_file = os.path.basename(self.path)
        else:
            raise UsageError(f"no NNEF model at {self.path}",
                             hint="give a model folder, its graph.nnef, or a .tgz/.tar container")

    def __enter__(self) -> "ModelSource":
        return self

    def __exit__(self, *exc) -> None:
        if self._unpacked is not None:
            self._unpacked.cleanup()

    def display(self, rel: str) -> str:
        if self._unpacked is not None:
            return f"{self.path}!{rel}"
        return os.path.join(self.root, rel)

    def path_of(self, rel: str, what: str, location: Location | None = None) -> str | None:
        """The file `rel` names inside the model (None if there is none); refuses escapes."""
        full = resolve_tensor_path(self.root, rel, what, location)
        return full if os.path.isfile(full) else None

    def text_of(self, rel: str) -> str | None:
        """A text file of the model (graph.nnef, graph.quant) decoded as UTF-8, None if missing."""
        full = os.path.join(self.root, rel) if rel == self.graph_file else self.path_of(rel, "the model")
        if full is None or not os.path.isfile(full):
            return None
        display = self.display(rel)
        check_tensor_size([os.path.getsize(full)], 1, f"text file {display}", Location(display))
        try:
            with open(full, "rb") as f:
                blob = f.read()
        except OSError as err:
            raise DataError(f"cannot read {display}: {err.strerror}", location=Location(display)) from None
        return decode_text(blob, display)


def load_nnef1(path: str, keep: Iterable[str] | None = None, batch: int | None = None) -> ir.Graph:
    """Loads an NNEF 1.0 model into an ir.Graph of NNEF 2.0 operators.

    `keep`: names of 1.0 compound fragments to convert whole (None: every compound that has a
    2.0 operator, e.g. linear, max_pool, softmax; () expands all compounds into primitives).
    `batch`: the first extent of every external input declared with extent 1 (the model on
    `batch` samples at once; a model whose operators spell out that extent fails to load or
    gives other shapes, which the caller checks).
    """
    with ModelSource(path) as source:
        return _load(source, keep, batch)


def _load(source: ModelSource, keep: Iterable[str] | None, batch: int | None = None) -> ir.Graph:
    graph_name = source.display(source.graph_file)
    text = source.text_of(source.graph_file)
    if text is None:
        raise DataError(f"{graph_name} is missing", location=Location(graph_name),
                        hint="an NNEF model folder or container holds graph.nnef (5.1)")
    document = parse_document(text, graph_name)

    def load_variable(label: str, shape: tuple, item: str, loc: Location):
        return _load_variable(source, label, shape, item, loc)

    composer = Composer(document, load_variable, None if keep is None else frozenset(keep),
                        external_batch=batch)
    graph = composer.compose()
    quant_text = source.text_of("graph.quant")
    if quant_text is None:
        return graph.verify()
    quant_name = source.display("graph.quant")
    env = composer.env
    entries = read_quant_file(quant_text, quant_name, lambda n: n in env)
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


def decode_text(blob: bytes, name: str) -> str:
    """UTF-8 text of a model file; a bad byte is reported at its line and column."""
    return decode_utf8(blob, name, what=name,
                       hint="NNEF model texts are UTF-8; save the file as UTF-8")


def _load_variable(source: ModelSource, label: str, shape: tuple, item: str, loc: Location):
    rel = label + ".dat"
    display = source.display(rel)
    full = source.path_of(rel, f"variable '{label}'", loc)
    if full is None:
        raise DataError(f"variable '{label}' has no data file {display}", location=loc,
                        hint="variables are stored as <label>.dat next to graph.nnef (5.1)")
    try:
        tf = read_tensor_file(full, expected_shape=shape, name=display)
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
            quant = min_max_quant(stored.min, stored.max, stored.bits, False, False, "tensor file",
                                  Location(display), DataError)
    elif item == "integer":
        if tf.items.dtype.kind not in "iu":
            raise DataError(f"{display}: holds {tf.items.dtype} items but variable '{label}' is "
                            "tensor<integer>", location=Location(display), hint=f"declared at {loc}")
        values = tf.items.astype(np.int64)
    else:
        values = tf.items.astype(np.bool_)
    return values, quant
