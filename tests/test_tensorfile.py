"""The `.dat` tensor format of NNEF 1.0 section 5.2: byte layouts worked by hand,
round trips in every code, the Khronos `nnef` package as an independent reader
and writer, and every malformed header field."""
import io
import struct

import numpy as np
import pytest

from qsim.errors import DataError, UnsupportedError
from qsim.tensorfile import (HEADER_BYTES, ItemCode, Quantizer, StoredQuantization, parse_header,
                             read_tensor, read_tensor_file, tensor_bytes, write_tensor)


def header(*, magic=b"N\xef", version=(1, 0), data_bytes=4, rank=1, extents=(1,), bits=32, code=0,
           params=b""):
    """A header built field by field from the 5.2 table (independent of the writer)."""
    blob = bytearray(HEADER_BYTES)
    blob[0:2] = magic
    blob[2], blob[3] = version
    struct.pack_into("<II", blob, 4, data_bytes, rank)
    struct.pack_into(f"<{len(extents)}I", blob, 12, *extents)
    struct.pack_into("<II", blob, 44, bits, code)
    blob[52:52 + len(params)] = params
    return bytes(blob)


# ------------------------------------------------------------- hand-worked layouts

def test_float32_layout_matches_the_spec_table():
    blob = tensor_bytes(np.array([[1.0, -2.0, 0.5]], dtype=np.float32))
    assert blob[:4] == b"N\xef\x01\x00"
    assert struct.unpack_from("<II", blob, 4) == (12, 2)          # data length, rank
    assert struct.unpack_from("<8I", blob, 12) == (1, 3, 0, 0, 0, 0, 0, 0)
    assert struct.unpack_from("<II", blob, 44) == (32, 0)         # bits, code float
    assert blob[52:HEADER_BYTES] == bytes(HEADER_BYTES - 52)
    assert blob[HEADER_BYTES:] == bytes.fromhex("0000803f" "000000c0" "0000003f")


def test_signed_integer_sets_first_parameter():
    blob = tensor_bytes(np.array([-1, 2], dtype=np.int16))
    assert struct.unpack_from("<III", blob, 44) == (16, 1, 1)     # bits, code integer, signed
    assert blob[HEADER_BYTES:] == bytes.fromhex("ffff" "0200")
    blob = tensor_bytes(np.array([3], dtype=np.uint8))
    assert struct.unpack_from("<III", blob, 44) == (8, 1, 0)


def test_int4_is_an_msb_first_bit_stream():
    # 1 → 0001, -1 → 1111, 7 → 0111, -8 → 1000, 3 → 0011 (+ 4 zero pad bits)
    blob = tensor_bytes(np.array([1, -1, 7, -8, 3], dtype=np.int8), bits=4)
    assert struct.unpack_from("<I", blob, 4)[0] == 3
    assert blob[HEADER_BYTES:] == bytes([0x1F, 0x78, 0x30])
    assert read_tensor(io.BytesIO(blob)).tolist() == [1, -1, 7, -8, 3]


def test_three_bit_unsigned_crosses_byte_boundaries():
    # 5=101 2=010 7=111 → 10101011 1(0000000)
    blob = tensor_bytes(np.array([5, 2, 7], dtype=np.uint8), bits=3)
    assert blob[HEADER_BYTES:] == bytes([0b10101011, 0b10000000])
    out = read_tensor(io.BytesIO(blob))
    assert out.dtype == np.uint8 and out.tolist() == [5, 2, 7]


def test_bool_is_one_bit_per_item():
    blob = tensor_bytes(np.array([True, False, True, True, False, False, False, False, True]))
    assert struct.unpack_from("<II", blob, 44) == (1, ItemCode.BOOL)
    assert blob[HEADER_BYTES:] == bytes([0b10110000, 0b10000000])


def test_24_bit_items_are_three_little_endian_bytes():
    blob = tensor_bytes(np.array([0x123456, -2], dtype=np.int32), bits=24)
    assert blob[HEADER_BYTES:] == bytes([0x56, 0x34, 0x12, 0xFE, 0xFF, 0xFF])
    assert read_tensor(io.BytesIO(blob)).tolist() == [0x123456, -2]


def test_linear_quantization_encodes_by_the_5_2_formula():
    quant = StoredQuantization(Quantizer.LINEAR, -1.0, 1.0, 8)
    # q = floor(clip((x+1)/2, 0, 1) * 255 + 0.5): -1 → 0, 0 → 128, 1 → 255, 5 → 255, 0.5 → 191
    blob = tensor_bytes(np.array([-1.0, 0.0, 1.0, 5.0, 0.5]), quantization=quant)
    assert struct.unpack_from("<IIff", blob, 44) == (8, 0x10, -1.0, 1.0)
    assert list(blob[HEADER_BYTES:]) == [0, 128, 255, 255, 191]
    tf = read_tensor_file(io.BytesIO(blob))
    assert tf.quantization == quant
    assert tf.items.tolist() == [0, 128, 255, 255, 191]
    values = read_tensor(io.BytesIO(blob))
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, np.float32([-1.0, 128 / 255 * 2 - 1, 1.0, 1.0, 191 / 255 * 2 - 1]))
    assert quant.text() == "linear_quantize(min = -1.0, max = 1.0, bits = 8)"


def test_logarithmic_unsigned_and_signed_codes():
    # max 1 → m = 0; 3 bits unsigned → r = 7: x = 0.25 → log2 -2 → q = -2 - (0 - 7) = 5
    unsigned = StoredQuantization(Quantizer.LOGARITHMIC, 0.0, 1.0, 3)
    assert unsigned.encode(np.array([0.25, 1.0, 0.0, 8.0])).tolist() == [5, 7, 0, 7]
    np.testing.assert_array_equal(unsigned.decode(np.array([5, 7, 0])), [0.25, 1.0, 2.0 ** -7])
    # signed 4 bits → r = 7 with the sign in bit 3: -0.5 → 1|110 = 14
    signed = StoredQuantization(Quantizer.LOGARITHMIC, -1.0, 1.0, 4)
    assert signed.encode(np.array([-0.5, 0.5])).tolist() == [14, 6]
    blob = tensor_bytes(np.array([-0.5, 0.5, -1.0]), quantization=signed)
    assert struct.unpack_from("<IIff", blob, 44) == (4, 0x11, -1.0, 1.0)
    assert blob[HEADER_BYTES:] == bytes([0xE6, 0xF0])            # 1110 0110 | 1111 (pad)
    np.testing.assert_array_equal(read_tensor(io.BytesIO(blob)), np.float32([-0.5, 0.5, -1.0]))


# ------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_round_trip(tmp_path, rng, dtype):
    data = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    write_tensor(tmp_path / "x.dat", data)
    out = read_tensor(tmp_path / "x.dat")
    assert out.dtype == np.dtype(dtype) and out.shape == data.shape
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize("bits", list(range(1, 65)))
@pytest.mark.parametrize("signed", [False, True])
def test_integer_round_trip_every_width(rng, bits, signed):
    if signed and bits == 1:
        lo, hi = -1, 0
    else:
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    data = rng.integers(lo, hi, size=37, endpoint=True, dtype=np.int64 if signed else np.uint64)
    data[:2] = [lo, hi]                                            # the extremes always
    blob = tensor_bytes(data, bits=bits, signed=signed)
    assert len(blob) == HEADER_BYTES + (37 * bits + 7) // 8
    out = read_tensor(io.BytesIO(blob))
    width = next(w for w in (8, 16, 32, 64) if bits <= w)
    assert out.dtype == np.dtype(f"{'i' if signed else 'u'}{width // 8}")
    assert out.tolist() == data.tolist()


@pytest.mark.parametrize("bits", [1, 2, 5, 8, 12, 16])
def test_linear_quantized_round_trip(rng, bits):
    quant = StoredQuantization(Quantizer.LINEAR, -0.75, 2.5, bits)
    items = rng.integers(0, (1 << bits) - 1, size=(3, 7), endpoint=True)
    tf = read_tensor_file(io.BytesIO(tensor_bytes(items, quantization=quant)))
    assert tf.items.tolist() == items.tolist()
    assert tf.quantization == quant
    r = (1 << bits) - 1
    np.testing.assert_allclose(tf.values(), items / r * 3.25 - 0.75, rtol=0, atol=1e-6)
    # re-encoding the decoded values gives the same items (decode is exact on the grid)
    assert quant.encode(tf.values().astype(np.float64)).tolist() == items.tolist()


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_logarithmic_signed_round_trip(rng, bits):
    quant = StoredQuantization(Quantizer.LOGARITHMIC, -4.0, 4.0, bits)
    r = (1 << (bits - 1)) - 1
    exponents = rng.integers(2 - r, 2, size=20, endpoint=True)
    x = np.exp2(exponents.astype(np.float64)) * rng.choice([-1.0, 1.0], size=20)
    values = read_tensor(io.BytesIO(tensor_bytes(x, quantization=quant)))
    np.testing.assert_array_equal(values, x.astype(np.float32))


def test_rank_zero_and_empty_tensors():
    assert read_tensor(io.BytesIO(tensor_bytes(np.float32(3.5)))).shape == ()
    empty = read_tensor(io.BytesIO(tensor_bytes(np.zeros((0, 4), dtype=np.int8), bits=4)))
    assert empty.shape == (0, 4)


def test_write_is_atomic_and_creates_folders(tmp_path):
    path = tmp_path / "conv1" / "filter.dat"
    write_tensor(path, np.ones((2, 2), np.float32))
    assert [p.name for p in path.parent.iterdir()] == ["filter.dat"]


# ------------------------------------------------------------- the Khronos `nnef` package as oracle

def test_khronos_reader_and_writer_agree(tmp_path, rng):
    binary = pytest.importorskip("nnef.binary", reason="the Khronos `nnef` package (test extra) is absent")
    cases = [rng.standard_normal((2, 3)).astype(np.float32), rng.integers(-100, 100, (4,), dtype=np.int8),
             rng.integers(0, 60000, (2, 2), dtype=np.uint16), rng.integers(-9, 9, (5,), dtype=np.int64),
             rng.random(11) > 0.5]
    for i, data in enumerate(cases):
        ours = tmp_path / f"ours{i}.dat"
        write_tensor(ours, data)
        with open(ours, "rb") as f:
            np.testing.assert_array_equal(binary.read_tensor(f), data)
        theirs = tmp_path / f"theirs{i}.dat"
        with open(theirs, "wb") as f:
            binary.write_tensor(f, data)
        out = read_tensor(theirs)
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, data)


# ------------------------------------------------------------- malformed files

def check_error(blob, tmp_path, cls, *fragments):
    path = tmp_path / "bad.dat"
    path.write_bytes(blob)
    with pytest.raises(cls) as err:
        read_tensor(path)
    text = str(err.value)
    assert str(path) in text
    for fragment in fragments:
        assert fragment in text, text
    return err.value


def test_short_file(tmp_path):
    check_error(b"N\xef\x01\x00", tmp_path, DataError, "4 bytes", "128-byte")


def test_bad_magic(tmp_path):
    check_error(header(magic=b"NN") + bytes(4), tmp_path, DataError, "0x4E 0x4E", "expected 0x4E 0xEF")


def test_bad_version(tmp_path):
    check_error(header(version=(2, 1)) + bytes(4), tmp_path, DataError, "version is 2.1", "expected 1.x")


def test_rank_too_large(tmp_path):
    check_error(header(rank=9), tmp_path, DataError, "rank is 9", "at most 8")


def test_extent_beyond_rank_not_zero(tmp_path):
    check_error(header(rank=1, extents=(1, 5)), tmp_path, DataError, "extent 1 is 5", "expected 0")


def test_unknown_code(tmp_path):
    check_error(header(code=0x12) + bytes(4), tmp_path, DataError, "algorithm code is 0x12", "0x10 (linear)")


def test_vendor_code(tmp_path):
    err = check_error(header(code=0x00070010) + bytes(4), tmp_path, UnsupportedError, "vendor code is 0x0007")
    assert err.hint


def test_float_bits(tmp_path):
    check_error(header(bits=24, data_bytes=3) + bytes(3), tmp_path, DataError, "bits per item is 24",
                "16, 32 or 64")


def test_bits_out_of_range(tmp_path):
    check_error(header(bits=65, code=1, data_bytes=9) + bytes(9), tmp_path, DataError, "bits per item is 65")


def test_data_length_disagrees_with_shape(tmp_path):
    check_error(header(data_bytes=8) + bytes(8), tmp_path, DataError,
                "header data length is 8 bytes", "expected 4 for shape [1] at 32 bits")


def test_size_mismatch_truncated(tmp_path):
    check_error(header(data_bytes=4, extents=(1,)) + bytes(3), tmp_path, DataError,
                "header data length is 4 bytes but the file has 3 bytes")


def test_size_mismatch_trailing(tmp_path):
    check_error(header() + bytes(6), tmp_path, DataError, "has 6 bytes after")


def test_logarithmic_min_must_be_zero_or_minus_max(tmp_path):
    params = struct.pack("<ff", -0.5, 2.0)
    check_error(header(code=0x11, bits=8, data_bytes=1, params=params) + bytes(1), tmp_path, DataError,
                "logarithmic_quantize min is -0.5", "expected 0 (unsigned) or -2.0")


def test_linear_max_below_min(tmp_path):
    params = struct.pack("<ff", 1.0, -1.0)
    check_error(header(code=0x10, bits=8, data_bytes=1, params=params) + bytes(1), tmp_path, DataError,
                "max -1.0 is below min 1.0")


def test_expected_shape_is_checked(tmp_path):
    path = tmp_path / "w.dat"
    write_tensor(path, np.zeros((2, 3), np.float32))
    with pytest.raises(DataError, match=r"stored shape is \[2, 3\] but the graph declares \[3, 2\]"):
        read_tensor(path, expected_shape=(3, 2))


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="cannot read tensor file .*nothere.dat"):
        read_tensor(tmp_path / "nothere.dat")


def test_writer_rejects_values_that_do_not_fit():
    with pytest.raises(DataError, match=r"values span \[-9, 3\].*signed 4-bit items \[-8, 7\]"):
        tensor_bytes(np.array([-9, 3], dtype=np.int8), bits=4)
    with pytest.raises(DataError, match="stores integers"):
        tensor_bytes(np.array([0.5]), code=ItemCode.INTEGER)
    with pytest.raises(DataError, match="needs quantization"):
        tensor_bytes(np.array([1]), code=ItemCode.LINEAR)


def test_parse_header_alone():
    h = parse_header(header(rank=2, extents=(2, 3), bits=4, code=1, data_bytes=3, params=struct.pack("<I", 1)))
    assert h.shape == (2, 3) and h.bits == 4 and h.signed and h.code is ItemCode.INTEGER


# ------------------------------------------------------------- hostile headers (issue 11)

class _Pipe(io.RawIOBase):
    """A readable stream that cannot seek (like a pipe or a socket)."""

    def __init__(self, blob):
        self.data = io.BytesIO(blob)

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self.data.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


def pipe(blob):
    return io.BufferedReader(_Pipe(blob))


def test_extents_whose_product_wraps_in_int64_are_refused(tmp_path):
    # 65536^4 = 2^64 items: an int64 product wraps to 0 and would match a data length of 0
    err = check_error(header(data_bytes=0, rank=4, extents=(65536,) * 4), tmp_path, DataError,
                      "shape [65536, 65536, 65536, 65536] at 32 bits per item needs "
                      f"{2 ** 64 * 4} bytes", "more than the 4-byte data length field can hold",
                      "(header extents, bytes 12-43)")
    assert err.location.file == str(tmp_path / "bad.dat")


def test_size_limit_is_checked_before_the_data_is_read(tmp_path, monkeypatch):
    # 2^32 - 8 one-bit items: 512 MiB of data, 4 GiB as bools; the data are absent on purpose,
    # the limit must refuse the header before anything is allocated or read
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    blob = header(data_bytes=(2 ** 32 - 8) // 8, rank=2, extents=(2 ** 29 - 1, 8), bits=1, code=ItemCode.BOOL)
    # a stream that cannot tell its size: only the limit can stop the read
    with pytest.raises(DataError, match=r"tensor file piped.dat of shape \[536870911, 8\] would take "
                                        r"4 GiB, over the 1 MiB limit") as err:
        read_tensor_file(pipe(blob), name="piped.dat")
    assert "--max-tensor-bytes" in err.value.hint


def test_every_rejected_field_names_its_header_bytes(tmp_path):
    cases = [(header(magic=b"NN"), "(header magic, bytes 0-1)"),
             (header(version=(3, 0)), "(header version, bytes 2-3)"),
             (header(rank=9), "(header rank, bytes 8-11)"),
             (header(rank=1, extents=(1, 5)), "(header extents, bytes 12-43)"),
             (header(bits=0, code=1), "(header bits per item, bytes 44-47)"),
             (header(code=0x12), "(header code, bytes 48-51)"),
             (header(data_bytes=5), "(header data length, bytes 4-7)"),
             (header(code=0x10, bits=8, data_bytes=1, params=struct.pack("<ff", 0.0, float("nan"))),
              "(header parameters, bytes 52-83)")]
    for blob, field in cases:
        check_error(blob + bytes(4), tmp_path, (DataError, UnsupportedError), field)


@pytest.mark.parametrize("code, bits, message", [
    (ItemCode.FLOAT, 8, "bits per item is 8 for float data, expected 16, 32 or 64"),
    (ItemCode.BOOL, 2, "bits per item is 2 for bool data, expected 1 or 8"),
    (ItemCode.INTEGER, 65, "bits per item is 65, expected 1..64"),
    (ItemCode.LINEAR, 0, "bits per item is 0, expected 1..64"),
])
def test_code_and_bits_combinations_the_spec_forbids(tmp_path, code, bits, message):
    check_error(header(code=code, bits=bits, data_bytes=(bits + 7) // 8) + bytes((bits + 7) // 8),
                tmp_path, DataError, message)


def test_signed_logarithmic_needs_two_bits(tmp_path):
    check_error(header(code=0x11, bits=1, data_bytes=1, params=struct.pack("<ff", -1.0, 1.0)) + bytes(1),
                tmp_path, DataError, "signed logarithmic_quantize needs at least 2 bits, got 1")


def test_linear_range_must_be_finite(tmp_path):
    check_error(header(code=0x10, bits=8, data_bytes=1, params=struct.pack("<ff", float("-inf"), 1.0))
                + bytes(1), tmp_path, DataError, "linear_quantize range [-inf, 1.0] is not finite")


def test_truncated_data_of_a_stream_that_cannot_seek(tmp_path):
    blob = tensor_bytes(np.arange(10, dtype=np.float32))[:-3]
    with pytest.raises(DataError, match="header data length is 40 bytes but the file has 37 bytes"):
        read_tensor_file(pipe(blob), name="pipe.dat")


@pytest.mark.parametrize("algorithm, lo, hi", [(Quantizer.LINEAR, -1.0, 1.0),
                                               (Quantizer.LOGARITHMIC, 0.0, 2.0 ** -100),
                                               (Quantizer.LOGARITHMIC, -8.0, 8.0)])
def test_64_bit_quantized_items_decode_without_wrapping(algorithm, lo, hi):
    """Items past 2^63 (as uint64) and m - r past -2^63 (logarithmic) are exact."""
    quant = StoredQuantization(algorithm, lo, hi, 64)
    r = quant.levels
    items = np.array([0, 1, r - 1, r], dtype=np.uint64)
    tf = read_tensor_file(io.BytesIO(tensor_bytes(items, quantization=quant)))
    assert tf.items.dtype == np.uint64 and tf.items.tolist() == [0, 1, r - 1, r]
    values = quant.decode(tf.items)
    if algorithm is Quantizer.LINEAR:
        assert values.tolist() == [-1.0, -1.0, 1.0, 1.0]   # q/r * 2 - 1 in float64
    elif lo == 0.0:
        # 2^(q + m - r), m = -100: the top item is max, one below it half of max
        assert values[-1] == 2.0 ** -100 and values[-2] == 2.0 ** -101 and values[0] == 0.0
    else:
        # signed: the top bit is the sign; r = 2^63 - 1, m = 3
        assert values[-1] == 8.0 and values[-2] == 4.0


def test_writer_refuses_what_a_tensor_file_cannot_hold():
    big = np.broadcast_to(np.float32(0), (2 ** 30 + 1,))   # 4 GiB + 4 bytes of data, no memory
    with pytest.raises(DataError, match="more than the 4 GiB a tensor file holds"):
        tensor_bytes(big)


def test_zero_extent_among_huge_ones_names_the_extents(tmp_path):
    """A zero extent among huge ones: no items, but no array can have the shape (numpy's
    reshape refused it with a ValueError before the header check named the field)."""
    err = check_error(header(data_bytes=0, rank=3, extents=(0, 2 ** 32 - 1, 2 ** 32 - 1)), tmp_path, DataError,
                      "shape [0, 4294967295, 4294967295] has a zero extent", "header extents, bytes 12-43")
    assert "4 GiB" in err.hint


def test_zero_extent_among_moderate_ones_reads_an_empty_tensor(tmp_path):
    path = tmp_path / "empty.dat"
    path.write_bytes(header(data_bytes=0, rank=3, extents=(3, 0, 1 << 20)))
    assert read_tensor(path).shape == (3, 0, 1 << 20)
