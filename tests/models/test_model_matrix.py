"""The model matrix: the blocks of common networks (model_blocks.py, ONNX built in code) through
every stage qsim has, each checked against an independent oracle:

1. float: qsim's float execution of the ONNX model vs onnxruntime, within the float32 rounding
   bound of tests/onnx (onnx_helpers: 2·γ_n·gain·S, S = the block on |x|, |W| with batch-norm
   means 0, n = roundings along the longest path, gain = how much the activations can amplify
   an error; each block's n and gain are stated in FLOAT_BOUNDS);
2. quantize (`qsim quantize`'s job, into a folder) → the folder's integer graph replayed on the
   TOSA 0.30 numpy reference equals the Cython kernels on every tensor, bit for bit;
3. `qsim simulate` on the NPU's cycle model (the numpy model engine: fast, and held equal to the
   RTL by tests/npu) verifies every layer against the kernels;
4. each output's SQNR (float vs dequantized integer over the 32 calibration samples) is at
   least the block's floor (SQNR_FLOOR_DB: about 5 dB under what the default recipe measures,
   so that a broken rule or scale fails and a change of recipe does not).

Blocks whose integer lowering other work of issue 13 is adding are marked xfail(strict) with
the message they stop with today (PENDING: quantizing or reloading the folder; SIMULATE_PENDING:
a simulation that does not verify); when a lowering lands the case passes, the strict marker
fails, and the entry is removed.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from model_blocks import BLOCKS
from qsim.commands.quantize import quantize_to_folder
from qsim.errors import QsimError
from qsim.npu.engines import Engine
from qsim.commands.simulate import simulate_command
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.qmodel import load_quantized_model
from qsim.runtime.executor import execute

# tests/onnx is no package (its name is the onnx package's): its helpers are imported by path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import EPS32, abs_block, assert_within, gamma, run_ort, run_qsim  # noqa: E402

SAMPLES = 32

# block -> (n roundings along the longest path, gain, why)
FLOAT_BOUNDS = {
    "resnet_basic_blocks": (400, 1.0, "conv 72 + bn 4 + conv 72 + bn 4 + add, conv 72 + bn 4 + conv 144 + bn 4 "
                                      "+ add; ReLU is 1-Lipschitz"),
    "inverted_residual": (64, 1.0, "1x1 8 + bn 4 + dw 9 + bn 4 + 1x1 32 + bn 4 + add; ReLU6 is 1-Lipschitz"),
    "mobilenetv3_block": (170, 9 / 4, "1x1 8 + bn 4 + hardswish 4 + dw 9 + bn 4 + hardswish 4 + mean 64 + "
                                      "SE convs 34 + hardsigmoid 3 + mul + 1x1 24 + bn 4 + add; two "
                                      "HardSwish of slope <= 3/2; the gate is in [0, 1]"),
    "shufflenet_unit": (40, 1.0, "1x1 8 + bn 4 + dw 9 + bn 4 + 1x1 8 + bn 4; layout ops exact"),
    "squeezenet_fire": (56, 1.0, "max pool exact, squeeze 16 + 1, expand 3x3 36 + 1"),
    "prelu_cnn": (570, 1.0, "conv 28 + conv 73 + fc 433 + fc 33 + 3 PReLU of slope in [0, 1]"),
    "conv1d_net": (120, 1.0, "conv1d 31 + bn 4 + max pool exact + conv1d 41 + bn 4 + avg 2 + mean 4 + fc 17; "
                             "ReLU 1-Lipschitz; the unit axis adds no rounding (same sums)"),
    "espcn": (80, 16.0, "conv 26 + tanh + conv 145 (of which the longest product chain 26 + 145 + 73 "
                        "roundings is bounded by 80 per layer) ...; tanh is 1-Lipschitz but its inputs' "
                        "partial sums (S on |x|, |W| before the tanh) reach 16x the output's S, whose tanh "
                        "terms count at most 1; DepthToSpace exact"),
    "unet_conv_transpose": (300, 1.0, "conv 28 + pool exact + conv 73 + conv-transpose 17 + concat exact + "
                                      "conv 145 + 1x1 9; ReLU 1-Lipschitz"),
    "decoder_output_padding": (200, 1.0, "conv 28 + conv 73 + conv-transpose 4 taps x 16 + 1 + 1x1 9; "
                                         "ReLU 1-Lipschitz"),
}

SQNR_FLOOR_DB = {"resnet_basic_blocks": 30.0, "inverted_residual": 30.0, "mobilenetv3_block": 30.0,
                 "shufflenet_unit": 30.0, "squeezenet_fire": 35.0, "prelu_cnn": 30.0,
                 "transformer_encoder_layer": 25.0, "conv1d_net": 32.0, "espcn": 28.0, "vit_class_token": 23.0,
                 "unet_conv_transpose": 25.0, "decoder_output_padding": 25.0}

# what stops each block today (issue 13: batched MatMul, LayerNorm, GELU: helper "xfmr")
PENDING = {
}

# blocks that quantize but whose simulation does not verify today: name -> the mismatch message
SIMULATE_PENDING: dict[str, str] = {}


def _pending(name, simulate: bool = False):
    if name in PENDING:
        return pytest.param(name, marks=pytest.mark.xfail(raises=QsimError, strict=True, reason=PENDING[name]))
    if simulate and name in SIMULATE_PENDING:
        return pytest.param(name, marks=pytest.mark.xfail(raises=AssertionError, strict=True,
                                                          reason=SIMULATE_PENDING[name]))
    return name


def _input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    return tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])


@pytest.fixture(scope="module")
def block_files(tmp_path_factory):
    """name -> (model, path, samples [SAMPLES, ...]); weights seeded per block."""
    folder = tmp_path_factory.mktemp("blocks")
    files = {}
    for i, (name, build) in enumerate(BLOCKS.items()):
        model = build(np.random.default_rng(100 + i))
        path = folder / f"{name}.onnx"
        onnx.save(model, path)
        x = np.random.default_rng(200 + i).normal(size=(SAMPLES, *_input_shape(model))).astype(np.float32)
        files[name] = (model, path, x)
    return files


def _intermediates(model: onnx.ModelProto, names, feeds) -> dict:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names)
    return run_ort(m, feeds)


@pytest.mark.parametrize("name", [n for n in BLOCKS if n in FLOAT_BOUNDS])
def test_float_execution_matches_onnxruntime(block_files, name):
    model, path, x = block_files[name]
    feeds = {"x": x[:4]}
    got, ref = run_qsim(str(path), feeds, batch=4), run_ort(model, feeds)
    n, gain, _ = FLOAT_BOUNDS[name]
    s = abs_block(model, feeds)
    for out in ref:
        if out == "prob":
            # softmax: |Δp| <= max |Δlogit| / 2 (its Jacobian's absolute row sums are 2p(1-p) <= 1/2)
            # plus its own exp/sum/div roundings (8 EPS32)
            logits = next(nd.input[0] for nd in model.graph.node if nd.op_type == "Softmax")
            s_logits = _intermediates(_abs_copy(model), [logits], {"x": np.abs(x[:4])})[logits]
            bound = 2 * gamma(n) * float(np.max(s_logits)) / 2 + 8 * EPS32
        else:
            bound = 2 * gamma(n) * gain * s[out]
        assert_within(got[out], ref[out], bound, f"{name}: {out}")


def _abs_copy(model):
    """The model with |initializers| and batch-norm means 0 (abs_block's model)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    means = {nd.input[3] for nd in m.graph.node if nd.op_type == "BatchNormalization"}
    for t in m.graph.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.dtype.kind == "f":
            t.CopyFrom(onnx.numpy_helper.from_array(np.zeros_like(a) if t.name in means else np.abs(a), t.name))
    return m


def test_vit_class_token_float_execution_matches_onnxruntime(block_files):
    """The one layer norm divides by σ: an error e in its input r (the class token and patch
    tokens plus position embeddings: sums of 48 products + 1 add) moves its output by at most
    2·e·max|g|/σ_min; after it, the feed-forward (16 + 32 products) and the head (16) add their
    own roundings of values bounded by S = 4·max|r|·max|g| + max|b| amplified by their weights
    (sum of |W| rows <= 8): bound 2·γ_120·S·8·(2·max|g|/σ_min)."""
    model, path, x = block_files["vit_class_token"]
    feeds = {"x": x[:4]}
    got, ref = run_qsim(str(path), feeds, batch=4)["y"], run_ort(model, feeds)["y"]
    norm = next(nd for nd in model.graph.node if nd.op_type == "LayerNormalization")
    r = _intermediates(model, [norm.input[0]], feeds)[norm.input[0]]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    g_max = float(np.abs(inits[norm.input[1]]).max())
    sigma_min = float(np.sqrt(np.var(r, axis=-1)).min())
    s = 4 * float(np.abs(r).max()) * g_max + float(np.abs(inits[norm.input[2]]).max())
    assert_within(got, ref, 2 * gamma(120) * s * 8 * (2 * g_max / sigma_min), "y")


def test_transformer_float_execution_matches_onnxruntime(block_files):
    """The layer norms divide by σ: an error e in their input r moves the output by at most
    2·e·max|g|/σ_min. The errors reaching r come from sums of at most 16 + 16 + 6 + 16 + 16 + 32
    terms (projections, QKᵀ, AV, output, feed-forward) of values bounded by S = 4·max|r| (the
    normalized values are at most sqrt(d) = 4), amplified by the first norm's gain once more:
    bound 2·γ_150·S·(2·max|g|/σ_min)² (n = 150 with softmax, erf and the element-wise ops)."""
    model, path, x = block_files["transformer_encoder_layer"]
    feeds = {"x": x[:4]}
    got, ref = run_qsim(str(path), feeds, batch=4)["y"], run_ort(model, feeds)["y"]
    norms = [nd for nd in model.graph.node if nd.op_type == "LayerNormalization"]
    r = _intermediates(model, [nd.input[0] for nd in norms], feeds)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    g_max = max(float(np.abs(inits[nd.input[1]]).max()) for nd in norms)
    sigma_min = min(float(np.sqrt(np.var(v, axis=-1)).min()) for v in r.values())
    s = 4 * max(float(np.abs(v).max()) for v in r.values())
    assert_within(got, ref, 2 * gamma(150) * s * (2 * g_max / sigma_min) ** 2, "y")


@pytest.fixture(scope="module")
def quantized(block_files, tmp_path_factory):
    """name -> (QuantizeResult, folder) or the QsimError the block stops with."""
    folder = tmp_path_factory.mktemp("quantized")
    done = {}
    for name, (_, path, x) in block_files.items():
        np.save(folder / f"{name}.npy", x)
        try:
            done[name] = (quantize_to_folder(str(path), str(folder / f"{name}.npy"), str(folder / name),
                                             QuantizeOptions(show_progress=False)), folder / name)
        except QsimError as err:
            done[name] = err
    return done


def _result(quantized, name):
    """The block's (result, folder); the error it stops with is raised, after checking that a
    pending block stops with the stated message (anything else fails its xfail)."""
    found = quantized[name]
    if isinstance(found, QsimError):
        assert name in PENDING and PENDING[name] in str(found), str(found)
        raise found
    return found


@pytest.mark.parametrize("name", [_pending(n) for n in BLOCKS])
def test_integer_graph_equals_the_tosa_reference_and_meets_the_sqnr_floor(block_files, quantized, name):
    result, folder = _result(quantized, name)
    _, _, x = block_files[name]
    try:
        model = load_quantized_model(folder)       # the written folder, reloaded
    except QsimError as err:
        assert name in PENDING and PENDING[name] in str(err), str(err)
        raise
    feed = quantize_feed(model, {"x": x[:1]})
    kernels = execute(model.graph, feed, backend="kernels")
    reference = execute(model.graph, feed, backend="reference")
    assert set(kernels) == set(reference)
    for tensor, value in reference.items():
        np.testing.assert_array_equal(kernels[tensor], value, err_msg=f"{name}: {tensor}")
    assert [o.name for o in result.report.outputs] == [o.name for o in block_files[name][0].graph.output]
    for out in result.report.outputs:
        assert out.sqnr_db >= SQNR_FLOOR_DB[name], f"{name}: {out.name} SQNR {out.sqnr_db:.1f} dB"


@pytest.mark.parametrize("name", [_pending(n, simulate=True) for n in BLOCKS])
def test_simulate_verifies_every_layer(block_files, quantized, name, tmp_path):
    _, folder = _result(quantized, name)
    _, _, x = block_files[name]
    np.save(tmp_path / "x.npy", x[:1])
    sim = simulate_command(str(folder), "8x8", Engine.MODEL, str(tmp_path / "x.npy"), str(tmp_path / "npu"),
                           show_progress=False, workers=1)
    if name in SIMULATE_PENDING:
        assert not sim.verified and SIMULATE_PENDING[name] in " ".join(sim.messages), sim.messages
    assert sim.verified, sim.messages
    compared = [layer for layer in sim.reports[0].layers if layer.verified is not None]
    assert compared and all(layer.verified for layer in compared)
    # issue 14: the host keeps only the free reinterpretations; everything else runs on the NPU
    on_host = [(layer.name, layer.op) for layer in sim.reports[0].layers
               if layer.unit == "host" and layer.op not in ("RESHAPE", "IDENTITY", "CONST")]
    assert not on_host, on_host
