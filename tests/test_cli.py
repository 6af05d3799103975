import os
import pytest
import subprocess
import sys

import numpy as np

import qsim
from qsim.cli import main


def test_version_and_help(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert f"qsim {qsim.__version__}" in capsys.readouterr().out
    assert main([]) == 2


def test_selftest_passes(capsys):
    assert main(["selftest", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "FAIL" not in out


def test_console_script_reports_usage_error_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "qsim", "no-such-command"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "invalid choice" in proc.stderr


def test_max_tensor_bytes_holds_for_one_run(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("QSIM_MAX_TENSOR_BYTES", raising=False)
    np.save(tmp_path / "x.npy", np.zeros(1000, np.float32))
    model = tmp_path / "m.sknd"
    model.write_text("graph g { @input { x: real[1000]; } @output { y: real[1000]; } "
                     "@compose { y = x; } }\n")
    assert main(["--max-tensor-bytes", "1K", "run", str(model), "--input", str(tmp_path / "x.npy")]) == 2
    assert "over the 1 KiB limit" in capsys.readouterr().err
    assert "QSIM_MAX_TENSOR_BYTES" not in os.environ          # the next call has the default
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy")]) == 0


def test_check_refuses_graph_and_keep_options_an_nnef1_model_cannot_use(tmp_path, capsys):
    from qsim.cli import main
    (tmp_path / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n"
                                         "    x = external(shape = [1, 3]);\n    y = relu(x);\n}\n")
    assert main(["check", str(tmp_path)]) == 0
    assert main(["check", str(tmp_path), "--graph", "G"]) == 0
    capsys.readouterr()
    assert main(["check", str(tmp_path), "--graph", "nope"]) == 2
    assert "has one graph, 'G'; there is no graph 'nope'" in capsys.readouterr().err
    assert main(["check", str(tmp_path), "--keep", "nn.softmax"]) == 2
    assert "--keep applies to SkriptND models" in capsys.readouterr().err
    assert main(["check", str(tmp_path), "--keep", ",,,"]) == 2
    assert "names no operator" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["run", "a" * 300, "--input", "x.npy"],
    ["simulate", "m/" + "b" * 256, "--engine", "model", "--workers", "1"],
    ["export-vectors", "q", "--out", "o/" * 2100],
    ["quantize", "m", "--calib", "c" * 256 + ".npy"],
    ["run", "m", "--input", "x=" + "d" * 256],
    ["check", "bad\0name"],
])
def test_a_path_the_system_cannot_name_is_a_usage_error(argv, capsys):
    from qsim.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not a path this system can open" in err and "Traceback" not in err


def test_no_command_is_a_usage_error_with_the_help(capsys):
    from qsim.cli import main
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "qsim: usage error: no command given" in err and "quantize" in err


def test_a_missing_kernel_build_is_a_clear_error_for_every_command_not_a_traceback():
    # the commands load the compiled kernels when they are imported; without them the CLI
    # (imported in a fresh process) says what is missing and how to rebuild, exit 2
    import subprocess
    import sys
    code = ("import sys; sys.modules['qsim.kernels._tosa_ops'] = None\n"
            "from qsim import cli\n"
            "sys.exit(cli.main(['check', 'model.sknd']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "qsim.kernels._tosa_ops" in proc.stderr and "build_ext --inplace" in proc.stderr
