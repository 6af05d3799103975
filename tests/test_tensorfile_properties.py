"""Property tests of the `.dat` format (NNEF 1.0 section 5.2), seeded: write → read returns the
same items for every code and bit width the spec allows and random shapes; any header or file
corruption ends in a DataError (UnsupportedError for a vendor's code) that names the header
field, or reads back a tensor the header describes."""
import io
import re
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.errors import DataError, UnsupportedError
from qsim.tensorfile import (HEADER_BYTES, MAX_RANK, ItemCode, Quantizer, StoredQuantization,
                             read_tensor_file, tensor_bytes)

SETTINGS = settings(derandomize=True, deadline=None, max_examples=150)

# small random shapes of rank 0..8 (extents 0..4, at most 256 items)
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=MAX_RANK).filter(
    lambda s: int(np.prod(s)) <= 256).map(tuple)


def read(blob):
    return read_tensor_file(io.BytesIO(blob), name="prop.dat")


@SETTINGS
@given(shape=shapes, bits=st.sampled_from([16, 32, 64]), data=st.data())
def test_float_round_trip(shape, bits, data):
    dtype = np.dtype(f"f{bits // 8}")
    values = data.draw(st.lists(st.floats(width=bits, allow_nan=False), min_size=int(np.prod(shape)),
                                max_size=int(np.prod(shape))))
    array = np.array(values, dtype=dtype).reshape(shape)
    tf = read(tensor_bytes(array))
    assert tf.header.code is ItemCode.FLOAT and tf.header.bits == bits and tf.header.shape == shape
    assert tf.items.dtype == dtype
    np.testing.assert_array_equal(tf.items, array)


@SETTINGS
@given(shape=shapes, bits=st.integers(1, 64), signed=st.booleans(), data=st.data())
def test_integer_round_trip_at_every_width(shape, bits, signed, data):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    count = int(np.prod(shape))
    values = data.draw(st.lists(st.integers(lo, hi), min_size=count, max_size=count))
    array = np.array(values, dtype=np.int64 if signed else np.uint64).reshape(shape)
    blob = tensor_bytes(array, bits=bits, signed=signed)
    assert len(blob) == HEADER_BYTES + (count * bits + 7) // 8      # packed, padded to a byte
    tf = read(blob)
    assert tf.header.bits == bits and tf.header.signed == signed and tf.header.shape == shape
    assert tf.items.dtype.kind == ("i" if signed else "u") and tf.items.dtype.itemsize * 8 >= bits
    assert [int(v) for v in tf.items.reshape(-1)] == values


@SETTINGS
@given(shape=shapes, wide=st.booleans(), data=st.data())
def test_bool_round_trip(shape, wide, data):
    count = int(np.prod(shape))
    array = np.array(data.draw(st.lists(st.booleans(), min_size=count, max_size=count)), dtype=bool).reshape(shape)
    tf = read(tensor_bytes(array, bits=8 if wide else 1))
    assert tf.header.code is ItemCode.BOOL and tf.items.dtype == np.bool_
    np.testing.assert_array_equal(tf.items, array)


@SETTINGS
@given(shape=shapes, bits=st.integers(1, 64), logarithmic=st.booleans(), data=st.data())
def test_quantized_items_round_trip(shape, bits, logarithmic, data):
    if logarithmic:
        top = data.draw(st.floats(2.0 ** -60, 2.0 ** 60, width=32))   # parameters are float32
        signed = bits >= 2 and data.draw(st.booleans())
        quant = StoredQuantization(Quantizer.LOGARITHMIC, -top if signed else 0.0, top, bits)
    else:
        lo = data.draw(st.floats(-1e6, 1e6, width=32))
        hi = float(np.float32(lo + data.draw(st.floats(0.0, 1e6, width=32))))
        quant = StoredQuantization(Quantizer.LINEAR, lo, max(lo, hi), bits)
    count = int(np.prod(shape))
    items = data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=count, max_size=count))
    tf = read(tensor_bytes(np.array(items, dtype=np.uint64).reshape(shape), quantization=quant))
    assert tf.quantization == quant
    assert [int(v) for v in tf.items.reshape(-1)] == items
    values = tf.values()
    assert values.dtype == np.float32 and values.shape == shape


FIELD = re.compile(r"\(header (magic|version|data length|rank|extents|bits per item|code|parameters), bytes \d+-\d+\)")


def valid_blobs():
    rng = np.random.default_rng(7)
    return [tensor_bytes(rng.standard_normal((2, 3)).astype(np.float32)),
            tensor_bytes(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), bits=4),
            tensor_bytes(np.array([True, False, True])),
            tensor_bytes(rng.standard_normal(5), quantization=StoredQuantization(Quantizer.LINEAR, -1.0, 1.0, 6)),
            tensor_bytes(np.float32([0.5, -2.0]), quantization=StoredQuantization(Quantizer.LOGARITHMIC, -4, 4, 5)),
            tensor_bytes(np.arange(7, dtype=np.uint64) << np.uint64(40), bits=47)]


def check_outcome(blob):
    """The read succeeds with a consistent tensor, or fails with a DataError saying why."""
    try:
        tf = read(blob)
    except (DataError, UnsupportedError) as err:
        text = err.message
        assert err.location is not None and err.location.file == "prop.dat"
        assert (FIELD.search(text) or "shorter than the 128-byte tensor header" in text
                or "stored shape" in text or "limit on one tensor" in text), text
        if isinstance(err, UnsupportedError):
            assert "vendor code" in text
        return None
    assert tf.items.shape == tf.header.shape
    assert len(blob) == HEADER_BYTES + tf.header.data_bytes
    return tf


U32 = st.sampled_from([0, 1, 2, 3, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 0x10, 0x11, 0xFF, 0xFFFF, 0x10000,
                       0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7F800000, 0x7FC00000]) | st.integers(0, 2 ** 32 - 1)


@SETTINGS
@given(index=st.integers(0, 5), offset=st.sampled_from([4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56]),
       value=U32, cut=st.none() | st.integers(0, 200))
def test_mutated_header_fields_fail_with_the_field_named(index, offset, value, cut):
    blob = bytearray(valid_blobs()[index])
    struct.pack_into("<I", blob, offset, value)
    if cut is not None:
        blob = blob[:cut]
    check_outcome(bytes(blob))


@SETTINGS
@given(index=st.integers(0, 5), flips=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=6),
       extra=st.binary(max_size=8))
def test_mutated_bytes_fail_with_the_field_named(index, flips, extra):
    blob = bytearray(valid_blobs()[index])
    for position, byte in flips:
        if position < len(blob):
            blob[position] = byte
    check_outcome(bytes(blob) + extra)


@SETTINGS
@given(header=st.binary(min_size=HEADER_BYTES, max_size=HEADER_BYTES), magic=st.booleans(),
       data=st.binary(max_size=64))
def test_random_headers_fail_with_the_field_named(header, magic, data):
    blob = bytearray(header)
    if magic:   # get past the magic and version most of the time
        blob[0:4] = b"N\xef\x01\x00"
    check_outcome(bytes(blob) + data)


@SETTINGS
@given(rank=st.integers(1, 8), extent=st.sampled_from([2 ** 8, 2 ** 16, 2 ** 31, 2 ** 32 - 1]),
       bits=st.sampled_from([1, 8, 32]))
def test_extents_never_wrap_or_allocate(rank, extent, bits):
    """Coherent headers with huge extents: the data length field cannot match, or the limit refuses."""
    blob = bytearray(HEADER_BYTES)
    blob[0:4] = b"N\xef\x01\x00"
    count = extent ** rank
    struct.pack_into("<II", blob, 4, ((count * bits + 7) // 8) % 2 ** 32, rank)
    struct.pack_into(f"<{rank}I", blob, 12, *([extent] * rank))
    struct.pack_into("<II", blob, 44, bits, 0x01)
    with pytest.raises(DataError) as err:
        read(bytes(blob))
    assert FIELD.search(err.value.message) or "limit on one tensor" in err.value.message


@SETTINGS
@given(extents=st.lists(st.sampled_from([0, 0, 1, 3, 2 ** 16, 2 ** 31, 2 ** 32 - 1]), min_size=1, max_size=MAX_RANK),
       bits=st.sampled_from([1, 8, 32, 64]), code=st.sampled_from([0x00, 0x01, 0x03]))
def test_zero_extents_among_huge_ones_read_or_name_the_extents(extents, bits, code):
    """Coherent headers mixing zero and huge extents (the data length matches the item count):
    an empty tensor reads back with its shape when its other extents describe at most 4 GiB, and
    is refused naming the extents field otherwise (never numpy's reshape error)."""
    if code == 0x00 and bits not in (32, 64):
        bits = 32
    blob = bytearray(HEADER_BYTES)
    blob[0:4] = b"N\xef\x01\x00"
    count = int(np.prod([float(e) for e in extents]))
    struct.pack_into("<II", blob, 4, ((count * bits + 7) // 8) % 2 ** 32, len(extents))
    struct.pack_into(f"<{len(extents)}I", blob, 12, *extents)
    struct.pack_into("<II", blob, 44, bits, code)
    tf = check_outcome(bytes(blob))
    span = 1
    for e in extents:
        span *= e or 1
    if 0 in extents and (span * bits + 7) // 8 > 2 ** 32 - 1:
        assert tf is None
    if tf is not None:
        assert tf.items.shape == tuple(extents)
