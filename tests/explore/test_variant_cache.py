"""The quantized-model cache of qsim explore: a second exploration of the same model and data
reads each precision's result instead of quantizing again, and gets the same integers; any
change of data or precision is another entry."""
from __future__ import annotations

import numpy as np

from qsim.commands.explore import quantize_variant
from qsim.explore import variant_cache
from qsim.quant.calibration.data import Samples


def test_the_second_call_reads_the_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path))
    model = tmp_path / "model.onnx"
    model.write_bytes(b"one")
    made = []

    def make():
        made.append(1)
        return {"weights": np.arange(5, dtype=np.int8)}
    key = variant_cache.variant_key(model, Samples(np.zeros((2, 3), np.float32)), None, "int8", "16x16", None)
    first = variant_cache.cached_variant(key, make)
    second = variant_cache.cached_variant(key, make)
    assert made == [1] and np.array_equal(first["weights"], second["weights"])


def test_keys_change_with_data_and_precision(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"one")
    (tmp_path / "other.onnx").write_bytes(b"two")
    calib = Samples(np.zeros((2, 3), np.float32))
    other = Samples(np.ones((2, 3), np.float32))
    key = variant_cache.variant_key(model, calib, None, "int8", "16x16", None)
    assert key == variant_cache.variant_key(model, Samples(np.zeros((2, 3), np.float32)), None, "int8", "16x16", None)
    assert key != variant_cache.variant_key(model, other, None, "int8", "16x16", None)
    assert key != variant_cache.variant_key(model, calib, None, "16x8", "16x16", None)
    assert key != variant_cache.variant_key(tmp_path / "other.onnx", calib, None, "int8", "16x16", None)


def test_a_cached_precision_is_the_quantized_one(tmp_path, monkeypatch):
    from qsim import zoo
    from qsim.quant.pipeline import load_float_model
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path))
    graph = load_float_model(zoo.default_model().path)
    images, labels = zoo.test_subset()
    calib, evaluation = Samples(zoo.calibration_images()), Samples(images[:20], labels[:20])
    path = zoo.default_model().path
    fresh = quantize_variant(graph, path, calib, evaluation, "int8", "16x16", None, True)
    assert list(tmp_path.joinpath("explore").glob("*.pickle"))
    read = quantize_variant(graph, path, calib, evaluation, "int8", "16x16", None, True)
    assert read is not fresh and read.accuracy == fresh.accuracy
    assert all(np.array_equal(read.feeds[k], fresh.feeds[k]) for k in fresh.feeds)
    for name, tensor in fresh.model.graph.tensors.items():
        if tensor.data is not None:
            assert np.array_equal(read.model.graph.tensors[name].data, tensor.data), name
