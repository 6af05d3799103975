"""TOSA integer layers on the NPU: CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, FULLY_CONNECTED,
MATMUL, each optionally followed by a fused RESCALE (+ CLAMP) in the requantization unit.

Attributes use the TOSA 0.30 names (qsim.tosa.run): CONV2D weight [OC,KH,KW,IC],
bias, pad [top, bottom, left, right], stride [y, x], dilation [y, x], input_zp,
weight_zp; DEPTHWISE_CONV2D weight [KH,KW,C,M] (output channel c*M + m);
FULLY_CONNECTED weight [OC,IC]; MATMUL A_zp, B_zp. RESCALE: input_zp (must be 0),
output_zp, multiplier, shift, scale32, double_round, per_channel; CLAMP: min_val, max_val.

Lowering (implicit GEMM, docs/npu.md): DRAM holds the input tensor as it is (NHWC
int8) and the array's A rows are read through convolution windows by LOADW (im2col in
hardware, qsim/npu/array/window.py): padded taps read as input_zp, so they contribute
(input_zp - input_zp) * w = 0 exactly as TOSA's padding does. Depthwise channels
are packed block-diagonally, cols // M channels per GEMM, K ordered tap-major so a
fold reads one tap's contiguous channels (off-diagonal weights = weight_zp,
contributing 0). TRANSPOSE_CONV2D (weight [OC,KH,KW,IC], out_pad, stride, out_shape) is
stride_y x stride_x stride-1 convolutions, one per output phase (qsim/npu/array/subpixel.py),
whose outputs interleave. Without a fused RESCALE the int32 accumulators are stored and the
bias is added on the host.

16x8 (int16 activations, int8 weights) and 16x16 MATMUL: the same GEMMs over the operands'
byte planes into int48 accumulators (qsim/npu/array/wide.py), the fused RESCALE of int48
(scale32 false, 48-bit bias) writing int16 or int8; int48 sums are never stored, so these
layers need their RESCALE fused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidGraphError, UnsupportedError
from ..hw.params import Geometry
from ..hw.isa import Opcode
from .array.compile import Gemm, Program, Requant
from .mapping.policy import FIXED_POLICY, MappingPolicy
from .mapping.search import compile_mapped
from .energy import EventCounts, program_events
from .engines import Engine, run_program
from .cycle_model import CycleStats, schedule
from .array.subpixel import Phase, phases
from .array.window import Window

LAYER_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "FULLY_CONNECTED", "MATMUL")


@dataclass
class LayerResult:
    op: str
    output: np.ndarray
    macs: int
    cycles: int
    compute_cycles: int
    fill_drain_cycles: int
    stall_cycles: int
    utilization: float              # macs / (cycles * rows * cols)
    dram_bytes: dict = field(default_factory=dict)   # input, weight, output
    programs: int = 0
    engine: str = "model"
    host_steps: list = field(default_factory=list)   # work done on the host, for the report
    mac_slots: int = 0              # rows * cols * streaming cycles: PE slots offered while computing
    runs: list = field(default_factory=list)          # ProgramRecord per program, in run order
    events: EventCounts = field(default_factory=EventCounts)   # energy events of all programs
    # several cores (qsim/npu/cores/layer.py), per core: its cycles (summed over the rounds), the
    # cycles its DRAM instructions waited for the arbiter, its energy events; empty on one core
    core_cycles: list = field(default_factory=list)
    arbitration_cycles: list = field(default_factory=list)
    core_events: list = field(default_factory=list)
    mappings: list = field(default_factory=list)      # per program: its mapping's label (qsim/npu/mapping)

    def locate(self, index: tuple) -> tuple["ProgramRecord", int, int]:
        """The program that wrote output element `index` and its (row, column) in that GEMM."""
        if self.op == "MATMUL":
            batch, row, col = index
            for run in self.runs:
                if run.where[0] == batch:
                    return run, row, col
        if self.op == "TRANSPOSE_CONV2D":
            for run in self.runs:
                row = run.where.row_of(index)
                if row is not None:
                    return run, row, index[-1]
        flat_row = int(np.ravel_multi_index(index[:-1], self.output.shape[:-1]))
        channel = index[-1]
        for run in self.runs:
            if run.where.start <= channel < run.where.stop:
                return run, flat_row, channel - run.where.start
        raise IndexError(f"no program wrote output element {index}")


@dataclass(frozen=True)
class ProgramRecord:
    """One program of a layer: where its GEMM output lands in the layer output, the program,
    and the layer-relative cycle at which it started (programs run back to back)."""
    where: object                   # column slice, or (batch, column slice) for MATMUL
    program: Program
    start_cycle: int

    def write_cycle(self, geom: Geometry, row: int, col: int) -> int:
        """Program-relative cycle in which the DRAM write of GEMM output (row, col) happens:
        its STORE dispatched at t writes beat j at t + 2 + max(j, ceil((j+1)W/B) - 1)
        (hw/README.md, LOAD/STORE timing)."""
        addr = self.program.out_addr + (row * self.program.out_shape[1] + col) * self.program.out_dtype.itemsize
        dispatch, _ = schedule(geom, self.program.instrs, self.program.dram)
        for t, instr in zip(dispatch, self.program.instrs):
            if instr.opcode is not Opcode.STORE:
                continue
            offset = addr - instr.get("dram_addr")
            stride, width = instr.get("dram_stride"), instr.get("word_bytes")
            beat, within = divmod(offset, stride) if stride else (0, offset)
            if offset >= 0 and beat < instr.get("count") and within < width:
                busy = max(beat, -(-(beat + 1) * width // geom.dram_bytes_per_cycle) - 1)
                return int(t) + 2 + busy
        raise IndexError(f"no STORE writes GEMM output ({row}, {col})")


def _layer_requant(rescale: dict | None, clamp: dict | None, channels: int, bias, acc48: bool = False,
             out_bits: int = 8) -> Requant | None:
    """The fused RESCALE (+ CLAMP) of a layer; `acc48`: its accumulator is int48 (an int16
    operand), so TOSA requires scale32 = false (16-bit multipliers, apply_scale_16)."""
    if rescale is None:
        if clamp is not None:
            raise UnsupportedError("CLAMP fuses only after a RESCALE", hint="run CLAMP on the host")
        return None
    acc = "int48" if acc48 else "int32"
    if rescale.get("input_zp", 0) != 0:
        raise InvalidGraphError(f"RESCALE of an {acc} accumulator needs input_zp = 0, got "
                                f"{rescale['input_zp']} (TOSA 0.30 2.13 ERROR_IF)")
    if acc48 and rescale.get("scale32", True):
        raise InvalidGraphError("RESCALE of an int48 accumulator with scale32 = true "
                                "(TOSA 0.30 2.13 ERROR_IF: a 48-bit value takes 16-bit multipliers)")
    if not acc48 and not rescale.get("scale32", True):
        raise UnsupportedError("RESCALE of int32 with scale32 = false (16-bit multipliers) is not mapped "
                               "onto the NPU", hint="quantize with scale32 = true")
    if out_bits == 16 and rescale.get("output_zp", 0) != 0:
        raise InvalidGraphError(f"RESCALE to int16 with output_zp {rescale['output_zp']}: TOSA 0.30 "
                                "requires 0 for non-int8 types (2.13 ERROR_IF)")
    mult = np.broadcast_to(np.asarray(rescale["multiplier"], np.int64), (channels,))
    shift = np.broadcast_to(np.asarray(rescale["shift"], np.int64), (channels,))
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    if clamp is not None:
        lo, hi = max(lo, int(clamp["min_val"])), min(hi, int(clamp["max_val"]))
    if lo > hi:
        raise InvalidGraphError(f"CLAMP min_val {clamp['min_val']} > max_val {clamp['max_val']} "
                                f"(after intersecting with the int{out_bits} range)")
    b = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64)
    return Requant(bias=b if acc48 else b.astype(np.int32), multiplier=mult.astype(np.int32),
                   shift=shift.astype(np.int64), out_zp=int(rescale.get("output_zp", 0)), clamp_lo=lo,
                   clamp_hi=hi, double_round=bool(rescale.get("double_round", False)), out_bits=out_bits)


def _gemms(op: str, inputs, attrs, rescale, clamp, geom: Geometry, out_bits: int = 8):
    """[(Gemm, output slice assembler info)] plus the output shape and real MAC count."""
    x = np.asarray(inputs[0])
    wide = x.dtype == np.int16 or (op == "MATMUL" and np.asarray(inputs[1]).dtype == np.int16)

    def requant_of(channels: int, bias):
        return _layer_requant(rescale, clamp, channels, bias, wide, out_bits)
    if op in ("CONV2D", "DEPTHWISE_CONV2D"):
        w = np.asarray(attrs["weight"])
        geometry = dict(pad=tuple(attrs.get("pad", (0, 0, 0, 0))), stride=tuple(attrs.get("stride", (1, 1))),
                        dilation=tuple(attrs.get("dilation", (1, 1))))
        in_zp, w_zp = attrs.get("input_zp", 0), attrs.get("weight_zp", 0)
    if op == "CONV2D":
        oc, kh, kw, ic = w.shape
        window = Window(x.shape, (kh, kw), **geometry)
        (oh, ow), (M, K) = window.out_hw, window.gemm_shape
        req = requant_of(oc, attrs.get("bias"))
        gemm = Gemm(x, np.ascontiguousarray(w.reshape(oc, -1).T), in_zp, w_zp, req, window)
        return [(gemm, slice(0, oc))], (x.shape[0], oh, ow, oc), M * K * oc
    if op == "DEPTHWISE_CONV2D":
        kh, kw, c, mult = w.shape
        taps = kh * kw
        req_all = requant_of(c * mult, attrs.get("bias"))
        group = max(1, geom.cols // mult)
        out = []
        for c0 in range(0, c, group):
            g = min(group, c - c0)
            window = Window(x.shape, (kh, kw), c0=c0, ck=g, **geometry)
            # K = (tap, channel i): row t*g + i feeds output columns i*mult .. i*mult + mult - 1
            wg = np.full((taps, g, g * mult), w_zp, np.int8)
            for i in range(g):
                wg[:, i, i * mult:(i + 1) * mult] = w[:, :, c0 + i, :].reshape(taps, mult)
            cols = slice(c0 * mult, (c0 + g) * mult)
            req = None if req_all is None else Requant(
                req_all.bias[cols], req_all.multiplier[cols], req_all.shift[cols], req_all.out_zp,
                req_all.clamp_lo, req_all.clamp_hi, req_all.double_round, req_all.out_bits)
            out.append((Gemm(x, wg.reshape(taps * g, g * mult), in_zp, w_zp, req, window), cols))
        (oh, ow), M = window.out_hw, window.gemm_shape[0]
        return out, (x.shape[0], oh, ow, c * mult), M * taps * c * mult
    if op == "TRANSPOSE_CONV2D":
        w = np.asarray(attrs["weight"])
        oc, ic = w.shape[0], w.shape[3]
        req = requant_of(oc, attrs.get("bias"))
        in_zp, w_zp = attrs.get("input_zp", 0), attrs.get("weight_zp", 0)
        out = [(Gemm(x, np.ascontiguousarray(ph.weight.reshape(oc, -1).T), in_zp, w_zp, req, ph.window), ph)
               for ph in phases(x.shape, w, attrs)]
        macs = sum(ph.window.gemm_shape[0] * ph.real_taps * ic * oc for _, ph in out)   # weight_zp taps are no MACs
        return out, tuple(int(v) for v in attrs["out_shape"]), macs
    if op == "FULLY_CONNECTED":
        w = np.asarray(attrs["weight"])
        req = requant_of(w.shape[0], attrs.get("bias"))
        gemm = Gemm(np.ascontiguousarray(x), np.ascontiguousarray(w.T), attrs.get("input_zp", 0),
                    attrs.get("weight_zp", 0), req)
        return [(gemm, slice(0, w.shape[0]))], (x.shape[0], w.shape[0]), x.shape[0] * x.shape[1] * w.shape[0]
    if op == "MATMUL":
        b = np.asarray(inputs[1])
        nb, h, c = x.shape
        width = b.shape[2]
        out = []
        for i in range(nb):
            req = requant_of(width, None)
            out.append((Gemm(np.ascontiguousarray(x[i]), np.ascontiguousarray(b[i]), attrs.get("A_zp", 0),
                             attrs.get("B_zp", 0), req), (i, slice(0, width))))
        return out, (nb, h, width), nb * h * c * width
    raise UnsupportedError(f"tosa.{op} does not run on the NPU array",
                           hint=f"the array runs {', '.join('tosa.' + o for o in LAYER_OPS)}")


def place_output(out: np.ndarray, op: str, where, value: np.ndarray) -> None:
    """Puts one GEMM's output (`value`, [M, N]) where `_gemms` says it belongs in the layer output."""
    if op == "MATMUL":
        out[where[0], :, where[1]] = value
    elif isinstance(where, Phase):
        where.place(out, value)
    else:
        out.reshape(-1, out.shape[-1])[:, where] = value


def add_host_bias(out: np.ndarray, fused: bool, attrs: dict) -> list[str]:
    """Without a fused RESCALE the int32 sums leave the NPU without bias: added here (wrapping
    like the accumulators); returns the host step for the report."""
    if fused or attrs.get("bias") is None:
        return []
    bias = np.asarray(attrs["bias"], np.int64)
    out[...] = (out.astype(np.int64) + bias).astype(np.uint32).astype(np.int32)
    return ["bias add (no fused RESCALE)"]


def layer_gemms(geom: Geometry, op: str, inputs, attrs: dict, rescale: dict | None = None,
                clamp: dict | None = None, out_bits: int = 8) -> list[Gemm]:
    """The GEMMs run_layer compiles for one layer (one per program), e.g. for a mapping search."""
    return [gemm for gemm, _ in _gemms(op, inputs, attrs, rescale, clamp, geom, out_bits)[0]]


def run_layer(geom: Geometry, op: str, inputs, attrs: dict, rescale: dict | None = None,
              clamp: dict | None = None, engine="model", name: str = "layer", out_bits: int = 8,
              mapping: MappingPolicy | None = None) -> LayerResult:
    """Compiles and runs one layer; the output is int8 (int16 with out_bits 16) with a fused
    RESCALE, else int32. int16 activations (16x8) and int16 MATMUL operands (16x16) run as
    byte-plane passes into int48 accumulators (qsim/npu/array/wide.py).
    `mapping`: how each GEMM is mapped (qsim/npu/mapping/policy.py; default the fixed rule)."""
    engine = Engine.parse(engine)
    gemms, out_shape, macs = _gemms(op, inputs, attrs, rescale, clamp, geom, out_bits)
    fused = rescale is not None
    out = np.zeros(out_shape, {8: np.int8, 16: np.int16}[out_bits] if fused else np.int32)
    total = CycleStats()
    dram = {"input": 0, "weight": 0, "output": 0}
    host = []
    runs = []
    events = EventCounts()
    labels = []
    for gemm, where in gemms:
        program, choice = compile_mapped(geom, gemm, mapping or FIXED_POLICY)
        labels.append(choice.mapping.label)
        runs.append(ProgramRecord(where, program, total.total_cycles))
        run = run_program(geom, program, engine, what=f"{name} (tosa.{op})")
        place_output(out, op, where, run.output)
        for key in ("total_cycles", "compute_cycles", "fill_drain_cycles", "stall_cycles", "pe_mac_slots"):
            setattr(total, key, getattr(total, key) + getattr(run.stats, key))
        dram["input"] += program.dram_input_bytes
        dram["weight"] += program.dram_weight_bytes
        dram["output"] += program.dram_output_bytes
        events = events + program_events(geom, program.instrs, program.dram_input_bytes)
    host += add_host_bias(out, fused, attrs)
    cycles = total.total_cycles
    return LayerResult(op=op, output=out, macs=int(macs), cycles=cycles,
                       compute_cycles=total.compute_cycles, fill_drain_cycles=total.fill_drain_cycles,
                       stall_cycles=total.stall_cycles,
                       utilization=macs / (cycles * geom.rows * geom.cols) if cycles else 0.0,
                       dram_bytes=dram, programs=len(gemms), engine=engine.value, host_steps=host,
                       mac_slots=total.pe_mac_slots, runs=runs, events=events, mappings=labels)
