"""GEMM tiling: one requantized matrix product -> an NPU program (instructions + DRAM image).

    out[M, N] = requant( sum_k (A[m, k] - in_zp) * (W[k, n] - w_zp) )      (int32 sums)

(int16 operands: the same sums over the operands' byte planes into int48 accumulators,
qsim/npu/array/wide.py; every plane pass is one more reduction step of the mapping)

with requant = bias add, apply_scale_32, output zero point and clamp (hw/requant.py);
without requant the raw int32 sums are stored (the caller adds any bias on the host).

DRAM image, each region 64-byte aligned: the A operand as the layer holds it (an NHWC
int8 / int16 tensor or an [M, K] matrix; qsim/npu/array/window.py), W (one image per byte
plane), the parameter words, the output (M x N, row-major, int8, int16 or int32 LE), then
the LOADW window descriptors. A never exists expanded: every A word is assembled by LOADW
(im2col in hardware) from the tensor, with the padding taps and the lanes beyond K filled
with in_zp (they contribute 0).
- Weight-stationary: K is cut into folds of R lanes; W is stored as [nN, nF, R, C] (rows
  beyond K hold w_zp). A COMPUTE streams the rows of a row tile through one fold of one
  column tile; LOADW word m of fold f = output pixel m0 + m, lanes k in [fR, fR + R).
- Output-stationary: an output tile is R rows x C columns; W is stored as [nN, K, C]; a
  COMPUTE runs a chunk of K. LOADW word j = K index k0 + j, lane r = output pixel m0 + r.
The loop order over the tiles and the tile sizes are the mapping's (qsim/npu/mapping/:
space.py says what each order keeps in the buffers, schedule.py writes the stream and why
the in-order dispatcher keeps every reader of a buffer half ahead of its next writer).
Without a mapping the compiler uses the fixed rule (mapping FIXED): row tiles of as many
rows as half the accumulator buffer holds (ws) or R (os), then column tiles, then K in
place, A kept in the input buffer across the column tiles when it fits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...hw import isa
from ...hw.isa import LoadBuffer, Plane, StoreBuffer
from ...hw.params import PARAM_LANE_BYTES, Dataflow, Geometry
from ...hw.window_isa import window_base
from ..mapping.schedule import Operands, Step, emit
from ..mapping.space import FIXED, Mapping, Shape
from . import wide
from .window import Window, descriptor_bytes, descriptor_words, window_timing

ALIGN = 64


@dataclass(frozen=True)
class Requant:
    bias: np.ndarray          # int32 [N]
    multiplier: np.ndarray    # int32 [N], >= 0
    shift: np.ndarray         # [N], 2..62
    out_zp: int
    clamp_lo: int
    clamp_hi: int
    double_round: bool
    out_bits: int = 8         # 8: int8 output lanes; 16: int16 (COMPUTE out16)


@dataclass(frozen=True)
class Gemm:
    a: np.ndarray             # int8 or int16: the A operand as DRAM holds it, read through `window`
    w: np.ndarray             # int8 or int16 [K, N] (int16: byte-plane passes, qsim/npu/array/wide.py)
    in_zp: int = 0
    w_zp: int = 0
    requant: Requant | None = None
    window: Window | None = None   # default: `a` is the [M, K] matrix itself

    @property
    def reading(self) -> Window:
        return self.window if self.window is not None else Window.matrix(*self.a.shape)

    @property
    def wide(self) -> bool:
        """An int16 operand: int48 accumulators, byte-plane passes (wide.py)."""
        return np.dtype(self.a.dtype) == np.int16 or np.dtype(self.w.dtype) == np.int16

    @property
    def passes(self) -> list[tuple[Plane, Plane]]:
        return [(pa, pw) for pa in wide.planes(self.a.dtype) for pw in wide.planes(self.w.dtype)]

    @property
    def shape(self) -> tuple[int, int, int]:
        M, K = self.reading.gemm_shape
        return M, K, self.w.shape[1]


@dataclass
class Program:
    instrs: list
    dram: np.ndarray          # initial DRAM image, uint8
    out_addr: int
    out_shape: tuple              # (M, N) of a GEMM; any tensor shape for a vector program
    out_dtype: np.dtype
    macs: int
    dram_input_bytes: int     # bytes of A the LOADWs move (padding taps are not read)
    dram_weight_bytes: int    # bytes of W and parameter words
    dram_output_bytes: int

    def output(self, dram: np.ndarray) -> np.ndarray:
        size = int(np.prod(self.out_shape)) * np.dtype(self.out_dtype).itemsize
        return dram[self.out_addr:self.out_addr + size].view(self.out_dtype).reshape(self.out_shape).copy()


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _align(n: int) -> int:
    return _ceil(n, ALIGN) * ALIGN


def _param_words(req: Requant | None, N: int, C: int, acc48: bool = False) -> np.ndarray:
    """[nN, C * 9] bytes: per lane bias int32, multiplier int32, shift uint8 (padding lanes 0/0/2);
    with int48 accumulators the int48 bias and a 16-bit multiplier (wide.pack_params)."""
    nN = _ceil(N, C)
    lanes = np.zeros((nN * C, PARAM_LANE_BYTES), np.uint8)
    bias = np.zeros(nN * C, np.int32)
    mult = np.zeros(nN * C, np.int32)
    shift = np.full(nN * C, 2, np.uint8)
    if req is not None:
        bias[:N], mult[:N], shift[:N] = req.bias, req.multiplier, req.shift
    lanes[:, 8] = shift
    if acc48:
        bias48 = np.zeros(nN * C, np.int64)
        bias48[:N] = req.bias
        wide.pack_params(lanes, bias48, mult)
        return lanes.reshape(nN, C * PARAM_LANE_BYTES)
    lanes[:, 0:4] = bias.astype("<i4").view(np.uint8).reshape(-1, 4)
    lanes[:, 4:8] = mult.astype("<i4").view(np.uint8).reshape(-1, 4)
    return lanes.reshape(nN, C * PARAM_LANE_BYTES)


def _check(gemm: Gemm, geom: Geometry) -> None:
    if gemm.a.dtype not in (np.int8, np.int16) or gemm.w.dtype not in (np.int8, np.int16):
        raise UnsupportedError(f"the NPU multiplies int8 or int16 operands; got {gemm.a.dtype} x {gemm.w.dtype}")
    if gemm.wide:
        wide.check(gemm.a.dtype, gemm.w.dtype, gemm.in_zp, gemm.w_zp, gemm.shape[1], geom.rows,
                   geom.dram_port_bytes, gemm.requant)
    if not (-128 <= gemm.in_zp <= 127 and -128 <= gemm.w_zp <= 127):
        raise UnsupportedError(f"zero points {gemm.in_zp}, {gemm.w_zp} outside int8")
    req = gemm.requant
    if req is not None:
        if np.any(req.multiplier < 0) or np.any((req.shift < 2) | (req.shift > 62)):
            raise UnsupportedError("requantization needs multiplier >= 0 and 2 <= shift <= 62 "
                                   "(TOSA apply_scale_32 REQUIRE)")
        top = (1 << (req.out_bits - 1)) - 1
        if not -top - 1 <= req.clamp_lo <= req.clamp_hi <= top or not -128 <= req.out_zp <= 127:
            raise UnsupportedError(f"output zero point {req.out_zp} / clamp [{req.clamp_lo}, "
                                   f"{req.clamp_hi}] must lie in int{req.out_bits}")


def _weight_image(w: np.ndarray, K: int, N: int, R: int, C: int, ws: bool, fill) -> np.ndarray:
    """W in the order the array consumes it: [nN, nF, R, C] (ws; rows beyond K hold `fill`)
    or [nN, K, C] (os)."""
    nN = _ceil(N, C)
    rows = _ceil(K, R) * R if ws else K
    w_pad = np.full((rows, nN * C), fill, np.int8)
    w_pad[:K, :N] = w
    if ws:
        return w_pad.reshape(rows // R, R, nN, C).transpose(2, 0, 1, 3).copy()
    return w_pad.reshape(K, nN, C).transpose(1, 0, 2).copy()


def gemm_shape(geom: Geometry, gemm: Gemm) -> Shape:
    """The GEMM as the mapping space (qsim/npu/mapping/space.py) sees it: sizes and byte planes."""
    M, K, N = gemm.shape
    return Shape(M, K, N, geom, wide.planes(gemm.a.dtype), wide.planes(gemm.w.dtype))


def compile_gemm(geom: Geometry, gemm: Gemm, mapping: Mapping | None = None) -> Program:
    """`mapping` (qsim/npu/mapping/space.py): the loop order and tile; None: the fixed rule below."""
    _check(gemm, geom)
    M, K, N = gemm.shape
    R, C = geom.rows, geom.cols
    ws = geom.dataflow is Dataflow.WEIGHT_STATIONARY
    nN = _ceil(N, C)
    x = np.ascontiguousarray(gemm.a)
    window = gemm.reading
    if x.size != int(np.prod(window.shape)):
        raise ValueError(f"A operand of {x.shape} does not match its window {window.shape}")
    shape = gemm_shape(geom, gemm)

    # W in the order the array consumes it, one image per weight plane; A stays as the layer holds it.
    w_img = np.stack([_weight_image(gemm.w if p is Plane.INT8 else wide.plane_bytes(gemm.w, p), K, N, R, C,
                                    ws, np.int8(gemm.w_zp)) for p in shape.w_planes])
    plane_stride = w_img[0].nbytes
    nF = _ceil(K, R)
    params = _param_words(gemm.requant, N, C, gemm.wide)
    out_bits = gemm.requant.out_bits if gemm.requant is not None else 32
    out_dtype = np.dtype({8: np.int8, 16: "<i2", 32: "<i4"}[out_bits])
    eb = out_dtype.itemsize

    P = geom.dram_port_bytes
    a_base = 0
    w_base = _align(x.nbytes)
    p_base = w_base + _align(w_img.nbytes)
    o_base = p_base + _align(params.nbytes)
    d_base = o_base + _align(M * N * eb)
    d_words = descriptor_words(P)
    descriptors: dict[tuple, int] = {}          # (pixel, k, os, plane) -> index in the descriptor region

    def a_load(m0, rows, step, buf_addr):
        """The window descriptor for rows m0.. from K index step.k0 (ws: one fold of `rows`
        words; os: `klen` words of row tile m0) of plane step.pa into the register file, then LOADW."""
        key = (m0, step.k0, not ws, int(step.pa))
        index = descriptors.setdefault(key, len(descriptors))
        return [isa.load(LoadBuffer.VCONFIG, window_base(C, P), d_words, d_base + index * d_words * P, P, P),
                isa.loadw(buf_addr, rows if ws else step.klen)]

    def w_load(j, k0, klen, wi, buf_addr):
        """klen K rows of weight plane image wi from k0 (ws: one fold, or a multiple of R for a
        resident column tile, qsim/npu/mapping/schedule.py)."""
        base = w_base + wi * plane_stride
        if ws:
            addr = base + ((j * nF + k0 // R) * R) * C
            return isa.load(LoadBuffer.WEIGHT, buf_addr, _ceil(klen, R) * R, addr, C, C)
        addr = base + (j * K + k0) * C
        return isa.load(LoadBuffer.WEIGHT, buf_addr, klen, addr, C, C)

    instrs = emit(shape, FIXED if mapping is None else mapping,
                  _operands(geom, gemm, a_load, w_load, p_base, params.shape[1], o_base, N, eb))
    blobs = [b""] * len(descriptors)
    for (m0, k0, os, plane), index in descriptors.items():
        blobs[index] = descriptor_bytes(dict(window.descriptor(a_base, m0, k0, os, gemm.in_zp), plane=plane), P)
    dram = np.zeros(d_base + len(blobs) * d_words * P, np.uint8)
    dram[a_base:a_base + x.nbytes] = x.astype(x.dtype.newbyteorder("<")).view(np.uint8).ravel()
    dram[w_base:w_base + w_img.nbytes] = w_img.view(np.uint8).ravel()
    dram[p_base:p_base + params.nbytes] = params.ravel()
    if blobs:
        dram[d_base:] = np.frombuffer(b"".join(blobs), np.uint8)
    a_bytes = 0
    for k, instr in enumerate(instrs):
        if instr.opcode is isa.Opcode.LOADW:
            addr = instrs[k - 1].get("dram_addr")
            a_bytes += window_timing(dram[addr:addr + d_words * P].tobytes(), instr.get("count"), R,
                                     geom.dram_bytes_per_cycle).read_bytes
    wp_bytes = sum(i.get("count") * i.get("word_bytes") for i in instrs
                   if i.opcode is isa.Opcode.LOAD and i.get("buf") != LoadBuffer.INPUT)
    return Program(instrs=instrs, dram=dram, out_addr=o_base, out_shape=(M, N), out_dtype=out_dtype,
                   macs=M * N * K, dram_input_bytes=a_bytes, dram_weight_bytes=wp_bytes,
                   dram_output_bytes=M * N * eb)


def _requant_fields(gemm: Gemm) -> dict:
    """COMPUTE's requantization fields (out16: 16-bit clamp bounds split into byte halves)."""
    req = gemm.requant
    if req is None:
        return dict(double_round=0, out_zp=0, clamp_lo=-128, clamp_hi=127)
    low = lambda v: ((v & 0xFF) ^ 0x80) - 0x80       # noqa: E731 (the low byte, as a signed field)
    out16 = req.out_bits == 16
    return dict(double_round=int(bool(req.double_round)), out_zp=req.out_zp, acc48=int(gemm.wide),
                out16=int(out16), clamp_lo=low(req.clamp_lo), clamp_hi=low(req.clamp_hi),
                clamp_lo_msb=req.clamp_lo >> 8 if out16 else 0, clamp_hi_msb=req.clamp_hi >> 8 if out16 else 0)


def _operands(geom, gemm, a_load, w_load, p_base, p_bytes, o_base, N, eb) -> Operands:
    """The instruction makers a mapped schedule (qsim/npu/mapping/schedule.py) assembles."""
    req, C = gemm.requant, geom.cols
    fields = _requant_fields(gemm)

    def compute(a_addr, w_addr, acc_addr, param_word, count, accumulate, requant, step: Step):
        planes = dict(a_plane=int(step.pa), w_plane=int(step.pw)) if gemm.wide else {}
        return isa.compute(
            a_addr=a_addr, w_addr=w_addr, acc_addr=acc_addr, out_addr=acc_addr, param_addr=param_word,
            count=count, accumulate=int(accumulate), requant=int(requant and req is not None),
            in_zp=gemm.in_zp, w_zp=gemm.w_zp, **fields, **planes, wait_dma=True)

    def store(acc_addr, rows, m0, j):
        return isa.store(StoreBuffer.OUTPUT if req is not None else StoreBuffer.ACCUMULATOR, acc_addr, rows,
                         o_base + (m0 * N + j * C) * eb, N * eb, min(C, N - j * C) * eb)

    return Operands(a_load=a_load, w_load=w_load,
                    param_load=lambda j, word: isa.load(LoadBuffer.PARAM, word, 1, p_base + j * p_bytes, 0, p_bytes),
                    compute=compute, store=store)
