import json
import math

import numpy as np

from qsim.quant.accuracy import AccuracyReport, TensorAccuracy
from qsim.report.accuracy import write_accuracy_report


def _report():
    counts, edges = np.histogram(np.random.default_rng(0).normal(size=500), bins=20)
    return AccuracyReport(
        model="demo", eval_samples=500, top1_agreement=0.992, float_top1=0.9, int8_top1=0.895,
        tensors=(TensorAccuracy("conv1", "CONV2D", 38.5, tuple(counts.tolist()), tuple(edges.tolist())),
                 TensorAccuracy("logits", "FULLY_CONNECTED", 27.25, tuple(counts.tolist()), tuple(edges.tolist())),
                 TensorAccuracy("input", "RESCALE", math.inf)),
        settings={"observer": "minmax"}, notes=("not ImageNet accuracy",))


def test_report_json_has_required_fields(tmp_path):
    paths = write_accuracy_report(_report(), tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["eval_samples"] == 500
    assert data["float_top1"] == 0.9 and data["int8_top1"] == 0.895
    assert data["top1_agreement"] == 0.992
    assert data["sqnr_db"] == {"conv1": 38.5, "logits": 27.25, "input": None}   # inf -> null


def test_report_writes_png_plots_and_html(tmp_path):
    paths = write_accuracy_report(_report(), tmp_path)
    for key in ("sqnr_plot", "error_plot"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = paths["html"].read_text()
    assert "sqnr.png" in page and "errors.png" in page
    assert "99.20 %" in page and "exact" in page and "not ImageNet accuracy" in page


def test_html_escapes_names(tmp_path):
    r = AccuracyReport(model="<m>", eval_samples=1, top1_agreement=1.0,
                       tensors=(TensorAccuracy("a<b>", "X&Y", 10.0),))
    page = write_accuracy_report(r, tmp_path)["html"].read_text()
    assert "a&lt;b&gt;" in page and "X&amp;Y" in page and "<m>" not in page


def test_per_output_figures_and_warnings_in_json_and_html(tmp_path):
    from qsim.quant.accuracy import OutputAccuracy
    box = OutputAccuracy("box", (4,), "values", "several outputs, no softmax, no labels", math.inf, 0.0, 1.0)
    prob = OutputAccuracy("prob", (2,), "classes", "softmax", 31.5, 1.25, 0.875, top1_agreement=0.75,
                          float_top1=0.5, int8_top1=0.625, labelled=8)
    r = AccuracyReport(model="rnet", eval_samples=8, top1_agreement=0.75, float_top1=0.5, int8_top1=0.625,
                       tensors=(TensorAccuracy("box", "nn.linear", math.inf), TensorAccuracy("prob", "nn.softmax", 31.5)),
                       outputs=(box, prob), warnings=("outputs[0] 'box' is not a class vector",))
    paths = write_accuracy_report(r, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["outputs"][0] == {"name": "box", "sample_shape": [4], "role": "values",
                                  "reason": "several outputs, no softmax, no labels", "sqnr_db": None,
                                  "max_error_lsb": 0.0, "within_one_lsb": 1.0, "top1_agreement": None,
                                  "float_top1": None, "int8_top1": None, "labelled": 0}
    assert data["outputs"][1]["top1_agreement"] == 0.75 and data["outputs"][1]["labelled"] == 8
    assert data["warnings"] == ["outputs[0] 'box' is not a class vector"]
    page = paths["html"].read_text()
    assert "Per-output accuracy" in page and "class vector (softmax)" in page
    assert "<td>box</td><td>4</td><td>values (several outputs, no softmax, no labels)</td><td>exact</td>" in page
    assert "62.50 %" in page and "87.50 %" in page                  # prob's integer top-1, within 1 LSB
    assert '<p class="bad">Warning: outputs[0] &#x27;box&#x27; is not a class vector</p>' in page
    assert "top-1 agreement (float vs integer) (&#x27;prob&#x27;)" in page


def _png_size(path):
    header = path.read_bytes()[:24]          # PNG signature, IHDR length and type, width, height
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_sqnr_plot_of_a_large_model_stays_a_readable_size(tmp_path):
    # 3,000 tensors (an unrolled LSTM's count) as bars would be 0.28 inch each: ~92,000 pixels tall
    from qsim.report.accuracy import MOST_BARS
    many = tuple(TensorAccuracy(f"t{i}", "ADD", 20.0 + (i % 37)) for i in range(3000))
    r = AccuracyReport(model="big", eval_samples=1, top1_agreement=1.0, tensors=many)
    width, height = _png_size(write_accuracy_report(r, tmp_path / "big")["sqnr_plot"])
    assert height <= 6 * 110 and width <= 12 * 110
    few = AccuracyReport(model="small", eval_samples=1, top1_agreement=1.0, tensors=many[:MOST_BARS])
    _, bars_height = _png_size(write_accuracy_report(few, tmp_path / "small")["sqnr_plot"])
    assert bars_height > 0.25 * MOST_BARS * 110      # up to MOST_BARS: one named bar each
