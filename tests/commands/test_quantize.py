"""`qsim quantize` and `qsim run` end to end: the folder, its round trip, the CLI contract."""
import json

import numpy as np
import pytest

import qsim
from qsim import zoo
from qsim.cli import main
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.commands.quantize import quantize_to_folder
from qsim.quant.options import QuantizeOptions
from qsim.quant.qmodel import load_quantized_model, save_quantized_model
from qsim.quant.tosa.target import TosaTarget
from qsim.runtime.executor import execute
from qsim.tosa import run as tosa_run


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """The embedded model quantized by the CLI on the embedded subset (200 samples)."""
    out = tmp_path_factory.mktemp("q") / "fashion-int8"
    code = main(["quantize", "-o", str(out), "--subset", "--eval-limit", "200", "-q"])
    assert code == 0
    return out


def test_output_folder_holds_model_and_report(quantized):
    names = {p.name for p in quantized.iterdir()}
    assert {"main.sknd", "quantization.json", "report.json", "report.html", "sqnr.png",
            "errors.png"} <= names
    assert any(n.endswith(".dat") for n in names)
    report = json.loads((quantized / "report.json").read_text())
    assert report["eval_samples"] == 200
    for key in ("float_top1", "int8_top1", "top1_agreement", "sqnr_db"):
        assert key in report
    assert report["top1_agreement"] >= 0.95
    assert set(report["sqnr_db"]) >= {"relu1", "relu4", "output"}
    text = (quantized / "main.sknd").read_text()
    assert "import tosa;" in text and "tosa.CONV2D" in text and "@quantize" in text


def test_folder_loads_back_as_the_same_integer_graph(quantized, tmp_path):
    model = load_quantized_model(quantized)
    g = qsim.load(quantized)
    assert [op.kind.name for op in g.ops] == [op.kind.name for op in model.graph.ops]
    assert all(op.kind.dialect == "tosa" for op in g.ops)
    conv = next(op for op in g.ops if op.kind.name == "tosa.CONV2D")
    assert conv.attrs["weight"].dtype == np.int8 and conv.attrs["bias"].dtype == np.int32
    assert set(conv.attrs) >= {"weight", "bias", "pad", "stride", "dilation", "input_zp", "weight_zp"}
    # lossless: writing the loaded model again gives identical files
    again = tmp_path / "again"
    save_quantized_model(model, TosaTarget(), again)
    for f in quantized.iterdir():
        if f.suffix in (".sknd", ".dat"):
            assert (again / f.name).read_bytes() == f.read_bytes(), f.name


def test_loaded_model_computes_what_the_in_memory_model_computes(quantized):
    from qsim.quant.pipeline import embedded_quantized_model
    images, _ = zoo.test_subset()
    loaded = load_quantized_model(quantized)
    memory = embedded_quantized_model()
    for i in (0, 7, 99):
        a = execute(loaded.graph, quantize_feed(loaded, {"input": images[i:i + 1]}))
        b = execute(memory.graph, quantize_feed(memory, {"input": images[i:i + 1]}))
        np.testing.assert_array_equal(a["output"], b["output"])


def test_run_dump_reruns_any_operator_through_tosa_run(quantized, tmp_path, capsys):
    images, _ = zoo.test_subset()
    x = tmp_path / "x.npy"
    np.save(x, images[:1])
    dump = tmp_path / "dump"
    out = tmp_path / "y.npy"
    assert main(["run", str(quantized), "--input", str(x), "--output", str(out),
                 "--dump", str(dump), "--backend", "reference"]) == 0
    assert "argmax" in capsys.readouterr().out
    g = qsim.load(quantized)
    for op in g.ops:
        inputs = [np.load(dump / f"{name}.npy") for name in op.inputs]
        attrs = {k: v for k, v in op.attrs.items()}
        result = tosa_run(op.kind.short_name, inputs, attrs, backend="kernels")
        np.testing.assert_array_equal(result[0], np.load(dump / f"{op.outputs[0]}.npy"),
                                      err_msg=op.kind.name)
    assert np.array_equal(np.load(out), np.load(dump / "output.npy"))


def test_run_accepts_int8_input_and_rejects_wrong_dtype(quantized, tmp_path, capsys):
    x8 = tmp_path / "x8.npy"
    np.save(x8, np.full((1, 1, 28, 28), -128, np.int8))
    assert main(["run", str(quantized), "--input", str(x8)]) == 0
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 1, 28, 28), np.int32))
    assert main(["run", str(quantized), "--input", str(bad)]) == 2
    assert "int32 array, the model takes" in capsys.readouterr().err


def test_quantize_cli_errors(tmp_path, capsys):
    assert main(["quantize", str(zoo.default_model().path), "-o", str(tmp_path / "o"), "-q"]) == 2
    assert "no calibration data" in capsys.readouterr().err
    assert main(["quantize", str(tmp_path / "missing"), "--calib", "x.npy", "-q"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:        # argparse refuses it: usage, exit 2
        main(["quantize", "--eval-limit", "0", "-q", "-o", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    assert "--eval-limit: 0 is less than 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_corrupt_metadata_is_a_clear_error(quantized, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(quantized, copy)
    (copy / "quantization.json").write_text("{ not json")
    with pytest.raises(qsim.errors.DataError, match=r"quantization.json:1:3: not valid JSON"):
        load_quantized_model(copy)


def test_quantize_command_with_explicit_data(tmp_path):
    """A user model path with .npz calibration and labelled evaluation data."""
    images, labels = zoo.test_subset()
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=zoo.calibration_images()[:32])
    ev = tmp_path / "eval.npz"
    np.savez(ev, x=images[:50], y=labels[:50])
    result = quantize_to_folder(str(zoo.default_model().path), str(calib), str(tmp_path / "out"),
                              QuantizeOptions(show_progress=False), evaluation=str(ev))
    assert result.report.eval_samples == 50 and result.report.int8_top1 is not None
    doc = json.loads((tmp_path / "out" / "quantization.json").read_text())
    assert doc["inputs"]["input"]["zero_point"] == result.model.input_quant["input"].zero_point


def test_quantize_target_cvm_and_run_it(tmp_path, capsys):
    out = tmp_path / "cvm"
    assert main(["quantize", "--target", "cvm", "-o", str(out), "--subset", "--eval-limit", "100",
                 "-q"]) == 0
    assert "CVM operators" in capsys.readouterr().out
    doc = json.loads((out / "quantization.json").read_text())
    assert doc["settings"]["target"] == "cvm" and doc["settings"]["precision"] == 8
    assert "import cvm;" in (out / "main.sknd").read_text()
    report = json.loads((out / "report.json").read_text())
    assert report["eval_samples"] == 100 and report["top1_agreement"] >= 0.9
    images, _ = zoo.test_subset()
    x = tmp_path / "x.npy"
    np.save(x, images[:1])
    dump = tmp_path / "dump"
    assert main(["run", str(out), "--input", str(x), "--dump", str(dump)]) == 0
    g = qsim.load(out)
    assert all(op.kind.dialect == "cvm" for op in g.ops)
    assert (dump / "output.npy").exists()
    assert main(["quantize", "--target", "cvm", "--precision", "16x8", "-q",
                 "-o", str(tmp_path / "no")]) == 2
    assert "16x8 is a TOSA mode" in capsys.readouterr().err


def test_default_job_evaluates_on_the_full_test_set_when_installed(tmp_path, capsys, monkeypatch):
    """The README's main command, `qsim quantize` with no arguments (here limited to 300
    evaluation samples): full 10k set when Debian's package is there, else the subset."""
    monkeypatch.chdir(tmp_path)
    assert main(["quantize", "--eval-limit", "300", "-q"]) == 0
    out = tmp_path / "qsim-out" / "fashion_cnn-int8"
    report = json.loads((out / "report.json").read_text())
    assert report["eval_samples"] == 300
    notes = " ".join(report.get("notes", []))
    if zoo.full_test_set() is not None:
        assert "full Fashion-MNIST test set (10000 labelled images" in notes
    else:
        assert "embedded Fashion-MNIST test subset" in notes
    assert "top-1 accuracy float" in capsys.readouterr().out


def test_summary_reports_the_runs_peak_memory(tmp_path, capsys):
    """The time line ends with the process's peak resident memory: at least what it holds now
    (/proc/self/statm's resident pages), which the peak can never be below."""
    import os
    import re
    assert main(["quantize", "-o", str(tmp_path / "q"), "--subset", "--eval-limit", "50"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("time:"))
    match = re.search(r"; peak memory (\d+) MB$", line)
    assert match, line
    with open("/proc/self/statm") as f:
        resident_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert int(match.group(1)) >= int(resident_mb) - 1
