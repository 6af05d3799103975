"""`qsim quantize --score-output` and the per-output accuracy report, on a small MTCNN-like ONNX
model (box regression as outputs[0], softmax face probability second), and the ONNX batch:
evaluation a batch at a time, `qsim run` on a batch of inputs."""
import json
import math

import numpy as np
import onnx
import pytest

from qsim.cli import main
from qsim.commands.quantize import quantize_to_folder
from qsim.errors import DataError, UsageError
from qsim.quant.calibration.data import Samples
from qsim.quant.evaluation.evaluate import float_view, quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import batched_models, calibrate_model, load_float_model, quantize_graph
from qsim.quant.tosa.target import TosaTarget
from qsim.runtime.executor import execute

from quant.scoring_models import two_heads    # tests/ is on sys.path (conftest folder)

N = 40


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    rng = np.random.default_rng(3)
    folder = tmp_path_factory.mktemp("heads")
    onnx.save(two_heads(rng), folder / "heads.onnx")
    onnx.save(two_heads(np.random.default_rng(3), batch=1), folder / "fixed.onnx")
    x = rng.normal(0, 1, (N, 3, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 2, N)
    np.savez(folder / "data.npz", x=x, **{"labels/prob": labels})
    np.save(folder / "x.npy", x)
    return folder, x, labels


@pytest.fixture(scope="module")
def quantized(files):
    folder, _, _ = files
    out = folder / "q"
    assert main(["quantize", str(folder / "heads.onnx"), "--calib", str(folder / "data.npz"), "-o", str(out),
                 "-q"]) == 0
    return out


def _sqnr(f, q):
    return 10 * math.log10(float(np.sum(f * f)) / float(np.sum((q - f) ** 2)))


def test_every_output_is_scored_with_its_own_figures(files, quantized):
    folder, x, labels = files
    report = json.loads((quantized / "report.json").read_text())
    box, prob = report["outputs"]
    assert (box["name"], box["role"], box["top1_agreement"]) == ("box", "values", None)
    assert (prob["name"], prob["role"], prob["reason"], prob["labelled"]) == ("prob", "classes", "softmax", N)
    # independent figures: the float graph at batch N (as the evaluation ran it: its N samples
    # are one batch, and float sums depend on the batch's blocking) and the integer graph
    # sample by sample (the same bits at any batch)
    from qsim.quant.qmodel import load_quantized_model
    fv = execute(load_float_model(folder / "heads.onnx", batch=N), {"x": x})
    f = {n: np.asarray(fv[n], np.float64) for n in ("box", "prob")}
    model = load_quantized_model(quantized)
    q = {n: [] for n in ("box", "prob")}
    for i in range(N):
        iv = execute(model.graph, quantize_feed(model, {"x": x[i:i + 1]}))
        for n in q:
            q[n].append(float_view(model, n, iv))
    q = {n: np.concatenate(v) for n, v in q.items()}
    for entry in (box, prob):
        assert entry["sqnr_db"] == pytest.approx(_sqnr(f[entry["name"]], q[entry["name"]]), rel=1e-9)
        scale = model.output_quant[entry["name"]].scale
        err = np.abs(q[entry["name"]] - f[entry["name"]]) / scale
        assert entry["max_error_lsb"] == pytest.approx(float(err.max()), rel=1e-9)
        assert entry["within_one_lsb"] == pytest.approx(float(np.mean(err <= 1.0)), rel=1e-12)
    agree = float(np.mean(f["prob"].argmax(1) == q["prob"].argmax(1)))
    assert prob["top1_agreement"] == pytest.approx(agree)
    assert prob["float_top1"] == pytest.approx(float(np.mean(f["prob"].argmax(1) == labels)))
    assert prob["int8_top1"] == pytest.approx(float(np.mean(q["prob"].argmax(1) == labels)))
    # the top-level figures are prob's (the classification output), not argmax over the box
    assert report["top1_agreement"] == prob["top1_agreement"]
    assert report["float_top1"] == prob["float_top1"]
    assert len(report["warnings"]) == 1 and "outputs[0] 'box'" in report["warnings"][0]


def test_html_and_summary_show_each_output(files, quantized, capsys):
    page = (quantized / "report.html").read_text()
    assert "Per-output accuracy" in page and "class vector (softmax)" in page and "values (several outputs" in page
    assert "Warning: outputs[0] &#x27;box&#x27;" in page
    assert "top-1 agreement (float vs integer) (&#x27;prob&#x27;)" in page
    folder, _, _ = files
    assert main(["quantize", str(folder / "heads.onnx"), "--calib", str(folder / "data.npz"), "-o",
                 str(folder / "again"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "output 'box' [4]: SQNR" in out
    assert "output 'prob' [2] (class vector: softmax): top-1 agreement float vs integer" in out
    assert "warning: outputs[0] 'box'" in out


def test_score_output_chooses_the_outputs(files):
    folder, _, _ = files
    r = quantize_to_folder(str(folder / "heads.onnx"), str(folder / "data.npz"), str(folder / "only_prob"),
                           QuantizeOptions(show_progress=False, score_outputs=("prob",)))
    assert [o.name for o in r.report.outputs] == ["prob"] and r.report.warnings == ()
    report = json.loads((folder / "only_prob" / "report.json").read_text())
    assert report["settings"]["score_outputs"] == ["prob"]
    r = quantize_to_folder(str(folder / "heads.onnx"), str(folder / "x.npy"), str(folder / "only_box"),
                           QuantizeOptions(show_progress=False, score_outputs=("box",)))
    assert [o.name for o in r.report.outputs] == ["box"]
    assert r.report.top1_agreement is None and r.report.float_top1 is None


def test_unknown_score_output_exits_2_listing_the_outputs(files, capsys):
    folder, _, _ = files
    code = main(["quantize", str(folder / "heads.onnx"), "--calib", str(folder / "x.npy"), "-o",
                 str(folder / "bad"), "-q", "--score-output", "prob", "--score-output", "boxes"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--score-output 'boxes': the model has no output of that name" in err
    assert "'box' [1, 4], 'prob' [1, 2]" in err
    assert not (folder / "bad").exists()


def test_labels_out_of_range_name_the_output(files, tmp_path):
    folder, x, _ = files
    np.savez(tmp_path / "d.npz", x=x, **{"labels/prob": np.full(N, 2)})
    with pytest.raises(DataError, match=r"labels/prob of output 'prob' must be class ids in \[0, 2\), got 2..2"):
        quantize_to_folder(str(folder / "heads.onnx"), str(tmp_path / "d.npz"), str(tmp_path / "o"),
                           QuantizeOptions(show_progress=False))


def test_onnx_model_evaluates_in_batches_with_the_batch_1_bits(files):
    folder, x, labels = files
    path = folder / "heads.onnx"
    big = load_float_model(path, batch=7)
    assert big.tensor("x").shape == (7, 3, 8, 8) and big.tensor("prob").shape == (7, 2)
    graph = load_float_model(path)
    samples = Samples(x, None, {"prob": labels})
    options = QuantizeOptions(show_progress=False)
    target = TosaTarget(options.config)
    calibration = calibrate_model(graph, samples, "x", options, target)
    model = target.lower(graph, calibration)
    batched = batched_models(graph, model, calibration, target, lambda n: load_float_model(path, batch=n), 8)
    assert batched is not None and batched.size == 8
    feed = quantize_feed(batched.model, {"x": x[:8]})
    ints = execute(batched.model.graph, feed)
    for i in range(8):
        one = execute(model.graph, quantize_feed(model, {"x": x[i:i + 1]}))
        for name in ("box", "prob"):
            np.testing.assert_array_equal(ints[name][i:i + 1], one[name])
    # the report figures both ways: the integer side is equal, the float reference moves by
    # float32 rounding (another summation order at another batch)
    one = quantize_graph(graph, samples, options=options).report
    big = quantize_graph(graph, samples, options=options, load_batch=lambda n: load_float_model(path, batch=n)).report
    for a, b in zip(one.outputs, big.outputs):
        assert a.sqnr_db == pytest.approx(b.sqnr_db, rel=1e-4)
        assert a.int8_top1 == b.int8_top1


def test_fixed_batch_onnx_model_cannot_be_loaded_at_another_batch(files):
    folder, _, _ = files
    with pytest.raises(UsageError, match="fixed batch size"):
        load_float_model(folder / "fixed.onnx", batch=4)
    assert load_float_model(folder / "fixed.onnx").tensor("x").shape == (1, 3, 8, 8)


def test_run_takes_the_batch_of_the_input(files, tmp_path):
    folder, x, _ = files
    np.save(tmp_path / "x3.npy", x[:3])
    assert main(["run", str(folder / "heads.onnx"), "--input", str(tmp_path / "x3.npy"), "--output",
                 str(tmp_path / "y.npz")]) == 0
    got = np.load(tmp_path / "y.npz")
    graph = load_float_model(folder / "heads.onnx")
    for i in range(3):
        one = execute(graph, {"x": x[i:i + 1]})
        for name in ("box", "prob"):
            assert got[name].shape[0] == 3
            # each sample's row is the batch-1 result (the float kernels may sum in another order)
            np.testing.assert_allclose(got[name][i:i + 1], one[name], rtol=0, atol=1e-5)
