"""Models with several inputs (issue 29): calibration and evaluation data keyed by input name
(qsim/quant/calibration/data.py load_model_samples, model_inputs.py), integer side inputs kept
integer with their ids checked against the embedding tables, bool padding masks into attention
(lowering/softmax_mask.py RuntimeMask, tosa/runtime_mask.py), and `--input NAME=x.npy` on every
command that runs a model.

Each model: float vs onnxruntime, `qsim quantize` → the folder's integer graph on the TOSA
reference equal to the kernels on every tensor, the output's SQNR above a floor, `qsim simulate`
verifying every layer. The floors are about 5 dB under what the default recipe measures.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from qsim.cli import main
from qsim.commands.quantize import quantize_to_folder
from qsim.commands.simulate import simulate_command
from qsim.errors import DataError, UsageError
from qsim.npu.engines import Engine
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.params import dequantize
from qsim.quant.qmodel import load_quantized_model
from qsim.runtime.executor import execute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import EPS32, gamma, init, magnitude, make_model, run_ort, run_qsim, save  # noqa: E402

EXPORTS = Path(__file__).resolve().parents[1] / "onnx" / "torch_exports"
QUIET = QuantizeOptions(show_progress=False)
N = 32
VOCAB, POSITIONS, SEQ, EMBED = 20, 8, 6, 16


def two_input_cnn(rng) -> onnx.ModelProto:
    """An image [3, 8, 8] through conv + ReLU + global pooling, a feature vector [5] through a
    linear layer + ReLU, concatenated, then a 4-class linear head."""
    def w(*shape, scale=0.3):
        return (rng.normal(size=shape) * scale).astype(np.float32)
    nodes = [helper.make_node("Conv", ["img", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("GlobalAveragePool", ["r1"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["feat", "wf", "bf"], ["ff"], transB=1), helper.make_node("Relu", ["ff"], ["rf"]),
             helper.make_node("Concat", ["f", "rf"], ["cat"], axis=1),
             helper.make_node("Gemm", ["cat", "wo", "bo"], ["y"], transB=1)]
    return make_model(nodes, [("img", ["N", 3, 8, 8]), ("feat", ["N", 5])], [("y", None)],
                      [init("w1", w(8, 3, 3, 3)), init("b1", w(8)), init("wf", w(8, 5)), init("bf", w(8)),
                       init("wo", w(4, 16)), init("bo", w(4))], name="two_input_cnn")


def ids_and_positions(rng) -> onnx.ModelProto:
    """Token ids and positions (int64 [N, 6]) through two embedding tables, added, a linear
    layer + ReLU and a mean over the sequence."""
    nodes = [helper.make_node("Gather", ["tok", "ids"], ["te"]), helper.make_node("Gather", ["pos", "positions"], ["pe"]),
             helper.make_node("Add", ["te", "pe"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]), helper.make_node("ReduceMean", ["r"], ["y"], axes=[1], keepdims=0)]
    return make_model(nodes, [("ids", ["N", SEQ], np.int64), ("positions", ["N", SEQ], np.int64)], [("y", None)],
                      [init("tok", rng.normal(size=(VOCAB, EMBED)).astype(np.float32)),
                       init("pos", rng.normal(size=(POSITIONS, EMBED)).astype(np.float32)),
                       init("w", (rng.normal(size=(EMBED, 4)) * 0.3).astype(np.float32))], name="ids_and_positions")


def bert_style_attention(rng) -> onnx.ModelProto:
    """One attention head as BERT-style exports write its mask: an int64 attention_mask [N, 8]
    (1: a token, 0: padding) → Unsqueeze twice → Cast → (1 - m) * float32's lowest → added to
    the scores Q Kᵀ / 4 → Softmax → P V → mean over positions."""
    def w(*shape):
        return (rng.normal(size=shape) * 0.5).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]), helper.make_node("Mul", ["qk", "quarter"], ["scores"]),
             helper.make_node("Unsqueeze", ["attention_mask", "ax1"], ["m1"]),
             helper.make_node("Cast", ["m1"], ["mf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"]), helper.make_node("Mul", ["inv", "lowest"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["masked"]), helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["a"]),
             helper.make_node("ReduceMean", ["a"], ["y"], axes=[1], keepdims=0)]
    inits = [init("wq", w(16, 16)), init("wk", w(16, 16)), init("wv", w(16, 16)), init("quarter", np.float32(0.25)),
             init("ax1", np.array([1], np.int64)), init("one", np.float32(1)),
             init("lowest", np.float32(np.finfo(np.float32).min))]
    return make_model(nodes, [("x", ["N", 8, 16]), ("attention_mask", ["N", 8], np.int64)], [("y", None)], inits,
                      name="bert_style_attention")


def _padding_masks(rng, n: int) -> np.ndarray:
    """[n, 8] bool, True at the last 0-3 positions (padding), never a fully padded row."""
    kept = rng.integers(5, 9, n)
    return np.arange(8)[None, :] >= kept[:, None]


CASES = {
    "two_input_cnn": (two_input_cnn, lambda rng, n: {"img": rng.normal(size=(n, 3, 8, 8)).astype(np.float32),
                                                     "feat": rng.normal(size=(n, 5)).astype(np.float32)}, 35.0),
    "ids_and_positions": (ids_and_positions, lambda rng, n: {"ids": rng.integers(0, VOCAB, (n, SEQ)),
                                                             "positions": np.tile(np.arange(SEQ), (n, 1))}, 35.0),
    "bert_style_attention": (bert_style_attention,
                             lambda rng, n: {"x": rng.normal(size=(n, 8, 16)).astype(np.float32),
                                             "attention_mask": (~_padding_masks(rng, n)).astype(np.int64)}, 30.0),
    "padding_mask_encoder": (lambda rng: onnx.load(EXPORTS / "encoder_padding_mask_opset17.onnx"),
                             lambda rng, n: {"x": rng.normal(size=(n, 8, 16)).astype(np.float32),
                                             "mask": _padding_masks(rng, n)}, 25.0),
}


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """name -> (onnx model, model path, data dict, QuantizeResult, folder)."""
    folder = tmp_path_factory.mktemp("multi")
    done = {}
    for i, (name, (build, data, _)) in enumerate(CASES.items()):
        rng = np.random.default_rng(290 + i)
        model = build(rng)
        path = save(model, folder, f"{name}.onnx")
        arrays = data(rng, N)
        np.savez(folder / f"{name}.npz", **arrays)
        result = quantize_to_folder(path, str(folder / f"{name}.npz"), str(folder / name), QUIET)
        done[name] = (model, path, arrays, result, folder / name)
    return done


@pytest.mark.parametrize("name", list(CASES))
def test_float_run_of_every_input_matches_onnxruntime(quantized, name):
    model, path, arrays, _, _ = quantized[name]
    feeds = {k: v[:4] for k, v in arrays.items()}
    got, ref = run_qsim(path, feeds, batch=4)["y"], run_ort(model, feeds)["y"]
    if name == "padding_mask_encoder":
        # two post-norm layers: errors amplified by the norms' gains (test_model_matrix's encoder
        # bound); measured differences are below 1e-6, the bound allows 1e-4 of the outputs' size
        assert np.max(np.abs(got - ref)) <= 1e-4 * np.max(np.abs(ref)) + 8 * EPS32
    else:
        # longest sum: 27 conv products + pooling 64 + 16 head products (or 16 + 6 + ...)
        np.testing.assert_array_less(np.abs(got - ref), 2 * gamma(120) * magnitude(model, feeds)["y"] + 1e-30)


@pytest.mark.parametrize("name", list(CASES))
def test_integer_graph_is_bit_exact_on_reference_and_kernels(quantized, name):
    _, _, arrays, result, folder = quantized[name]
    model = load_quantized_model(folder)
    assert sorted(model.graph.inputs) == sorted(arrays)
    feed = quantize_feed(model, {k: v[:1] for k, v in arrays.items()})
    kernels = execute(model.graph, feed, backend="kernels")
    reference = execute(model.graph, feed, backend="reference")
    for tensor, value in reference.items():
        np.testing.assert_array_equal(kernels[tensor], value, err_msg=f"{name}: {tensor}")
    assert result.report.outputs[0].sqnr_db >= CASES[name][2], result.report.outputs[0].sqnr_db


@pytest.mark.parametrize("name", list(CASES))
def test_simulate_takes_every_input_by_name_and_verifies(quantized, name, tmp_path):
    _, _, arrays, _, folder = quantized[name]
    specs = []
    for k, v in arrays.items():
        np.save(tmp_path / f"{k}.npy", v[:1])
        specs.append(f"{k}={tmp_path / f'{k}.npy'}")
    sim = simulate_command(str(folder), "8x8", Engine.MODEL, specs, str(tmp_path / "npu"), show_progress=False,
                           workers=1)
    assert sim.verified, sim.messages
    compared = [layer for layer in sim.reports[0].layers if layer.verified is not None]
    assert compared and all(layer.verified for layer in compared)


@pytest.mark.parametrize("name,softmax_suffix,count", [("padding_mask_encoder", "Softmax_output_0", 2),
                                                       ("bert_style_attention", "p", 1)])
def test_padded_positions_get_probability_exactly_zero(quantized, name, softmax_suffix, count):
    """The integer softmax of every attention keeps no padded position: p = 0 exactly (q = -128
    on the 1/255 grid) wherever the sample's mask says padding, in every layer."""
    _, _, arrays, _, folder = quantized[name]
    model = load_quantized_model(folder)
    softmaxes = [m for n, m in model.tensor_map.items() if n.endswith(softmax_suffix)]
    assert len(softmaxes) == count
    for i in range(4):
        values = execute(model.graph, quantize_feed(model, {k: v[i:i + 1] for k, v in arrays.items()}),
                         backend="reference")
        padded = arrays["mask"][i] if "mask" in arrays else arrays["attention_mask"][i] == 0
        for lowered in softmaxes:
            p = dequantize(values[lowered.name], lowered.quant)     # [1, heads, 8, 8] in its perm
            p = np.transpose(p, np.argsort(lowered.perm))
            assert np.all(p[..., padded] == 0.0)
            assert np.all(np.abs(p.sum(-1) - 1) <= 8 / 255)          # the kept ones still sum to 1


def test_folder_of_named_arrays_gives_the_same_model(quantized, tmp_path):
    """A folder with NAME.npy per input is the same data as the .npz."""
    _, path, arrays, result, _ = quantized["two_input_cnn"]
    data = tmp_path / "data"
    data.mkdir()
    for k, v in arrays.items():
        np.save(data / f"{k}.npy", v)
    again = quantize_to_folder(path, str(data), str(tmp_path / "q"), QUIET)
    assert again.report.outputs[0].sqnr_db == result.report.outputs[0].sqnr_db
    a, b = load_quantized_model(tmp_path / "q"), load_quantized_model(quantized["two_input_cnn"][4])
    assert [op.kind.name for op in a.graph.ops] == [op.kind.name for op in b.graph.ops]


def test_id_beyond_the_embedding_table_names_input_sample_and_element(quantized, tmp_path):
    _, path, arrays, _, _ = quantized["ids_and_positions"]
    ids = arrays["ids"][:4].copy()
    ids[2, 3] = VOCAB + 5
    np.savez(tmp_path / "bad.npz", ids=ids, positions=arrays["positions"][:4])
    with pytest.raises(DataError, match=r"input 'ids', sample 2, element \[3\]: id 25 is outside the 20 rows "
                                        r"of embedding table 'tok'"):
        quantize_to_folder(path, str(tmp_path / "bad.npz"), str(tmp_path / "q"), QUIET)


def test_float_samples_for_integer_ids_are_refused(quantized, tmp_path):
    _, path, arrays, _, _ = quantized["ids_and_positions"]
    np.savez(tmp_path / "f.npz", ids=arrays["ids"].astype(np.float32), positions=arrays["positions"])
    with pytest.raises(DataError, match="'ids' is I64 .*the samples are float32"):
        quantize_to_folder(path, str(tmp_path / "f.npz"), str(tmp_path / "q"), QUIET)


@pytest.mark.parametrize("arrays,message", [
    (lambda a: {"img": a["img"]}, r"no array for model input\(s\) 'feat'"),
    (lambda a: {"img": a["img"], "feat": a["feat"][:5]}, "different numbers of samples"),
    (lambda a: {"img": a["img"], "feat": a["feat"][:, :4]}, r"the model input is \[5\]"),
])
def test_multi_input_data_errors_name_the_input(quantized, tmp_path, arrays, message):
    _, path, data, _, _ = quantized["two_input_cnn"]
    np.savez(tmp_path / "d.npz", **arrays(data))
    with pytest.raises(DataError, match=message):
        quantize_to_folder(path, str(tmp_path / "d.npz"), str(tmp_path / "q"), QUIET)


def test_one_array_for_a_two_input_model_is_refused(quantized, tmp_path):
    _, path, data, _, _ = quantized["two_input_cnn"]
    np.save(tmp_path / "img.npy", data["img"])
    with pytest.raises(DataError, match=r"one array, and the model has 2 inputs \(img \[3, 8, 8\], feat \[5\]\)"):
        quantize_to_folder(path, str(tmp_path / "img.npy"), str(tmp_path / "q"), QUIET)


@pytest.mark.parametrize("command", ["run", "simulate", "export-vectors"])
def test_cli_input_names_missing_or_unknown_exit_2_listing_the_inputs(quantized, tmp_path, capsys, command):
    _, path, data, _, folder = quantized["two_input_cnn"]
    np.save(tmp_path / "img.npy", data["img"][:1])
    target = path if command == "run" else str(folder)
    extra = {"run": [], "simulate": ["--engine", "model", "--config", "8x8", "-o", str(tmp_path / "s")],
             "export-vectors": ["--out", str(tmp_path / "v")]}[command]
    assert main([command, target, "--input", f"img={tmp_path / 'img.npy'}", *extra]) == 2
    assert "no --input for model input(s) feat" in capsys.readouterr().err
    assert main([command, target, "--input", f"img={tmp_path / 'img.npy'}", "--input",
                 f"fet={tmp_path / 'img.npy'}", *extra]) == 2
    err = capsys.readouterr().err
    assert "the model has no input 'fet'" in err and "img, feat" in err


def test_cli_run_refuses_an_id_beyond_the_table_naming_input_and_element(quantized, tmp_path, capsys):
    _, path, arrays, _, _ = quantized["ids_and_positions"]
    ids = arrays["ids"][:1].copy()
    ids[0, 4] = -1
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "pos.npy", arrays["positions"][:1])
    assert main(["run", path, "--input", f"ids={tmp_path / 'ids.npy'}", "--input",
                 f"positions={tmp_path / 'pos.npy'}"]) == 2
    assert "input 'ids', sample 0, element [4]: id -1 is outside the 20 rows of embedding table 'tok'" in \
        capsys.readouterr().err
