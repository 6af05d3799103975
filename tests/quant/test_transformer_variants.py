"""Stock torch.nn.TransformerEncoder exports beyond the batch-first one
(tests/onnx/torch_exports/make_exports.py, committed files, no torch needed):

- `encoder_seq_first`: batch_first=False, the default layout, an [S, N, E] input whose batch is
  axis 1 (named "batch" in the export), ReLU, post-norm, 2 layers;
- `encoder_norm_first_gelu`: batch_first=False, norm_first=True, activation="gelu", 2 layers.

Each is checked four ways: float vs onnxruntime within the float32 bound; the integer graph on
the TOSA reference equal to the kernels on every tensor; `qsim quantize --calib` then
`qsim simulate` verified on the cycle model; output SQNR (int8 and 16x8) above a floor.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import qsim.onnx
from qsim.cli import main
from qsim.errors import DataError, UnsupportedError
from qsim.quant.calibration.data import Samples, load_samples
from qsim.quant.params import Precision, dequantize
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph, single_input
from qsim.runtime.executor import execute

from .test_target_tosa import _run_both, sqnr_db

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import assert_within, gamma, make_model, run_ort, save  # noqa: E402

EXPORTS = Path(__file__).resolve().parents[1] / "onnx" / "torch_exports"
SEQ_FIRST = ["encoder_seq_first", "encoder_norm_first_gelu"]
SEQ, EMBED = 5, 16
# about 5 dB under what the default recipe measures on the calibration samples (int8: 33.6 /
# 33.8 dB; 16x8: 53.8 / 54.1 dB, where the 8-bit weights of the projections limit every linear
# output to about 46 dB), so a broken rule fails and a change of recipe does not
SQNR_FLOOR_DB = {Precision.INT8: 28.0, Precision.INT16X8: 48.0}


def _path(name: str) -> Path:
    return EXPORTS / f"{name}_opset17.onnx"


def _calib(rng, n: int) -> np.ndarray:
    """n sequence-first samples: one sample is the input without its batch axis, [S, E]."""
    return rng.normal(0, 1, (n, SEQ, EMBED)).astype(np.float32)


@pytest.mark.parametrize("name", SEQ_FIRST)
def test_sequence_first_export_loads_with_the_batch_on_axis_1_and_matches_onnxruntime(name):
    model = onnx.load(str(_path(name)))
    x = np.random.default_rng(1).normal(size=(SEQ, 3, EMBED)).astype(np.float32)
    graph = qsim.onnx.load(str(_path(name)), batch=3)
    assert graph.tensor("x").shape == (SEQ, 3, EMBED)
    got = {n: v for n, v in execute(graph, {"x": x}).items() if n in graph.outputs}
    ref = run_ort(model, {"x": x})
    # the bound of test_onnx_torch_exports' encoder, per layer norm: each divides by its input's σ,
    # amplifying an error by at most 2·max|g|/σ_min (torch's g = 1); sums of at most 150 terms
    # per layer, 2 layers; S and σ_min from onnxruntime's layer-norm inputs
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    norm_inputs = [n.input[0] for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert len(norm_inputs) == 4
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                              for n in norm_inputs)
    r = list(run_ort(probe, {"x": x}).values())
    sigma_min = min(float(np.sqrt(np.var(v, axis=-1)).min()) for v in r)
    s = max(float(np.abs(v).max()) for v in r) * 4
    (out,) = ref
    assert_within(got[out], ref[out], 2 * gamma(300) * s * (2 / sigma_min) ** 4, f"{name}:{out}")


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.INT16X8])
@pytest.mark.parametrize("name", SEQ_FIRST)
def test_sequence_first_export_quantizes_bit_exact_and_tracks_float(name, precision):
    rng = np.random.default_rng(3)
    graph = qsim.onnx.load(str(_path(name)))
    assert graph.tensor("x").shape == (SEQ, 1, EMBED)
    assert single_input(graph) == ("x", (SEQ, EMBED))
    # evaluated on the calibration samples: a 16-bit grid has no room for values beyond the
    # calibrated range, and one clipped value of other samples would decide the SQNR
    result = quantize_graph(graph, Samples(_calib(rng, 32)), None,
                            QuantizeOptions(show_progress=False, precision=precision))
    model = result.model
    kinds = [op.kind.name for op in model.graph.ops]
    assert all(k.startswith("tosa.") for k in kinds)
    assert kinds.count("tosa.MATMUL") == 4            # q·kᵀ and p·v in each of 2 layers
    out = graph.outputs[0]
    (scored,) = result.report.outputs
    assert scored.sample_shape == (SEQ, EMBED) and scored.top1_agreement is None   # not a class vector
    assert result.report.eval_samples == 32
    assert scored.sqnr_db > SQNR_FLOOR_DB[precision]
    x = _calib(np.random.default_rng(3), 1)[0][:, None, :]          # the first calibration sample
    ints = _run_both(model, x)
    v = model.tensor_map[out]
    got = dequantize(ints[v.name].transpose(np.argsort(v.perm)), v.quant)
    assert sqnr_db(execute(graph, {"x": x})[out], got) > SQNR_FLOOR_DB[precision] - 3


@pytest.mark.parametrize("name", SEQ_FIRST)
def test_sequence_first_quantize_then_simulate_verifies_every_layer(tmp_path, capsys, name):
    rng = np.random.default_rng(7)
    calib, x1 = tmp_path / "calib.npy", tmp_path / "x1.npy"
    np.save(calib, _calib(rng, 16))
    np.save(x1, _calib(rng, 1)[0][:, None, :])          # one input in the model's [S, 1, E] layout
    out = tmp_path / "q"
    assert main(["quantize", str(_path(name)), "--calib", str(calib), "--eval-limit", "4", "-o", str(out),
                 "-q"]) == 0
    assert main(["simulate", str(out), "--input", str(x1), "--engine", "model", "-o",
                 str(tmp_path / "sim")]) == 0
    assert "every layer bit-exact with the kernels" in capsys.readouterr().out


def test_calibration_samples_in_the_wrong_layout_are_refused_with_the_sample_shape(tmp_path):
    graph = qsim.onnx.load(str(_path("encoder_seq_first")))
    name, sample = single_input(graph)
    bad = tmp_path / "calib.npy"
    np.save(bad, np.zeros((4, SEQ, 1, EMBED), np.float32))
    with pytest.raises(DataError) as err:
        load_samples(bad, name, sample)
    assert "the model input is [5, 16]" in str(err.value) and "[N, 5, 16]" in err.value.hint


def test_a_dynamic_dimension_not_named_as_a_batch_is_still_refused(tmp_path):
    """Only a dynamic first dimension, or one named N/B/batch..., is the batch; a dynamic sequence
    length (here axis 1 'S' of a batch-first input) must be given, never guessed."""
    nodes = [onnx.helper.make_node("Relu", ["x"], ["y"])]
    for dims in ((1, "S", 4), ("S", "batch", 4, "T")):
        path = save(make_model(nodes, [("x", dims)], [("y", None)]), tmp_path)
        with pytest.raises(UnsupportedError) as err:
            qsim.onnx.load(path)
        assert "dynamic dimension" in str(err.value) and "input_shapes" in err.value.hint
    path = save(make_model(nodes, [("x", (3, "Batch", 4))], [("y", None)]), tmp_path)
    assert qsim.onnx.load(path, batch=2).tensor("x").shape == (3, 2, 4)


def test_qsim_run_takes_the_batch_from_the_sequence_first_array(tmp_path):
    """`qsim run` loads the model at the array's batch, found on the input's extent-1 axis (axis 1
    here), and matches onnxruntime (the float bound of the first test, with margin 1e-5 rel)."""
    x = np.random.default_rng(5).normal(size=(SEQ, 3, EMBED)).astype(np.float32)
    xin, out = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xin, x)
    path = _path("encoder_seq_first")
    assert main(["run", str(path), "--input", str(xin), "--output", str(out)]) == 0
    (ref,) = run_ort(onnx.load(str(path)), {"x": x}).values()
    got = np.load(out)
    assert got.shape == (SEQ, 3, EMBED)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
