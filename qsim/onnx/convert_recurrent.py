"""ONNX LSTM and GRU → NNEF 2.0 standard operators, the static sequence unrolled at import.

Every time step becomes the operators a cell is made of: `nn.linear` for the recurrent
projection (H·Rᵀ), `math.add`, `nn.sigmoid` / `math.tanh` for the gates, `math.mul`,
`math.add` / `math.sub` for the state update, `layout.slice` to take a step's rows and a gate's
columns. The input projection X·Wᵀ + Wb + Rb of all steps is one `nn.linear` over the
[seq·batch, input] matrix before the loop (one large product instead of seq small ones; the
same sums). Unrolled, each gate and state tensor of each step is a tensor of its own, so
`qsim quantize` calibrates it and lowers it with the rules every other network uses (TABLE
gates, rescaled products and sums), and the NPU sees matrix products and element-wise ops.

Semantics (ONNX operator definitions, LSTM-14 / GRU-14; earlier versions agree on everything
read here): W [D, G·H, I], R [D, G·H, H], B [D, 2·G·H] = (Wb, Rb) with gate order i, o, f, c
(LSTM, G = 4) and z, r, h (GRU, G = 3); D = 2 for direction 'bidirectional' (forward first);
Y [S, D, N, H], Y_h / Y_c [D, N, H] (layout 0), or [N, S, D, H] and [N, D, H] (layout 1, X
[N, S, I]). The reverse direction reads the steps from last to first and writes Y at each
step's own position. A missing initial state is zero: the first step then drops the terms
that read it (H·Rᵀ, f⊙C), which is exact. GRU: h' = (1 - z)⊙n + z⊙h is computed as
n + z⊙(h - n) (no constant 1 to quantize; equal in exact arithmetic, one rounding fewer).

Refused with a located error: `clip`, activations other than the defaults (Sigmoid, Tanh,
Tanh for LSTM; Sigmoid, Tanh for GRU), LSTM `input_forget`, `sequence_lens` that differ from
the sequence length (per-sequence masking would need data-dependent steps), weights computed
at run time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .builder import F32, NodeContext, Value
from .convert_base import NO_ALIGN, binary, converter, unary

_DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}
_GATES = {"LSTM": 4, "GRU": 3}
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
# the longest sequence unrolled: some 30 operators per step and direction, so 4,096 steps are
# already a graph of 10^5 operators (minutes to quantize); a longer one is refused, not hung on
MAX_STEPS = 4096


@dataclass(frozen=True)
class _Cell:
    """What the unrolled steps of one direction need: weights of that direction as constants."""
    op: str
    hidden: int
    batch: int
    steps: int
    reverse: bool
    recurrence: np.ndarray          # R [G·H, H]
    recurrent_bias: np.ndarray      # Rb [G·H]
    peephole: np.ndarray | None     # P [3·H] (i, o, f), LSTM only; None when absent or zero
    @property
    def tag(self) -> str:
        return "reverse" if self.reverse else "forward"

    # hint → the constant every step reads (one graph tensor for R, not one per step)
    shared: dict = field(default_factory=dict, compare=False)

    def constant(self, ctx: NodeContext, hint: str, array: np.ndarray) -> Value:
        if hint not in self.shared:
            self.shared[hint] = _const(ctx, hint, array)
        return self.shared[hint]


def _const(ctx: NodeContext, hint: str, array) -> Value:
    """An import-time constant (materialized when an op reads it), under a fresh name."""
    name = ctx.builder.fresh(f"{ctx.label}.{hint}")
    ctx.builder.reserved.add(name)
    return Value(name, F32, tuple(np.shape(array)), np.ascontiguousarray(array, dtype=np.float32))


def _weights(ctx: NodeContext, index: int, what: str, shape: tuple) -> np.ndarray:
    data = ctx.constant(index, what)
    if tuple(data.shape) != shape:
        ctx.fail(f"'{what}' has shape {list(data.shape)}, expected {list(shape)}",
                 hint="W is [num_directions, gates·hidden_size, input_size], R [num_directions, "
                      "gates·hidden_size, hidden_size], B [num_directions, 2·gates·hidden_size]")
    if data.dtype != np.float32:
        ctx.fail(f"'{what}' is {data.dtype}; qsim executes {ctx.op_type} on float32", unsupported=True,
                 hint="convert the model to float32")
    return data


def _check_attributes(ctx: NodeContext, directions: int) -> None:
    if ctx.attr("clip") is not None:
        ctx.fail("the cell clip (attribute 'clip') is not supported", unsupported=True,
                 hint="export the recurrent layer without a clip threshold")
    if ctx.attr("input_forget", 0):
        ctx.fail("input_forget=1 (coupled input and forget gates) is not supported", unsupported=True,
                 hint="export the LSTM with separate input and forget gates")
    default = _DEFAULT_ACTIVATIONS[ctx.op_type]
    given = ctx.attr("activations")
    if given is not None:
        names = tuple(a.decode() if isinstance(a, bytes) else str(a) for a in given)
        if tuple(n.lower() for n in names) != default * directions:
            ctx.fail(f"activations {list(names)} are not the defaults", unsupported=True,
                     hint=f"qsim unrolls {ctx.op_type} with the default activations "
                          f"{[n.capitalize() for n in default]} per direction")


def _sequence_lengths(ctx: NodeContext, steps: int, batch: int) -> None:
    """sequence_lens, when given, must be the full length for every sequence of the batch."""
    value = ctx.optional(4)
    if value is None:
        return
    if not value.is_constant:
        ctx.fail("'sequence_lens' is computed at run time", unsupported=True,
                 hint="qsim unrolls the static sequence; drop sequence_lens or make every length "
                      f"the sequence length {steps}")
    lengths = value.data.reshape(-1)
    if lengths.size != batch or np.any(lengths != steps):
        ctx.fail(f"'sequence_lens' {lengths[:8].tolist()} varies or differs from the sequence length {steps}",
                 unsupported=True, hint="qsim unrolls every sequence for all steps; pad the sequences to "
                                        "one length and drop sequence_lens")


def _initial_state(ctx: NodeContext, index: int, what: str, shape: tuple) -> Value | None:
    """initial_h / initial_c ([D, N, H]); None when absent or a constant of zeros."""
    value = ctx.optional(index)
    if value is None:
        return None
    if value.shape != shape:
        ctx.fail(f"'{what}' has shape {list(value.shape)}, expected {list(shape)}")
    ctx.float_input(value, what)
    if value.is_constant and not np.any(value.data):
        return None
    return value


def _state_of_direction(ctx: NodeContext, state: Value | None, direction: int, layout: int) -> Value | None:
    """[N, H] of one direction from initial_h/initial_c ([D, N, H], layout 1: [N, D, H])."""
    if state is None:
        return None
    n, h = (state.shape[0], state.shape[2]) if layout else state.shape[1:]
    axis = 1 if layout else 0
    if state.is_constant:
        part = np.take(state.data, direction, axis=axis)
        return _const(ctx, "initial_state", part)
    attrs = {"axes": (axis,), "begin": (direction,), "end": (direction + 1,), "stride": (1,)}
    piece_shape = (n, 1, h) if layout else (1, n, h)
    piece = ctx.emit1("layout.slice", [state], attrs, F32, piece_shape)
    return _reshape(ctx, piece, (n, h))


def _reshape(ctx: NodeContext, x: Value, shape: tuple, final: bool = False) -> Value:
    return ctx.emit1("layout.reshape", [x], {"axis": 0, "rank": x.rank, "shape": tuple(shape)}, F32, shape, final)


def _columns(ctx: NodeContext, x: Value, begin: int, end: int, rows: tuple[int, int] | None = None) -> Value:
    """x[rows, begin:end] of a matrix (all rows when `rows` is None); x itself when that is all."""
    r0, r1 = rows if rows is not None else (0, x.shape[0])
    if (r0, r1, begin, end) == (0, x.shape[0], 0, x.shape[1]):
        return x
    attrs = {"axes": (0, 1), "begin": (r0, begin), "end": (r1, end), "stride": (1, 1)}
    return ctx.emit1("layout.slice", [x], attrs, F32, (r1 - r0, end - begin))


def _linear(ctx: NodeContext, cell: _Cell | None, x: Value, weights: np.ndarray, bias: np.ndarray | None,
            hint: str) -> Value:
    """x·weightsᵀ (+ bias) as nn.linear (filter [out, in]); a cell's weights are shared by its steps."""
    def const(what, array):
        return _const(ctx, what, array) if cell is None else cell.constant(ctx, what, array)
    filt = const(f"{hint}.filter", weights)
    b = None if bias is None else const(f"{hint}.bias", bias)
    return ctx.emit1("nn.linear", [x, filt, b], {}, F32, (x.shape[0], weights.shape[0]))


def _state(ctx: NodeContext, kind: str, x: Value, y: Value, name: str) -> Value:
    """The element-wise op that makes a step's state, named `<node>.<direction>.t<step>.<h|c>` so
    that reports and `qsim run --dump` show which state of which step a tensor is."""
    return ctx.emit(kind, [x, y], dict(NO_ALIGN), [(F32, x.shape)], [ctx.builder.fresh(name)])[0]


def _lstm_step(ctx: NodeContext, cell: _Cell, t: int, xp: Value, h: Value | None, c: Value | None):
    """One LSTM step: xp = X_t·Wᵀ + Wb + Rb [N, 4H]; returns (H_t, C_t)."""
    n = cell.hidden
    gates = xp if h is None else binary(ctx, "math.add", xp, _linear(ctx, cell, h, cell.recurrence, None, "R"))
    p = cell.peephole
    o = None
    if p is None:
        # i, o, f are contiguous: one sigmoid over [N, 3H] where no peephole tells them apart
        iof = unary(ctx, "nn.sigmoid", _columns(ctx, gates, 0, 3 * n))
        i, o, f = (_columns(ctx, iof, k * n, (k + 1) * n) for k in range(3))
    else:           # the peepholes of i and f read C_{t-1} (none when it is the zero state)
        i_in, f_in = _columns(ctx, gates, 0, n), _columns(ctx, gates, 2 * n, 3 * n)
        i = unary(ctx, "nn.sigmoid", i_in if c is None else _peep(ctx, cell, i_in, c, p[:n], "Pi"))
        f = None if c is None else unary(ctx, "nn.sigmoid", _peep(ctx, cell, f_in, c, p[2 * n:], "Pf"))
    g = unary(ctx, "math.tanh", _columns(ctx, gates, 3 * n, 4 * n))
    name = f"{ctx.label}.{cell.tag}.t{t}"
    if c is None:
        c_new = _state(ctx, "math.mul", i, g, f"{name}.c")
    else:
        c_new = _state(ctx, "math.add", binary(ctx, "math.mul", f, c), binary(ctx, "math.mul", i, g), f"{name}.c")
    if o is None:   # the output gate's peephole reads the new cell state C_t
        o = unary(ctx, "nn.sigmoid", _peep(ctx, cell, _columns(ctx, gates, n, 2 * n), c_new, p[n:2 * n], "Po"))
    return _state(ctx, "math.mul", o, unary(ctx, "math.tanh", c_new), f"{name}.h"), c_new


def _peep(ctx: NodeContext, cell: _Cell, pre: Value, c: Value, weights: np.ndarray, hint: str) -> Value:
    return binary(ctx, "math.add", pre, binary(ctx, "math.mul", c, cell.constant(ctx, hint, weights)))


def _gru_step(ctx: NodeContext, cell: _Cell, t: int, xp: Value, h: Value | None, before_reset: bool):
    """One GRU step: xp = X_t·Wᵀ + Wb (+ Rb of z and r; + Rb of h unless linear_before_reset)."""
    n = cell.hidden
    r_mat, rb_h = cell.recurrence, cell.recurrent_bias[2 * n:]
    zr_in = _columns(ctx, xp, 0, 2 * n)
    if h is not None:
        zr_in = binary(ctx, "math.add", zr_in, _linear(ctx, cell, h, r_mat[:2 * n], None, "Rzr"))
    zr = unary(ctx, "nn.sigmoid", zr_in)
    z, r = _columns(ctx, zr, 0, n), _columns(ctx, zr, n, 2 * n)
    n_in = _columns(ctx, xp, 2 * n, 3 * n)
    if before_reset:        # r ⊙ (H·Rhᵀ + Rbh)
        rec = cell.constant(ctx, "Rbh", rb_h) if h is None else _linear(ctx, cell, h, r_mat[2 * n:], rb_h, "Rh")
        n_in = binary(ctx, "math.add", n_in, binary(ctx, "math.mul", r, rec))
    elif h is not None:     # (r ⊙ H)·Rhᵀ; Rbh is in xp
        n_in = binary(ctx, "math.add", n_in, _linear(ctx, cell, binary(ctx, "math.mul", r, h), r_mat[2 * n:], None, "Rh"))
    cand = unary(ctx, "math.tanh", n_in)
    if h is None:           # (1 - z) ⊙ n
        return _state(ctx, "math.sub", cand, binary(ctx, "math.mul", z, cand), f"{ctx.label}.{cell.tag}.t{t}.h")
    update = binary(ctx, "math.mul", z, binary(ctx, "math.sub", h, cand))
    return _state(ctx, "math.add", cand, update, f"{ctx.label}.{cell.tag}.t{t}.h")


def _input_projection(ctx: NodeContext, x_rows: Value, w: np.ndarray, b: np.ndarray, op: str, n: int,
                      before_reset: bool) -> Value:
    """X·Wᵀ plus every bias that does not meet the reset gate, for all steps: [S·N, G·H]."""
    wb, rb = b[:w.shape[0]], b[w.shape[0]:]
    bias = wb + rb
    if op == "GRU" and before_reset:
        bias = np.concatenate([bias[:2 * n], wb[2 * n:]])
    return _linear(ctx, None, x_rows, w, bias, "W")


def _run_direction(ctx: NodeContext, cell: _Cell, xp: Value, h: Value | None, c: Value | None,
                   before_reset: bool) -> tuple[list, Value, Value | None]:
    """The hidden states in time order (position t holds H after reading step t), H and C last."""
    outputs = [None] * cell.steps
    order = range(cell.steps - 1, -1, -1) if cell.reverse else range(cell.steps)
    for t in order:
        x_t = _columns(ctx, xp, 0, xp.shape[1], rows=(t * cell.batch, (t + 1) * cell.batch))
        if cell.op == "LSTM":
            h, c = _lstm_step(ctx, cell, t, x_t, h, c)
        else:
            h = _gru_step(ctx, cell, t, x_t, h, before_reset)
        outputs[t] = h
    return outputs, h, c


def _assemble(ctx: NodeContext, pieces: list, shape: tuple, perm: tuple, index: int, layout: int) -> Value:
    """Output `index` of the node from [N, H] pieces: concatenated on axis 0, reshaped to the
    layout-0 `shape`, and for layout 1 transposed by `perm`; named after the ONNX output."""
    name = ctx.output_names[index]
    flat = (sum(p.shape[0] for p in pieces), pieces[0].shape[1])
    cat = pieces[0] if len(pieces) == 1 else ctx.emit1("layout.concat", pieces, {"axis": 0}, F32, flat)
    attrs = {"axis": 0, "rank": 2, "shape": tuple(shape)}
    if not layout:
        return ctx.emit("layout.reshape", [cat], attrs, [(F32, shape)], [name])[0]
    y = ctx.emit1("layout.reshape", [cat], attrs, F32, shape)
    out_shape = tuple(shape[p] for p in perm)
    return ctx.emit("layout.transpose", [y], {"axis": 0, "perm": perm}, [(F32, out_shape)], [name])[0]


@converter("LSTM", "GRU")
def _recurrent(ctx: NodeContext) -> list:
    op, gates = ctx.op_type, _GATES[ctx.op_type]
    x = ctx.float_input(ctx.input(0, "X"), "X")
    direction = ctx.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in _DIRECTIONS:
        ctx.fail(f"direction {direction!r} is not 'forward', 'reverse' or 'bidirectional'")
    reverses = _DIRECTIONS[direction]
    d = len(reverses)
    _check_attributes(ctx, d)
    layout = int(ctx.attr("layout", 0))
    if layout not in (0, 1):
        ctx.fail(f"layout {layout} is not 0 or 1")
    if x.rank != 3:
        ctx.fail(f"X has shape {list(x.shape)}, expected rank 3 ([seq, batch, input], layout 1: [batch, seq, input])")
    steps, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
    if steps > MAX_STEPS:
        ctx.fail(f"a sequence of {steps} steps is longer than the {MAX_STEPS} qsim unrolls", unsupported=True,
                 hint="qsim unrolls recurrent layers step by step; split the sequence into shorter windows")
    w_value = ctx.input(1, "W")
    n = ctx.attr("hidden_size")
    if n is None:       # optional: then W [D, G·H, I] says it
        if w_value.rank != 3 or w_value.shape[1] % gates:
            ctx.fail(f"'W' has shape {list(w_value.shape)}, expected [num_directions, {gates}·hidden_size, input_size]")
        n = w_value.shape[1] // gates
    if int(n) <= 0:
        ctx.fail(f"hidden_size {n} is not positive")
    n = int(n)
    w = _weights(ctx, 1, "W", (d, gates * n, size))
    r = _weights(ctx, 2, "R", (d, gates * n, n))
    b = np.zeros((d, 2 * gates * n), np.float32) if ctx.optional(3) is None else _weights(ctx, 3, "B", (d, 2 * gates * n))
    _sequence_lengths(ctx, steps, batch)
    state_shape = (batch, d, n) if layout else (d, batch, n)
    h0 = _initial_state(ctx, 5, "initial_h", state_shape)
    c0 = _initial_state(ctx, 6, "initial_c", state_shape) if op == "LSTM" else None
    p = _weights(ctx, 7, "P", (d, 3 * n)) if op == "LSTM" and ctx.optional(7) is not None else None
    before_reset = bool(ctx.attr("linear_before_reset", 0)) if op == "GRU" else False

    if layout:      # steps first: the rows of step t are then one block of the projection
        x = ctx.emit1("layout.transpose", [x], {"axis": 0, "perm": (1, 0, 2)}, F32, (steps, batch, size))
    x_rows = _reshape(ctx, x, (steps * batch, size))
    per_dir = []
    for k, reverse in enumerate(reverses):
        peephole = None if p is None or not np.any(p[k]) else p[k]
        cell = _Cell(op, n, batch, steps, reverse, r[k], b[k, gates * n:], peephole)
        xp = _input_projection(ctx, x_rows, w[k], b[k], op, n, before_reset)
        per_dir.append(_run_direction(ctx, cell, xp, _state_of_direction(ctx, h0, k, layout),
                                      _state_of_direction(ctx, c0, k, layout), before_reset))
    return _outputs(ctx, per_dir, steps, batch, n, layout)


def _consumed(ctx: NodeContext, name: str) -> bool:
    """Whether a node or a graph output reads `name`: an output nothing reads (torch names Y
    and Y_h of every layer) is not assembled, so it costs no concat on the NPU."""
    if not name:
        return False
    graph = ctx.model.proto.graph if ctx.model is not None else None
    if graph is None:
        return True
    return any(o.name == name for o in graph.output) or any(name in node.input for node in graph.node)


def _outputs(ctx: NodeContext, per_dir: list, steps: int, batch: int, n: int, layout: int) -> list:
    """Y, Y_h (and Y_c) from each direction's states; only the outputs the model names."""
    d = len(per_dir)
    names = [name if _consumed(ctx, name) else "" for name in list(ctx.output_names) + ["", "", ""]]
    results: list = [None, None, None]
    if names[0]:    # [S, D, N, H]: step-major, then direction
        pieces = [per_dir[k][0][t] for t in range(steps) for k in range(d)]
        results[0] = _assemble(ctx, pieces, (steps, d, batch, n), (2, 0, 1, 3), 0, layout)
    for index in (1, 2) if ctx.op_type == "LSTM" else (1,):
        if names[index]:    # [D, N, H]
            pieces = [per_dir[k][index] for k in range(d)]
            results[index] = _assemble(ctx, pieces, (d, batch, n), (1, 0, 2), index, layout)
    return results
