import math

import numpy as np
import pytest

from qsim import ir
from qsim.errors import DataError
from qsim.quant.calibration.calibrate import calibrate, channel_mean
from qsim.quant.calibration.observers import make_observer
from qsim.quant.params import QuantConfig, annotated
from qsim.quant.rounding.moments import watch_layers
from qsim.quant.evaluation.evaluate import evaluate, float_view, quantize_feed
from qsim.quant.tosa.target import lower_graph
from qsim.runtime.executor import execute

from .lowering_models import FloatGraph, small_cnn


def test_calibrate_minmax_covers_observed_values(rng):
    graph = small_cnn(rng)
    feeds = [{"x": rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(5)]
    qp = calibrate(graph, feeds, show_progress=False)
    assert set(qp) == {n for n, t in graph.tensors.items() if not t.is_constant}
    lo = min(float(execute(graph, f)["add"].min()) for f in feeds)
    hi = max(float(execute(graph, f)["add"].max()) for f in feeds)
    q = qp["add"]
    # the int8 grid [-128, 127] covers [lo, hi] (to rounding of the zero point)
    assert (-128 - q.zero_point) * q.scale <= lo + q.scale
    assert (127 - q.zero_point) * q.scale >= hi - q.scale


def test_calibrate_keeps_annotations_and_needs_data(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4))
    g.op("nn.relu", [x], "y", (1, 4))
    note = ir.QuantInfo(scale=0.05, zero_point=-128, source="annotation")
    g.tensors["y"] = ir.Tensor("y", ir.DType.F32, (1, 4), quant=note)
    graph = g.graph(["y"])
    qp = calibrate(graph, [{"x": rng.normal(size=(1, 4)).astype(np.float32)}], show_progress=False)
    assert qp["y"] is note
    with pytest.raises(DataError, match="no calibration samples"):
        calibrate(graph, [], show_progress=False)


def test_evaluate_reports_agreement_accuracy_and_sqnr(rng):
    graph = small_cnn(rng)
    xs = [rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32) for _ in range(12)]
    # calibrated on every sample, so no input is clipped: the input error is pure rounding
    model = lower_graph(graph, calibrate(graph, [{"x": x} for x in xs], show_progress=False))
    labels = [int(np.argmax(execute(graph, {"x": x})["logits"])) for x in xs]   # float is right
    labels[0] = (labels[0] + 1) % 5                                           # ... except once
    report = evaluate(graph, model, [({"x": x}, y) for x, y in zip(xs, labels)], show_progress=False)
    assert report.eval_samples == 12
    assert report.float_top1 == pytest.approx(11 / 12)
    # independent agreement count
    agree = 0
    for x in xs:
        ivals = execute(model.graph, quantize_feed(model, {"x": x}))
        agree += int(np.argmax(float_view(model, "logits", ivals))) == int(
            np.argmax(execute(graph, {"x": x})["logits"]))
    assert report.top1_agreement == pytest.approx(agree / 12)
    sq = {t.name: t.sqnr_db for t in report.tensors}
    assert sq["x"] > 35.0                  # input quantization alone
    assert 15.0 < sq["logits"] < math.inf
    hist = next(t for t in report.tensors if t.name == "x")
    assert sum(hist.error_counts) == 12 * 3 * 12 * 12
    # input quantization error is at most half a step: all mass within [-0.5, 0.5] LSB
    edges = np.array(hist.error_edges)
    inside = (edges[:-1] >= -0.5 - 1e-9) & (edges[1:] <= 0.5 + 1e-9)
    assert np.array(hist.error_counts)[~inside].sum() == 0


def test_error_histogram_counts_like_numpys_clip_and_histogram():
    """evaluate's one-pass error histogram equals np.histogram(np.clip(...)) on values at and
    one ulp around every bin edge, beyond the range, infinite and NaN."""
    from qsim.quant.evaluation.evaluate import ERROR_EDGES_LSB, _quant_ops
    edges = ERROR_EDGES_LSB
    rng = np.random.default_rng(9)
    x = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
                        [-1e300, 1e300, -np.inf, np.inf, np.nan, -0.0, 0.0],
                        rng.standard_normal(5000) * 3, rng.uniform(-4, 4, 5000)])
    want = np.histogram(np.clip(x, edges[0], edges[-1]), bins=len(edges) - 1, range=(edges[0], edges[-1]))[0]
    counts = np.zeros(len(edges) - 1, np.int64)
    _quant_ops.add_clipped_histogram(x, edges[0], edges[-1], edges, counts)
    assert counts.tolist() == want.tolist()
    assert counts.sum() == x.size - 1                  # every value but the NaN


def test_evaluate_tensor_figures_are_those_of_float_view(rng):
    """The report's per-tensor SQNR and error histogram equal the numpy formulation over
    float_view (dequantized integers brought to the float layout) for every watched tensor."""
    from qsim.quant.evaluation.evaluate import ERROR_EDGES_LSB
    graph = small_cnn(rng)
    xs = [rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate(graph, [{"x": x} for x in xs[:2]], show_progress=False))
    report = evaluate(graph, model, [({"x": x}, None) for x in xs], show_progress=False)
    checked = 0
    for t in report.tensors:
        signal = noise = 0.0
        counts = np.zeros(64, np.int64)
        for x in xs:
            f = np.asarray(execute(graph, {"x": x})[t.name], np.float64)
            err = float_view(model, t.name, execute(model.graph, quantize_feed(model, {"x": x}))) - f
            signal += float(np.sum(f * f))
            noise += float(np.sum(err * err))
            lsb = err / float(model.tensor_map[t.name].quant.scales()[0])
            counts += np.histogram(np.clip(lsb, -4, 4), bins=64, range=(-4, 4))[0]
        assert list(t.error_counts) == counts.tolist(), t.name
        assert t.sqnr_db == pytest.approx(10 * math.log10(signal / noise), abs=1e-9), t.name
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("observer", ["minmax", "percentile"])
def test_streamed_calibration_gives_the_keep_everything_statistics_bit_for_bit(rng, observer):
    """calibrate() takes each tensor from the executor's stream (execute on_value) and keeps
    only the outputs; the reference runs the graph keeping every tensor and updates fresh
    observers, channel means and input moments from that dict after each sample, as calibration
    did before streaming. Parameters, means and moments must be the same bits."""
    graph = small_cnn(rng)
    feeds = [{"x": rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(6)]
    means, moments = {}, watch_layers(graph)
    qp = calibrate(graph, feeds, observer=observer, show_progress=False, channel_means=means,
                   input_moments=moments, total=len(feeds))

    observers = {n: make_observer(observer, name=n) for n, t in graph.tensors.items()
                 if not t.is_constant and not annotated(t)}
    ref_moments = watch_layers(graph)
    ref_moments.expect_samples(len(feeds))
    sums = {}
    for feed in feeds:
        values = execute(graph, feed)
        for n, obs in observers.items():
            obs.update(values[n])
        ref_moments.update(values)
        for n, t in graph.tensors.items():
            if not t.is_constant and len(t.shape) >= 2:
                sums[n] = sums.get(n, 0.0) + channel_mean(values[n])
    ref_moments.calibration_done()
    scheme = QuantConfig().activation_scheme()
    assert qp == {n: obs.params(scheme) for n, obs in observers.items()}
    assert means.keys() == sums.keys()
    for n in sums:
        assert np.array_equal(means[n], sums[n] / len(feeds)), n
    assert moments.moments.keys() == ref_moments.moments.keys() and moments.moments
    for key, m in moments.moments.items():
        ref = ref_moments.moments[key]
        assert m.count == ref.count, key
        assert np.array_equal(m.sum_outer, ref.sum_outer) and np.array_equal(m.sum_x, ref.sum_x), key


@pytest.mark.parametrize("worker_min_elements", [0, 300, 1 << 30])
def test_calibration_is_the_same_for_any_thread_count(rng, monkeypatch, worker_min_elements):
    """With more than one thread the observers and channel means of tensors of at least
    WORKER_MIN_ELEMENTS run on a worker thread beside the float execution (all of them, some,
    none: parametrized): every parameter and channel mean is the one-thread bits (percentile
    histograms, range growth across samples included), and a non-finite activation is still
    the data error naming its tensor."""
    from qsim.quant.calibration import calibrate as calibrate_module
    monkeypatch.setattr(calibrate_module, "WORKER_MIN_ELEMENTS", worker_min_elements)
    graph = small_cnn(rng)
    feeds = [{"x": (rng.normal(0, 1, (1, 3, 12, 12)) * (1 + i)).astype(np.float32)} for i in range(5)]
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        means = {}
        params = calibrate(graph, feeds, observer="percentile", show_progress=False, channel_means=means)
        results.append(({n: (np.asarray(q.scale).tolist(), np.asarray(q.zero_point).tolist())
                         for n, q in params.items()}, {n: m.tolist() for n, m in means.items()}))
    assert len(results[0][1]) >= 8
    assert results[1] == results[0] and results[2] == results[0]
    bad = [dict(f) for f in feeds]
    bad[3] = {"x": np.full((1, 3, 12, 12), np.inf, np.float32)}
    for threads in ("1", "2"):       # the first tensor made (the input is taken after the run)
        monkeypatch.setenv("QSIM_THREADS", threads)
        with pytest.raises(DataError, match="c1: calibration produced non-finite"):
            calibrate(graph, bad, observer="percentile", show_progress=False)
