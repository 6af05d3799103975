"""qsim.outpath: which outputs may be written, checked against an independent oracle, and which
existing folders an output may replace (its manifest)."""
import json
import os
import re

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from qsim.atomic import MANIFEST, atomic_directory
from qsim.errors import UsageError
from qsim.outpath import (QUANTIZED_MODEL, SIMULATION_REPORT, TENSOR_DUMP, check_output,
                          require_replaceable)

PARTS = ["a", "b", "ab", "a.b", "..", ".", "link", "m", "graph.nnef", "w.dat", "y.npy", "d",
         "img.png"]
MODEL_READS = (".sknd", ".dat", ".nnef", ".quant")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """a/ b/ ab/ d/img.png m/{graph.nnef,w.dat,y.npy}, and link -> a (names that share
    prefixes, a symbolic link, a model folder with a file it reads and one it does not, a data
    folder)."""
    root = tmp_path_factory.mktemp("tree")
    for d in ("a/b", "ab", "b", "m", "d"):
        (root / d).mkdir(parents=True)
    (root / "m" / "graph.nnef").write_text("version 1.0;")
    (root / "m" / "w.dat").write_bytes(b"weights")
    (root / "m" / "y.npy").write_bytes(b"an earlier result")
    (root / "d" / "img.png").write_bytes(b"an image")
    (root / "link").symlink_to(root / "a", target_is_directory=True)
    return root


def _harms(out, given, folder: bool) -> bool:
    """The oracle (pathlib's resolve and is_relative_to): the output is the input, contains it,
    or, as a file, replaces an existing file the input reads (a model folder's model files,
    every file of another input folder)."""
    out, given = out.resolve(), given.resolve()
    if out == given or given.is_relative_to(out):
        return True
    model = given.name == "graph.nnef" and given.is_file()
    reads = given.parent if model else given if given.is_dir() else None
    if folder or reads is None or not out.is_relative_to(reads) or not out.is_file():
        return False
    is_model_folder = model or (reads / "graph.nnef").is_file()
    return not is_model_folder or out.suffix in MODEL_READS


relative = st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map(lambda p: os.path.join(*p))


@settings(derandomize=True, deadline=None, max_examples=400,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(out=relative, given=st.sampled_from(["a", "a/b", "ab", "b", "m", "m/graph.nnef", "link",
                                           "link/b", "a/../ab", ".", "d", "m/w.dat"]),
       folder=st.booleans())
def test_refused_exactly_when_the_output_harms_an_input(tree, out, given, folder):
    out_path, in_path = tree / out, tree / given
    if not out_path.resolve().is_relative_to(tree):
        return                                           # (never write outside the test tree)
    expect = _harms(out_path, in_path, folder)
    event("harms" if expect else "apart")
    try:
        check_output(out_path, "-o", [("model", in_path)], folder=folder)
        refused = False
    except UsageError as err:            # (also refused: a file where a folder goes, and back)
        refused = "the model" in err.message
    assert refused == expect, (out, given, folder)


@pytest.mark.parametrize("out,given,folder,message", [
    ("m/graph.nnef", "m/graph.nnef", False, "-o {out} is the model {given}"),
    ("m/w.dat", "m/graph.nnef", False, "-o {out} would replace {tree}/m/w.dat, a file the model"),
    ("m", "m/graph.nnef", True, "-o {out} contains the model {given}; replacing it would delete"),
    (".", "m", True, "contains the model"),
    ("d/img.png", "d", False, "would replace {tree}/d/img.png, a file the model {given} reads"),
])
def test_the_message_names_the_conflict_and_the_hint_a_place_that_is_accepted(
        tree, monkeypatch, out, given, folder, message):
    monkeypatch.chdir(tree)
    inputs = [("model", given)]
    with pytest.raises(UsageError) as info:
        check_output(out, "-o", inputs, folder=folder)
    assert message.format(out=out, given=given, tree=tree) in info.value.message
    place = re.fullmatch(r"write the output elsewhere, e\.g\. -o (\S+)", info.value.hint).group(1)
    check_output(place, "-o", inputs, folder=folder)         # accepted as proposed
    assert not os.path.exists(place)                         # (and nothing was written)


@pytest.mark.parametrize("out,folder", [("y.npy", False), ("out/y.npy", False), ("new.npy", False),
                                        ("qsim-out/m-int8", True), ("dump", True)])
def test_new_outputs_beside_and_inside_a_model_folder_are_accepted(tree, monkeypatch, out, folder):
    """cd model_dir && qsim run graph.nnef --output y.npy (y.npy, an earlier result, is not a
    file the model reads), --output out/y.npy, the default qsim-out/... of quantize."""
    monkeypatch.chdir(tree / "m")
    check_output(out, "--output", [("model", "graph.nnef"), ("--input", "w.dat")], folder=folder)


def test_outputs_of_one_run_must_not_overlap(tree):
    with pytest.raises(UsageError, match="lies inside the --dump folder .* an output of the same run"):
        check_output(tree / "new" / "y.npy", "--output", outputs=[("--dump folder", tree / "new")],
                     folder=False)


# ---- ownership: an existing folder is replaced only when qsim wrote all of it ---------------

def _write(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_an_earlier_output_with_its_manifest_is_replaced_one_with_the_users_files_is_not(tmp_path):
    out = tmp_path / "q"
    with atomic_directory(out, command="quantize") as tmp:
        _write(tmp, {"quantization.json": "{}", "main.sknd": "", "sub/w.dat": ""})
    doc = json.loads((out / MANIFEST).read_text())
    assert doc == {"qsim output of": "quantize", "files": ["main.sknd", "quantization.json", "sub/w.dat"]}
    check_output(out, "-o", replaces=QUANTIZED_MODEL)
    (out / "main.sknd").unlink()                       # a file of it removed: still ours
    check_output(out, "-o", replaces=QUANTIZED_MODEL)
    _write(out, {"notes.txt": "mine", "sub/more.dat": "mine", "photos/a.jpg": "mine"})
    with pytest.raises(UsageError) as info:
        check_output(out, "-o", replaces=QUANTIZED_MODEL)
    assert "holds files qsim quantize did not write: " in info.value.message
    named = info.value.message.split("did not write: ")[1].split(";")[0].split(", ")
    assert sorted(named) == ["notes.txt", "photos/", "sub/more.dat"]
    assert "move those files out of" in info.value.hint
    with pytest.raises(UsageError, match="is the output of qsim quantize, not of qsim simulate"):
        check_output(out, "-o", replaces=SIMULATION_REPORT)


@pytest.mark.parametrize("files,accepted", [
    ({"quantization.json": "{}", "main.sknd": "", "w.dat": "", "report.json": "", "sqnr.png": ""}, True),
    ({"quantization.json": "{}", "notes.txt": "mine"}, False),          # the case
    ({"quantization.json": "{}", "sub/w.dat": ""}, False),              # no folders in one
    ({"main.sknd": "", "w.dat": ""}, False),                            # no quantization.json
    ({MANIFEST: "not json", "quantization.json": "{}"}, False),         # a damaged manifest
])
def test_an_output_written_before_manifests_is_replaced_only_if_it_holds_only_its_files(
        tmp_path, files, accepted):
    _write(tmp_path / "q", files)
    if accepted:
        check_output(tmp_path / "q", "-o", replaces=QUANTIZED_MODEL)
    else:
        with pytest.raises(UsageError, match="is not an earlier qsim quantize output"):
            check_output(tmp_path / "q", "-o", replaces=QUANTIZED_MODEL)


def test_a_sweep_report_written_before_manifests_is_recognised(tmp_path):
    _write(tmp_path / "s", {"sweep.json": "{}", "sweep.png": "", "8x8/report.json": "",
                            "8x8/cycles.png": "", "8x8/compute_report.csv": ""})
    check_output(tmp_path / "s", "-o", replaces=SIMULATION_REPORT)
    _write(tmp_path / "s", {"8x8/deep/x.png": ""})
    with pytest.raises(UsageError, match=r"holds 8x8/deep/"):
        check_output(tmp_path / "s", "-o", replaces=SIMULATION_REPORT)


def test_a_folder_of_the_users_own_npy_files_is_not_a_dump(tmp_path):
    _write(tmp_path / "d", {"mine.npy": ""})
    with pytest.raises(UsageError, match="is not an earlier qsim run --dump output .* holds mine.npy"):
        check_output(tmp_path / "d", "--dump", replaces=TENSOR_DUMP)


def test_an_empty_folder_and_a_new_one_are_fine(tmp_path):
    (tmp_path / "empty").mkdir()
    for kind in (QUANTIZED_MODEL, TENSOR_DUMP):
        check_output(tmp_path / "empty", "-o", replaces=kind)
        check_output(tmp_path / "new", "-o", replaces=kind)
        assert require_replaceable(tmp_path / "empty", kind) == tmp_path / "empty"


def test_a_manifest_that_is_a_link_is_not_taken(tmp_path):
    (tmp_path / "real.json").write_text(json.dumps({"qsim output of": "run --dump", "files": ["a.npy"]}))
    _write(tmp_path / "d", {"a.npy": ""})
    (tmp_path / "d" / MANIFEST).symlink_to(tmp_path / "real.json")
    with pytest.raises(UsageError, match="is not an earlier qsim run --dump output"):
        check_output(tmp_path / "d", "--dump", replaces=TENSOR_DUMP)
