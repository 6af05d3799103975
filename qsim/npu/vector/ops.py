"""TOSA 0.30 integer operators as vector-unit programs (qsim/npu/vector/program.py).

Every operator is a loop nest over its output tensor (row-major in DRAM, as the kernels
hold it): C lanes carry C consecutive elements of one output dimension (the last one,
or for reductions over the last axis the one before), tiles of C lanes are a loop level,
the other output dimensions are the outer levels, and the window or reduced axis, for
pooling and reductions, the innermost levels (one reduction group). Each operand is
read through byte strides per output dimension: a broadcast dimension has stride 0, a
TRANSPOSE permutes the input strides, a SLICE offsets the base, CONCAT writes each input
at its offset of the output. So every data movement is an address pattern of the vector
DMA, with the vector unit passing the values through.

Operators and their vector instruction (hw/vector_isa.py):
  ADD, SUB, MUL (shift), MAXIMUM, MINIMUM  the op on A and B (B broadcast by strides)
  ARITHMETIC_RIGHT_SHIFT, LOGICAL_LEFT/RIGHT_SHIFT, INTDIV, GREATER, GREATER_EQUAL, EQUAL,
  BITWISE_AND/OR/XOR, LOGICAL_AND/OR/XOR   likewise (ASR or ASR_ROUND, LSL/LSR unclamped: the
                                           writer keeps the type's low bytes, as TOSA truncates;
                                           LSR's mul_shift is the type's width)
  CLZ, ABS                                 the unary op on A
  NEGATE, BITWISE_NOT, LOGICAL_NOT         SUB from a broadcast 0 (zp_b = input1_zp), XOR with a
                                           broadcast -1 / 1 (one element in DRAM)
  SELECT                                   three jobs: c ? x : 0, c ? 0 : y, their OR
  CLAMP                                    PASS, clamp [min_val, max_val]
  RESCALE                                  PASS with zp_a = input_zp and the output scaler
                                           (per-channel: one configuration per lane tile)
  CAST (integer to integer)                PASS; narrowing keeps the low bytes (TOSA truncates)
  TABLE                                    LOAD_TABLE (the table through lane 0), then TABLE8/16
  MAX_POOL2D, AVG_POOL2D                   REDUCE_MAX / AVG over the window group; padding of
                                           MAX_POOL2D: the input is first copied into a
                                           scratch region filled with the type's minimum (two
                                           PASS jobs, the fill clamped to one value); padding
                                           of AVG_POOL2D: runs of equally clipped windows
                                           (windows.py)
  RESIZE                                   runs of one sampling phase (windows.py):
                                           PASS (nearest) or DOT over the taps (bilinear)
  REDUCE_SUM, REDUCE_MAX, REDUCE_MIN, ARGMAX   the reduction over the axis group
  REDUCE_ALL, REDUCE_ANY                   REDUCE_MIN, REDUCE_MAX of the 0/1 boolean bytes
  TRANSPOSE, SLICE, CONCAT, PAD, REVERSE   PASS over the address pattern (PAD: fill, then copy)
  TILE                                     one PASS copy of the input per repetition
  GATHER (constant indices)                one PASS copy per run of consecutive indices of a
                                           batch (the indices are part of the program, like a
                                           layout)
  GATHER (indices computed at run time)    one PASS job in the DMA's indirect mode: per beat
                                           the index (operand B), then the row it names
Anything else raises UnsupportedError with the reason, and the planner runs it on the host.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...errors import UnpredictableError, UnsupportedError
from ...hw.params import Geometry
from ...hw.vector_isa import INT32_MAX, INT32_MIN, VectorInstr, VectorOp
from . import windows as vector_windows
from .program import DramImage, Job, Stream, make_config, vector_program
from .program import strides_of as _strides

# Booleans are bytes holding 0 or 1 (numpy's and the kernels' layout): streamed as int8.
SIGNED = {np.dtype(np.int8): 1, np.dtype("<i2"): 2, np.dtype("<i4"): 4, np.dtype(bool): 1}
ELEMENTWISE = {"ADD": VectorOp.ADD, "SUB": VectorOp.SUB, "MUL": VectorOp.MUL,
               "MAXIMUM": VectorOp.MAXIMUM, "MINIMUM": VectorOp.MINIMUM,
               "LOGICAL_LEFT_SHIFT": VectorOp.LSL, "LOGICAL_RIGHT_SHIFT": VectorOp.LSR,
               "INTDIV": VectorOp.INTDIV, "GREATER": VectorOp.GREATER,
               "GREATER_EQUAL": VectorOp.GREATER_EQUAL, "EQUAL": VectorOp.EQUAL,
               "BITWISE_AND": VectorOp.AND, "BITWISE_OR": VectorOp.OR, "BITWISE_XOR": VectorOp.XOR,
               "LOGICAL_AND": VectorOp.AND, "LOGICAL_OR": VectorOp.OR, "LOGICAL_XOR": VectorOp.XOR}
# Results that are the low bytes of a 32-bit lane (TOSA truncates them to in_out_t), not clamped.
TRUNCATED = frozenset({"LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"})
# Unary operators with a constant second operand (one element in DRAM, broadcast to every lane):
# op(constant, x) for NEGATE (0 - (x - input1_zp)), op(x, constant) for the NOTs.
UNARY_WITH_CONSTANT = {"NEGATE": (VectorOp.SUB, 0), "BITWISE_NOT": (VectorOp.XOR, -1),
                       "LOGICAL_NOT": (VectorOp.XOR, 1)}
UNARY = {"CLZ": VectorOp.CLZ, "ABS": VectorOp.ABS}
REDUCE = {"REDUCE_SUM": VectorOp.REDUCE_SUM, "REDUCE_MAX": VectorOp.REDUCE_MAX,
          "REDUCE_MIN": VectorOp.REDUCE_MIN, "ARGMAX": VectorOp.ARGMAX,
          # booleans are bytes 0/1: all = the minimum, any = the maximum
          "REDUCE_ALL": VectorOp.REDUCE_MIN, "REDUCE_ANY": VectorOp.REDUCE_MAX}


def element_bytes(dtype, what: str) -> int:
    dtype = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    if dtype not in SIGNED:
        raise UnsupportedError(f"{what} is {np.dtype(dtype)}: the vector DMA streams signed 8-, 16- and "
                               "32-bit integers and booleans (it sign-extends every element)")
    return SIGNED[dtype]


def _range(dtype) -> tuple[int, int]:
    if np.dtype(dtype) == bool:
        return 0, 1
    info = np.iinfo(dtype)
    return max(int(info.min), INT32_MIN), min(int(info.max), INT32_MAX)


def _table_load(table: np.ndarray, image: DramImage) -> list:
    nbytes = 1 if len(table) == 256 else 2
    base = image.add(np.asarray(table, np.int8 if nbytes == 1 else "<i2"))
    stream = Stream(base, (nbytes,), nbytes, nbytes)
    return [make_config(VectorInstr(VectorOp.LOAD_TABLE, 0), 1, [len(table)], stream,
                        Stream(0, (0,), 1, 1), out_counts=[1])]


def _scale_fields(attrs: dict, which: str) -> dict:
    """The input scaler fields of a per-tensor RESCALE fused in front of a binary operator."""
    return {f"zp_{which}": int(attrs.get("input_zp", 0)), f"scale_{which}": True,
            f"mult_{which}": int(np.asarray(attrs["multiplier"]).reshape(-1)[0]),
            f"shift_{which}": int(np.asarray(attrs["shift"]).reshape(-1)[0]),
            f"dr_{which}": bool(attrs.get("double_round", False)) and bool(attrs.get("scale32", True))}


def _output_scale(attrs: dict, first: int, lanes: int, C: int) -> dict:
    """The output scaler fields of a RESCALE (per-channel: this lane tile's channels, the
    unused lanes padded; their results are dropped)."""
    mult = np.asarray(attrs["multiplier"], np.int64).reshape(-1)
    shift = np.asarray(attrs["shift"], np.int64).reshape(-1)
    per_channel = bool(attrs.get("per_channel", False))
    sl = slice(first, first + lanes) if per_channel else slice(0, 1)
    m_, s_ = [int(v) for v in mult[sl]], [int(v) for v in shift[sl]]
    if per_channel:
        m_, s_ = m_ + [0] * (C - lanes), s_ + [0] * (C - lanes)
    return dict(scale_o=True, mult_o=tuple(m_), shift_o=tuple(s_), zp_o=int(attrs.get("output_zp", 0)),
                dr_o=bool(attrs.get("double_round", False)) and bool(attrs.get("scale32", True)))


def fusable_input_rescale(attrs: dict, in_dtype, out_dtype) -> bool:
    """A RESCALE that the vector unit's input scaler A'/B' can take in front of a binary op:
    per-tensor, to int32 with output zero point 0 (so its clip to int32 is a no-op)."""
    return (not attrs.get("per_channel", False) and np.dtype(out_dtype) == np.int32
            and int(attrs.get("output_zp", 0)) == 0 and np.dtype(in_dtype) in (np.int8, np.int16))


def _broadcast(base: int, shape, nbytes: int, out_shape) -> tuple:
    """An operand read at the output's index, numpy broadcasting: its dimensions aligned to the
    output's last ones, stride 0 where it has size 1 and the output does not."""
    strides = _strides(shape, nbytes)
    rank = len(out_shape)
    padded = [1] * (rank - len(shape)) + list(shape)
    pstr = [0] * (rank - len(shape)) + strides
    return base, [0 if padded[d] == 1 and out_shape[d] != 1 else pstr[d] for d in range(rank)], nbytes


def compile_vector_chain(geom: Geometry, ops: list, inputs: list, out_shape, out_dtype):
    """A fused chain on one VRUN job per lane tile: [RESCALE a] [RESCALE b] BINARY [RESCALE]
    [CLAMP], or RESCALE CLAMP. `ops` = [(kind, attrs, role)], role in "a", "b", "op", "out",
    "clamp"; `inputs` = the chain's tensor inputs (A, then B)."""
    C = geom.cols
    image = DramImage()
    arrays = [np.ascontiguousarray(x) for x in inputs]
    sizes = [element_bytes(x.dtype, "fused chain input") for x in arrays]
    bases = [image.add(x) for x in arrays]
    o_bytes = element_bytes(out_dtype, "fused chain output")
    out_shape = tuple(int(d) for d in out_shape)
    out_base = image.reserve(int(np.prod(out_shape, dtype=np.int64)) * o_bytes)
    lo, hi = _range(out_dtype)
    roles = {role: (kind, attrs) for kind, attrs, role in ops}
    clamp_lo, clamp_hi = lo, hi
    if "clamp" in roles:
        c = roles["clamp"][1]
        clamp_lo, clamp_hi = max(lo, int(c["min_val"])), min(hi, int(c["max_val"]))
    kind = ELEMENTWISE[roles["op"][0]] if "op" in roles else VectorOp.PASS
    shift = int(roles["op"][1].get("shift", 0)) if roles.get("op", ("",))[0] == "MUL" else 0
    fixed = {}
    for which in ("a", "b"):
        if which in roles:
            fixed.update(_scale_fields(roles[which][1], which))
    if kind is VectorOp.PASS and "out" not in roles:
        raise UnsupportedError("a fused chain needs a binary operator or an output RESCALE")
    per_channel = "out" in roles and bool(roles["out"][1].get("per_channel", False))
    if kind is VectorOp.PASS:          # RESCALE + CLAMP: the RESCALE's input zero point at P0
        fixed["zp_a"] = int(roles["out"][1].get("input_zp", 0))

    def instr(first, lanes):
        extra = _output_scale(roles["out"][1], first, lanes, C) if "out" in roles else {}
        return VectorInstr(kind, 0, mul_shift=shift, clamp_lo=clamp_lo, clamp_hi=clamp_hi, **fixed, **extra)

    operands = [_broadcast(bases[k], x.shape, sizes[k], out_shape) for k, x in enumerate(arrays)]
    configs = Job(instr, out_shape, out_base, _strides(out_shape, o_bytes), o_bytes, operands,
                  per_tile=per_channel).configs(C)
    return vector_program(geom, image, configs, out_base, out_shape, out_dtype,
                          sum(x.nbytes for x in arrays), 0)


@dataclass
class _OpJob:
    """One operator being compiled: its operands in the DRAM image and its output region. The
    builders of BUILDERS add the vector configurations of their kind of operator from it."""
    op: str
    attrs: dict
    image: DramImage
    arrays: list            # the streamed inputs (GATHER's indices are not streamed)
    sizes: list             # element bytes of each streamed input
    bases: list             # DRAM address of each streamed input
    out_shape: tuple
    out_base: int
    out_strides: list
    o_bytes: int
    lo: int                 # the output type's range (clamped to int32)
    hi: int
    C: int                  # lanes
    indices: np.ndarray | None = None       # GATHER's constant indices
    weight_bytes: int = 0                   # constant data the program adds (TABLE's table)

    def plain(self, kind=VectorOp.PASS, clamp_lo=None, clamp_hi=None, **kw):
        lo = self.lo if clamp_lo is None else clamp_lo
        hi = self.hi if clamp_hi is None else clamp_hi
        return lambda first, lanes: VectorInstr(kind, 0, clamp_lo=lo, clamp_hi=hi, **kw)

    def operand(self, k):
        """Input k read at the output's index."""
        return _broadcast(self.bases[k], self.arrays[k].shape, self.sizes[k], self.out_shape)

    def job(self, instr, operands, **kw) -> list:
        """The configurations of one job writing the whole output."""
        return Job(instr, self.out_shape, self.out_base, self.out_strides, self.o_bytes, operands,
                   **kw).configs(self.C)


def _binary(j: _OpJob) -> list:
    if j.op == "ARITHMETIC_RIGHT_SHIFT":
        kind = VectorOp.ASR_ROUND if j.attrs.get("round", False) else VectorOp.ASR
    else:
        kind = ELEMENTWISE[j.op]
    kw = {"mul_shift": int(j.attrs.get("shift", 0))} if j.op == "MUL" else {}
    if j.op == "LOGICAL_RIGHT_SHIFT":                     # the type's width: (unsigned in_out_t)
        kw["mul_shift"] = 8 * j.sizes[0]
    if j.op in TRUNCATED:
        kw.update(clamp_lo=INT32_MIN, clamp_hi=INT32_MAX)
    return j.job(j.plain(kind, **kw), [j.operand(0), j.operand(1)])


def _unary(j: _OpJob) -> list:
    return j.job(j.plain(UNARY[j.op]), [j.operand(0)])


def _unary_with_constant(j: _OpJob) -> list:
    kind, value = UNARY_WITH_CONSTANT[j.op]
    constant = (j.image.add(np.array([value], j.arrays[0].dtype)), [0] * len(j.out_shape), j.sizes[0])
    if j.op == "NEGATE":
        instr = j.plain(kind, zp_b=int(j.attrs.get("input1_zp", 0)), zp_o=int(j.attrs.get("output_zp", 0)))
        return j.job(instr, [constant, j.operand(0)])
    return j.job(j.plain(kind), [j.operand(0), constant])


def _select_op(j: _OpJob) -> list:
    return _select(j.image, [j.operand(k) for k in range(3)], j.out_shape, j.out_strides, j.o_bytes,
                   j.out_base, j.lo, j.hi, j.C)


def _clamp_or_cast(j: _OpJob) -> list:
    if j.op == "CLAMP":
        clamp = max(j.lo, int(j.attrs["min_val"])), min(j.hi, int(j.attrs["max_val"]))
    else:
        clamp = INT32_MIN, INT32_MAX
    return j.job(j.plain(clamp_lo=clamp[0], clamp_hi=clamp[1]), [j.operand(0)])


def _rescale(j: _OpJob) -> list:
    attrs, lo, hi, C = j.attrs, j.lo, j.hi, j.C
    mult = np.asarray(attrs["multiplier"], np.int64).reshape(-1)
    shift = np.asarray(attrs["shift"], np.int64).reshape(-1)
    per_channel = bool(attrs.get("per_channel", False))
    double = bool(attrs.get("double_round", False)) and bool(attrs.get("scale32", True))

    def rescale(first, lanes):
        # per-channel: this tile's channels, the unused lanes padded (their results are dropped)
        sl = slice(first, first + lanes) if per_channel else slice(0, 1)
        m_, s_ = list(mult[sl]), list(shift[sl])
        if per_channel:
            m_, s_ = m_ + [0] * (C - lanes), s_ + [0] * (C - lanes)
        return VectorInstr(VectorOp.PASS, 0, zp_a=int(attrs.get("input_zp", 0)), scale_o=True,
                           mult_o=tuple(int(m) for m in m_), shift_o=tuple(int(s) for s in s_),
                           dr_o=double, zp_o=int(attrs.get("output_zp", 0)), clamp_lo=lo, clamp_hi=hi)
    return j.job(rescale, [j.operand(0)], per_tile=per_channel)


def _table(j: _OpJob) -> list:
    table = np.asarray(j.attrs["table"])
    configs = _table_load(table, j.image)
    j.weight_bytes += table.size * (1 if len(table) == 256 else 2)
    kind = VectorOp.TABLE8 if len(table) == 256 else VectorOp.TABLE16
    return configs + j.job(j.plain(kind), [j.operand(0)])


def _avg_pool(j: _OpJob) -> list:
    return vector_windows.avg_pool(j.image, j.attrs, j.arrays[0], j.bases[0], j.sizes[0], j.out_shape,
                                   j.out_base, j.o_bytes, j.lo, j.hi, j.C)


def _resize(j: _OpJob) -> list:
    return vector_windows.resize(j.image, j.attrs, j.arrays[0], j.bases[0], j.sizes[0], j.out_shape,
                                 j.out_base, j.o_bytes, j.C)


def _max_pool_op(j: _OpJob) -> list:
    return _max_pool(j.attrs, j.arrays[0], j.bases[0], j.sizes[0], j.image, j.out_shape, j.out_base,
                     j.out_strides, j.o_bytes, j.lo, j.hi, j.C)


def _reduce_op(j: _OpJob) -> list:
    return _reduce(j.op, j.attrs, j.arrays[0], j.bases[0], j.sizes[0], j.out_shape, j.out_base, j.o_bytes,
                   j.lo, j.hi, j.C)


def _view(j: _OpJob) -> list:
    """TRANSPOSE, SLICE, REVERSE: one copy through a view of the input's strides."""
    x = j.arrays[0]
    strides = _strides(x.shape, j.sizes[0])
    base = j.bases[0]
    if j.op == "TRANSPOSE":
        view = [strides[p] for p in j.attrs["perms"]]
    elif j.op == "SLICE":
        base += sum(int(s) * st for s, st in zip(j.attrs["start"], strides))
        view = strides
    else:
        axis = int(j.attrs["axis"])
        base += (x.shape[axis] - 1) * strides[axis]
        view = [-s if d == axis else s for d, s in enumerate(strides)]
    return j.job(j.plain(), [(base, view, j.sizes[0])])


def _concat(j: _OpJob) -> list:
    configs, axis, offset = [], int(j.attrs["axis"]), 0
    for k, x in enumerate(j.arrays):
        configs += Job(j.plain(), x.shape, j.out_base + offset * j.out_strides[axis], j.out_strides, j.o_bytes,
                       [(j.bases[k], _strides(x.shape, j.sizes[k]), j.sizes[k])]).configs(j.C)
        offset += x.shape[axis]
    return configs


def _tile(j: _OpJob) -> list:
    configs, x = [], j.arrays[0]
    for reps in np.ndindex(*(int(m) for m in j.attrs["multiples"])):
        offset = sum(r * n * st for r, n, st in zip(reps, x.shape, j.out_strides))
        configs += Job(j.plain(), x.shape, j.out_base + offset, j.out_strides, j.o_bytes,
                       [(j.bases[0], _strides(x.shape, j.sizes[0]), j.sizes[0])]).configs(j.C)
    return configs


def _gather_op(j: _OpJob) -> list:
    if j.indices is None:
        return _gather_indirect(j)
    return _gather(j.arrays[0], j.bases[0], j.sizes[0], j.indices, j.out_base, j.out_strides, j.o_bytes, j.C)


def _pad_op(j: _OpJob) -> list:
    return _pad(j.arrays[0], j.bases[0], j.sizes[0], [tuple(p) for p in j.attrs["padding"]],
                int(j.attrs.get("pad_const", 0)), j.out_shape, j.out_base, j.out_strides, j.o_bytes, j.C)


# How each operator kind becomes vector configurations (the module docstring's table).
BUILDERS = {**{op: _binary for op in [*ELEMENTWISE, "ARITHMETIC_RIGHT_SHIFT"]},
            **{op: _unary for op in UNARY},
            **{op: _unary_with_constant for op in UNARY_WITH_CONSTANT},
            **{op: _reduce_op for op in REDUCE},
            "SELECT": _select_op, "CLAMP": _clamp_or_cast, "CAST": _clamp_or_cast, "RESCALE": _rescale,
            "TABLE": _table, "AVG_POOL2D": _avg_pool, "RESIZE": _resize, "MAX_POOL2D": _max_pool_op,
            "TRANSPOSE": _view, "SLICE": _view, "REVERSE": _view, "CONCAT": _concat, "TILE": _tile,
            "GATHER": _gather_op, "PAD": _pad_op}
VECTOR_OPS = frozenset(BUILDERS)


def compile_vector_op(geom: Geometry, op: str, attrs: dict, inputs: list, out_shape, out_dtype,
                      run_time_indices: bool = False):
    """The program of one operator on the vector unit, or UnsupportedError saying why not.
    `run_time_indices`: GATHER's indices are computed by the graph, so they stream through the
    vector DMA's indirect mode instead of shaping the address pattern."""
    if op not in BUILDERS:
        raise UnsupportedError(f"tosa.{op} has no vector-unit mapping")
    image = DramImage()
    arrays = [np.ascontiguousarray(x) for x in inputs if x is not None]
    indices = None
    if op == "GATHER":
        require_indices(np.asarray(arrays[1]), arrays[0].shape[1])
        if run_time_indices:    # streamed as operand B, int32
            arrays[1] = np.ascontiguousarray(arrays[1], "<i4")
        else:                   # the indices shape the address pattern; only the values stream
            indices = np.asarray(arrays.pop(1), np.int64)
    sizes = [element_bytes(x.dtype, f"tosa.{op} input") for x in arrays]
    bases = [image.add(x) for x in arrays]
    o_bytes = element_bytes(out_dtype, f"tosa.{op} output")
    out_shape = tuple(int(d) for d in out_shape)
    out_base = image.reserve(int(np.prod(out_shape, dtype=np.int64)) * o_bytes)
    lo, hi = _range(out_dtype)
    job = _OpJob(op, attrs, image, arrays, sizes, bases, out_shape, out_base, _strides(out_shape, o_bytes),
                 o_bytes, lo, hi, geom.cols, indices)
    configs = BUILDERS[op](job)
    return vector_program(geom, image, configs, out_base, out_shape, out_dtype,
                          sum(x.nbytes for x in arrays), job.weight_bytes)


def _select(image, operands, out_shape, out_strides, o_bytes, out_base, lo, hi, C) -> list:
    """SELECT(cond, x, y) with two operand streams: t = cond ? x : 0, u = cond ? 0 : y (the
    condition's zero point 1 turns 1/0 into 0/-1), then out = t | u (one of them is 0)."""
    cond, x, y = operands
    size = int(np.prod(out_shape, dtype=np.int64)) * o_bytes
    t, u = image.reserve(size), image.reserve(size)
    dense = _strides(out_shape, o_bytes)

    def instr(op, zp_a=0):
        return lambda f, n: VectorInstr(op, 0, zp_a=zp_a, clamp_lo=lo, clamp_hi=hi)
    jobs = [Job(instr(VectorOp.SELECT), out_shape, t, dense, o_bytes, [cond, x]),
            Job(instr(VectorOp.SELECT, zp_a=1), out_shape, u, dense, o_bytes, [cond, y]),
            Job(instr(VectorOp.OR), out_shape, out_base, out_strides, o_bytes,
                [(t, dense, o_bytes), (u, dense, o_bytes)])]
    return [config for job in jobs for config in job.configs(C)]


def _fill_and_copy(x_base, x_shape, x_bytes, value, region_shape, region_base, region_strides, o_bytes,
                   before, C) -> list:
    """PAD as two jobs: the region filled with `value` (PASS clamped to [value, value], reading
    one element broadcast), then the input copied to its interior."""
    fill = Job(lambda f, n: VectorInstr(VectorOp.PASS, 0, clamp_lo=value, clamp_hi=value), region_shape,
               region_base, region_strides, o_bytes, [(x_base, [0] * len(region_shape), x_bytes)])
    inner = region_base + sum(b * s for b, s in zip(before, region_strides))
    copy = Job(lambda f, n: VectorInstr(VectorOp.PASS, 0), x_shape, inner, region_strides, o_bytes,
               [(x_base, _strides(x_shape, x_bytes), x_bytes)])
    return fill.configs(C) + copy.configs(C)


def _gather(values, base, nbytes, indices, out_base, out_strides, o_bytes, C) -> list:
    """GATHER [N, K, Ch] by constant indices [N, W]: output row (n, w) is values[n, indices[n, w]];
    each run of consecutive indices is one copy job."""
    n_batch, extent, ch = values.shape
    if indices.size and (indices.min() < 0 or indices.max() >= extent):
        raise UnsupportedError(f"GATHER indices outside [0, {extent})")
    row = _strides(values.shape, nbytes)
    out = []
    for n in range(n_batch):
        w = 0
        while w < indices.shape[1]:
            run = 1
            while w + run < indices.shape[1] and indices[n, w + run] == indices[n, w] + run:
                run += 1
            out += Job(lambda f, k: VectorInstr(VectorOp.PASS, 0), (run, ch),
                       out_base + n * out_strides[0] + w * out_strides[1], out_strides[1:], o_bytes,
                       [(base + n * row[0] + int(indices[n, w]) * row[1], row[1:], nbytes)]).configs(C)
            w += run
    return out


def require_indices(indices: np.ndarray, extent: int) -> None:
    """TOSA 0.30 2.11.1 REQUIRE(0 <= k && k < K): the DMA adds index * row bytes unchecked, so
    the compiler refuses an index outside the values (the kernels' GATHER raises the same)."""
    bad = (indices < 0) | (indices >= extent)
    if bad.any():
        n, w = (int(i) for i in np.argwhere(bad)[0])
        raise UnpredictableError(f"GATHER: REQUIRE(0 <= k && k < K) fails: indices[{n}, {w}] = "
                                 f"{int(indices[n, w])}, K = {extent}",
                                 hint="the indices must name rows of the values tensor")


def _gather_indirect(j: _OpJob) -> list:
    """GATHER [N, K, Ch] by indices [N, W] that the graph computes: one job over (n, w, lane
    tile) in the vector DMA's indirect mode. Each beat reads index[n, w] (operand B, int32,
    broadcast), then lanes of row values[n, index] at A's beat address (batch n, tile) +
    index * Ch * bytes (a_lane carries the row's bytes)."""
    values, idx = j.arrays
    n_batch, extent, ch = values.shape
    b = j.sizes[0]
    a = (j.bases[0], [extent * ch * b, 0, b], b)
    index = (j.bases[1], [idx.shape[1] * 4, 4, 0], 4)
    configs = j.job(j.plain(), [a, index], lane_dim=2)
    return [replace(c, pattern={**c.pattern, "a_indirect": 1, "a_lane": ch * b}) for c in configs]


def _pad(x, x_base, x_bytes, padding, value, out_shape, out_base, out_strides, o_bytes, C) -> list:
    return _fill_and_copy(x_base, x.shape, x_bytes, value, out_shape, out_base, out_strides, o_bytes,
                          [b for b, _ in padding], C)


def _max_pool(attrs, x, x_base, x_bytes, image, out_shape, out_base, out_strides, o_bytes, lo, hi, C):
    ky, kx = (int(v) for v in attrs["kernel"])
    sy, sx = (int(v) for v in attrs["stride"])
    pt, pb, pl, pr = (int(v) for v in attrs["pad"])
    n, h, w, ch = x.shape
    configs = []
    if any((pt, pb, pl, pr)):
        low = int(np.iinfo(x.dtype).min)     # MAX_POOL2D pads with minimum<in_out_t>
        shape = (n, h + pt + pb, w + pl + pr, ch)
        base = image.reserve(int(np.prod(shape)) * x_bytes)
        strides = _strides(shape, x_bytes)
        configs += _fill_and_copy(x_base, x.shape, x_bytes, low, shape, base, strides, x_bytes,
                                  (0, pt, pl, 0), C)
        x_base, (n, h, w, ch) = base, shape
    s = _strides((n, h, w, ch), x_bytes)
    view = [s[0], sy * s[1], sx * s[2], s[3]]
    job = Job(lambda first, lanes: VectorInstr(VectorOp.REDUCE_MAX, 0, clamp_lo=lo, clamp_hi=hi), out_shape,
              out_base, out_strides, o_bytes, [(x_base, view, x_bytes)], group=[(kx, [s[2]]), (ky, [s[1]])])
    return configs + job.configs(C)


def _reduce(op, attrs, x, x_base, x_bytes, out_shape, out_base, o_bytes, lo, hi, C):
    axis = int(attrs["axis"])
    s = _strides(x.shape, x_bytes)
    kept = [d for d in range(x.ndim) if d != axis]
    shape = [x.shape[d] for d in kept] or [1]
    view = [s[d] for d in kept] or [0]
    strides = _strides(shape, o_bytes)
    kind = REDUCE[op]
    job = Job(lambda f, n: VectorInstr(kind, 0, clamp_lo=lo, clamp_hi=hi), shape, out_base, strides,
              o_bytes, [(x_base, view, x_bytes)], group=[(x.shape[axis], [s[axis]])])
    return job.configs(C)


# Operators that only reinterpret a tensor (the DRAM bytes already are the result): host, free.
HOST_OPS = frozenset({"RESHAPE", "IDENTITY", "CONST"})
_STREAMED = {"i8", "i16", "i32", "bool"}


def vector_support(graph, op) -> str | None:
    """Why `op` cannot run on the vector unit (decided from the graph alone), or None."""
    short = op.kind.short_name
    if short not in VECTOR_OPS:
        return f"tosa.{short} has no vector-unit mapping"
    for name in [n for n in op.inputs if n] + list(op.outputs):
        dtype = graph.tensor(name).dtype
        if dtype.short not in _STREAMED:
            return (f"tensor {name!r} is {dtype.short}: the vector DMA streams signed 8-, 16- and "
                    "32-bit integers and booleans")
    return None
