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
