"""The window descriptor of LOADW (im2col in hardware): one definition for the RTL and its drivers.

LOADW fills `count` input-buffer words from a tensor that DRAM holds as it is (NHWC int8,
or a plain [M, K] matrix), walking convolution windows: no expanded matrix exists
anywhere. The descriptor sits in the register file behind the vector configuration
(words WINDOW_BASE.. of LOAD buf=3, see window_base) and holds the geometry and the
walkers' start state, all precomputed by the compiler so the address generator only adds
and compares.

K index space (the array's reduction dimension) = kernel rows ky, then `units_per_row`
units per row, then `unit_len` lanes per unit. A unit is a run of lanes that is
contiguous in DRAM: one tap's channels, or a whole kernel row (taps x channels) when the
dilation across is 1 and the taps carry all channels of a pixel. Two walkers:
- the pixel walker (output pixel: oy, ox; input iy = oy*sy - top, ixb = (ox*sx - left) *
  pixel bytes; paddr = DRAM address of input pixel (n, iy, ix) at the unit offset 0);
- the K walker (ky_d = ky*dy, unit u, ux_b = u * unit_step, uoff = DRAM offset of the
  unit from the pixel, q = lane within the unit, k = K index).
`os` = 0 (weight-stationary): word w is output pixel start+w, lanes the K run from the
descriptor's K state (R lanes); `os` = 1 (output-stationary): word w is K index start+w,
lane r is output pixel start+r. One read transaction per unit piece (WS) or per lane (OS);
`plane` 1 or 2 reads one byte plane of an int16 tensor (a piece of n elements is the 2n - 1
bytes from its first element's plane byte: every other byte lands in a lane);
see qsim/npu/array/window.py for the exact sequence and timing, which the RTL (hw/wdma.py)
follows.
"""
from __future__ import annotations

from .vector_isa import config_words

# (name, width in bits, signed); packed little-endian from bit 0 in this order.
WINDOW_FIELDS = (
    ("os", 1, False), ("zp", 8, True),
    # geometry
    ("height", 16, False),            # H: input rows
    ("width_bytes", 32, False),       # W * pixel bytes
    ("out_h", 16, False), ("out_w", 16, False),
    ("stride_y", 16, False),          # sy: iy step per output row
    ("iy_reset", 17, True),           # -pad_top: iy of output row 0
    ("ixb_reset", 32, True),          # -pad_left * pixel bytes
    ("x_step", 32, True),             # sx * pixel bytes: ixb and paddr step per output column
    ("y_step", 32, True),             # paddr step to the next output row (after the last column)
    ("n_step", 32, True),             # paddr step to the next image (after the last row)
    ("unit_len", 16, False),          # lanes of one contiguous unit
    ("units_per_row", 16, False),
    ("dil_y", 16, False),             # dy: ky_d step per kernel row
    ("unit_step", 32, True),          # DRAM bytes between units of a kernel row (dx * pixel bytes)
    ("row_step", 32, True),           # uoff step to the next kernel row
    ("k_total", 24, False),           # K: lanes at or beyond it hold zp
    # start state of the pixel walker
    ("oy", 16, False), ("ox", 16, False), ("iy", 17, True), ("ixb", 32, True),
    ("paddr", 32, False), ("pixels_left", 32, False),
    # start state of the K walker
    ("ky_d", 16, False), ("u", 16, False), ("ux_b", 32, True), ("uoff", 32, True),
    ("q", 16, False), ("k", 24, False),
    # int16 tensors (hw/isa.py Plane): every address above counts elements; element e is at
    # bytes 2e (low byte) and 2e + 1 (high byte), and lanes take the byte of `plane`
    ("plane", 2, False),
)
WINDOW_BITS = sum(w for _, w, _ in WINDOW_FIELDS)


def window_layout() -> dict[str, tuple[int, int, bool]]:
    out, pos = {}, 0
    for name, width, signed in WINDOW_FIELDS:
        out[name] = (pos, width, signed)
        pos += width
    return out


def window_words(word_bytes: int) -> int:
    """Register-file words of one descriptor."""
    return -(-WINDOW_BITS // (8 * word_bytes))


def pack_window(values: dict, word_bytes: int) -> bytes:
    """The descriptor as window_words(word_bytes) words of word_bytes bytes."""
    word = 0
    for name, (lo, width, signed) in window_layout().items():
        value = int(values.get(name, 0))
        low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        if not low <= value <= high:
            raise ValueError(f"window.{name} = {value} outside [{low}, {high}]")
        word |= (value & ((1 << width) - 1)) << lo
    return word.to_bytes(window_words(word_bytes) * word_bytes, "little")


def unpack_window(blob: bytes) -> dict:
    word = int.from_bytes(bytes(blob), "little")
    out = {}
    for name, (lo, width, signed) in window_layout().items():
        value = (word >> lo) & ((1 << width) - 1)
        if signed and value >> (width - 1):
            value -= 1 << width
        out[name] = value
    return out


def window_base(lanes: int, word_bytes: int) -> int:
    """First register-file word of the descriptor: right behind the vector configuration."""
    return config_words(lanes, word_bytes)
