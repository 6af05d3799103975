"""`qsim check MODEL [--all] [--graph G] [--keep ...]` and `qsim run` on real model folders."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import qsim
from qsim.cli import main

ZOO = Path(qsim.__file__).parent / "zoo" / "fashion_cnn"

TWO_GRAPHS = """import nn;
graph First {
    @input { x: real[1, 4]; }
    @output { y: real[1, 4]; }
    @compose { y = nn.relu(x); }
}
graph Second {
    @attrib { k: int = 3; }
    @input { x: real[2, k]; }
    @output { y: real[2, k]; }
    @compose { y = nn.sigmoid(x); }
}
"""


def test_check_zoo_summary(capsys):
    assert main(["check", str(ZOO)]) == 0
    out = capsys.readouterr().out
    assert "valid SkriptND model, 1 graph(s) composed" in out
    assert "graph fashion_cnn:" in out
    assert "input   input: f32[1, 1, 28, 28]" in out and "output  output: f32[1, 10]" in out
    assert "conv1_filter: f32[16, 1, 3, 3]  [const]" in out
    assert "nn.conv x4" in out


def test_check_keep(capsys):
    assert main(["check", str(ZOO), "--keep", "nn.batch_norm,nn.linear"]) == 0
    out = capsys.readouterr().out
    assert "nn.batch_norm x4" in out and "nn.linear x1" in out


def test_check_all_and_graph(tmp_path, capsys):
    (tmp_path / "main.sknd").write_text(TWO_GRAPHS)
    assert main(["check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 graph(s) composed" in out and "graph First" in out and "Second" not in out
    assert main(["check", str(tmp_path), "--all"]) == 0
    out = capsys.readouterr().out
    assert "2 graph(s) composed" in out and "graph Second" in out and "x: f32[2, 3]" in out
    assert main(["check", str(tmp_path / "main.sknd"), "--graph", "Second"]) == 0
    assert "graph First" not in capsys.readouterr().out
    assert main(["check", str(tmp_path), "--graph", "Third"]) == 2
    assert "has no graph 'Third'" in capsys.readouterr().err


def test_check_quantized_model_shows_quantization(tmp_path, capsys):
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.tosa.sknd_form import to_sknd_form
    from qsim.skriptnd.writer import write_model
    write_model(to_sknd_form(embedded_quantized_model().graph), tmp_path / "q")
    assert main(["check", str(tmp_path / "q")]) == 0
    out = capsys.readouterr().out
    assert "quantization:" in out
    assert "input: scale 0.00392157, zero point -128, 8-bit signed (annotation)" in out
    assert "tosa.CONV2D x4" in out and "conv1.acc: i32[1, 28, 28, 16]" in out


def test_check_invalid_model_exit_2_located(tmp_path, capsys):
    (tmp_path / "main.sknd").write_text(TWO_GRAPHS.replace("nn.sigmoid(x)", "nn.sigmoidd(x)"))
    assert main(["check", str(tmp_path), "--all"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'main.sknd'}:11:20:" in err and "no operator 'sigmoidd'" in err
    (tmp_path / "main.sknd").write_text("graph G {\n    @input { x: real[2]; }\n    @output { y: real[2] }\n}\n")
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "main.sknd:3:" in err and "syntax error" in err
    assert "Traceback" not in err


def test_check_module_without_graph(tmp_path, capsys):
    (tmp_path / "ops.sknd").write_text("import nn;\noperator twice {\n    @input { x: real[n]; }\n"
                                       "    @output { y: real[n]; }\n    @compose { y = nn.relu(x); }\n}\n")
    assert main(["check", str(tmp_path / "ops.sknd")]) == 0
    assert "valid SkriptND module without graphs, 1 operator definition(s) checked" in capsys.readouterr().out


def test_run_zoo_folder(tmp_path, capsys):
    from qsim.zoo import test_subset
    images, labels = test_subset()
    np.save(tmp_path / "x.npy", images[:1])
    rc = main(["run", str(ZOO), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
               "--dump", str(tmp_path / "dump")])
    assert rc == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 10) and y.dtype == np.float32
    # the dump holds every tensor; its output is the same array
    np.testing.assert_array_equal(np.load(tmp_path / "dump" / "output.npy"), y)
    assert (tmp_path / "dump" / "relu1.npy").exists()
    assert "output: float32[1, 10]" in capsys.readouterr().out


def test_run_missing_input_exit_2(capsys):
    assert main(["run", str(ZOO), "--input", "/nonexistent/x.npy"]) == 2
    err = capsys.readouterr().err
    assert "x.npy" in err and "Traceback" not in err


def test_a_graph_without_outputs_is_the_same_error_for_check_and_quantize(tmp_path, capsys):
    """As for ONNX: `qsim check` does not call valid what `qsim quantize` refuses."""
    model = tmp_path / "g.sknd"
    model.write_text("import math;\ngraph G {\n    @input { x: real[1, 2]; }\n    @output { }\n"
                     "    @compose { y = math.exp(x); }\n}\n")
    np.save(tmp_path / "c.npy", np.ones((2, 2), np.float32))
    for argv in (["check", str(model)], ["quantize", str(model), "--calib", str(tmp_path / "c.npy"),
                                         "-o", str(tmp_path / "q"), "-q"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "graph 'G' declares no outputs" in err and "SkriptND: @output" in err
