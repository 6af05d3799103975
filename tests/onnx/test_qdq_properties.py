"""Property tests of the QDQ reader (qsim.onnx.qdq) on the fuzz target's models
(benchmarks/_fuzz/gen_qdq.py): random valid QDQ models keep their parameters exactly and match
onnxruntime within 1 LSB; QDQ-specific mutations load, quantize and run or fail with a
QsimError, never another exception."""
from __future__ import annotations

import os
import random
import sys

import numpy as np
from hypothesis import given, settings, strategies as st
from onnx import numpy_helper

from qsim.errors import QsimError
from qsim.onnx import load
from qsim.quant.pipeline import quantize_graph
from qsim.runtime.executor import execute
from tests.onnx.onnx_helpers import save
from tests.onnx.qdq_models import QUIET, compare_with_ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
from _fuzz.gen_qdq import INPUT_SHAPE, mutate_qdq, qdq_model  # noqa: E402


@settings(derandomize=True, deadline=None, max_examples=12)
@given(seed=st.integers(0, 2 ** 32 - 1), opset=st.sampled_from([13, 17, 19, 21]), unsigned=st.booleans())
def test_random_qdq_models_keep_their_parameters_and_match_onnxruntime(tmp_path_factory, seed, opset, unsigned):
    folder = tmp_path_factory.mktemp("qdq")
    model = qdq_model(np.random.default_rng(seed), opset, unsigned)
    path = save(model, folder)
    stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    graph = load(path)
    x = graph.tensor("x").quant
    assert x.scale == float(stored["sx"]) and x.zero_point == int(stored["zx"]) and x.signed is not unsigned
    w = graph.tensor("w").quant
    np.testing.assert_array_equal(w.scales(), stored["sw"].astype(np.float64))
    np.testing.assert_array_equal(np.rint(graph.tensor("w").data / stored["sw"].reshape(-1, 1, 1, 1)), stored["wq"])
    lowered = quantize_graph(graph, None, None, QUIET).model
    conv = next(op for op in lowered.graph.ops if op.kind.name == "tosa.CONV2D")
    np.testing.assert_array_equal(conv.attrs["weight"], stored["wq"].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(conv.attrs["bias"], stored["bq"])
    rng = np.random.default_rng(seed ^ 0x5EED)
    agreement = compare_with_ort(path, [(rng.standard_normal(INPUT_SHAPE) * 2).astype(np.float32) for _ in range(8)])
    assert max(agreement.max_lsb.values()) <= 1, agreement


@settings(derandomize=True, deadline=None, max_examples=40)
@given(seed=st.integers(0, 2 ** 32 - 1), mutations=st.integers(1, 2))
def test_mutated_qdq_models_fail_only_with_qsim_errors(tmp_path_factory, seed, mutations):
    rng = random.Random(seed)
    model = qdq_model(np.random.default_rng(seed), rng.choice((13, 17, 21)), rng.random() < 0.5)
    kinds = [mutate_qdq(rng, model) for _ in range(mutations)]
    path = save(model, tmp_path_factory.mktemp("mut"))
    try:
        graph = load(path)
        lowered = quantize_graph(graph, None, None, QUIET).model
        (name, quant), = lowered.input_quant.items()
        execute(lowered.graph, {name: np.zeros(lowered.graph.tensor(name).shape, np.int8)})
    except QsimError as err:
        assert err.message, kinds
