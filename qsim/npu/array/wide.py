"""int16 operands on the int8 array: byte-plane passes into int48 accumulators (TOSA 16x8, 16x16).

An int16 value is x = 256 * hi + lo with hi = x >> 8 in [-128, 127] (signed byte) and
lo = x & 255 in [0, 255] (unsigned byte). For one output (zero points: TOSA 0.30 requires 0
for int16 operands, any int8 value for an int8 weight, 2.3):

    sum_k x_k * (w_k - w_zp) = 256 * sum_k hi_k * (w_k - w_zp) + sum_k lo_k * (w_k - w_zp)

so a 16x8 layer is two passes of the int8 array over the same weights, one per byte plane of
the activations (LOADW reads a plane straight from the int16 tensor, hw/wdma.py), and a
16x16 MATMUL four (the weights' planes too: 65536 * hi*hi + 256 * (hi*lo + lo*hi) + lo*lo).
Each COMPUTE adds its array result into the 48-bit accumulator lanes shifted left by 8 per
high-byte operand (hw/compute.py); the sum of all passes is the exact int48 accumulator.

Bounds (every case below is checked or holds by construction):
- Edge operands fit the PEs' signed 9 bits: hi - 0 in [-128, 127], lo - 0 in [0, 255],
  w - w_zp in [-255, 255] (int8 w and w_zp), an int16 weight's planes as the activations'.
- PE sums are 32 bits and must not wrap within one COMPUTE: a term is at most
  255 * 255 = 65025 in magnitude (lo x lo; 255 * 255 for lo x (w - w_zp), 128 * 255 for hi),
  so a COMPUTE may sum at most floor((2^31 - 1) / 65025) = 33025 terms: R (a
  weight-stationary fold) or the K chunk (output-stationary), both checked by the compiler.
- The 48-bit accumulator holds the exact sum: |x * (w - w_zp)| <= 32768 * 255 < 2^23 for
  16x8 and |x * y| <= 2^30 for 16x16, so K <= 2^24 (16x8) / 2^17 (16x16) terms stay below
  2^47; the TOSA reference already REQUIREs the int48 sum not to overflow (apply_add), and
  the compiler refuses a K beyond these bounds. Intermediate pass sums are partial sums of
  the same products, each bounded by the same K * max term, so they never wrap either.
- The bias is an int48 tensor: v = acc + bias may need 48 bits; the requantization unit adds
  them in 48 bits and scales with apply_scale_16 (TOSA 0.30 RESCALE: scale32 must be false
  for int48 input, hence no double rounding; multiplier 0 .. 2^15 - 1, shift 2 .. 62).
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidGraphError, UnsupportedError
from ...hw.isa import Plane

PE_SUM_BITS = 32
MAX_TERM = 255 * 255                                # largest edge product magnitude
MAX_TERMS_PER_COMPUTE = ((1 << (PE_SUM_BITS - 1)) - 1) // MAX_TERM     # 33025
ACC_BITS = 48


def planes(dtype) -> tuple[Plane, ...]:
    """The passes an operand of `dtype` needs: one int8 pass, or its two byte planes."""
    dtype = np.dtype(dtype)
    if dtype == np.int8:
        return (Plane.INT8,)
    if dtype == np.int16:
        return (Plane.LO, Plane.HI)
    raise UnsupportedError(f"the NPU array multiplies int8 or int16 operands, got {dtype}")


def max_k(a_dtype, w_dtype) -> int:
    """The longest reduction whose exact sum stays below 2^47 (module docstring)."""
    a_max = 32768 if np.dtype(a_dtype) == np.int16 else 255
    w_max = 32768 if np.dtype(w_dtype) == np.int16 else 255
    return ((1 << (ACC_BITS - 1)) - 1) // (a_max * w_max)


def check(a_dtype, w_dtype, in_zp: int, w_zp: int, K: int, rows: int, port_bytes: int,
          requant) -> None:
    """The rules a wide (int16-operand) GEMM must meet; raises with what to change."""
    for dtype, zp, name in ((a_dtype, in_zp, "input"), (w_dtype, w_zp, "weight")):
        if np.dtype(dtype) == np.int16 and zp != 0:
            raise InvalidGraphError(f"int16 {name} zero point {zp}: TOSA 0.30 requires 0 for "
                                    "non-int8 types (2.3 ERROR_IF)")
    if K > max_k(a_dtype, w_dtype):
        raise UnsupportedError(f"a reduction of {K} terms may overflow the int48 accumulator "
                               f"(at most {max_k(a_dtype, w_dtype)} for these operand types)")
    if rows > MAX_TERMS_PER_COMPUTE:
        raise UnsupportedError(f"{rows} array rows: a plane pass sums up to {rows} products of "
                               f"{MAX_TERM} in 32-bit PE sums (at most {MAX_TERMS_PER_COMPUTE})")
    if np.dtype(a_dtype) == np.int16 and 2 * rows - 1 > port_bytes:
        raise UnsupportedError(f"LOADW reads a plane of {rows} int16 lanes as {2 * rows - 1} bytes, "
                               f"more than the {port_bytes}-byte DRAM port",
                               hint="use an array with rows <= (port bytes + 1) / 2")
    if requant is None:
        raise UnsupportedError("int48 sums are not stored: a 16x8 / 16x16 layer needs its RESCALE "
                               "fused into the requantization unit")
    if requant.double_round:
        raise InvalidGraphError("RESCALE of int48 with double_round: TOSA 0.30 requires "
                                "scale32 = false, and double_round only with scale32 (2.13 ERROR_IF)")
    if np.any(np.asarray(requant.multiplier) >= 1 << 15):
        raise InvalidGraphError("RESCALE of int48 takes 16-bit multipliers (scale32 = false): "
                                "a multiplier >= 2^15 is outside int16's non-negative range")
    bias = np.asarray(requant.bias, np.int64)
    if np.any((bias < -(1 << 47)) | (bias >= 1 << 47)):
        raise InvalidGraphError("an int48 bias value lies outside int48")


def pack_params(lanes: np.ndarray, bias: np.ndarray, mult: np.ndarray) -> None:
    """Writes int48 bias and 16-bit multipliers into parameter lanes [n, 9] (hw/compute.py):
    bias bits 31:0 in bytes 0-3, the multiplier in bytes 4-5, bias bits 47:32 in bytes 6-7."""
    bias = np.asarray(bias, np.int64)
    lanes[:, 0:4] = (bias & 0xFFFFFFFF).astype("<u4").view(np.uint8).reshape(-1, 4)
    lanes[:, 4:6] = np.asarray(mult, np.int64).astype("<u2").view(np.uint8).reshape(-1, 2)
    lanes[:, 6:8] = ((bias >> 32) & 0xFFFF).astype("<u2").view(np.uint8).reshape(-1, 2)


def plane_bytes(x: np.ndarray, plane: Plane) -> np.ndarray:
    """The bytes of one plane of int16 `x` (as int8 bit patterns; a low byte reads unsigned)."""
    v = np.asarray(x).astype(np.int64)
    part = (v >> 8) if plane is Plane.HI else (v & 0xFF)
    return part.astype(np.uint8).view(np.int8)


def weight_shift(a_plane: Plane, w_plane: Plane) -> int:
    return 8 * ((a_plane is Plane.HI) + (w_plane is Plane.HI))
