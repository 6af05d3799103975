"""Golden vectors (qsim/npu/golden_vectors.py, vectors_hex.py, `qsim export-vectors`): hex files read
back by an independent parser equal the .npy files; accumulators rescaled with the manifest's
parameters give the outputs; values agree with the TOSA reference; error paths."""
import json
from pathlib import Path

import numpy as np
import pytest

from qsim import tosa
from qsim.cli import main
from qsim.commands.quantized_model import default_input, load_npu_model, read_inputs
from qsim.errors import DataError, UsageError
from qsim.npu import corner_cases, golden_vectors
from qsim.npu.config import load_config
from qsim.npu.vectors_hex import LAYOUT_DOC, hex_text
from qsim.quant.pipeline import embedded_quantized_model
from qsim.runtime.executor import execute

ROOT = Path(__file__).resolve().parents[2]


def read_hex(path: Path, entry: dict) -> np.ndarray:
    """Independent reader of the documented layout (docs/vectors.md): one word per line,
    lane i = bits [i*b, (i+1)*b), b-bit two's complement, rows padded to whole words."""
    bits, lanes, shape = entry["element_bits"], entry["lanes"], tuple(entry["shape"])
    lines = path.read_text().splitlines()
    assert len(lines) == entry["words"]
    assert all(len(line) == entry["word_bits"] // 4 for line in lines)
    last = shape[-1] if shape else 1
    per_row = -(-last // lanes)
    values = []
    for line in lines:
        word = int(line, 16)
        for i in range(lanes):
            v = (word >> (i * bits)) & ((1 << bits) - 1)
            signed = entry["dtype"].startswith("int")
            values.append(v - (1 << bits) if signed and v >> (bits - 1) else v)
    matrix = np.array(values, np.int64).reshape(-1, per_row * lanes)
    pad = matrix[:, last:]
    assert not pad.any(), "padding lanes must be zero"
    return matrix[:, :last].reshape(shape)


def check_folder(folder: Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    for layer in manifest["layers"]:
        for role, entry in layer["tensors"].items():
            array = np.load(folder / entry["npy"])
            assert list(array.shape) == entry["shape"] and array.dtype.name == entry["dtype"]
            np.testing.assert_array_equal(read_hex(folder / entry["hex"], entry), array.astype(np.int64),
                                          err_msg=f"{layer['dir']}/{role}")
    return manifest


def requant_check(folder: Path, layer: dict) -> None:
    """accumulator --RESCALE(manifest multiplier, shift, scalars)--> clamp == output."""
    t, s = layer["tensors"], layer["scalars"]
    acc = np.load(folder / t["accumulator"]["npy"])
    attrs = dict(input_zp=0, output_zp=s["output_zp"], multiplier=np.load(folder / t["multiplier"]["npy"]),
                 shift=np.load(folder / t["shift"]["npy"]), scale32=s["scale32"],
                 double_round=s["double_round"], per_channel=s["per_channel"], out_t="int8")
    out, = tosa.run("RESCALE", [acc], attrs)
    out = np.clip(out, s["clamp_min"], s["clamp_max"])
    np.testing.assert_array_equal(out, np.load(folder / t["output"]["npy"]))


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("vectors") / "model"
    assert main(["export-vectors", "--out", str(out)]) == 0
    return out


def test_hex_layout_worked_examples():
    # hand-worked (docs/vectors.md): lane 0 least significant, rows padded to whole words
    assert hex_text(np.array([[1, -1, -128], [127, 0, 2]], np.int8), 2) == "ff01\n0080\n007f\n0002\n"
    assert hex_text(np.array(-2, np.int32), 1) == "fffffffe\n"
    assert hex_text(np.array([-1, 5], np.int64), 2) == "000000000005ffffffffffff\n"   # int48
    assert hex_text(np.array([[1, 2], [3, 4]], np.int16), 4) == "0000000000020001\n0000000000040003\n"
    assert hex_text(np.zeros((0, 3), np.int8), 4) == ""


def test_docs_carry_the_layout():
    assert LAYOUT_DOC in (ROOT / "docs" / "vectors.md").read_text()


def test_model_hex_equals_npy(model_folder):
    manifest = check_folder(model_folder)
    assert LAYOUT_DOC in (model_folder / "README.md").read_text()
    assert manifest["array"] == {"rows": 16, "cols": 16} and manifest["backend"] == "kernels"
    graph = embedded_quantized_model().graph
    # every TOSA op appears once, in graph order, across the layers' op lists
    assert [o["op"] for layer in manifest["layers"] for o in layer["ops"]] == \
           [op.kind.short_name for op in graph.ops]
    kinds = [layer["op"] for layer in manifest["layers"]]
    assert kinds.count("CONV2D+RESCALE+CLAMP") == 4 and "FULLY_CONNECTED+RESCALE" in kinds


def test_model_accumulators_rescale_to_outputs(model_folder):
    manifest = json.loads((model_folder / "manifest.json").read_text())
    npu = [layer for layer in manifest["layers"] if layer["kind"] == "npu"]
    assert len(npu) == 5
    for layer in npu:
        requant_check(model_folder, layer)
        t = layer["tensors"]
        acc, bias = np.load(model_folder / t["accumulator"]["npy"]), np.load(model_folder / t["bias"]["npy"])
        np.testing.assert_array_equal(np.load(model_folder / t["array_sums"]["npy"]).astype(np.int64),
                                      acc.astype(np.int64) - bias)


def test_model_values_match_the_reference_and_chain(model_folder):
    """The kernels' vectors equal an independent run on the TOSA reference, tensor by name;
    each layer's input is the previous layer's output."""
    model = embedded_quantized_model()
    inputs = default_input(model)
    ref = execute(model.graph, inputs, backend="reference")
    manifest = json.loads((model_folder / "manifest.json").read_text())
    previous = None
    for layer in manifest["layers"]:
        for role, entry in layer["tensors"].items():
            if entry["tensor"] is not None:
                np.testing.assert_array_equal(np.load(model_folder / entry["npy"]), ref[entry["tensor"]])
        if previous is not None:
            np.testing.assert_array_equal(np.load(model_folder / layer["tensors"]["input"]["npy"]), previous)
        previous = np.load(model_folder / layer["tensors"]["output"]["npy"])
    np.testing.assert_array_equal(previous, ref[model.graph.outputs[0]])


def test_input_option_float_and_integer(tmp_path, model_folder):
    from qsim import zoo
    images, _ = zoo.test_subset()
    np.save(tmp_path / "x.npy", images[:1])
    assert main(["export-vectors", "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "f"),
                 "--config", "8x8"]) == 0
    m = check_folder(tmp_path / "f")
    assert m["array"] == {"rows": 8, "cols": 8}
    same = np.load(tmp_path / "f" / m["layers"][-1]["tensors"]["output"]["npy"])
    first = json.loads((model_folder / "manifest.json").read_text())["layers"][-1]
    np.testing.assert_array_equal(same, np.load(model_folder / first["tensors"]["output"]["npy"]))
    xi = np.full((1, 1, 28, 28), 5, np.int8)
    np.save(tmp_path / "xi.npy", xi)
    assert main(["export-vectors", "--input", f"input={tmp_path / 'xi.npy'}", "--out", str(tmp_path / "i")]) == 0
    mi = json.loads((tmp_path / "i" / "manifest.json").read_text())
    np.testing.assert_array_equal(np.load(tmp_path / "i" / mi["layers"][0]["tensors"]["input"]["npy"]), xi)


def test_corner_case_folder_hex_and_requant(tmp_path):
    out = tmp_path / "corners"
    assert main(["export-vectors", "--corner-cases", str(len(corner_cases.KINDS)), "--seed", "1", "--out", str(out),
                 "--config", "8x8"]) == 0
    manifest = check_folder(out)
    assert [layer["corner_case"] for layer in manifest["layers"]] == list(corner_cases.KINDS)
    for layer in manifest["layers"]:
        requant_check(out, layer)
    assert manifest["layers"][0]["tensors"]["input"]["lanes"] == 8


# -- errors ------------------------------------------------------------------------------

def test_a_folder_with_other_files_is_refused_and_kept_an_earlier_output_replaced(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not an earlier qsim export-vectors output"):
        corner_cases.export_corner_cases(1, 0, load_config("8x8"), tmp_path / "o")
    assert (tmp_path / "o" / "keep.txt").read_text() == "mine"
    assert main(["export-vectors", "--corner-cases", "1", "--out", str(tmp_path / "o")]) == 2
    argv = ["export-vectors", "--corner-cases", "1", "--out", str(tmp_path / "v")]
    assert main(argv) == 0 and main(argv) == 0          # its own earlier output is replaced
    (tmp_path / "v" / "notes.txt").write_text("mine")
    assert main(argv) == 2
    assert (tmp_path / "v" / "notes.txt").read_text() == "mine"


def test_interrupted_export_leaves_nothing(tmp_path, monkeypatch):
    calls = []

    def failing(array, lanes, what="tensor"):
        calls.append(what)
        if len(calls) == 5:
            raise RuntimeError("disk full")
        return hex_text(array, lanes, what)
    monkeypatch.setattr(golden_vectors, "hex_text", failing)
    with pytest.raises(RuntimeError):
        corner_cases.export_corner_cases(2, 0, load_config("8x8"), tmp_path / "v")
    assert list(tmp_path.iterdir()) == []


def test_model_and_input_errors(tmp_path, capsys):
    with pytest.raises(UsageError, match="no quantized model"):
        load_npu_model(str(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError, match="not a quantized model folder"):
        load_npu_model(str(tmp_path / "plain"))
    model = embedded_quantized_model()
    # [1, 28, 28] is one sample without its batch axis (accepted); [1, 27, 28] fits neither form
    np.save(tmp_path / "bad.npy", np.zeros((1, 27, 28), np.float32))
    with pytest.raises(DataError, match=r"shape \[1, 27, 28\]"):
        read_inputs(model, [str(tmp_path / "bad.npy")])
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(DataError, match="junk.npy: not a .npy array"):
        read_inputs(model, [str(tmp_path / "junk.npy")])
    with pytest.raises(DataError, match="none.npy: no such file"):
        read_inputs(model, [str(tmp_path / "none.npy")])
    with pytest.raises(UsageError, match="no input 'x'"):
        read_inputs(model, [f"x={tmp_path / 'bad.npy'}"])
    with pytest.raises(UsageError, match="has 1 input"):
        read_inputs(model, [str(tmp_path / "bad.npy")] * 2)
    assert main(["export-vectors", "--corner-cases", "2", "--input", "x.npy", "--out", str(tmp_path / "c")]) == 2
    assert "takes no QMODEL or --input" in capsys.readouterr().err
    assert main(["export-vectors", str(tmp_path / "plain"), "--out", str(tmp_path / "d")]) == 2
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


def test_lanes_follow_rows_for_inputs_and_cols_for_the_rest(tmp_path):
    cases = corner_cases.generate(3, seed=5)
    out = golden_vectors.write_vectors(corner_cases.case_layers(cases, 5), tmp_path / "rc", rows=4, cols=8,
                                header={}, readme_intro="test")
    manifest = check_folder(out)
    for layer in manifest["layers"]:
        for role, entry in layer["tensors"].items():
            assert entry["lanes"] == (4 if role == "input" else 8), (layer["name"], role)
            assert entry["word_bits"] == entry["lanes"] * entry["element_bits"]


def test_quantized_model_folder_gives_the_same_vectors(tmp_path, model_folder):
    from qsim.quant.qmodel import save_quantized_model
    from qsim.quant.tosa.target import TosaTarget
    save_quantized_model(embedded_quantized_model(), TosaTarget(), tmp_path / "qm")
    assert main(["export-vectors", str(tmp_path / "qm"), "--out", str(tmp_path / "v")]) == 0
    ours = json.loads((tmp_path / "v" / "manifest.json").read_text())
    embedded = json.loads((model_folder / "manifest.json").read_text())
    assert [layer["op"] for layer in ours["layers"]] == [layer["op"] for layer in embedded["layers"]]
    for a, b in zip(ours["layers"], embedded["layers"]):
        for role, entry in a["tensors"].items():
            assert (tmp_path / "v" / entry["hex"]).read_text() == (model_folder / b["tensors"][role]["hex"]).read_text()
