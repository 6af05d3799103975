"""Adaptive weight rounding (qsim.quant.rounding.adaptive): the objective it lowers, the patch moments
it reads, and what it does to a quantized model (only integers within one step change). The
patch layout: test_conv_geometry.py; the moments by tap offset: test_offset_moments.py."""
import dataclasses
import itertools

import numpy as np
import pytest

from qsim import zoo
from qsim.errors import UsageError
from qsim.commands.quantize import quantize_to_folder
from qsim.quant.calibration.data import Samples
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import calibrate_model, embedded_quantized_model, load_float_model
from qsim.quant.rounding.conv_geometry import (ConvGeometry, conv_patch_shape, conv_patches,
                                      conv_patches_numpy)
from qsim.quant.rounding.adaptive import adaptive_round
from qsim.quant.rounding.moments import PatchMoments
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.tosa.target import TosaTarget
from qsim.runtime.executor import execute

QUIET = QuantizeOptions(show_progress=False)
NEAREST = dataclasses.replace(QUIET, weight_rounding="nearest")


def _correlated_moments(rng, k, n=400):
    """Second moments of patches whose taps are correlated (a smooth signal plus noise)."""
    base = rng.normal(size=(n, 1))
    x = base + 0.3 * rng.normal(size=(n, k))
    m = PatchMoments(1, k)
    m.add(x[None, :, :])
    return m.second_moment(centered=False)


def _objective(w, q, s, h):
    """e^T H e per output channel, e = q * scale - w (one group: H = h[0])."""
    e = q * np.asarray(s, np.float64).reshape(-1, 1) - w
    return np.einsum("ok,kl,ol->o", e, h[0], e)


def test_never_worse_than_nearest_and_within_one_step():
    rng = np.random.default_rng(7)
    for _ in range(20):
        k, oc = int(rng.integers(2, 40)), int(rng.integers(1, 9))
        w = rng.normal(size=(oc, k))
        s = np.abs(w).max(axis=1) / 127
        h = _correlated_moments(rng, k)
        nearest = np.clip(np.rint(w / s[:, None]), -127, 127)
        q = adaptive_round(w, s, h)
        assert q.min() >= -127 and q.max() <= 127
        assert np.all(np.abs(q - w / s[:, None]) < 1.0)
        assert np.all(_objective(w, q, s, h) <= _objective(w, nearest, s, h) * (1 + 1e-12))


def test_close_to_the_exhaustive_optimum_on_small_kernels():
    """Against every floor/ceil combination (2^9 for a 3x3 tap set): the greedy result is at
    least as good as nearest and within a small factor of the true optimum."""
    rng = np.random.default_rng(11)
    gaps = []
    for _ in range(30):
        w = rng.normal(size=(1, 9))
        s = np.abs(w).max(axis=1) / 127
        h = _correlated_moments(rng, 9)
        v = w / s[:, None]
        lo = np.floor(v)
        best = min(_objective(w, (lo + np.array(bits))[None, :].reshape(1, 9), s, h)[0]
                   for bits in itertools.product((0, 1), repeat=9))
        got = _objective(w, adaptive_round(w, s, h), s, h)[0]
        nearest = _objective(w, np.rint(v), s, h)[0]
        assert best <= got * (1 + 1e-9) and got <= nearest * (1 + 1e-12)
        gaps.append(got / best)
    assert np.median(gaps) < 1.5


def test_perfectly_correlated_taps_make_the_rounding_errors_cancel():
    """With identical inputs on every tap (H = all ones) only the sum of the errors matters:
    the search must bring |sum(q - w/s)| to at most 1/2 (nearest leaves it larger here)."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(16, 25))
    s = np.abs(w).max(axis=1) / 127
    h = np.ones((1, 25, 25))
    q = adaptive_round(w, s, h)
    total = np.abs((q - w / s[:, None]).sum(axis=1))
    assert np.all(total <= 0.5 + 1e-9)
    assert np.abs((np.rint(w / s[:, None]) - w / s[:, None]).sum(axis=1)).max() > 0.5


def test_centered_moments_are_the_patch_covariance():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 2, 4)) + np.arange(4)
    m = PatchMoments(2, 4)
    m.add(x[:100].transpose(1, 0, 2))
    m.add(x[100:].transpose(1, 0, 2))
    # the moments are of the float32 patches, their products summed by a float32 GEMM of at
    # most 300 rows per flush: |error| <= 300 * eps32 * sum|x_i x_j| / n per entry
    xf = x.astype(np.float32).astype(np.float64)
    eps32 = float(np.finfo(np.float32).eps)
    for grp in range(2):
        a = xf[:, grp]
        bound = 300 * eps32 * (np.abs(a).T @ np.abs(a)) / 300
        assert np.all(np.abs(m.second_moment(True)[grp] - np.cov(a.T, bias=True)) <= bound + 1e-12)
        assert np.all(np.abs(m.second_moment(False)[grp] - a.T @ a / 300) <= bound)


def _weights(model):
    return {op.outputs[0]: op.attrs["weight"] for op in model.graph.ops
            if op.kind.name in ("tosa.CONV2D", "tosa.DEPTHWISE_CONV2D", "tosa.FULLY_CONNECTED")}


def test_embedded_model_changes_only_integers_within_one_step_and_lowers_each_layer_error():
    """On the embedded CNN: the same scales (so the same RESCALE multipliers), integers moved
    by at most one step, every conv/linear layer rounded from its own input moments."""
    adaptive = dataclasses.replace(QUIET, weight_rounding="adaptive")
    near, adapt = embedded_quantized_model(NEAREST), embedded_quantized_model(adaptive)
    graph = load_float_model(zoo.default_model().path)
    target = TosaTarget(adaptive.config)
    stats = calibrate_model(graph, Samples(zoo.calibration_images()), "input", adaptive, target)
    wn, wa = _weights(near), _weights(adapt)
    assert wn.keys() == wa.keys() and len(wn) == 5
    changed = 0
    for label in wn:
        diff = wa[label].astype(np.int64) - wn[label].astype(np.int64)
        assert np.abs(diff).max() <= 1, label
        changed += np.count_nonzero(diff)
    assert changed > 0
    # every conv / linear layer was watched during calibration and rounded from its moments
    watched = [op for op in graph.ops if op.kind.name in ("nn.conv", "nn.linear")]
    assert {op.outputs[0] for op in watched} == set(stats.input_moments.moments)
    target.lower(graph, stats)
    assert set(stats.input_moments.rounded) == set(stats.input_moments.moments)
    # scales are those of nearest rounding: the RESCALE multipliers are identical
    rn = [op.attrs["multiplier"] for op in near.graph.ops if op.kind.name == "tosa.RESCALE"]
    ra = [op.attrs["multiplier"] for op in adapt.graph.ops if op.kind.name == "tosa.RESCALE"]
    assert len(rn) == len(ra) and all(np.array_equal(a, b) for a, b in zip(rn, ra))


def test_adaptive_model_runs_identically_on_both_backends():
    model = embedded_quantized_model(dataclasses.replace(QUIET, weight_rounding="adaptive"))
    images, _ = zoo.test_subset()
    for i in range(3):
        x = quantize_feed(model, {"input": images[i:i + 1]})
        kern = execute(model.graph, x, backend="kernels")
        ref = execute(model.graph, x, backend="reference")
        assert kern.keys() == ref.keys()
        for name in kern:
            np.testing.assert_array_equal(kern[name], ref[name], err_msg=name)


def test_cvm_target_refuses_adaptive_rounding(tmp_path):
    with pytest.raises(UsageError, match="adaptive is a TOSA option"):
        quantize_to_folder(None, None, str(tmp_path / "out"),
                         dataclasses.replace(QUIET, weight_rounding="adaptive"), subset_only=True,
                         target="cvm")
    assert not (tmp_path / "out").exists()


def test_unknown_rounding_mode_is_a_usage_error():
    graph = load_float_model(zoo.default_model().path)
    with pytest.raises(UsageError, match="unknown weight rounding 'stochastic'"):
        calibrate_model(graph, Samples(zoo.calibration_images()[:2]), "input",
                        dataclasses.replace(QUIET, weight_rounding="stochastic"), TosaTarget())


def test_adaptive_is_the_tosa_default_and_recorded_in_the_settings():
    assert QUIET.settings()["weight_rounding"] == "adaptive"
    assert NEAREST.settings()["weight_rounding"] == "nearest"
    default, adaptive = embedded_quantized_model(QUIET), embedded_quantized_model(
        dataclasses.replace(QUIET, weight_rounding="adaptive"))
    for a, b in zip(_weights(default).values(), _weights(adaptive).values()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_compiled_passes_give_the_numpy_loops_integers(monkeypatch, groups, threads):
    """The compiled pass loop (kernels/quant_ops.pyx, rows split over threads) takes exactly
    the moves of the numpy loop, for one and two threads."""
    from qsim.quant.rounding import adaptive as rounding
    rng = np.random.default_rng(11)
    monkeypatch.setenv("QSIM_THREADS", threads)
    moved = 0
    for _ in range(8):
        k, per_group = int(rng.integers(3, 30)), int(rng.integers(1, 5))
        oc = per_group * groups
        base = rng.normal(size=(300, groups, 1))
        m = PatchMoments(groups, k)
        m.add((base + 0.3 * rng.normal(size=(300, groups, k))).transpose(1, 0, 2))   # [g, P, K]
        h = m.second_moment(centered=True)
        w = rng.normal(size=(oc, k))
        s = np.abs(w).max(axis=1) / 127 * rng.uniform(5, 40)   # coarse steps: many moves
        assert rounding._round_passes_kernel() is not None
        compiled = adaptive_round(w, s, h)
        monkeypatch.setattr(rounding, "_round_passes_kernel", lambda: None)
        reference = adaptive_round(w, s, h)
        monkeypatch.undo()
        monkeypatch.setenv("QSIM_THREADS", threads)
        nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
        moved += int(np.sum(reference != nearest))
        np.testing.assert_array_equal(compiled, reference)
    assert moved > 10                             # the cases exercise the moves


@pytest.mark.parametrize("g,p,k", [(1, 3000, 2), (3, 2000, 9), (2, 500, 144), (1, 4000, 1), (5, 1, 7)])
def test_patch_sums_have_numpys_bits(g, p, k):
    """PatchMoments' first moments (compiled row sums) equal numpy's float64 sum bit for bit,
    on values whose exponents span 2^-60..2^60, where the order of additions shows."""
    from qsim.quant.rounding.moments import _column_sums
    rng = np.random.default_rng(g * 1000 + k)
    x = (rng.standard_normal((g, p, k)) * np.exp2(rng.integers(-60, 60, size=(g, p, k)))).astype(np.float32)
    got = _column_sums(x)
    want = x.sum(axis=1, dtype=np.float64)
    assert got.dtype == np.float64 and got.view(np.uint64).tolist() == want.view(np.uint64).tolist()


class _FlushedSums:
    """The reference for PatchMoments' totals: rows concatenated and flushed into a float64
    GEMM and sum each time FLUSH_ROWS of them are pending, then once more at the end."""

    def __init__(self, groups: int, k: int):
        from qsim.quant.rounding.moments import FLUSH_ROWS
        self.flush_rows = FLUSH_ROWS
        self.outer, self.sums, self.pending = np.zeros((groups, k, k)), np.zeros((groups, k)), []

    def add(self, x: np.ndarray) -> None:
        self.pending.append(x)
        if sum(p.shape[1] for p in self.pending) >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            p = np.concatenate(self.pending, axis=1)
            self.outer += np.matmul(p.transpose(0, 2, 1), p)
            self.sums += p.sum(axis=1, dtype=np.float64)
            self.pending = []


def test_buffered_moments_have_the_bits_of_concatenated_flushes():
    """PatchMoments fills one growing buffer instead of concatenating per-sample arrays; the
    GEMM and the sums see the same rows in the same flushes, so the moments are bit-equal to
    the concatenate-then-flush formulation, written out here."""
    rng = np.random.default_rng(3)
    for groups, k, rows in [(1, 40, 300), (3, 9, 49), (2, 5, 1500), (1, 7, 1024), (4, 3, 7)]:
        m, ref = PatchMoments(groups, k), _FlushedSums(groups, k)
        for _ in range(9):
            x = (rng.standard_normal((groups, rows, k)) * np.exp2(rng.integers(-20, 20, (groups, rows, k))))
            x = x.astype(np.float32)
            m.add(x)
            ref.add(x)
        ref.flush()
        h = m.second_moment(centered=False)          # flushes what is pending
        assert m.sum_outer.tobytes() == ref.outer.tobytes() and m.sum_x.tobytes() == ref.sums.tobytes()
        assert h.shape == (groups, k, k) and m.count == 9 * rows


def test_shared_scratch_gives_the_moments_bits():
    """InputMoments gathers layers with >= FLUSH_ROWS rows per sample into one shared scratch
    buffer; the moments are the bytes of PatchMoments.add on the same patches."""
    from qsim.quant.rounding.moments import FLUSH_ROWS, InputMoments
    rng = np.random.default_rng(5)
    # dilated: gathered (stride-1 undilated layers are summed by offsets, without gathering)
    g_big = ConvGeometry(1, (3, 3), (1, 1), (2, 2), (2, 2), (2, 2), (0, 0))     # 34*34 rows
    g_small = ConvGeometry(2, (3, 3), (2, 2), (1, 1), (0, 0), (0, 0), (0, 0))   # 16*16 rows
    moments = InputMoments()
    moments.watch_conv("big", "a", g_big)
    moments.watch_conv("small", "b", g_small)
    plain = {"big": PatchMoments(1, 27), "small": PatchMoments(2, 18)}
    for _ in range(5):
        values = {"a": rng.normal(size=(1, 3, 34, 34)).astype(np.float32),
                  "b": rng.normal(size=(1, 4, 33, 33)).astype(np.float32)}
        moments.update(values)
        plain["big"].add(conv_patches(values["a"], g_big))
        plain["small"].add(conv_patches(values["b"], g_small))
    assert 34 * 34 >= FLUSH_ROWS > 16 * 16 and moments._scratch.size == 34 * 34 * 27
    for key, ref in plain.items():
        got = moments.moments[key]
        assert got.second_moment(True).tobytes() == ref.second_moment(True).tobytes()
        assert got.sum_outer.tobytes() == ref.sum_outer.tobytes() and got.count == ref.count


@pytest.mark.parametrize("rows, adds", [(150, 9), (150, 5), (1200, 2), (40, 30)])
def test_wide_layer_holds_its_rows_and_sums_them_in_the_flushes_blocks(rows, adds):
    """A one-group layer with K > FLUSH_ROWS keeps its rows while it has seen at most K of them
    (held_rows); past K, or when second_moment is asked for, the held rows are summed in the
    blocks the flushes would have summed: the totals and means have the bits of the
    concatenate-then-flush formulation."""
    from qsim.quant.rounding.moments import FLUSH_ROWS
    rng = np.random.default_rng(5)
    k = FLUSH_ROWS + 76
    m = PatchMoments(1, k)
    assert m.holding
    ref, seen = _FlushedSums(1, k), []
    for _ in range(adds):
        x = (rng.standard_normal((1, rows, k)) * np.exp2(rng.integers(-8, 8, (1, rows, k)))).astype(np.float32)
        m.add(x)
        ref.add(x)
        seen.append(x)
        total = sum(p.shape[1] for p in seen)
        assert m.holding == (total <= k)
        if m.holding:
            assert m.held_rows().tobytes() == np.concatenate(seen, axis=1)[0].tobytes()
    ref.flush()
    means = m.means()
    assert means.tobytes() == (ref.sums / m.count).tobytes()
    m.second_moment(centered=False)
    assert not m.holding
    assert m.sum_outer.tobytes() == ref.outer.tobytes() and m.sum_x.tobytes() == ref.sums.tobytes()


def test_narrow_or_grouped_layers_never_hold():
    from qsim.quant.rounding.moments import FLUSH_ROWS
    assert not PatchMoments(1, FLUSH_ROWS).holding
    assert not PatchMoments(2, FLUSH_ROWS + 10).holding
    with pytest.raises(ValueError, match="summed"):
        PatchMoments(1, 9).held_rows()


@pytest.mark.parametrize("centered", [False, True])
def test_rounding_from_rows_matches_rounding_from_h(centered):
    """round_from_rows (residual X e per channel, block GEMMs for X^T r) takes the moves
    adaptive_round takes on H = X^T X / P of the same rows: the same integers on random
    correlated rows (no objective ties), never worse than nearest, within one step."""
    from qsim.quant.rounding.adaptive import round_from_rows
    rng = np.random.default_rng(11)
    for p, k, oc in [(30, 150, 6), (200, 700, 12), (64, 64, 4)]:
        x = (rng.standard_normal((p, 1)) + 0.4 * rng.standard_normal((p, k))
             + rng.standard_normal(k)).astype(np.float32)
        w = rng.normal(0, 0.05, (oc, k))
        s = np.abs(w).max(axis=1) / 127
        mean = x.astype(np.float64).mean(axis=0)
        xc = x.astype(np.float64) - (mean if centered else 0.0)
        h = (xc.T @ xc / p)[None]
        want = adaptive_round(w, s, h)
        got = round_from_rows(w, s, x, mean if centered else None)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
        nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
        assert np.all(_objective(w, got, s, h) <= _objective(w, nearest, s, h) + 1e-12)
        assert np.all(np.abs(got - w / s[:, None]) < 1)


def test_round_layer_rounds_a_holding_layer_from_its_rows_and_keeps_its_means():
    """round_layer on a layer that held its rows: the integers of round_from_rows, the layer's
    rows let go, and its means (bias correction reads them) still those of the rows."""
    from qsim import ir
    from qsim.quant.rounding.adaptive import round_from_rows, round_layer
    from qsim.quant.rounding.moments import FLUSH_ROWS, InputMoments
    rng = np.random.default_rng(2)
    k, oc = FLUSH_ROWS + 8, 5
    x = (rng.standard_normal((60, 1)) + 0.5 * rng.standard_normal((60, k))).astype(np.float32)
    moments = InputMoments()
    moments.moments["y"] = PatchMoments(1, k)
    moments.moments["y"].add(x[None])
    w = rng.normal(0, 0.05, (oc, k))
    s = np.abs(w).max(axis=1) / 127
    quant = ir.QuantInfo(scale=s, zero_point=np.zeros(oc, np.int64), axis=0, bits=8, signed=True,
                         symmetric=True, source="derived")
    wq = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127).astype(np.int8)
    mean = x.astype(np.float64).mean(axis=0)
    got = round_layer(moments, "y", w, wq, quant, centered=True)
    assert got.tolist() == round_from_rows(w, s, x, mean).astype(np.int8).tolist()
    stats = moments.moments["y"]
    assert not stats.holding and stats.sum_outer is None
    np.testing.assert_allclose(stats.means()[0], mean, rtol=1e-12)
    assert round_layer(moments, "y", w, wq, quant, centered=True) is got      # cached


def test_rounding_from_rows_is_independent_of_the_thread_count(monkeypatch):
    """round_from_rows splits channels over threads: the integers are the same for 1 and 2
    threads, on a case with many moves over several blocks and passes."""
    from qsim.quant.rounding.adaptive import BLOCK_COLUMNS, round_from_rows
    rng = np.random.default_rng(21)
    k, p, oc = 3 * BLOCK_COLUMNS + 5, 90, 33
    x = (rng.standard_normal((p, 1)) + 0.3 * rng.standard_normal((p, k))).astype(np.float32)
    w = rng.normal(size=(oc, k))
    s = np.abs(w).max(axis=1) / 127 * 20                           # coarse steps: many moves
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        results.append(round_from_rows(w, s, x, x.astype(np.float64).mean(axis=0)))
    nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
    assert int(np.sum(results[0] != nearest)) > 100
    assert results[0].tolist() == results[1].tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_candidates_have_numpys_doubles(dtype):
    """rounding_candidates (one compiled pass) gives the doubles of the numpy formulation: the
    start at nearest (ties up, -0.0 to +0.0), floor and floor + 1 clipped to the range, and
    e = q - w / scale; on halves, signed zeros and weights past the range."""
    from qsim.quant.rounding.adaptive import _candidates, _candidates_numpy
    rng = np.random.default_rng(5)
    w = (rng.normal(size=(17, 41)) * 3).astype(dtype)
    w[0, :12] = [0.5, -0.5, 1.5, -1.5, -0.0, 0.0, 127.6, -127.6, 200, -300, 126.5, -127.5]
    s = rng.uniform(0.005, 0.02, 17)
    s[0] = 1.0
    for scales in (s, s[:1]):
        for got, want in zip(_candidates(w, scales, -127, 127), _candidates_numpy(w, scales, -127, 127)):
            assert got.dtype == np.float64 and got.tobytes() == want.tobytes()


def test_rounding_is_the_same_on_every_instruction_set_path_and_thread_count(monkeypatch):
    """The pass kernels (kernels/round_passes.h) are compiled per instruction-set path: the H
    and the rows forms give the same integers on every path the machine has, at 1, 2 and 3
    threads, on cases with many moves."""
    from qsim.kernels.cpu_features import forced_isa, supported_isas
    from qsim.quant.rounding.adaptive import BLOCK_COLUMNS, round_from_rows
    rng = np.random.default_rng(23)
    k, p, oc = 2 * BLOCK_COLUMNS + 7, 70, 19
    x = (rng.standard_normal((p, 1)) + 0.3 * rng.standard_normal((p, k))).astype(np.float32)
    w = rng.normal(size=(oc, k))
    s = np.abs(w).max(axis=1) / 127 * 20                           # coarse steps: many moves
    mean = x.astype(np.float64).mean(axis=0)
    h = PatchMoments(1, k)
    h.add(x[None])
    h = h.second_moment(centered=True)
    results = set()
    for isa in supported_isas():
        with forced_isa(isa):
            for threads in ("1", "2", "3"):
                monkeypatch.setenv("QSIM_THREADS", threads)
                results.add((adaptive_round(w, s, h).tobytes(), round_from_rows(w, s, x, mean).tobytes()))
    assert len(results) == 1
    nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
    got = np.frombuffer(results.pop()[0], np.int64).reshape(oc, k)
    assert int(np.sum(got != nearest)) > 50


def _coarse_case(rng, k=64, oc=8, p=50, mult=1.0):
    """Inputs whose taps are a random walk (neighbours strongly correlated, as in images):
    the greedy search takes several passes."""
    m = PatchMoments(1, k)
    m.add(np.cumsum(rng.normal(size=(p, k)), axis=1)[None])
    w = rng.normal(size=(oc, k))
    s = np.abs(w).max(axis=1) / 127 * mult
    return w, s, m.second_moment(centered=True)


@pytest.mark.parametrize("stop", [0.0, 1e-3, 0.05])
def test_early_stop_compiled_and_numpy_agree_and_never_worse_than_nearest(monkeypatch, stop):
    """The per-channel stop rule (a pass lowering the objective by less than stop x its value
    at nearest ends the channel's search) is the same in the compiled loop and the numpy
    reference, and the result is never worse than nearest rounding."""
    from qsim.quant.rounding import adaptive as rounding
    rng = np.random.default_rng(31)
    for _ in range(4):
        w, s, h = _coarse_case(rng, mult=5.0)
        compiled = adaptive_round(w, s, h, stop_fraction=stop)
        monkeypatch.setattr(rounding, "_round_passes_kernel", lambda: None)
        reference = adaptive_round(w, s, h, stop_fraction=stop)
        monkeypatch.undo()
        np.testing.assert_array_equal(compiled, reference)
        nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
        assert np.all(_objective(w, compiled, s, h) <= _objective(w, nearest, s, h) + 1e-12)
        assert np.all(np.abs(compiled - w / s[:, None]) < 1)


def test_early_stop_ends_a_channel_when_the_rule_says(monkeypatch):
    """stop 0: passes run until one makes no move (the search before the rule); a huge
    fraction: every channel stops after its first pass, which is what MAX_PASSES = 1 gives;
    in between the result lies between the two in objective (here strictly: the case needs
    several passes)."""
    from qsim.quant.rounding import adaptive as rounding
    rng = np.random.default_rng(32)
    w, s, h = _coarse_case(rng)
    full = adaptive_round(w, s, h, stop_fraction=0.0)
    first = adaptive_round(w, s, h, stop_fraction=1e30)
    monkeypatch.setattr(rounding, "MAX_PASSES", 1)
    one_pass = adaptive_round(w, s, h, stop_fraction=0.0)
    monkeypatch.undo()
    assert first.tolist() == one_pass.tolist()
    assert not np.array_equal(full, first)
    j_full, j_first = _objective(w, full, s, h).sum(), _objective(w, first, s, h).sum()
    assert j_full < j_first
    # rows form: the same rule
    x = np.cumsum(rng.normal(size=(30, 64)), axis=1).astype(np.float32)
    from qsim.quant.rounding.adaptive import round_from_rows
    r_first = round_from_rows(w, s, x, None, stop_fraction=1e30)
    monkeypatch.setattr(rounding, "MAX_PASSES", 1)
    assert r_first.tolist() == round_from_rows(w, s, x, None, stop_fraction=0.0).tolist()
    monkeypatch.undo()


def test_early_stop_default_stops_before_the_pass_cap():
    """With the default fraction, a channel whose passes go on lowering its objective by a
    little each time stops early; the integers differ from the run to the cap only where
    the later passes moved them, and the objective stays within 1 % of nearest's of the
    full search's (the rule's own bound per skipped pass, summed over the cap)."""
    from qsim.quant.rounding.adaptive import MAX_PASSES, STOP_FRACTION
    rng = np.random.default_rng(33)
    w, s, h = _coarse_case(rng, p=20)
    nearest = np.clip(np.floor(w / s[:, None] + 0.5), -127, 127)
    full = adaptive_round(w, s, h, stop_fraction=0.0)
    early = adaptive_round(w, s, h)
    assert not np.array_equal(full, early)              # the rule ended some search early
    j0, jf, je = (_objective(w, q, s, h) for q in (nearest, full, early))
    assert np.all(je <= j0 + 1e-12)
    assert np.all(je <= jf + MAX_PASSES * STOP_FRACTION * j0 + 1e-12)


def test_offset_layers_sum_by_offsets_and_give_the_same_bits_at_any_thread_count(monkeypatch):
    """InputMoments sums a stride-1 3x3 layer with add_offsets (no gathered rows kept, even
    past FLUSH_ROWS columns when it will see more rows than K), buffering samples until
    FLUSH_ROWS positions are pending; its moments are those of the gathered patches within
    float32 rounding, and the same bits for 1, 2 and 3 threads."""
    from qsim.quant.rounding.moments import FLUSH_ROWS, InputMoments
    rng = np.random.default_rng(3)
    g = ConvGeometry(1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    xs = [np.maximum(rng.normal(size=(1, 120, 9, 10)), 0).astype(np.float32) for _ in range(13)]
    assert 120 * 9 > FLUSH_ROWS and 13 * 90 > 120 * 9     # K > FLUSH_ROWS, more rows than K
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        moments = InputMoments()
        moments.watch_conv("y", "x", g)
        moments.expect_samples(len(xs))
        for x in xs:
            moments.update({"x": x})
        stats = moments.moments["y"]
        assert not stats.holding and stats._pending_rows == 0 and stats._offset_geometry == g
        results.append((stats.second_moment(centered=True), stats.means()))
    for h, m in results[1:]:
        assert h.tobytes() == results[0][0].tobytes() and m.tobytes() == results[0][1].tobytes()
    x = np.concatenate(xs).astype(np.float64)
    rows, _, k = conv_patch_shape(x.shape, g)
    p = conv_patches_numpy(x, g, np.empty((1, rows, k)))[0]
    mean = p.mean(axis=0)
    want = p.T @ p / rows - np.outer(mean, mean)
    np.testing.assert_allclose(results[0][1][0], mean, rtol=1e-12)
    np.testing.assert_allclose(results[0][0][0], want, atol=1e-6 * np.abs(want).max())


def test_offset_layer_inputs_of_another_size_are_summed_apart():
    """A layer summed by offsets that sees inputs of two spatial sizes (a model run at two
    input sizes) sums each size's patches: the totals of the gathered patches of both."""
    rng = np.random.default_rng(4)
    g = ConvGeometry(1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    xs = [rng.normal(size=(1, 3, h, w)).astype(np.float32) for h, w in [(6, 7), (6, 7), (5, 9), (6, 7)]]
    m = PatchMoments(1, 27)
    want = np.zeros((27, 27))
    for x in xs:
        m.add_offsets(x, g)
        rows, _, k = conv_patch_shape(x.shape, g)
        p = conv_patches_numpy(x.astype(np.float64), g, np.empty((1, rows, k)))[0]
        want += p.T @ p
    got = m.second_moment(centered=False) * m.count
    np.testing.assert_allclose(got[0], want, atol=1e-5 * np.abs(want).max())
