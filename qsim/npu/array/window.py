"""LOADW, im2col in hardware: convolution windows as descriptors, and the numpy model of the
address generator (hw/wdma.py): its read transactions, timing and the words it writes.

A `Window` says how the array's A matrix [M, K] is read from a tensor DRAM holds as it is:
x [N, H, W, Cp] int8 (NHWC; a plain [M, K] matrix is N = M images of one pixel of K
channels). Row m of A is output pixel m = (n, oy, ox); column k = (ky, kx, c) with c
the `ck` channels from `c0` (all channels for CONV2D, one group for a depthwise GEMM).
Taps outside the input read as the input zero point, so they contribute
(zp - zp) * w = 0 exactly as TOSA's padding does; lanes at or beyond K too.

Transactions (the order the RTL issues them; hw/window_isa.py names the walkers):
weight-stationary, word w = pixel start+w: the K run of R lanes from the descriptor's K
state, one transaction per piece of a unit it covers (a kernel row or a tap);
output-stationary, word w = K index start+w: one transaction per lane r = pixel start+r.
A transaction reads the in-bounds part of its piece, `nbytes` (0: all padding, no read)
contiguous bytes, at most one per cycle; transaction j issues at busy cycle
s_j = max(s_{j-1} + 1, ceil(cum_j / B) - 1) (cum_j: bytes of transactions 0..j), the
word is written to the input buffer at s_last(word) + 1, and LOADW is busy for
s_last + 2 cycles: LOAD's timing, with the bytes the hardware actually moves.
An int16 tensor is read one byte plane at a time (descriptor `plane`, hw/isa.py Plane): its
addresses count elements, and a piece of n lanes moves the 2n - 1 bytes from its first
lane's byte (2e, or 2e + 1 for the high plane) to its last.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...errors import InvalidGraphError
from ...hw.window_isa import pack_window, unpack_window, window_words

MASK32 = (1 << 32) - 1


@dataclass(frozen=True)
class Window:
    """The convolution reading x [N, H, W, Cp] (see the module docstring)."""
    shape: tuple                 # (N, H, W, Cp) of the tensor in DRAM
    kernel: tuple = (1, 1)       # KH, KW
    pad: tuple = (0, 0, 0, 0)    # top, bottom, left, right
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    c0: int = 0                  # first channel read
    ck: int | None = None        # channels per tap (default: all)

    @staticmethod
    def matrix(rows: int, cols: int) -> "Window":
        return Window((rows, 1, 1, cols))

    @property
    def channels(self) -> int:
        return self.shape[3] if self.ck is None else self.ck

    @property
    def out_hw(self) -> tuple[int, int]:
        _, h, w, _ = self.shape
        (kh, kw), (top, bottom, left, right) = self.kernel, self.pad
        (sy, sx), (dy, dx) = self.stride, self.dilation
        oh = (h - 1 + top + bottom - (kh - 1) * dy) // sy + 1
        ow = (w - 1 + left + right - (kw - 1) * dx) // sx + 1
        if oh <= 0 or ow <= 0:
            raise InvalidGraphError(f"convolution output {oh}x{ow} is empty for input {h}x{w}")
        return oh, ow

    @property
    def gemm_shape(self) -> tuple[int, int]:
        oh, ow = self.out_hw
        return self.shape[0] * oh * ow, self.kernel[0] * self.kernel[1] * self.channels

    def units(self) -> tuple[int, int, int, int]:
        """(unit_len, units_per_row, unit_step, row_step): a whole kernel row is one unit when
        it is contiguous in DRAM (dilation across 1 and every channel of a pixel read)."""
        _, _, w, cp = self.shape
        kw, dx, dy = self.kernel[1], self.dilation[1], self.dilation[0]
        if (dx == 1 or kw == 1) and self.channels == cp:
            return kw * cp, 1, dx * cp, dy * w * cp
        return self.channels, kw, dx * cp, dy * w * cp - (kw - 1) * dx * cp

    def descriptor(self, base: int, pixel: int, k: int, os: bool, zp: int) -> dict:
        """The LOADW descriptor starting at output pixel `pixel` and K index `k`."""
        n_img, h, w, cp = self.shape
        oh, ow = self.out_hw
        top, _, left, _ = self.pad
        (sy, sx), dy = self.stride, self.dilation[0]
        unit_len, per_row, unit_step, row_step = self.units()
        n, rest = divmod(pixel, oh * ow)
        oy, ox = divmod(rest, ow)
        iy, ix = oy * sy - top, ox * sx - left
        ky, rest = divmod(k, per_row * unit_len)
        u, q = divmod(rest, unit_len)
        wb = w * cp
        return dict(
            os=int(os), zp=zp, height=h, width_bytes=wb, out_h=oh, out_w=ow, stride_y=sy,
            iy_reset=-top, ixb_reset=-left * cp, x_step=sx * cp,
            y_step=sy * wb - (ow - 1) * sx * cp, n_step=h * wb - (oh - 1) * sy * wb - (ow - 1) * sx * cp,
            unit_len=unit_len, units_per_row=per_row, dil_y=dy, unit_step=unit_step, row_step=row_step,
            k_total=self.gemm_shape[1],
            oy=oy, ox=ox, iy=iy, ixb=ix * cp, paddr=(base + self.c0 + (n * h + iy) * wb + ix * cp) & MASK32,
            pixels_left=self.gemm_shape[0] - pixel,
            ky_d=ky * dy, u=u, ux_b=u * unit_step, uoff=ky * dy * wb + u * unit_step, q=q, k=k)


def descriptor_bytes(desc: dict, word_bytes: int) -> bytes:
    return pack_window(desc, word_bytes)


def descriptor_words(word_bytes: int) -> int:
    return window_words(word_bytes)


def _pixels(d: dict, n: int) -> dict:
    """The pixel walker's state for its first n positions (closed form of the RTL's steps)."""
    j = np.arange(n, dtype=np.int64)
    ow, oh = max(d["out_w"], 1), max(d["out_h"], 1)
    t = d["ox"] + j
    cy, ox = t // ow, t % ow
    s = d["oy"] + cy
    cn, oy = s // oh, s % oh
    return dict(
        iy=np.where(cn == 0, d["iy"] + cy * d["stride_y"], d["iy_reset"] + oy * d["stride_y"]),
        ixb=np.where(cy == 0, d["ixb"] + j * d["x_step"], d["ixb_reset"] + ox * d["x_step"]),
        paddr=d["paddr"] + (j - cy) * d["x_step"] + (cy - cn) * d["y_step"] + cn * d["n_step"],
        left=np.maximum(d["pixels_left"] - j, 0))


def _advance(state: dict, d: dict, length: int) -> dict:
    s = dict(state)
    s["q"] += length
    s["k"] += length
    if s["q"] >= d["unit_len"]:
        s["q"] = 0
        if s["u"] + 1 < d["units_per_row"]:
            s["u"] += 1
            s["ux_b"] += d["unit_step"]
            s["uoff"] += d["unit_step"]
        else:
            s["u"], s["ux_b"] = 0, 0
            s["ky_d"] += d["dil_y"]
            s["uoff"] += d["row_step"]
    return s


_K_FIELDS = ("ky_d", "u", "ux_b", "uoff", "q", "k")


def _ws_pieces(d: dict, lanes: int) -> dict:
    """The K run of one weight-stationary word: its pieces (lane, length) and K states."""
    state = {f: d[f] for f in _K_FIELDS}
    rows, lane = [], 0
    while True:
        length = min(d["unit_len"] - state["q"], lanes - lane, d["k_total"] - state["k"])
        if length <= 0 and state["k"] < d["k_total"]:
            raise ValueError(f"window descriptor with an empty unit piece: {d}")
        rows.append(dict(state, lane=lane, length=max(length, 0)))
        lane += length
        state = _advance(state, d, length)
        if lane >= lanes or state["k"] >= d["k_total"]:
            break
    return {key: np.array([r[key] for r in rows], np.int64) for key in rows[0]}


def _os_steps(d: dict, n: int) -> dict:
    """The K walker after 0..n-1 steps of one lane (closed form of _advance by 1)."""
    j = np.arange(n, dtype=np.int64)
    t = d["q"] + j
    a, q = t // d["unit_len"], t % d["unit_len"]
    uu = d["u"] + a
    b, u = uu // d["units_per_row"], uu % d["units_per_row"]
    return dict(ky_d=d["ky_d"] + b * d["dil_y"], u=u,
                ux_b=np.where(b == 0, d["ux_b"] + a * d["unit_step"], u * d["unit_step"]),
                uoff=d["uoff"] + (a - b) * d["unit_step"] + b * d["row_step"], q=q, k=d["k"] + j)


@dataclass(frozen=True)
class Transactions:
    """One LOADW's read transactions in issue order (arrays of equal length)."""
    word: np.ndarray
    lane: np.ndarray            # first lane of the piece
    length: np.ndarray          # lanes of the piece
    dst: np.ndarray             # first lane filled from DRAM
    nbytes: np.ndarray          # lanes filled from DRAM (0: padding only); int8: the bytes read
    addr: np.ndarray            # DRAM address of the first byte read
    step: int = 1               # bytes between consecutive lanes' bytes (2: an int16 plane)

    @property
    def read_bytes(self) -> np.ndarray:
        """Bytes each transaction moves: a plane read of n lanes spans 2n - 1 bytes."""
        return np.where(self.nbytes > 0, self.step * self.nbytes - (self.step - 1), 0)


def transactions(d: dict, count: int, lanes: int) -> Transactions:
    if d["os"]:
        kst = {key: v[:, None] for key, v in _os_steps(d, count).items()}
        pix = {key: v[None, :] for key, v in _pixels(d, lanes).items()}
        lane = np.arange(lanes, dtype=np.int64)[None, :]
        length = np.ones((1, 1), np.int64)
    else:
        pieces = _ws_pieces(d, lanes)
        kst = {key: pieces[key][None, :] for key in _K_FIELDS}
        pix = {key: v[:, None] for key, v in _pixels(d, count).items()}
        lane, length = pieces["lane"][None, :], pieces["length"][None, :]
    shape = np.broadcast_shapes(kst["q"].shape, pix["iy"].shape)
    word = np.broadcast_to(np.arange(count, dtype=np.int64)[:, None], shape)
    ixf = pix["ixb"] + kst["ux_b"]
    qlo = np.clip(-ixf, 0, d["unit_len"])
    qhi = np.clip(d["width_bytes"] - ixf, 0, d["unit_len"])
    row = pix["iy"] + kst["ky_d"]
    ok = (row >= 0) & (row < d["height"]) & (pix["left"] > 0)
    lo = np.maximum(kst["q"], qlo)
    hi = np.minimum(kst["q"] + length, qhi)
    nbytes = np.where(ok & (hi > lo), hi - lo, 0)
    dst = lane + lo - kst["q"]
    addr = (pix["paddr"] + kst["uoff"] + lo) & MASK32
    step = 2 if d.get("plane", 0) else 1     # int16 planes: element e's bytes are 2e, 2e + 1
    addr = (step * addr + int(d.get("plane", 0) == 2)) & MASK32
    flat = lambda v: np.broadcast_to(v, shape).reshape(-1)   # noqa: E731
    return Transactions(flat(word), flat(lane), flat(length), flat(dst), flat(nbytes), flat(addr), step)


@dataclass(frozen=True)
class WindowTiming:
    duration: int               # busy cycles (s_last + 2)
    read_bytes: int
    transactions: int


@functools.lru_cache(maxsize=4096)
def _timing(blob: bytes, count: int, lanes: int, bytes_per_cycle: int) -> WindowTiming:
    tr = transactions(unpack_window(blob), count, lanes)
    cum = np.cumsum(tr.read_bytes)
    j = np.arange(len(cum), dtype=np.int64)
    need = -(-cum // bytes_per_cycle) - 1 - j
    s_last = int(j[-1] + max(0, int(np.max(need))))
    return WindowTiming(s_last + 2, int(cum[-1]), len(cum))


def window_timing(blob: bytes, count: int, lanes: int, bytes_per_cycle: int) -> WindowTiming:
    """Busy cycles and bytes moved of LOADW count=`count` with descriptor `blob`."""
    return _timing(bytes(blob), int(count), int(lanes), int(bytes_per_cycle))


@functools.lru_cache(maxsize=256)     # <= 256 x (count x lanes x 8 B): 32 MiB for 1024 x 16
def _sources(blob: bytes, count: int, lanes: int) -> tuple[np.ndarray, int]:
    """[count, lanes] DRAM address of every lane LOADW fills (-1: the zero point), and zp."""
    d = unpack_window(blob)
    tr = transactions(d, count, lanes)
    src = np.full((count, lanes), -1, np.int64)
    take = tr.nbytes > 0
    n = tr.nbytes[take]
    if n.size:
        starts = np.cumsum(n) - n
        rep = np.repeat(np.arange(n.size), n)
        off = np.arange(int(n.sum())) - starts[rep]
        src[tr.word[take][rep], tr.dst[take][rep] + off] = tr.addr[take][rep] + tr.step * off
    src.flags.writeable = False
    return src, d["zp"]


def window_words_values(blob: bytes, count: int, lanes: int, dram: np.ndarray) -> np.ndarray:
    """The [count, lanes] uint8 words LOADW writes into the input buffer."""
    src, zp = _sources(bytes(blob), int(count), int(lanes))
    if src.size and src.max() >= dram.size:
        raise IndexError(f"LOADW reads DRAM byte {int(src.max())} beyond its {dram.size} bytes")
    return np.where(src >= 0, dram[np.maximum(src, 0)], np.uint8(zp & 0xFF)).astype(np.uint8)
