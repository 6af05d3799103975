"""ONNX LSTM and GRU (qsim/onnx/convert_recurrent.py): qsim's float execution of the unrolled
cell vs onnxruntime on seeded models (recurrent_models.py) over directions, initial states,
peepholes, linear_before_reset, layout 1 and output subsets; the refusals as located errors.

onnxruntime refuses layout 1 ("Batchwise recurrent operations (layout == 1) are not
supported"), so a layout-1 model is checked against onnxruntime running the same node at layout
0 on transposed inputs, its outputs transposed back (the layouts differ only in axis order).

Bound (onnx_helpers' doc: 2·γ_n·M per sum of products, two implementations): the error of the
hidden state is propagated step by step (`_state_error_bound`). A gate pre-activation is a sum
of I + H + 2 products and biases of magnitude at most M = max row of |W|·max|x| + |R|·h_max +
|Wb| + |Rb|, so each implementation adds at most δ = 2·γ_{I+H+3}·M; an error e_h in the
previous hidden state moves it by at most ‖R‖∞·e_h (largest row sum of |R|), a peephole by
max|P|·e_c. σ has slope ≤ 1/4, tanh ≤ 1, both are float32 functions within 2 EPS32 of exact
in each implementation. |σ|, |tanh| ≤ 1, |h| ≤ h_max = max(1, max|h0|); the forget gate is
at most f_max = σ(M + max|P|·(max|c0| + S)), so |C_t| ≤ f_max·|C_t-1| + 1 and an error of C
shrinks by f_max per step.
The products and sums of the state update add one rounding each (u relative). The weights of
the tests are small (N(0, 0.15²)): the bound multiplies by about 1 + ‖R‖∞ per step, and must stay
far below the effect of a wrong cell (test_a_gate_order_mistake_would_fail_the_bound).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from onnx_helpers import assert_within, make_model, run_ort, run_qsim, save
from recurrent_models import Recurrent, recurrent_model, state_error_bound
from qsim.errors import QsimError

def _weights(model: onnx.ModelProto) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _state_error_bound(spec: Recurrent, model: onnx.ModelProto, feeds: dict) -> float:
    """A bound on |qsim - onnxruntime| of every hidden and cell state after `spec.steps` steps."""
    def largest(name):
        return float(np.abs(feeds[name]).max()) if name in feeds else 0.0
    return state_error_bound(spec.op, _weights(model), spec.steps, largest("x"), h0_max=largest("h0"),
                             c0_max=largest("c0"), linear_before_reset=bool(spec.linear_before_reset))


def _as_layout0(model: onnx.ModelProto, spec: Recurrent) -> onnx.ModelProto:
    """The same node at layout 0 (inputs declared sequence-first / direction-first)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    kept = [a for a in node.attribute if a.name != "layout"]
    del node.attribute[:]
    node.attribute.extend(kept)
    for vi in m.graph.input:
        dims = vi.type.tensor_type.shape.dim
        dims[0].dim_value, dims[1].dim_value = dims[1].dim_value, dims[0].dim_value
    return m


def _reference(model: onnx.ModelProto, spec: Recurrent, feeds: dict) -> dict:
    if not spec.layout:
        return run_ort(model, feeds)
    swapped = {k: np.ascontiguousarray(np.swapaxes(v, 0, 1)) for k, v in feeds.items()}
    out = run_ort(_as_layout0(model, spec), swapped)
    perms = {"Y": (2, 0, 1, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
    return {k: np.ascontiguousarray(np.transpose(v, perms[k])) for k, v in out.items()}


def _check(tmp_path, spec: Recurrent, seed: int) -> dict:
    model, feeds = recurrent_model(spec, np.random.default_rng(seed))
    got = run_qsim(save(model, tmp_path), feeds, batch=spec.batch)
    ref = _reference(model, spec, feeds)
    assert set(got) == set(ref)
    bound = _state_error_bound(spec, model, feeds)
    assert bound < 1e-2, f"the bound {bound} is too loose to tell a wrong cell from a right one"
    for name in ref:
        assert_within(got[name], ref[name], bound, f"{spec}: {name}")
    return got


CASES = [Recurrent(op, direction, layout, initial, initial and op == "LSTM", linear_before_reset=lbr)
         for op, lbrs in (("LSTM", (None,)), ("GRU", (0, 1)))
         for lbr in lbrs
         for direction in ("forward", "reverse", "bidirectional")
         for layout in (0, 1)
         for initial in (False, True)]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: f"{s.op}-{s.direction}-layout{s.layout}"
                         f"-{'state' if s.initial_h else 'zero'}-lbr{s.linear_before_reset}")
def test_float_execution_matches_onnxruntime(tmp_path, spec):
    _check(tmp_path, spec, seed=CASES.index(spec))


@pytest.mark.parametrize("spec", [
    Recurrent("LSTM", peepholes=True),
    Recurrent("LSTM", "bidirectional", peepholes=True, initial_h=True, initial_c=True),
    Recurrent("LSTM", initial_h=True),                   # initial_h without initial_c
    Recurrent("LSTM", initial_c=True),                   # initial_c without initial_h
    Recurrent("LSTM", outputs=(True, False, False)),
    Recurrent("LSTM", "bidirectional", outputs=(False, False, True)),
    Recurrent("LSTM", "reverse", layout=1, outputs=(False, True, True)),
    Recurrent("GRU", "bidirectional", outputs=(False, True), linear_before_reset=1),
    Recurrent("GRU", steps=1, batch=1),
    Recurrent("LSTM", steps=12, batch=3, input_size=6, hidden=8, weight_scale=0.04),
])
def test_peepholes_partial_states_and_output_subsets(tmp_path, spec):
    got = _check(tmp_path, spec, seed=11)
    wanted = [n for n, used in zip(["Y", "Y_h", "Y_c"], spec.outputs) if used][:3 if spec.op == "LSTM" else 2]
    assert sorted(got) == sorted(wanted)


def test_a_gate_order_mistake_would_fail_the_bound(tmp_path):
    """The bound is tight enough to catch a swapped gate: onnxruntime on the model with the
    o and f gate blocks of W, R and B swapped differs from the original by far more than it."""
    spec = Recurrent("LSTM")
    model, feeds = recurrent_model(spec, np.random.default_rng(3))
    swapped = onnx.ModelProto()
    swapped.CopyFrom(model)
    n = spec.hidden
    for t in swapped.graph.initializer:
        a = numpy_helper.to_array(t).copy()
        blocks = [1, 2] if t.name != "B" else [1, 2, 5, 6]
        order = list(range(a.shape[1] // n))
        for i in range(0, len(blocks), 2):
            order[blocks[i]], order[blocks[i + 1]] = order[blocks[i + 1]], order[blocks[i]]
        a = np.concatenate([a[:, k * n:(k + 1) * n] for k in order], axis=1)
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    got = run_qsim(save(model, tmp_path), feeds, batch=spec.batch)["Y"]
    wrong = run_ort(swapped, feeds)["Y"]
    assert np.abs(got - wrong).max() > 10 * _state_error_bound(spec, model, feeds)


def _refusal(tmp_path, model, feeds, *needles):
    with pytest.raises(QsimError) as err:
        run_qsim(save(model, tmp_path), feeds, batch=2)
    text = str(err.value) + str(getattr(err.value, "hint", ""))
    assert "node 'rnn'" in text, text
    for needle in needles:
        assert needle in text, text


def _with_attr(model, **attrs):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[0].attribute.extend(onnx.helper.make_attribute(k, v) for k, v in attrs.items())
    return m


def test_refuses_clip_activations_and_input_forget(tmp_path):
    model, feeds = recurrent_model(Recurrent("LSTM"), np.random.default_rng(0))
    _refusal(tmp_path, _with_attr(model, clip=3.0), feeds, "clip")
    _refusal(tmp_path, _with_attr(model, activations=["Relu", "Tanh", "Tanh"]), feeds, "Relu", "default")
    _refusal(tmp_path, _with_attr(model, input_forget=1), feeds, "input_forget")
    gru, gfeeds = recurrent_model(Recurrent("GRU"), np.random.default_rng(0))
    _refusal(tmp_path, _with_attr(gru, activations=["HardSigmoid", "Tanh"]), gfeeds, "HardSigmoid")


def test_default_activations_spelled_out_are_accepted(tmp_path):
    spec = Recurrent("LSTM", "bidirectional")
    model, feeds = recurrent_model(spec, np.random.default_rng(4))
    named = _with_attr(model, activations=["Sigmoid", "Tanh", "Tanh"] * 2)
    got = run_qsim(save(named, tmp_path), feeds, batch=2)
    ref = run_ort(model, feeds)
    for k in ref:
        assert_within(got[k], ref[k], _state_error_bound(spec, model, feeds), k)


def _with_sequence_lens(model, lengths):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.initializer.append(numpy_helper.from_array(np.asarray(lengths, np.int32), "lens"))
    m.graph.node[0].input[4] = "lens"
    return m


def test_sequence_lens_equal_to_the_length_is_accepted_and_varying_refused(tmp_path):
    spec = Recurrent("GRU", initial_h=True)      # inputs x, W, R, B, "", h0: sequence_lens slot exists
    model, feeds = recurrent_model(spec, np.random.default_rng(5))
    full = _with_sequence_lens(model, [spec.steps] * spec.batch)
    got = run_qsim(save(full, tmp_path), feeds, batch=spec.batch)
    ref = run_ort(full, feeds)
    for k in ref:
        assert_within(got[k], ref[k], _state_error_bound(spec, model, feeds), k)
    _refusal(tmp_path, _with_sequence_lens(model, [spec.steps, 2]), feeds, "sequence_lens", "varies",
             "pad the sequences")


def test_refuses_wrong_weight_shapes_and_computed_weights(tmp_path):
    model, feeds = recurrent_model(Recurrent("LSTM"), np.random.default_rng(6))
    bad = onnx.ModelProto()
    bad.CopyFrom(model)
    r = next(t for t in bad.graph.initializer if t.name == "R")
    r.CopyFrom(numpy_helper.from_array(np.zeros((1, 16, 5), np.float32), "R"))
    _refusal(tmp_path, bad, feeds, "'R' has shape [1, 16, 5]", "[1, 16, 4]")
    computed = onnx.ModelProto()
    computed.CopyFrom(model)
    w = next(t for t in computed.graph.initializer if t.name == "W")
    computed.graph.input.append(onnx.helper.make_tensor_value_info("W", onnx.TensorProto.FLOAT, list(w.dims)))
    computed.graph.initializer.remove(w)
    with pytest.raises(QsimError) as err:
        run_qsim(save(computed, tmp_path), {**feeds, "W": np.zeros(tuple(w.dims), np.float32)}, batch=2)
    assert "node 'rnn'" in str(err.value) and "'W'" in str(err.value)


@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["LSTM", "GRU"]), direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
       layout=st.integers(0, 1), initial=st.booleans(), peepholes=st.booleans(), lbr=st.integers(0, 1),
       steps=st.integers(1, 6), batch=st.integers(1, 3), input_size=st.integers(1, 5), hidden=st.integers(1, 6),
       outputs=st.tuples(st.booleans(), st.booleans(), st.booleans()).filter(any), seed=st.integers(0, 2 ** 16))
def test_random_recurrent_nodes_match_onnxruntime(tmp_path, op, direction, layout, initial, peepholes, lbr, steps,
                                                   batch, input_size, hidden, outputs, seed):
    if op == "GRU":
        outputs = outputs[:2] if any(outputs[:2]) else (True, False)
    spec = Recurrent(op, direction, layout, initial, initial and op == "LSTM", peepholes and op == "LSTM",
                     lbr if op == "GRU" else None, outputs, steps, batch, input_size, hidden)
    model, feeds = recurrent_model(spec, np.random.default_rng(seed))
    got = run_qsim(save(model, tmp_path), feeds, batch=batch)
    ref = _reference(model, spec, feeds)
    assert set(got) == set(ref)
    for name in ref:
        assert_within(got[name], ref[name], _state_error_bound(spec, model, feeds), f"{spec}: {name}")


def test_refuses_a_sequence_too_long_to_unroll(tmp_path):
    from qsim.onnx.convert_recurrent import MAX_STEPS
    model, feeds = recurrent_model(Recurrent("GRU", steps=MAX_STEPS + 1, batch=1, input_size=1, hidden=1),
                                   np.random.default_rng(0))
    _refusal(tmp_path, model, feeds, f"{MAX_STEPS + 1} steps", "shorter windows")


@settings(derandomize=True, max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["LSTM", "GRU"]), hidden_size=st.one_of(st.none(), st.integers(-2, 6)),
       direction=st.sampled_from(["forward", "reverse", "bidirectional", "both", ""]), layout=st.integers(-1, 2),
       w_shape=st.lists(st.integers(1, 16), min_size=1, max_size=4), r_rows=st.integers(1, 16),
       x_shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), states=st.integers(0, 3),
       activations=st.one_of(st.none(), st.lists(st.sampled_from(["Sigmoid", "Tanh", "Relu", "tanh"]), min_size=1, max_size=6)))
def test_any_node_loads_or_is_refused_with_a_located_error(tmp_path, op, hidden_size, direction, layout, w_shape,
                                                           r_rows, x_shape, states, activations):
    """Malformed LSTM/GRU nodes (shapes, attributes, state inputs) never reach a traceback."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=w_shape).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(size=(1, r_rows, 4)).astype(np.float32), "R"),
             numpy_helper.from_array(np.zeros((1, 2, 4), np.float32), "s")]
    inputs = ["x", "W", "R", "", ""] + ["s"] * states
    attrs = {"direction": direction, "layout": layout}
    if hidden_size is not None:
        attrs["hidden_size"] = hidden_size
    if activations is not None:
        attrs["activations"] = activations
    node = onnx.helper.make_node(op, inputs, ["Y"], name="rnn", **attrs)
    model = make_model([node], [("x", x_shape)], [("Y", None)], inits, opset=14)
    try:
        run_qsim(save(model, tmp_path), {"x": rng.normal(size=x_shape).astype(np.float32)})
    except QsimError as err:
        assert "node 'rnn'" in str(err) or "graph" in str(err), str(err)
