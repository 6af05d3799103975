"""Items ↔ the data bytes of a tensor file (NNEF 1.0 section 5.2), for tensorfile.py.

"The tensor data is laid out linearly in a continuous row-major order, as a bit-stream packed
continuously into a sequence of bytes" (5.2). Decisions (docs/nnef1.md): widths that are a
multiple of 8 are little-endian bytes per item; other widths form one stream, each item most
significant bit first, bytes filled from their most significant bit (as numpy.packbits and
nnef-tools store 1-bit items), the last byte zero-padded. Signed items are two's complement.

Streams are (un)packed in chunks, so the intermediates (8 bytes per bit) stay small whatever
the tensor's size.
"""
from __future__ import annotations

import numpy as np

# Items per chunk: a multiple of 8, so every chunk starts on a byte boundary of the bit
# stream, and the 8-bytes-per-bit intermediates stay around 32 MiB.
_CHUNK_ITEMS = 1 << 16


def pack_items(items: np.ndarray, bits: int, signed: bool) -> bytes:
    """Flat items → data bytes. Float items are stored at `bits` width (16, 32, 64)."""
    if items.dtype.kind == "f":
        return items.astype(f"<f{bits // 8}").tobytes()
    if bits in (8, 16, 32, 64):
        return items.astype(f"<{'i' if signed else 'u'}{bits // 8}").tobytes()
    return b"".join(_pack_chunk(items[i:i + _CHUNK_ITEMS], bits)
                    for i in range(0, len(items), _CHUNK_ITEMS))


def unpack_items(raw: np.ndarray, count: int, bits: int, dtype: np.dtype) -> np.ndarray:
    """Data bytes → `count` flat items of `dtype` (a float, or an integer at least `bits` wide;
    a signed integer dtype means the items are two's complement)."""
    if dtype.kind == "f" or bits == dtype.itemsize * 8:
        return raw.view(dtype.newbyteorder("<")).astype(dtype)
    out = np.empty(count, dtype=dtype)
    for first in range(0, count, _CHUNK_ITEMS):
        n = min(_CHUNK_ITEMS, count - first)
        chunk = raw[first * bits // 8: (first * bits + n * bits + 7) // 8]
        out[first:first + n] = _unpack_chunk(chunk, n, bits, dtype.kind == "i")
    return out


def _pack_chunk(items: np.ndarray, bits: int) -> bytes:
    # two's complement in the low `bits` bits of a u64 (int64 → uint64 wraps as intended)
    unsigned = items.astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1)
    if bits % 8 == 0:
        return unsigned.astype("<u8").view(np.uint8).reshape(-1, 8)[:, : bits // 8].tobytes()
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint64)
    stream = ((unsigned[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
    return np.packbits(stream.reshape(-1)).tobytes()


def _unpack_chunk(raw: np.ndarray, count: int, bits: int, signed: bool) -> np.ndarray:
    """`count` items of `bits` bits (starting on a byte boundary) → uint64 or sign-extended int64."""
    if bits % 8 == 0:
        wide = np.zeros((count, 8), dtype=np.uint8)
        wide[:, : bits // 8] = raw.reshape(count, bits // 8)
        unsigned = wide.view("<u8").reshape(count)
    else:
        stream = np.unpackbits(raw, count=count * bits).reshape(count, bits).astype(np.uint64)
        shifts = np.arange(bits - 1, -1, -1, dtype=np.uint64)
        unsigned = np.bitwise_or.reduce(stream << shifts, axis=1)
    if signed:
        # sign extension: move the item's top bit to bit 63, then shift back arithmetically
        spare = np.uint64(64 - bits)
        return (unsigned << spare).view(np.int64) >> np.int64(64 - bits)
    return unsigned
