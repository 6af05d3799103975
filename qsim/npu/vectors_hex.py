"""`$readmemh` text for golden vectors: the one definition of the hex layout (docs/vectors.md).

Layout of one tensor (LAYOUT_DOC below is copied verbatim into docs/vectors.md and
into the README.md of every vector folder):
- The tensor is read as a matrix [rows, L]: L = its last axis (rank 0 and 1 tensors
  are one row), rows = the product of the other axes, in row-major (C) order.
- Each row is cut into words of `lanes` elements; the last word of a row is padded
  with zero lanes, so a row takes ceil(L / lanes) words and rows never share a word.
- Lane i of a word holds element (word * lanes + i) of its row in bits
  [i*b, (i+1)*b) of the word, b = element bits, as b-bit two's complement
  (lane 0 is least significant, the NPU's little-endian lane order, hw/README.md).
- One word per line, lanes*b/4 hex digits, most significant digit first, lower case,
  no address markers (`@`) and no comments.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError

LAYOUT_DOC = """\
Each `.hex` file holds one tensor for Verilog `$readmemh`:

- The tensor is read as a matrix `[rows, L]`: `L` is its last axis (a scalar or a
  vector is one row), `rows` the product of the other axes, in row-major (C) order.
- Each row is cut into words of `lanes` elements. The last word of a row is padded
  with zero lanes: a row takes `ceil(L / lanes)` words and rows never share a word.
- Lane `i` of a word holds element `word * lanes + i` of its row in bits
  `[i*b, (i+1)*b)` of the word, where `b` is the element width in bits, as `b`-bit
  two's complement (lane 0 is the least significant lane: the NPU's little-endian
  lane order, see the RTL README).
- One word per line: `lanes * b / 4` hex digits, most significant first, lower
  case; no `@address` lines, no comments. `words` in the manifest is the line count.
- `b` is 8 for int8/uint8/bool, 16 for int16, 32 for int32, 48 for int48 (stored
  as int64 in the `.npy`; TOSA 0.30 has no 64-bit integers).
- `lanes` is the NPU array width the word feeds: R (array rows) for a layer's
  activation input, C (array columns) for everything else (weights, bias,
  multipliers, shifts, accumulators, outputs, TABLE contents, host-operator tensors).
"""

# numpy storage dtype -> element bits in the hex words (int64 holds TOSA int48_t)
ELEMENT_BITS = {np.dtype(np.bool_): 8, np.dtype(np.int8): 8, np.dtype(np.uint8): 8,
                np.dtype(np.int16): 16, np.dtype(np.uint16): 16, np.dtype(np.int32): 32,
                np.dtype(np.int64): 48}


def element_bits(dtype: np.dtype, what: str = "tensor") -> int:
    dtype = np.dtype(dtype)
    if dtype not in ELEMENT_BITS:
        raise UnsupportedError(f"{what}: {dtype} tensors have no golden-vector hex layout",
                               hint="vectors hold integer tensors (int8/16/32/48, uint8/16, bool)")
    return ELEMENT_BITS[dtype]


def as_rows(array: np.ndarray) -> np.ndarray:
    """The [rows, L] matrix view of the layout (rank 0 and 1 are one row)."""
    a = np.asarray(array)
    if a.ndim <= 1:
        return a.reshape(1, -1)
    return a.reshape(-1, a.shape[-1])


def words_of(shape, lanes: int) -> int:
    """Number of words (lines) of a tensor of `shape` at `lanes` lanes per word."""
    shape = tuple(shape)
    last = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    return rows * -(-last // lanes) if last else 0


def hex_text(array: np.ndarray, lanes: int, what: str = "tensor") -> str:
    """The `$readmemh` text of `array` (layout above); every line ends with a newline."""
    if lanes < 1:
        raise UnsupportedError(f"{what}: lanes must be >= 1, got {lanes}")
    a = np.asarray(array)
    bits = element_bits(a.dtype, what)
    nbytes = bits // 8
    m = as_rows(a)
    rows, last = m.shape
    if rows * last == 0:
        return ""
    per_row = -(-last // lanes)
    padded = np.zeros((rows, per_row * lanes), np.int64)
    padded[:, :last] = m.astype(np.int64)
    # Two's complement of the element width: the low `bits` bits of the int64 value,
    # little-endian bytes, the first `nbytes` bytes of each element.
    le = padded.astype("<i8").view(np.uint8).reshape(rows * per_row, lanes, 8)[:, :, :nbytes]
    word_le = le.reshape(rows * per_row, lanes * nbytes)
    digits = word_le[:, ::-1].tobytes().hex()        # most significant byte first
    width = 2 * lanes * nbytes
    return "".join(digits[i:i + width] + "\n" for i in range(0, len(digits), width))
