"""The TFLite reader (qsim/tflite/model.py, flatbuf.py) and importer: what a model holds comes
out right (shapes, buffers inside and past the flatbuffer, per-tensor and per-channel
quantization, operator codes and versions), and every broken or hostile file is a QsimError
naming what is wrong: bad offsets, vtables out of range, buffers outside the file, huge
shapes, truncations, unsupported builtins (by BuiltinOperator name and version)."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from qsim.errors import DataError, QsimError, UnsupportedError
from qsim.loader import model_kind
from qsim.tflite.load import convert_model
from qsim.tflite.model import parse_model
from qsim.tflite.writer import ModelWriter, Options
from tests.tflite import op_models
from tests.tflite.harness import Net, conv_options


def _conv_model(external: bool = False) -> bytes:
    n = Net(0)
    x = n.act([1, 6, 6, 3], 0.05, -3, name="input image")
    k = n.weights([4, 3, 3, 3])
    b = n.bias(4, 0.05, k)
    y = n.act([1, 6, 6, 4], 0.08, 2, name="conv/out")
    n.op("CONV_2D", [x, k, b], [y], conv_options(act=3), version=3)
    return n.finish([x], [y], external)


@pytest.mark.parametrize("external", [False, True])
def test_reader_gives_back_what_was_written(external):
    data = _conv_model(external)
    m = parse_model(data)
    names = [t.name for t in m.tensors]
    assert names == ["input image", "w2", "b3", "conv/out"]
    x, w, b, y = m.tensors
    assert x.shape == (1, 6, 6, 3) and x.data is None and x.type_name == "INT8"
    assert float(x.quant.scale[0]) == np.float32(0.05) and int(x.quant.zero_point[0]) == -3 and x.quant.axis is None
    assert w.shape == (4, 3, 3, 3) and w.data.dtype == np.int8 and w.quant.axis == 0 and w.quant.scale.size == 4
    assert b.data.dtype == np.int32 and b.data.shape == (4,)
    assert (m.operators[0].builtin, m.operators[0].version) == ("CONV_2D", 3)
    assert m.inputs == (0,) and m.outputs == (3,)
    same = parse_model(_conv_model(not external))
    for t, u in zip(m.tensors, same.tensors):
        assert (t.data is None) == (u.data is None)
        if t.data is not None:
            np.testing.assert_array_equal(t.data, u.data)


def test_format_is_told_by_the_identifier_not_the_name(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(_conv_model())
    assert model_kind(str(path)) == "tflite"
    other = tmp_path / "x.tflite"
    other.write_bytes(b"\0" * 64)
    with pytest.raises(QsimError, match="cannot tell the model format"):
        model_kind(str(other))


def test_import_annotates_every_tensor_with_tflite_parameters():
    graph = convert_model(parse_model(_conv_model()))
    assert graph.inputs == ("input image",) and graph.outputs == ("conv/out",)
    assert graph.tensor("input image").shape == (1, 6, 6, 3)
    for t in graph.tensors.values():
        if t.dtype.is_float and t.data is None or t.name.endswith(".oihw"):
            assert t.quant is not None and t.quant.source == "tflite", t.name


def _unsupported(builtin: str, version: int) -> bytes:
    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 4], scale=0.1)
    y = w.tensor("y", np.int8, [1, 4], scale=0.1)
    w.operator(builtin, [x], [y], version=version)
    return w.finish([x], [y])


@pytest.mark.parametrize("builtin, version", [("CUMSUM", 1), ("LSTM", 4), ("STABLEHLO_COMPOSITE", 1)])
def test_unsupported_builtin_is_named_with_its_version_and_place(builtin, version):
    with pytest.raises(UnsupportedError) as e:
        convert_model(parse_model(_unsupported(builtin, version)))
    message = e.value.format()
    assert f"builtin {builtin} (version {version})" in message and "operator 0" in message and "'y'" in message


def _patched(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _find_u32(data: bytes, value: int) -> int:
    return bytes(data).index(struct.pack("<I", value))


@pytest.mark.parametrize("mutation, message", [
    (lambda d: d[:6], "not a TFLite flatbuffer"),
    (lambda d: d[:4] + b"TFL2" + d[8:], "not a TFLite flatbuffer"),
    (lambda d: _patched(d, 0, "<I", len(d) + 100), "outside the file"),
    (lambda d: d[:len(d) // 2], "outside the file"),
])
def test_broken_files_are_data_errors(mutation, message):
    with pytest.raises(DataError, match=message):
        parse_model(mutation(_conv_model()))


def test_buffer_outside_the_file_is_named():
    data = bytearray(_conv_model(external=True))
    # the weights' bytes lie past the flatbuffer at some offset; the buffer table holds it
    weights = parse_model(bytes(data)).tensors[1].data.tobytes()
    offset = bytes(data).index(weights)
    at = bytes(data).index(struct.pack("<Q", offset))
    struct.pack_into("<Q", data, at, len(data) + 4096)
    with pytest.raises(DataError, match="buffer .* outside the file"):
        parse_model(bytes(data))


def test_huge_shape_is_refused_before_allocating():
    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 4], scale=0.1)
    big = w.tensor("weights", np.int8, [1 << 20, 1 << 20, 1 << 10], scale=0.1)
    w.buffers.append(b"\1" * 16)
    w.tensors[big].buffer = len(w.buffers) - 1
    y = w.tensor("y", np.int8, [1, 4], scale=0.1)
    w.operator("ADD", [x, big], [y])
    with pytest.raises(QsimError, match="weights"):
        parse_model(w.finish([x], [y]))


def test_buffer_size_must_match_the_shape():
    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 4], scale=0.1)
    k = w.tensor("k", np.int8, [4], data=np.arange(4), scale=0.1)
    w.buffers[w.tensors[k].buffer] = b"\1\2\3"
    y = w.tensor("y", np.int8, [1, 4], scale=0.1)
    w.operator("ADD", [x, k], [y])
    with pytest.raises(DataError, match="holds 3 bytes"):
        parse_model(w.finish([x], [y]))


def test_tensor_index_out_of_range_is_refused():
    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 4], scale=0.1)
    w.operator("RELU", [x], [7])
    with pytest.raises(DataError, match="names tensor 7"):
        parse_model(w.finish([x], [x]))


_VALID = {name: build()[0] for name, build in (("conv", op_models.conv), ("cnn", op_models.small_cnn),
                                               ("concat", op_models.concat))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(_VALID)), edits=st.lists(
    st.tuples(st.integers(0, 1 << 20), st.sampled_from(["<I", "<H", "<B", "<Q"]),
              st.sampled_from([0, 1, 2, 3, 4, 7, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40])),
    min_size=1, max_size=4), cut=st.one_of(st.none(), st.integers(0, 1 << 20)))
def test_hostile_files_give_qsim_errors_only(which, edits, cut):
    """Any patched offset, length, vtable entry or count, and any truncation: the reader and
    importer either read a model or raise a QsimError, never another exception."""
    data = bytearray(_VALID[which])
    for at, fmt, value in edits:
        at %= len(data)
        width = struct.calcsize(fmt)
        if at + width <= len(data):
            struct.pack_into(fmt, data, at, value & ((1 << (8 * width)) - 1))
    if cut is not None:
        data = data[:cut % (len(data) + 1)]
    try:
        convert_model(parse_model(bytes(data)))
    except QsimError:
        pass


def test_options_table_of_another_kind_is_read_as_its_fields():
    """Options are read by the builtin's layout; a wrong union table with too few fields
    gives the defaults, not garbage (a vtable shorter than the slot is an absent field)."""
    n = Net(0)
    x = n.act([1, 4, 4, 2], 0.1, 0, name="x")
    y = n.act([1, 2, 2, 2], 0.1, 0, name="y")
    n.op("MAX_POOL_2D", [x], [y], Options(5, [(0, "i8", 1)]))
    with pytest.raises(QsimError, match="output shape"):
        convert_model(parse_model(n.finish([x], [y])))


def test_empty_tensor_is_refused_by_name():
    """(found by the fuzzer: an extent of 0 reached the conv converter's channel division)"""
    w = ModelWriter()
    x = w.tensor("x", np.int8, [1, 6, 0, 3], scale=0.1)
    y = w.tensor("y", np.int8, [1, 6, 6, 3], scale=0.1)
    w.operator("RELU", [x], [y])
    with pytest.raises(UnsupportedError, match="tensor 0 'x' is empty"):
        parse_model(w.finish([x], [y]))
