"""The NNEF binary tensor file (`.dat`), read and write: NNEF 1.0 section 5.2.

NNEF 2.0 keeps the same format ("the same way as NNEF 1.x did"), so both front
ends, the writer and the exporters use this one module.

Layout (all little-endian, 128-byte header, then the data):

    offset  size  field
         0     2  magic 'N' 0xEF
         2     2  version major, minor
         4     4  data length in bytes (from offset 128)
         8     4  rank (at most 8)
        12    32  8 extents, zero beyond the rank
        44     4  bits per item (1..64)
        48     4  code: algorithm (low 16 bits) and vendor (high 16 bits), vendor 0 = Khronos
        52    32  parameters of the code
        84    44  reserved, zero

Decisions where 5.2 is silent or ambiguous (also in docs/nnef1.md):
- The code is read as one little-endian u32 whose value is the Khronos
  algorithm code (0x00, 0x01, 0x10, 0x11) when the vendor is Khronos, as the
  Khronos tools write it; the vendor is the upper half.
- The later NNEF 1.0.x revisions (and `nnef-tools`) number the integer kinds
  0x01 unsigned, 0x02 quantized unsigned, 0x03 quantized signed, 0x04 signed,
  0x05 bool. Codes 0x02..0x05 do not clash with 5.2, so they are read too;
  0x01 with a non-zero first parameter is signed in both.
- Item widths that are a multiple of 8 are stored as little-endian bytes per
  item. Other widths (1..63 bits) form one bit stream, each item most
  significant bit first and bytes filled from their most significant bit, the
  way `numpy.packbits` and nnef-tools store 1-bit items; the last byte is
  zero-padded.
- Signed logarithmic codes (min = -max) are sign and magnitude: the item's top
  bit is the sign, the other b-1 bits are the code q of 5.2 with r = 2^(b-1)-1.
- Rounding in the encoders is the NNEF `round`: floor(x + 0.5) (4.2.1).
- Reading validates every header field before any data is read: magic, version 1.x, rank
  <= 8, zero extents past the rank, the code and the bits it allows, parameters (finite
  min <= max), and the data length against shape x bits computed in Python integers (a
  shape needing more than the u32 data length field can hold is refused). The tensor is
  then checked against qsim.limits before its data are read. Errors name the field and its
  header bytes. The reserved bytes "should" be zero (5.2): they are not checked.
- Version: qsim reads major version 1 (NNEF 2.0 keeps this format and its version).
"""
from __future__ import annotations

import contextlib
import enum
import io
import math
import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Union

import numpy as np

from .atomic import atomic_write_bytes
from .errors import DataError, Location, UnsupportedError
from .limits import check_tensor_size
from .numerics import nnef_round
from .tensorbits import pack_items, unpack_items

HEADER_BYTES = 128
MAX_RANK = 8
MAGIC = b"N\xef"
_PARAM_BYTES = 32

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]


class ItemCode(enum.IntEnum):
    """Khronos algorithm codes (5.2), plus the later 1.0.x revision's integer kinds."""
    FLOAT = 0x00
    INTEGER = 0x01             # 5.2: first parameter u32 != 0 means signed
    QUANTIZED_UNSIGNED = 0x02  # revision: raw unsigned ints, quantization lives in graph.quant
    QUANTIZED_SIGNED = 0x03    # revision: raw signed ints, quantization lives in graph.quant
    SIGNED_INTEGER = 0x04      # revision
    BOOL = 0x05                # revision: 1 bit per item
    LINEAR = 0x10              # linear_quantize indices, parameters min, max (f32)
    LOGARITHMIC = 0x11         # logarithmic_quantize codes, parameters min, max (f32)


class Quantizer(enum.Enum):
    LINEAR = "linear_quantize"
    LOGARITHMIC = "logarithmic_quantize"


@dataclass(frozen=True)
class StoredQuantization:
    """How the items of a quantized tensor file map to real values (5.2).

    Linear: item q in [0, r], r = 2^bits - 1, real = q / r * (max - min) + min.
    Logarithmic: min = 0 (unsigned) or -max (signed); m = ceil(log2 max);
    real = ±2^(q + m - r), with one bit of the item spent on the sign when signed.
    """
    algorithm: Quantizer
    min: float
    max: float
    bits: int

    @property
    def signed(self) -> bool:
        return self.algorithm is Quantizer.LOGARITHMIC and self.min < 0

    @property
    def code(self) -> ItemCode:
        return ItemCode.LINEAR if self.algorithm is Quantizer.LINEAR else ItemCode.LOGARITHMIC

    @property
    def levels(self) -> int:
        """r of 5.2: the largest magnitude code."""
        return (1 << (self.bits - (1 if self.signed else 0))) - 1

    def text(self) -> str:
        """The algorithm as NNEF text, as graph.quant would hold it (7.1)."""
        if self.algorithm is Quantizer.LINEAR:
            return f"linear_quantize(min = {self.min!r}, max = {self.max!r}, bits = {self.bits})"
        return f"logarithmic_quantize(max = {self.max!r}, bits = {self.bits})"

    def check(self, where: str) -> None:
        """Raises DataError (located at `where`) when the parameters cannot describe a tensor."""
        def fail(message: str, hint: str | None = None):
            raise DataError(message, location=Location(where), hint=hint)

        name = self.algorithm.value
        if not (1 <= self.bits <= 64):
            fail(f"{name} bits is {self.bits}, expected 1..64")
        if not (np.isfinite(self.min) and np.isfinite(self.max)):
            fail(f"{name} range [{self.min}, {self.max}] is not finite")
        if self.algorithm is Quantizer.LINEAR:
            if self.max < self.min:
                fail(f"linear_quantize max {self.max} is below min {self.min}",
                     "min is the value of the all-zero item, max of the all-one item")
            return
        if self.max <= 0:
            fail(f"logarithmic_quantize max is {self.max}, expected > 0")
        if self.min != 0 and self.min != -self.max:
            fail(f"logarithmic_quantize min is {self.min}, expected 0 (unsigned) or {-self.max} "
                 "(signed, = -max) (NNEF 1.0 section 5.2)")
        if self.signed and self.bits < 2:
            fail(f"signed logarithmic_quantize needs at least 2 bits, got {self.bits}")

    def decode(self, items: np.ndarray) -> np.ndarray:
        """Items as stored → the real values they stand for (float64)."""
        # in float64: items of up to 64 bits are unsigned here, and m - r can pass -2**63
        items = np.asarray(items)
        r = self.levels
        if self.algorithm is Quantizer.LINEAR:
            q = items.astype(np.float64)
            return q / float(r) * (self.max - self.min) + self.min
        # 2^(q + m - r) as 2^(m - d) with d = r - q taken in uint64: exact for any width
        m = int(np.ceil(np.log2(self.max)))
        unsigned = items.astype(np.uint64)
        magnitude = unsigned & np.uint64(r)
        power = np.exp2(float(m) - (np.uint64(r) - magnitude).astype(np.float64))
        if self.signed:
            negative = (unsigned >> np.uint64(self.bits - 1)) & np.uint64(1)
            return np.where(negative == 1, -1.0, 1.0) * power
        return power

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Real values → items (uint64), by the encoding formulas of 5.2.

        The formulas are evaluated in float64: exact up to 53 bits per item; wider codes round
        (and an item never passes r)."""
        x = np.asarray(values, dtype=np.float64)
        r = self.levels
        if self.algorithm is Quantizer.LINEAR:
            if self.max == self.min:
                return np.zeros(x.shape, dtype=np.uint64)
            with np.errstate(over="ignore", invalid="ignore"):
                t = np.clip((x - self.min) / (self.max - self.min), 0.0, 1.0)
            return _to_items(nnef_round(t * float(r)), r)
        # q = round(clamp(log2 |x|, m - r, m)) - (m - r), as r - d with d = m - round(...) in [0, r]
        m = int(np.ceil(np.log2(self.max)))
        with np.errstate(divide="ignore"):
            log = np.log2(np.abs(x))  # log2 0 = -inf, clamped below
        d = _to_items(float(m) - nnef_round(np.clip(log, float(m - r), float(m))), r)
        q = np.uint64(r) - d
        if self.signed:
            q = q | (np.signbit(x).astype(np.uint64) << np.uint64(self.bits - 1))
        return q


def _to_items(q: np.ndarray, r: int) -> np.ndarray:
    """Non-negative integral float64 codes → uint64 items, clamped to r (float64(r) may be r + 1)."""
    below_r = np.nextafter(float(r), 0.0) if float(r) > r else float(r)
    items = np.minimum(np.nan_to_num(q, nan=0.0), below_r).astype(np.uint64)
    items[q >= float(r)] = np.uint64(r)
    return items


@dataclass(frozen=True)
class TensorHeader:
    version: tuple[int, int]
    data_bytes: int
    shape: tuple[int, ...]
    bits: int
    code: ItemCode
    params: bytes  # the 32 parameter bytes, as stored

    @property
    def count(self) -> int:
        """Number of items, as a Python int (never wraps, whatever the extents)."""
        return math.prod(self.shape)

    @property
    def signed(self) -> bool:
        """Whether the stored items are two's complement signed integers."""
        if self.code is ItemCode.INTEGER:
            return struct.unpack_from("<I", self.params, 0)[0] != 0
        return self.code in (ItemCode.SIGNED_INTEGER, ItemCode.QUANTIZED_SIGNED)

    @property
    def quantization(self) -> StoredQuantization | None:
        """min/max/bits of a linear or logarithmic file, else None."""
        if self.code not in (ItemCode.LINEAR, ItemCode.LOGARITHMIC):
            return None
        lo, hi = struct.unpack_from("<ff", self.params, 0)
        algorithm = Quantizer.LINEAR if self.code is ItemCode.LINEAR else Quantizer.LOGARITHMIC
        return StoredQuantization(algorithm, float(lo), float(hi), self.bits)

    @property
    def item_dtype(self) -> np.dtype:
        """The numpy dtype of the items as read: float16/32/64, bool, or the narrowest integer."""
        if self.code is ItemCode.FLOAT:
            return np.dtype(f"f{self.bits // 8}")
        if self.code is ItemCode.BOOL:
            return np.dtype(np.bool_)
        width = next(w for w in (8, 16, 32, 64) if self.bits <= w)
        return np.dtype(f"{'i' if self.signed else 'u'}{width // 8}")


@dataclass(frozen=True)
class TensorFile:
    """A whole tensor file: its header and its items as stored (indices for quantized codes)."""
    header: TensorHeader
    items: np.ndarray

    @property
    def quantization(self) -> StoredQuantization | None:
        return self.header.quantization

    def values(self) -> np.ndarray:
        """What the tensor holds: the items, or for codes 0x10/0x11 their real values (float32)."""
        quant = self.header.quantization
        if quant is None:
            return self.items
        return quant.decode(self.items).astype(np.float32)


def read_tensor(source: PathOrFile, expected_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Reads a `.dat` file and returns the tensor it holds.

    Float and integer files give their items (float16/32/64; the narrowest
    numpy integer holding `bits`, signed or not; bool for code 0x05);
    linear/logarithmic files give the real values they encode as float32 (use
    `read_tensor_file` for the stored indices and the min/max/bits).
    `expected_shape`: raise DataError unless the stored shape equals it.
    """
    return read_tensor_file(source, expected_shape).values()


def read_tensor_file(source: PathOrFile, expected_shape: tuple[int, ...] | None = None, *,
                     name: str | None = None) -> TensorFile:
    """Reads a `.dat` file: its header and its items as stored.

    The header is validated field by field first; the data are read only when their size agrees
    with the header and the tensor is within qsim.limits (checked before allocating).
    `name`: how messages call the file (default: its path or the stream's name).
    """
    name = name or _name_of(source)
    where = Location(name)
    with _opened(source, name) as stream:
        head = stream.read(HEADER_BYTES)
        header = parse_header(head, name)
        if expected_shape is not None and tuple(expected_shape) != header.shape:
            raise DataError(f"stored shape is {list(header.shape)} but the graph declares "
                            f"{list(expected_shape)}", location=where,
                            hint="the tensor file belongs to another model version, or the graph's shape is wrong")
        remaining = _remaining_bytes(stream)
        if remaining is not None and remaining != header.data_bytes:
            _size_mismatch(name, header.data_bytes, remaining)
        # the items as read, and for quantized codes their float32 values, must fit the limit
        itemsize = max(header.item_dtype.itemsize, 4 if header.quantization is not None else 0)
        check_tensor_size(header.shape, itemsize, f"tensor file {name}", where)
        data = stream.read(header.data_bytes)
        if len(data) != header.data_bytes or (remaining is None and stream.read(1)):
            _size_mismatch(name, header.data_bytes, len(data) if len(data) != header.data_bytes else None)
    raw = np.frombuffer(data, dtype=np.uint8)
    if header.code is ItemCode.BOOL:
        items = (raw != 0) if header.bits == 8 else np.unpackbits(raw, count=header.count).astype(np.bool_)
    else:
        items = unpack_items(raw, header.count, header.bits, header.item_dtype)
    items = items.reshape(header.shape)
    return TensorFile(header, items)


def _size_mismatch(name: str, expected: int, actual: int | None):
    found = (f"the file has {actual} bytes" if actual is not None else "the file has more bytes")
    raise DataError(f"header data length is {expected} bytes but {found} after the {HEADER_BYTES}-byte "
                    f"header (header data length, bytes {_FIELD_BYTES['data length']})",
                    location=Location(name), hint="the file is truncated or has trailing bytes")


# Header fields of 5.2 and the bytes they occupy, for messages that say which field is wrong.
_FIELD_BYTES = {"magic": "0-1", "version": "2-3", "data length": "4-7", "rank": "8-11",
                "extents": "12-43", "bits per item": "44-47", "code": "48-51", "parameters": "52-83"}
_MAX_DATA_BYTES = 0xFFFFFFFF   # the data length field is a u32


def parse_header(blob: bytes, name: str = "<tensor>") -> TensorHeader:
    """Validates and decodes the 128-byte header at the start of `blob`.

    Every field is checked against 5.2 and against the others (bits against the code, the data
    length against shape x bits, computed in Python integers so huge extents cannot wrap);
    each failure names the field, its bytes in the header, the value found and what was expected.
    """
    where = Location(name)

    def fail(field: str, message: str, hint: str | None = None, cls=DataError):
        raise cls(f"{message} (header {field}, bytes {_FIELD_BYTES[field]})", location=where,
                  hint=hint)

    if len(blob) < HEADER_BYTES:
        raise DataError(f"file is {len(blob)} bytes, shorter than the {HEADER_BYTES}-byte "
                        "tensor header", location=where, hint="not an NNEF tensor file, or truncated")
    if blob[:2] != MAGIC:
        fail("magic", f"magic number is 0x{blob[0]:02X} 0x{blob[1]:02X}, expected 0x4E 0xEF ('N' 0xEF)",
             "not an NNEF tensor file (NNEF 1.0 section 5.2)")
    major, minor = blob[2], blob[3]
    if major != 1:
        fail("version", f"version is {major}.{minor}, expected 1.x",
             "qsim reads tensor file format 1.x (NNEF 1.0 section 5.2, kept by NNEF 2.0)")
    data_bytes, rank = struct.unpack_from("<II", blob, 4)
    extents = struct.unpack_from(f"<{MAX_RANK}I", blob, 12)
    bits, code_word = struct.unpack_from("<II", blob, 44)
    params = bytes(blob[52:52 + _PARAM_BYTES])
    if rank > MAX_RANK:
        fail("rank", f"rank is {rank}, expected at most {MAX_RANK}")
    for axis in range(rank, MAX_RANK):
        if extents[axis] != 0:
            fail("extents", f"extent {axis} is {extents[axis]} beyond rank {rank}, expected 0",
                 "extents past the rank must be zero (NNEF 1.0 section 5.2)")
    vendor, algorithm = code_word >> 16, code_word & 0xFFFF
    if vendor != 0:
        fail("code", f"quantization vendor code is 0x{vendor:04X}, expected 0x0000 (Khronos)",
             "vendor-specific encodings are not readable without that vendor's tools", UnsupportedError)
    try:
        code = ItemCode(algorithm)
    except ValueError:
        fail("code", f"quantization algorithm code is 0x{algorithm:02X}, expected one of "
             + ", ".join(f"0x{c.value:02X} ({c.name.lower()})" for c in ItemCode))
    if code is ItemCode.FLOAT and bits not in (16, 32, 64):
        fail("bits per item", f"bits per item is {bits} for float data, expected 16, 32 or 64")
    if code is ItemCode.BOOL and bits not in (1, 8):
        fail("bits per item", f"bits per item is {bits} for bool data, expected 1 or 8")
    if not 1 <= bits <= 64:
        fail("bits per item", f"bits per item is {bits}, expected 1..64")
    shape = tuple(int(e) for e in extents[:rank])
    header = TensorHeader((major, minor), int(data_bytes), shape, int(bits), code, params)
    needed = packed_bytes(header.count, bits)
    if needed > _MAX_DATA_BYTES:
        fail("extents", f"shape {list(shape)} at {bits} bits per item needs {needed} bytes of data, "
             f"more than the 4-byte data length field can hold ({_MAX_DATA_BYTES})",
             "the extents are corrupt; a tensor file holds at most 4 GiB of data")
    # An empty tensor's other extents still have to describe an array: numpy refuses shapes whose
    # non-zero extents multiply past its index range, and no model has a [0, 2^32-1, 2^32-1]
    # tensor. They are held to the same 4 GiB as a tensor whose zero extents were 1.
    span = packed_bytes(math.prod(e for e in shape if e != 0), bits)
    if header.count == 0 and span > _MAX_DATA_BYTES:
        fail("extents", f"shape {list(shape)} has a zero extent, but its other extents at {bits} bits per "
             f"item span {span} bytes, more than the 4-byte data length field can hold ({_MAX_DATA_BYTES})",
             "the extents are corrupt: an empty tensor's other extents must still describe at most "
             "4 GiB of data")
    if data_bytes != needed:
        fail("data length", f"header data length is {data_bytes} bytes, expected {needed} for shape "
             f"{list(shape)} at {bits} bits per item")
    quant = header.quantization
    if quant is not None:
        try:
            quant.check(name)
        except DataError as err:
            raise DataError(f"{err.message} (header parameters, bytes {_FIELD_BYTES['parameters']})",
                            location=where, hint=err.hint) from None
    return header


def packed_bytes(count: int, bits: int) -> int:
    """Bytes that `count` items of `bits` bits take in a bit stream, padded to a byte."""
    return (count * bits + 7) // 8


def write_tensor(target: PathOrFile, array: np.ndarray, *, code: ItemCode | None = None,
                 bits: int | None = None, signed: bool | None = None,
                 quantization: StoredQuantization | None = None,
                 version: tuple[int, int] = (1, 0)) -> None:
    """Writes `array` as a `.dat` file (to a path atomically, or to an open binary file).

    Defaults follow the array's dtype: floats → code 0x00 at their width; bool →
    code 0x05 at 1 bit; integers → code 0x01 at their width with their
    signedness. `bits` narrows integers (e.g. 4 for int4, bit-packed); values
    must fit. For code LINEAR/LOGARITHMIC pass `quantization` (its bits win);
    a float array is encoded with it, an integer array is taken as the items.
    """
    array = np.asarray(array)
    name = _name_of(target)
    if quantization is not None:
        if code is not None and code is not quantization.code:
            raise DataError(f"{name}: code {ItemCode(code).name} disagrees with "
                            f"{quantization.algorithm.value} quantization")
        code = quantization.code
        quantization.check(name)
    if code is None:
        if array.dtype == np.bool_:
            code = ItemCode.BOOL
        elif array.dtype.kind == "f":
            code = ItemCode.FLOAT
        elif array.dtype.kind in "iu":
            code = ItemCode.INTEGER
        else:
            raise DataError(f"{name}: cannot store numpy dtype {array.dtype} in a tensor file")
    code = ItemCode(code)
    if array.ndim > MAX_RANK:
        raise DataError(f"{name}: rank is {array.ndim}, tensor files hold at most {MAX_RANK}")
    if any(extent > 0xFFFFFFFF for extent in array.shape):
        raise DataError(f"{name}: shape {list(array.shape)} has an extent past the 4-byte field of 5.2")
    bits = _item_bits(name, array, code, bits, quantization)
    if packed_bytes(array.size, bits) > _MAX_DATA_BYTES:   # checked before converting anything
        raise DataError(f"{name}: {array.size} items of {bits} bits are more than the 4 GiB a tensor "
                        "file holds (its data length field has 4 bytes, NNEF 1.0 section 5.2)")
    params = bytearray(_PARAM_BYTES)
    item_signed = False
    if code in (ItemCode.LINEAR, ItemCode.LOGARITHMIC):
        items = quantization.encode(array) if array.dtype.kind == "f" else array
        struct.pack_into("<ff", params, 0, quantization.min, quantization.max)
        limit = (1 << bits) - 1
        if items.size and (int(items.min()) < 0 or int(items.max()) > limit):
            raise DataError(f"{name}: quantized items span [{items.min()}, {items.max()}], "
                            f"expected 0..{limit} for {bits} bits")
    elif code is ItemCode.FLOAT:
        items = array if array.dtype.kind == "f" else array.astype(np.float64)   # _pack narrows
    elif code is ItemCode.BOOL:
        items = array if array.dtype == np.bool_ else array != 0
    else:
        if array.dtype.kind not in "iub":
            raise DataError(f"{name}: code {code.name} stores integers, got {array.dtype} data",
                            hint="round or cast the data first")
        if signed is None:
            signed = code in (ItemCode.SIGNED_INTEGER, ItemCode.QUANTIZED_SIGNED) or array.dtype.kind == "i"
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        if array.size and (int(array.min()) < lo or int(array.max()) > hi):
            raise DataError(f"{name}: values span [{array.min()}, {array.max()}], which does not fit "
                            f"{'signed' if signed else 'unsigned'} {bits}-bit items [{lo}, {hi}]")
        if code is ItemCode.INTEGER:
            struct.pack_into("<I", params, 0, 1 if signed else 0)
        items = array
        item_signed = signed
    payload = pack_items(np.ascontiguousarray(items).reshape(-1), bits, item_signed)
    header = bytearray(HEADER_BYTES)
    header[0:2] = MAGIC
    header[2], header[3] = version
    struct.pack_into("<II", header, 4, len(payload), array.ndim)
    struct.pack_into(f"<{array.ndim}I", header, 12, *array.shape)
    struct.pack_into("<II", header, 44, bits, int(code))
    header[52:52 + _PARAM_BYTES] = params
    _write_all(target, bytes(header) + payload)


def _item_bits(name: str, array: np.ndarray, code: ItemCode, bits: int | None,
               quantization: StoredQuantization | None) -> int:
    """Bits per item for writing `array` with `code` (the caller's `bits`, else the default)."""
    if code in (ItemCode.LINEAR, ItemCode.LOGARITHMIC):
        if quantization is None:
            raise DataError(f"{name}: code {code.name} needs quantization=StoredQuantization(...)")
        return quantization.bits
    if code is ItemCode.FLOAT:
        bits = bits or (array.dtype.itemsize * 8 if array.dtype.kind == "f" else 32)
        if bits not in (16, 32, 64):
            raise DataError(f"{name}: float data has {bits} bits per item, expected 16, 32 or 64")
        return bits
    if code is ItemCode.BOOL:
        bits = bits or 1
        if bits not in (1, 8):
            raise DataError(f"{name}: bool data has {bits} bits per item, expected 1 or 8")
        return bits
    bits = bits or array.dtype.itemsize * 8
    if not 1 <= bits <= 64:
        raise DataError(f"{name}: integer data has {bits} bits per item, expected 1..64")
    return bits


# ---------------------------------------------------------------- file access

def relative_parts(name: str) -> list[str] | None:
    """'a/./b//c.dat' → ['a', 'b', 'c.dat'] ('\\' counts as '/'), '.' → []; None for a name that
    is absolute (also 'C:...'), has a '..' component or a NUL, i.e. that could leave its folder."""
    text = name.replace("\\", "/")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if text.startswith("/") or (len(text) > 1 and text[1] == ":") or ".." in parts or "\0" in text:
        return None
    return parts


def resolve_tensor_path(root: str, relative: str, what: str, location: Location | None = None) -> str:
    """The path of a tensor file a model names (e.g. a variable label + '.dat') under `root`.

    `relative` is '/'-separated ('\\' counts as '/'); absolute names, '..' components and
    names that resolve (through symbolic links) outside `root` are refused with a DataError
    saying "<what> names ...", so a model can only read files inside its own folder.
    """
    parts = relative_parts(relative)
    if not parts:
        raise DataError(f"{what} names '{relative}', which is not a path inside the model folder", location=location,
                        hint="tensor files are named by relative paths without '..' (refused for safety)")
    full = os.path.join(root, *parts)
    real_root, real = os.path.realpath(root), os.path.realpath(full)
    if os.path.commonpath([real_root, real]) != real_root:
        raise DataError(f"{what} names {full}, which resolves to {real}, outside the model folder {real_root}",
                        location=location, hint="a model reads only files inside its folder; copy the "
                                                "file in instead of linking to it")
    return full


def _name_of(source: PathOrFile) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", "<tensor stream>"))


@contextlib.contextmanager
def _opened(source: PathOrFile, name: str):
    """The source as a binary stream (a path is opened and closed; a stream is used as is)."""
    if not isinstance(source, (str, os.PathLike)):
        yield source
        return
    try:
        stream = open(source, "rb")
    except OSError as err:
        raise DataError(f"cannot read tensor file {name}: {err.strerror}", location=Location(name)) from None
    with stream:
        yield stream


def _remaining_bytes(stream: BinaryIO) -> int | None:
    """Bytes left in a seekable stream (None when it cannot tell), without reading them."""
    try:
        if not stream.seekable():
            return None
        here = stream.tell()
        end = stream.seek(0, io.SEEK_END)
        stream.seek(here)
        return end - here
    except (OSError, AttributeError, ValueError):
        return None


def _write_all(target: PathOrFile, blob: bytes) -> None:
    """A path is written through a temporary name (atomic.py), so a half-written file never
    looks whole; a stream is written as is."""
    if isinstance(target, (str, os.PathLike)):
        atomic_write_bytes(target, blob)
    else:
        target.write(blob)


def tensor_bytes(array: np.ndarray, **kwargs) -> bytes:
    """The `.dat` encoding of `array` as bytes (same keywords as `write_tensor`)."""
    buffer = io.BytesIO()
    write_tensor(buffer, array, **kwargs)
    return buffer.getvalue()
