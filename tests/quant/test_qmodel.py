"""The one quantized-model folder format (qsim/quant/qmodel.py): one save, one load for both
targets, and clear errors for a float model where a quantized one is expected (and back)."""
import json

import pytest

from qsim import zoo
from qsim.errors import DataError, UsageError
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import embedded_quantized_model, load_float_model
from qsim.quant.qmodel import (METADATA_FILE, load_quantized_model, save_quantized_model,
                               target_of)
from qsim.quant.target import TargetKind
from qsim.quant.cvm.target import CvmTarget
from qsim.quant.tosa.target import TosaTarget

QUIET = QuantizeOptions(show_progress=False)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("qmodels")
    tosa = save_quantized_model(embedded_quantized_model(QUIET), TosaTarget(), root / "tosa")
    cvm = save_quantized_model(embedded_quantized_model(QUIET, CvmTarget()), CvmTarget(), root / "cvm")
    return tosa, cvm


def test_one_load_for_both_targets(folders):
    tosa, cvm = folders
    assert target_of(tosa).kind is TargetKind.TOSA and target_of(cvm).kind is TargetKind.CVM
    for folder, dialect in ((tosa, "tosa"), (cvm, "cvm")):
        model = load_quantized_model(folder)
        assert {op.kind.dialect for op in model.graph.ops} == {dialect}
        assert set(model.input_quant) == {"input"} and set(model.output_quant) == {"output"}
    # TOSA folders say nothing of their target (the format predates CVM): TOSA is the default
    assert "target" not in json.loads((tosa / METADATA_FILE).read_text())["settings"]


def test_a_float_model_is_not_a_quantized_model(tmp_path):
    with pytest.raises(UsageError, match=r"fashion_cnn is not a quantized model folder \(no "
                                         r"quantization.json\): a float model") as err:
        load_quantized_model(zoo.default_model().path)
    assert "qsim quantize MODEL" in err.value.hint
    with pytest.raises(UsageError, match="no quantized model .*nowhere"):
        load_quantized_model(tmp_path / "nowhere")


def test_a_quantized_model_is_not_a_float_model(folders):
    tosa, _ = folders
    with pytest.raises(UsageError, match=r"tosa is a quantized model folder \(it has quantization.json\); "
                                         "qsim quantize takes a float model"):
        load_float_model(tosa)


def test_save_replaces_the_folder_as_a_whole(folders, tmp_path):
    tosa, _ = folders
    target = tmp_path / "q"
    target.mkdir()
    (target / "stale.dat").write_bytes(b"old")
    save_quantized_model(load_quantized_model(tosa), TosaTarget(), target)
    assert not (target / "stale.dat").exists()
    for f in tosa.iterdir():
        if f.suffix in (".sknd", ".dat"):
            assert (target / f.name).read_bytes() == f.read_bytes(), f.name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no staging left


def test_an_unknown_target_in_the_folder_is_a_data_error(folders, tmp_path):
    tosa, _ = folders
    doc = json.loads((tosa / METADATA_FILE).read_text())
    doc["settings"]["target"] = "npu"
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / METADATA_FILE).write_text(json.dumps(doc))
    with pytest.raises(DataError, match='"settings.target" is \'npu\'; expected "tosa" or "cvm"'):
        load_quantized_model(copy)


def test_qsim_load_of_a_quantized_folder_gives_the_ir_form_in_a_fresh_process(folders):
    """`import qsim; qsim.load(folder)` alone (no quant import) returns TOSA ops with their
    tensor attributes and narrow integer tensors: the dialects register their text forms."""
    import subprocess
    import sys
    tosa, cvm = folders
    code = ("import sys, qsim; g = qsim.load(sys.argv[1]); c = qsim.load(sys.argv[2]);"
            "conv = next(op for op in g.ops if op.kind.name == 'tosa.CONV2D');"
            "print(conv.attrs['weight'].dtype, g.tensor('input').dtype.name, len(conv.inputs),"
            " c.tensor('input').dtype.name)")
    out = subprocess.run([sys.executable, "-c", code, str(tosa), str(cvm)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["int8", "I8", "1", "I8"]
