"""nn.relu's attributes reach the integer graph: `max` caps it (relu6); a leaky relu (`alpha` > 0)
is lowered as one (TOSA: tosa/rules_activation.py) or, where the target has no lowering (CVM),
refused with the operator named instead of being lowered as a plain relu."""
import json

import numpy as np
import pytest

from qsim import cli

MODEL = """import nn;
graph g {{
    @input {{ x: real[1, 8]; }}
    @output {{ y: real[1, 8]; }}
    @compose {{
        y = nn.relu{{{attrs}}}(x);
    }}
}}
"""


def _model(tmp_path, attrs: str):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "main.sknd").write_text(MODEL.format(attrs=attrs))
    np.save(tmp_path / "calib.npy", np.linspace(-2.0, 2.0, 64, dtype=np.float32).reshape(8, 8))
    return folder, tmp_path / "calib.npy"


def _quantize_and_run(tmp_path, attrs: str, *options):
    """Quantizes the model with `options`, runs it on 8 points of [-2, 2]: (x, real outputs,
    output quantization, input step)."""
    model, calib = _model(tmp_path, attrs)
    out = tmp_path / "q"
    assert cli.main(["quantize", str(model), "--calib", str(calib), "-o", str(out), "-q", *options]) == 0
    x = np.linspace(-2.0, 2.0, 8, dtype=np.float32).reshape(1, 8)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(out), "--input", str(tmp_path / "x.npy"),
                     "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy").astype(np.float64)
    quant = json.loads((out / "quantization.json").read_text())
    info, step_in = quant["outputs"]["y"], quant["inputs"]["x"]["scale"]
    return x, (y - info.get("zero_point", 0)) * info["scale"], info, step_in


@pytest.mark.parametrize("target", ["tosa", "cvm"])
def test_relu_max_caps_the_integer_output(tmp_path, target):
    x, real, info, step_in = _quantize_and_run(tmp_path, "max=0.5", "--target", target)
    want = np.clip(x.astype(np.float64), 0.0, 0.5)
    # clamped at 0.5 (and 0 below), within the input's rounding (half a step) and one output step
    assert np.abs(real - want).max() <= step_in / 2 + info["scale"]
    assert real.max() <= 0.5 + info["scale"] / 2


@pytest.mark.parametrize("precision", ["int8", "16x8"])
def test_leaky_relu_is_lowered_with_its_slope(tmp_path, precision):
    x, real, info, step_in = _quantize_and_run(tmp_path, "alpha=0.1", "--precision", precision)
    xf = x.astype(np.float64)
    want = np.where(xf < 0, 0.1 * xf, xf)
    # the input's rounding (half a step, slope <= 1) and the output's (half a step)
    assert np.abs(real - want).max() <= step_in / 2 + info["scale"] / 2 + 1e-12
    assert real[0, 0] < 0 and real[0, 0] > 2 * -0.1 - info["scale"]   # the slope, not a clamp at 0


def test_leaky_relu_is_refused_by_cvm_not_lowered_as_relu(tmp_path, capsys):
    target = "cvm"
    model, calib = _model(tmp_path, "alpha=0.1")
    code = cli.main(["quantize", str(model), "--calib", str(calib), "-o", str(tmp_path / "q"), "-q",
                     "--target", target])
    err = capsys.readouterr().err
    assert code == 2
    assert "nn.relu" in err and "alpha=0.1" in err and "leaky relu" in err
    assert not (tmp_path / "q").exists()
