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
"""
from __future__ import annotations

import enum
import io
import os
import struct
import tempfile
from dataclasses import dataclass
from typing import BinaryIO, Union

import numpy as np

from .errors import DataError, Location, UnsupportedError

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
        """Raises DataError when the parameters cannot describe a tensor."""
        if not (1 <= self.bits <= 64):
            raise DataError(f"{where}: {self.algorithm.value} bits is {self.bits}, expected 1..64")
        if not (np.isfinite(self.min) and np.isfinite(self.max)):
            raise DataError(f"{where}: {self.algorithm.value} range [{self.min}, {self.max}] is not finite")
        if self.algorithm is Quantizer.LINEAR:
            if self.max < self.min:
                raise DataError(f"{where}: linear_quantize max {self.max} is below min {self.min}",
                                hint="min is the value of the all-zero item, max of the all-one item")
            return
        if self.max <= 0:
            raise DataError(f"{where}: logarithmic_quantize max is {self.max}, expected > 0")
        if self.min != 0 and self.min != -self.max:
            raise DataError(f"{where}: logarithmic_quantize min is {self.min}, expected 0 (unsigned) "
                            f"or {-self.max} (signed, = -max) (NNEF 1.0 section 5.2)")
        if self.signed and self.bits < 2:
            raise DataError(f"{where}: signed logarithmic_quantize needs at least 2 bits, got {self.bits}")

    def decode(self, items: np.ndarray) -> np.ndarray:
        """Items as stored → the real values they stand for (float64)."""
        q = np.asarray(items).astype(np.int64)
        r = self.levels
        if self.algorithm is Quantizer.LINEAR:
            if r == 0:
                return np.full(q.shape, self.min, dtype=np.float64)
            return q / r * (self.max - self.min) + self.min
        m = int(np.ceil(np.log2(self.max)))
        if self.signed:
            negative = (q >> (self.bits - 1)) & 1
            magnitude = q & r
            return np.where(negative == 1, -1.0, 1.0) * np.exp2(magnitude + (m - r))
        return np.exp2(q + (m - r))

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Real values → items (int64), by the encoding formulas of 5.2."""
        x = np.asarray(values, dtype=np.float64)
        r = self.levels
        if self.algorithm is Quantizer.LINEAR:
            if self.max == self.min:
                return np.zeros(x.shape, dtype=np.int64)
            t = np.clip((x - self.min) / (self.max - self.min), 0.0, 1.0)
            return np.floor(t * r + 0.5).astype(np.int64)
        m = int(np.ceil(np.log2(self.max)))
        with np.errstate(divide="ignore"):
            log = np.log2(np.abs(x))  # log2 0 = -inf, clamped below
        q = np.floor(np.clip(log, m - r, m) + 0.5).astype(np.int64) - (m - r)
        if self.signed:
            q = q | (np.signbit(x).astype(np.int64) << (self.bits - 1))
        return q


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
        return int(np.prod(self.shape, dtype=np.int64))

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


def read_tensor_file(source: PathOrFile, expected_shape: tuple[int, ...] | None = None) -> TensorFile:
    """Reads a `.dat` file: its header and its items as stored."""
    name, blob = _read_all(source)
    header = parse_header(blob, name)
    where = Location(name)
    available = len(blob) - HEADER_BYTES
    if available != header.data_bytes:
        raise DataError(f"{name}: header data length is {header.data_bytes} bytes but the file has "
                        f"{available} bytes after the {HEADER_BYTES}-byte header",
                        location=where, hint="the file is truncated or has trailing bytes")
    if expected_shape is not None and tuple(expected_shape) != header.shape:
        raise DataError(f"{name}: stored shape is {list(header.shape)} but the graph declares "
                        f"{list(expected_shape)}", location=where,
                        hint="the tensor file belongs to another model version, or the graph's shape is wrong")
    raw = np.frombuffer(blob, dtype=np.uint8, offset=HEADER_BYTES)
    items = _unpack(raw, header).reshape(header.shape)
    return TensorFile(header, items)


def parse_header(blob: bytes, name: str = "<tensor>") -> TensorHeader:
    """Validates and decodes the 128-byte header at the start of `blob`."""
    where = Location(name)

    def fail(message: str, hint: str | None = None, cls=DataError):
        raise cls(f"{name}: {message}", location=where, hint=hint)

    if len(blob) < HEADER_BYTES:
        fail(f"file is {len(blob)} bytes, shorter than the {HEADER_BYTES}-byte tensor header",
             "not an NNEF tensor file, or truncated")
    if blob[:2] != MAGIC:
        fail(f"magic number is 0x{blob[0]:02X} 0x{blob[1]:02X}, expected 0x4E 0xEF ('N' 0xEF)",
             "not an NNEF tensor file (NNEF 1.0 section 5.2)")
    major, minor = blob[2], blob[3]
    if major != 1:
        fail(f"version is {major}.{minor}, expected 1.x", "qsim reads tensor files of NNEF 1.x and 2.x")
    data_bytes, rank = struct.unpack_from("<II", blob, 4)
    extents = struct.unpack_from(f"<{MAX_RANK}I", blob, 12)
    bits, code_word = struct.unpack_from("<II", blob, 44)
    params = bytes(blob[52:52 + _PARAM_BYTES])
    if rank > MAX_RANK:
        fail(f"rank is {rank}, expected at most {MAX_RANK}")
    for axis in range(rank, MAX_RANK):
        if extents[axis] != 0:
            fail(f"extent {axis} is {extents[axis]} beyond rank {rank}, expected 0",
                 "extents past the rank must be zero (NNEF 1.0 section 5.2)")
    vendor, algorithm = code_word >> 16, code_word & 0xFFFF
    if vendor != 0:
        fail(f"quantization vendor code is 0x{vendor:04X}, expected 0x0000 (Khronos)",
             "vendor-specific encodings are not readable without that vendor's tools", UnsupportedError)
    try:
        code = ItemCode(algorithm)
    except ValueError:
        fail(f"quantization algorithm code is 0x{algorithm:02X}, expected one of "
             + ", ".join(f"0x{c.value:02X} ({c.name.lower()})" for c in ItemCode))
    if code is ItemCode.FLOAT and bits not in (16, 32, 64):
        fail(f"bits per item is {bits} for float data, expected 16, 32 or 64")
    if code is ItemCode.BOOL and bits not in (1, 8):
        fail(f"bits per item is {bits} for bool data, expected 1 or 8")
    if not 1 <= bits <= 64:
        fail(f"bits per item is {bits}, expected 1..64")
    shape = tuple(int(e) for e in extents[:rank])
    header = TensorHeader((major, minor), int(data_bytes), shape, int(bits), code, params)
    needed = packed_bytes(header.count, bits)
    if data_bytes != needed:
        fail(f"header data length is {data_bytes} bytes, expected {needed} for shape {list(shape)} "
             f"at {bits} bits per item")
    quant = header.quantization
    if quant is not None:
        quant.check(name)
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
    params = bytearray(_PARAM_BYTES)
    if code in (ItemCode.LINEAR, ItemCode.LOGARITHMIC):
        if quantization is None:
            raise DataError(f"{name}: code {code.name} needs quantization=StoredQuantization(...)")
        bits = quantization.bits
        items = quantization.encode(array) if array.dtype.kind == "f" else array.astype(np.int64)
        struct.pack_into("<ff", params, 0, quantization.min, quantization.max)
        item_signed = False
        limit = (1 << bits) - 1
        if items.size and (items.min() < 0 or items.max() > limit):
            raise DataError(f"{name}: quantized items span [{items.min()}, {items.max()}], "
                            f"expected 0..{limit} for {bits} bits")
    elif code is ItemCode.FLOAT:
        if bits is None:
            bits = array.dtype.itemsize * 8 if array.dtype.kind == "f" else 32
        if bits not in (16, 32, 64):
            raise DataError(f"{name}: float data has {bits} bits per item, expected 16, 32 or 64")
        items = array.astype(f"<f{bits // 8}")
        item_signed = False
    elif code is ItemCode.BOOL:
        bits = bits or 1
        if bits not in (1, 8):
            raise DataError(f"{name}: bool data has {bits} bits per item, expected 1 or 8")
        items = array.astype(np.bool_).astype(np.uint8)
        item_signed = False
    else:
        if array.dtype.kind not in "iub":
            raise DataError(f"{name}: code {code.name} stores integers, got {array.dtype} data",
                            hint="round or cast the data first")
        if signed is None:
            signed = code in (ItemCode.SIGNED_INTEGER, ItemCode.QUANTIZED_SIGNED) or array.dtype.kind == "i"
        bits = bits or array.dtype.itemsize * 8
        if not 1 <= bits <= 64:
            raise DataError(f"{name}: integer data has {bits} bits per item, expected 1..64")
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        if array.size and (int(array.min()) < lo or int(array.max()) > hi):
            raise DataError(f"{name}: values span [{array.min()}, {array.max()}], which does not fit "
                            f"{'signed' if signed else 'unsigned'} {bits}-bit items [{lo}, {hi}]")
        if code is ItemCode.INTEGER:
            struct.pack_into("<I", params, 0, 1 if signed else 0)
        items = array
        item_signed = signed
    payload = _pack(np.ascontiguousarray(items).reshape(-1), bits, item_signed)
    header = bytearray(HEADER_BYTES)
    header[0:2] = MAGIC
    header[2], header[3] = version
    struct.pack_into("<II", header, 4, len(payload), array.ndim)
    struct.pack_into(f"<{array.ndim}I", header, 12, *array.shape)
    struct.pack_into("<II", header, 44, bits, int(code))
    header[52:52 + _PARAM_BYTES] = params
    _write_all(target, bytes(header) + payload)


# ---------------------------------------------------------------- bit packing

def _pack(items: np.ndarray, bits: int, signed: bool) -> bytes:
    """Items (flat) → bytes: little-endian per item for whole bytes, else an MSB-first bit stream."""
    if items.dtype.kind == "f":
        return items.astype(f"<f{bits // 8}").tobytes()
    if bits in (8, 16, 32, 64):
        return items.astype(f"<{'i' if signed else 'u'}{bits // 8}").tobytes()
    # two's complement in the low `bits` bits of a u64 (int64 → uint64 wraps as intended)
    unsigned = items.astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1)
    if bits % 8 == 0:
        return unsigned.astype("<u8").view(np.uint8).reshape(-1, 8)[:, : bits // 8].tobytes()
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint64)
    stream = ((unsigned[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
    return np.packbits(stream.reshape(-1)).tobytes()


def _unpack(raw: np.ndarray, header: TensorHeader) -> np.ndarray:
    """Bytes after the header → flat items in the dtype `read_tensor` promises."""
    bits, count = header.bits, header.count
    if header.code is ItemCode.FLOAT:
        return raw.view(f"<f{bits // 8}").astype(f"=f{bits // 8}")
    if header.code is ItemCode.BOOL:
        if bits == 8:
            return raw != 0
        return np.unpackbits(raw, count=count).astype(np.bool_)
    signed = header.signed
    width = next(w for w in (8, 16, 32, 64) if bits <= w)
    out_dtype = np.dtype(f"{'i' if signed else 'u'}{width // 8}")
    if bits == width:
        return raw.view(f"<{out_dtype.kind}{width // 8}").astype(out_dtype)
    if bits % 8 == 0:
        wide = np.zeros((count, 8), dtype=np.uint8)
        wide[:, : bits // 8] = raw.reshape(count, bits // 8)
        unsigned = wide.view("<u8").reshape(count)
    else:
        stream = np.unpackbits(raw, count=count * bits).reshape(count, bits).astype(np.uint64)
        shifts = np.arange(bits - 1, -1, -1, dtype=np.uint64)
        unsigned = np.bitwise_or.reduce(stream << shifts, axis=1) if count else np.zeros(0, np.uint64)
    if signed:
        # sign extension: move the item's top bit to bit 63, then shift back arithmetically
        spare = np.uint64(64 - bits)
        return ((unsigned << spare).view(np.int64) >> np.int64(64 - bits)).astype(out_dtype)
    return unsigned.astype(out_dtype)


# ---------------------------------------------------------------- file access

def _name_of(source: PathOrFile) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", "<tensor stream>"))


def _read_all(source: PathOrFile) -> tuple[str, bytes]:
    name = _name_of(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as f:
                return name, f.read()
        except OSError as err:
            raise DataError(f"cannot read tensor file {name}: {err.strerror}", location=Location(name)) from None
    return name, source.read()


def _write_all(target: PathOrFile, blob: bytes) -> None:
    """Writes to a temporary name and renames, so a half-written file never looks whole."""
    if not isinstance(target, (str, os.PathLike)):
        target.write(blob)
        return
    path = os.fspath(target)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".dat", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def tensor_bytes(array: np.ndarray, **kwargs) -> bytes:
    """The `.dat` encoding of `array` as bytes (same keywords as `write_tensor`)."""
    buffer = io.BytesIO()
    write_tensor(buffer, array, **kwargs)
    return buffer.getvalue()
