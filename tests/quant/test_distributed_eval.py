"""Distributed evaluation (qsim.quant.evaluation.distributed, `qsim quantize --workers N |
--scheduler ADDR`): the serial run's report, bit for bit, however the samples are cut into chunks,
in whatever order the chunks come back, on 1 and 2 workers; bad options a clear error."""
from __future__ import annotations

import dataclasses
import json
import math
import socket

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim import zoo
from qsim.commands.quantize import quantize_to_folder
from qsim.errors import UsageError
from qsim.quant.calibration.data import Samples
from qsim.quant.evaluation import distributed
from qsim.quant.evaluation.distributed import (ChunkFigures, OutputPart, TensorPart, evaluate_chunk,
                                               merge)
from qsim.quant.evaluation.evaluate import Batched, accuracy_report, evaluate
from qsim.quant.options import QuantizeOptions
from qsim.quant import pipeline
from qsim.quant.pipeline import load_float_model, make_target, quantize_graph
from qsim.quant.target import TargetKind

EVAL_SAMPLES = 45       # not a multiple of the batch: a short, padded last batch
BATCH = 8


def _bits(report) -> str:
    """The report with every float as its exact bits (repr round-trips a float64)."""
    return json.dumps(dataclasses.asdict(report), default=repr, sort_keys=True)


@pytest.fixture(scope="module")
def embedded():
    """The embedded Fashion-MNIST model quantized, and the arguments the pipeline evaluated it
    with: (float graph, model, samples, evaluate's keyword arguments, the serial report)."""
    path = zoo.default_model().path
    images, labels = zoo.test_subset()
    seen = {}

    def capture(graph, model, feeds, **kwargs):
        seen.update(graph=graph, model=model, samples=list(feeds), kwargs=kwargs)
        return evaluate(graph, model, seen["samples"], **kwargs)

    saved, pipeline.EVAL_BATCH = pipeline.EVAL_BATCH, BATCH     # several batches of the samples
    try:
        result = quantize_graph(load_float_model(path), Samples(zoo.calibration_images()[:64]),
                                Samples(images[:EVAL_SAMPLES], labels[:EVAL_SAMPLES]),
                                QuantizeOptions(show_progress=False), make_target(TargetKind.TOSA),
                                "fashion_cnn", load_batch=lambda n: load_float_model(path, batch=n),
                                evaluator=capture)
    finally:
        pipeline.EVAL_BATCH = saved
    return seen, result.report


def _chunked_report(seen, cuts: list[int], order: list[int]):
    """The report merged from chunks of the samples cut at `cuts` (whole batches), the chunks
    evaluated, and handed to merge, in `order`."""
    kw = seen["kwargs"]
    bounds = [0, *cuts, len(seen["samples"])]
    parts = [evaluate_chunk(seen["graph"], seen["model"], kw["batched"], kw["outputs"], kw["backend"],
                            a, seen["samples"][a:b]) for a, b in zip(bounds, bounds[1:])]
    stats, scored, n = merge([parts[i] for i in order], seen["model"], kw["outputs"])
    return accuracy_report(seen["graph"], kw["outputs"], stats, scored, n, kw["name"], kw["settings"],
                           kw["notes"])


def test_the_embedded_model_is_evaluated_in_batches(embedded):
    # else the chunks' cuts at whole batches would test nothing
    seen, report = embedded
    assert seen["kwargs"]["batched"] is not None and seen["kwargs"]["batched"].size == BATCH
    assert report.eval_samples == EVAL_SAMPLES and report.int8_top1 is not None


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_any_cut_in_whole_batches_in_any_order_gives_the_serial_report(embedded, data):
    seen, serial = embedded
    size = seen["kwargs"]["batched"].size
    batches = math.ceil(EVAL_SAMPLES / size)
    cuts = sorted(data.draw(st.sets(st.integers(1, batches - 1), max_size=batches - 1)))
    order = data.draw(st.permutations(range(len(cuts) + 1)))
    assert _bits(_chunked_report(seen, [c * size for c in cuts], order)) == _bits(serial)


def test_a_sum_of_chunk_totals_would_not_be_the_serial_bits():
    # why merge folds each sample's sums: chunk totals added together round differently
    sums = [1.0, 1e-16, 1e-16, 1e-16, 1e-16]
    serial = 0.0
    for x in sums:
        serial += x
    assert serial != sums[0] + (sums[1] + sums[2] + sums[3] + sums[4])
    parts = [_part(0, sums[:1]), _part(1, sums[1:])]
    assert merge(parts[::-1], _Model(), ())[0]["t"].signal == serial


class _Model:
    tensor_map: dict = {}


def _part(start: int, sums: list[float]) -> ChunkFigures:
    return ChunkFigures(start, len(sums), {"t": TensorPart(tuple((x, 2 * x) for x in sums), (len(sums),) + (0,) * 63)},
                        ())


finite = st.floats(min_value=0.0, max_value=1e30, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(sums=st.lists(st.tuples(finite, finite), min_size=1, max_size=40), data=st.data())
def test_merge_of_permuted_splits_is_the_ordered_fold(sums, data):
    n = len(sums)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n - 1))) if n > 1 else []
    bounds = [0, *cuts, n]
    parts = [ChunkFigures(a, b - a, {"t": TensorPart(tuple(sums[a:b]), tuple([b - a] + [a] * 63))}, ())
             for a, b in zip(bounds, bounds[1:])]
    order = data.draw(st.permutations(range(len(parts))))
    stats, _, count = merge([parts[i] for i in order], _Model(), ())
    signal = noise = 0.0
    for s, e in sums:           # the serial run's order: sample after sample
        signal += s
        noise += e
    assert (stats["t"].signal, stats["t"].noise, count) == (signal, noise, n)
    assert int(stats["t"].counts[0]) == n
    assert int(stats["t"].counts[1]) == sum(bounds[:-1])


def test_merge_refuses_chunks_that_miss_or_repeat_samples():
    with pytest.raises(Exception, match="sample 2 is missing"):
        merge([_part(0, [1.0, 2.0]), _part(3, [1.0])], _Model(), ())
    with pytest.raises(Exception, match="in two chunks"):
        merge([_part(0, [1.0, 2.0]), _part(1, [1.0])], _Model(), ())


def test_output_figures_merge_as_counts_and_maxima():
    def output_part(start, maximum, counts):
        return ChunkFigures(start, 1, {}, (OutputPart(((1.0, 0.5),), maximum, counts),))

    class Quant:
        def scales(self):
            return np.array([0.5])

    class View:
        quant = Quant()

    class Model:
        tensor_map = {"y": View()}

    from qsim.quant.evaluation.scoring import OutputRole, ScoredOutput
    out = (ScoredOutput("y", (10,), OutputRole.CLASSES, "only output"),)
    _, (figures,), _ = merge([output_part(1, 3.0, (10, 9, 1, 1, 0, 1)), output_part(0, 2.5, (10, 7, 1, 1, 1, 0))],
                             Model(), out)
    assert (figures.max_error_lsb, figures.elements, figures.within_one_lsb, figures.agree,
            figures.labelled, figures.float_correct, figures.int_correct) == (3.0, 20, 16, 2, 2, 1, 1)
    assert (figures.signal, figures.noise) == (2.0, 1.0)


def test_chunks_are_whole_batches_within_the_bounds():
    batches = Batched(100, "x", 0)
    assert distributed.chunk_size(batches, 10_000, 2) == 700          # 625 per chunk, 16 chunks aimed for
    assert distributed.chunk_size(batches, 1_000, 2) == 300           # at least CHUNK_SAMPLES (256)
    assert distributed.chunk_size(batches, 10**6, 2) == 2100          # at most MAX_CHUNK_SAMPLES (2048)
    assert distributed.chunk_size(None, None, 2) == distributed.CHUNK_SAMPLES
    assert distributed.chunk_size(None, 10_000, 1) == 1250


@pytest.mark.parametrize("workers", [1, 2])
def test_quantize_with_workers_writes_the_serial_report(tmp_path, workers, monkeypatch):
    # small chunks: several tasks per worker, and more than one window of them
    monkeypatch.setattr(distributed, "CHUNK_SAMPLES", 16)
    monkeypatch.setattr(distributed, "MAX_CHUNK_SAMPLES", 16)
    monkeypatch.setattr(pipeline, "EVAL_BATCH", BATCH)
    pools = []
    real_open_pool = distributed.open_pool

    def recording_open_pool(*args):
        context = real_open_pool(*args)
        pools.append(context)
        return context
    monkeypatch.setattr(distributed, "open_pool", recording_open_pool)
    options = QuantizeOptions(show_progress=False, eval_limit=150)
    serial = quantize_to_folder(None, None, str(tmp_path / "serial"), options, subset_only=True)
    spread = quantize_to_folder(None, None, str(tmp_path / "spread"), options, subset_only=True,
                                workers=workers)
    assert len(pools) == (workers > 1)      # --workers 1: evaluate itself, in this process
    assert _bits(spread.report) == _bits(serial.report)
    assert (tmp_path / "spread" / "report.json").read_bytes() == (tmp_path / "serial" / "report.json").read_bytes()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheduler, message", [
    ("http://127.0.0.1:8787", "dashboard"),
    ("127.0.0.1:8786", "has no protocol"),
    ("tcp://127.0.0.1", "has no port"),
    (f"tcp://127.0.0.1:{_closed_port()}", "cannot reach the Dask scheduler"),
])
def test_a_bad_scheduler_is_a_clear_error_before_any_work(tmp_path, scheduler, message):
    with pytest.raises(UsageError, match=message):
        quantize_to_folder(None, None, str(tmp_path / "out"), QuantizeOptions(show_progress=False),
                           subset_only=True, scheduler=scheduler)
    assert not (tmp_path / "out").exists()


def test_cli_bad_scheduler_and_workers_exit_2(tmp_path, capsys):
    from qsim.cli import main
    assert main(["quantize", "--scheduler", "ftp://x:1", "-o", str(tmp_path / "o")]) == 2
    assert "ftp:// is not supported" in capsys.readouterr().err
    assert main(["quantize", "--workers", "0", "-o", str(tmp_path / "o")]) == 2
    assert "need at least 1" in capsys.readouterr().err
    assert main(["quantize", "--workers", "2", "--scheduler", "tcp://h:1", "-o", str(tmp_path / "o")]) == 2
    assert "do not combine" in capsys.readouterr().err


def test_the_kernel_writes_each_samples_totals_as_one_sample_calls_give_them(rng):
    # add_error_stats(sample_sums=...): the values distributed.py folds; each must be the total a
    # call on that sample alone returns (from zero), and the running totals their ordered fold
    from qsim.kernels.cpu_features import current_isa
    from qsim.kernels.extensions import extension
    from qsim.quant.evaluation.evaluate import ERROR_EDGES_LSB
    ops = extension("_quant_ops")
    samples, sample = 5, 3 * 4 * 700         # several STATS_BLOCKs per sample
    q = rng.integers(-128, 128, (samples, 3, 4 * 700), dtype=np.int8)
    f = (rng.normal(0, 20, q.size) * 0.05).astype(np.float32)
    args = (np.array([0.05, 0.04, 0.06]), np.array([-128, 0, 127], np.int64), 4 * 700, 0.05, ERROR_EDGES_LSB)
    sums = np.full((samples, 2), np.nan)
    counts = np.zeros(64, np.int64)
    running = ops.add_error_stats(current_isa().code, q, f, *args, counts, sample, 0.0, 0.0, sums)
    one = np.zeros(64, np.int64)
    fold = [0.0, 0.0]
    for i in range(samples):
        alone = ops.add_error_stats(current_isa().code, q[i:i + 1], f[i * sample:(i + 1) * sample], *args,
                                    one, sample, 0.0, 0.0)
        assert tuple(sums[i]) == alone
        fold = [fold[0] + alone[0], fold[1] + alone[1]]
    assert running == tuple(fold)
    assert (counts == one).all()
    with pytest.raises(ValueError, match="sample_sums must be"):
        ops.add_error_stats(current_isa().code, q, f, *args, counts, sample, 0.0, 0.0, np.zeros((4, 2)))
