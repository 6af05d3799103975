"""Models with their own operators and with control flow: `qsim run` executes them, calibration
runs them through the one executor (qsim.runtime), and quantization either succeeds (what
composes into standard operators) or stops with an UnsupportedError naming the operator that
has no integer lowering (kind, label, and the definition's file:line for a model's own one)."""
from __future__ import annotations

import numpy as np
import pytest

from qsim.cli import main
from qsim.errors import UnsupportedError
from qsim.quant.calibration.calibrate import calibrate
from qsim.quant.calibration.data import Samples
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import load_float_model, quantize_graph

SHAPE = (1, 2, 4, 4)
HEADER = "import nn;\nimport math;\n\n"
GRAPH = """graph G {{
    @input {{
        x: real[1, 2, 4, 4];
    }}
    @output {{
        y: real[1, 2, 4, 4];
    }}
    @compose {{
        r = nn.relu(x);
        {body}
    }}
}}
"""

DOUBLE_IT = """operator double_it {{
    @input {{
        x: real[b, c, h, w];
    }}
    @output {{
        y: real[b, c, h, w];
    }}
    {block}
}}

"""
# a primitive the model defines by its formula (@lower): float execution only
OWN_LOWER = HEADER + DOUBLE_IT.format(block="""@lower {
        y[i, j, k, l] = 2.0 * x[i, j, k, l],
            i < b, j < c, k < h, l < w;
    }""") + GRAPH.format(body="y = double_it(r);")
# the same operator composed of standard operators: composes away, so it quantizes
OWN_COMPOSE = HEADER + DOUBLE_IT.format(block="""@compose {
        y = math.add(x, x);
    }""") + GRAPH.format(body="y = double_it(r);")

# a loop kept as control.loop (do), and the same loop unrolled at composition (unroll)
LOOP = HEADER + GRAPH.format(body="y = with s = r do ..(3) math.add(s, r);")
UNROLLED = HEADER + GRAPH.format(body="y = with s = r unroll ..(3) math.add(s, r);")

# a branch on a run-time value (control.if)
BRANCH = HEADER + GRAPH.format(body="m = math.sum_reduce{axes=[0, 1, 2, 3], squeeze=true}(r);\n"
                                    "        c = math.gt(m, 8.0);\n"
                                    "        y = if c then math.neg(r) else math.mul(r, r);")


def _model(tmp_path, text, name="m"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "main.sknd").write_text(text)
    return folder


def _calib(tmp_path, n=8):
    data = np.random.default_rng(5).normal(0.0, 1.0, (n,) + SHAPE[1:]).astype(np.float32)
    np.save(tmp_path / "calib.npy", data)
    return data


def _run(tmp_path, model, x):
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--output", str(out)]) == 0
    return np.load(out)


@pytest.mark.parametrize("text, expected", [
    (OWN_LOWER, lambda r: 2 * r),
    (OWN_COMPOSE, lambda r: r + r),
    (LOOP, lambda r: 4 * r),            # s = r, then three times s = s + r
    (UNROLLED, lambda r: 4 * r),
], ids=["own-lower", "own-compose", "loop", "unrolled"])
def test_qsim_run_matches_numpy(tmp_path, text, expected):
    x = np.random.default_rng(1).normal(0.0, 1.0, SHAPE).astype(np.float32)
    got = _run(tmp_path, _model(tmp_path, text), x)
    np.testing.assert_array_equal(got, expected(np.maximum(x, 0)))    # exact in float32


@pytest.mark.parametrize("scale, then_branch", [(1.0, True), (0.1, False)])
def test_qsim_run_takes_the_branch_the_data_selects(tmp_path, scale, then_branch):
    x = (scale * np.random.default_rng(2).normal(1.0, 1.0, SHAPE)).astype(np.float32)
    r = np.maximum(x, 0)
    assert (r.sum(dtype=np.float64) > 8.0) == then_branch      # sum(relu(x)) > 8 selects `then`
    got = _run(tmp_path, _model(tmp_path, BRANCH), x)
    np.testing.assert_array_equal(got, -r if then_branch else r * r)


@pytest.mark.parametrize("text, factor", [(OWN_LOWER, 2.0), (LOOP, 4.0)], ids=["own-lower", "loop"])
def test_calibration_runs_model_operators_and_loops(tmp_path, text, factor):
    """Min-max calibration sees y = factor * relu(x): y's range is exactly factor times r's
    (a power of two scales float32 exactly), so its scale is too."""
    graph = load_float_model(_model(tmp_path, text))
    data = _calib(tmp_path)
    params = calibrate(graph, ({"x": data[i:i + 1]} for i in range(len(data))), observer="minmax",
                       show_progress=False)
    r, y = params["r"], params["y"]
    assert float(np.max(r.scale)) > 0
    np.testing.assert_allclose(np.asarray(y.scale), factor * np.asarray(r.scale), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(y.zero_point), np.asarray(r.zero_point))


@pytest.mark.parametrize("target", ["tosa", "cvm"])
def test_quantize_names_the_model_operator_without_integer_lowering(tmp_path, capsys, target):
    model = _model(tmp_path, OWN_LOWER)
    _calib(tmp_path)
    out = tmp_path / "q"
    rc = main(["quantize", str(model), "--calib", str(tmp_path / "calib.npy"), "-o", str(out), "-q",
               "--target", target])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    line = OWN_LOWER.splitlines().index("operator double_it {") + 1
    assert f"{model / 'main.sknd'}:{line}:1: unsupported error" in err
    assert ("cannot lower main.double_it 'y': no " + ("integer" if target == "tosa" else "CVM")
            + " lowering for main.double_it (operator 'double_it' is defined by the model)") in err
    assert "@compose block of standard operators" in err and "Traceback" not in err


def test_quantize_api_gives_the_definition_location(tmp_path):
    model = _model(tmp_path, OWN_LOWER)
    graph = load_float_model(model)
    with pytest.raises(UnsupportedError, match=r"main.double_it 'y': no integer lowering") as info:
        quantize_graph(graph, Samples(_calib(tmp_path)), options=QuantizeOptions(show_progress=False))
    loc = info.value.location
    assert loc is not None and loc.file.endswith("main.sknd")
    assert loc.line == OWN_LOWER.splitlines().index("operator double_it {") + 1


def test_quantize_names_a_loop_left_as_control_flow(tmp_path, capsys):
    model = _model(tmp_path, LOOP)
    _calib(tmp_path)
    rc = main(["quantize", str(model), "--calib", str(tmp_path / "calib.npy"), "-o", str(tmp_path / "q"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "q").exists()
    assert "cannot lower control.loop 'y': no integer lowering for control.loop" in err
    assert "'unroll'" in err


@pytest.mark.parametrize("text", [OWN_COMPOSE, UNROLLED], ids=["own-compose", "unrolled"])
def test_what_composes_into_standard_operators_quantizes(tmp_path, text):
    """API and CLI: the integer model computes y = k * relu(x) within a few steps of its scale."""
    model = _model(tmp_path, text)
    data = _calib(tmp_path)
    result = quantize_graph(load_float_model(model), Samples(data),
                            options=QuantizeOptions(show_progress=False))
    assert {op.kind.dialect for op in result.model.graph.ops} == {"tosa"}
    out = tmp_path / "q"
    assert main(["quantize", str(model), "--calib", str(tmp_path / "calib.npy"), "-o", str(out), "-q"]) == 0
    assert (out / "main.sknd").is_file() and (out / "quantization.json").is_file()
    k = 2.0 if text is OWN_COMPOSE else 4.0
    x = data[:1].reshape(SHAPE)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "yq.npy")]) == 0
    yq = np.load(tmp_path / "yq.npy")                    # int8 codes of y
    q = result.model.output_quant[result.model.graph.outputs[0]]
    real = (yq.astype(np.float64) - np.asarray(q.zero_point)) * np.asarray(q.scale)
    want = k * np.maximum(x, 0)
    assert np.max(np.abs(real - want)) <= 3 * float(np.max(q.scale))
