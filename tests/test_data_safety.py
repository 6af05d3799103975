"""Bad user data and dangerous output paths through the CLI: every case ends in exit 2 with a
message saying what, where and how to fix it, and no user file is changed."""
import hashlib
import os
import re
import shutil

import numpy as np
import pytest

from qsim.cli import main

from quant.test_pipeline import write_tiny_model   # conv + relu, input [1, 2, 6, 6]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with a tiny float model `m`, its quantized form `q`, and data files."""
    root = tmp_path_factory.mktemp("safety")
    rng = np.random.default_rng(7)
    m = write_tiny_model(root, rng)
    assert main(["quantize", str(m), "--calib", str(root / "c.npy"), "-o", str(root / "q"),
                 "-q"]) == 0
    (root / "afile").write_text("not a folder")
    return root


def _tree_digest(path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(path)):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            h.update(os.path.relpath(p, path).encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def _fails(argv, capsys, *fragments):
    """main(argv) exits 2, prints no traceback, and its message holds every fragment."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert "hint:" in err
    return err


# ---- bad --input arrays ------------------------------------------------------------------

def _nan_at(path, index):
    x = np.zeros((1, 2, 6, 6), np.float32)
    x[index] = np.nan
    np.save(path, x)


def _header_only(path, shape):
    """A .npy header declaring `shape` float32, and no data (a hostile or damaged file)."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": shape})


BAD_INPUTS = {
    "empty": (lambda p: p.write_bytes(b""), "the file is empty"),
    "text": (lambda p: p.write_text("1 2 3"), "not a .npy array"),
    "object": (lambda p: np.save(p, np.array([1, "a"], dtype=object), allow_pickle=True),
               "holds Python objects"),
    "strings": (lambda p: np.save(p, np.array(["a", "b"])), "dtype <U1 is not a numeric"),
    "complex": (lambda p: np.save(p, np.zeros((1, 2, 6, 6), np.complex64)),
                "dtype complex64 is not a numeric"),
    "npz": (lambda p: np.savez(p.with_suffix(""), x=np.zeros(3)) or
            os.replace(str(p.with_suffix("")) + ".npz", p), "a .npz archive"),
    "truncated": (lambda p: (np.save(p, np.zeros((1, 2, 6, 6), np.float32)),
                             p.write_bytes(p.read_bytes()[:-8])), "truncated"),
    "huge-header": (lambda p: _header_only(p, (100000, 100000, 100000)), "over the 4 GiB limit"),
    "nan": (lambda p: _nan_at(p, (0, 1, 2, 3)), "element [0, 1, 2, 3] is NaN"),
    "float64-overflow": (lambda p: np.save(p, np.full((1, 2, 6, 6), 1e300)),
                         "element [0, 0, 0, 0] is 1e+300, beyond float32's range"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", ["run-float", "run-quantized", "export-vectors"])
def test_bad_input_file_is_a_data_error(work, tmp_path, capsys, case, command):
    make, message = BAD_INPUTS[case]
    bad = tmp_path / "in.npy"
    make(bad)
    argv = {"run-float": ["run", work / "m", "--input", bad],
            "run-quantized": ["run", work / "q", "--input", bad],
            "export-vectors": ["export-vectors", work / "q", "--input", bad,
                               "--out", tmp_path / "v"]}[command]
    err = _fails(argv, capsys, "data error", str(bad), message)
    if case in ("nan", "float64-overflow"):
        assert "input 'input'" in err                # the tensor is named
    assert not (tmp_path / "v").exists()


def test_wrong_shape_input_is_named(work, tmp_path, capsys):
    np.save(tmp_path / "s.npy", np.zeros((3, 3), np.float32))
    _fails(["run", work / "m", "--input", tmp_path / "s.npy"], capsys, "input 'input' has shape [3, 3]")


def test_simulate_refuses_nan_input(work, tmp_path, capsys):
    bad = tmp_path / "nan.npy"
    _nan_at(bad, (0, 0, 5, 1))
    _fails(["simulate", work / "q", "--engine", "model", "--input", bad, "-o", tmp_path / "s",
            "-q"], capsys, "element [0, 0, 5, 1] is NaN")
    assert not (tmp_path / "s").exists()


# ---- calibration / evaluation data ---------------------------------------------------------

@pytest.mark.parametrize("flag", ["--calib", "--eval"])
def test_nan_in_calibration_or_evaluation_data(work, tmp_path, capsys, flag):
    data = np.zeros((5, 2, 6, 6), np.float32)
    data[3, 1, 0, 4] = -np.inf
    np.save(tmp_path / "d.npy", data)
    argv = ["quantize", work / "m", "--calib", tmp_path / "d.npy" if flag == "--calib"
            else work / "c.npy", "-o", tmp_path / "o", "-q"]
    if flag == "--eval":
        argv += ["--eval", tmp_path / "d.npy"]
    _fails(argv, capsys, "samples of input 'input'", "element [3, 1, 0, 4] is infinite")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("make,message", [
    (lambda p: np.savez(p, x=np.array([1, "a"], dtype=object)), "[x]: the array holds Python objects"),
    (lambda p: np.savez(p, a=np.zeros((3, 2, 6, 6)), b=np.zeros((3, 2, 6, 6))),
     "cannot tell which array holds the inputs"),
    (lambda p: p.write_bytes(b"PK\x03\x04 broken"), "not a .npz archive"),
    (lambda p: np.savez(p, x=np.zeros((3, 2, 6, 6)), y=np.array([0.5, 1, 2])), "labels must be 3"),
])
def test_bad_npz_calibration_archive(work, tmp_path, capsys, make, message):
    path = tmp_path / "d.npz"
    make(path)
    _fails(["quantize", work / "m", "--calib", path, "-o", tmp_path / "o", "-q"], capsys, message)


# ---- npu.toml ---------------------------------------------------------------------------

PRESET = __import__("qsim.npu.config").npu.config.PRESETS["8x8"].to_toml().encode()


@pytest.mark.parametrize("content,location,message", [
    (b"[npu]\nname = \"a\xff\"\n", "cfg.toml:2:10", "not UTF-8 text: byte 0xff"),
    (b"[npu\nrows = 8\n", "cfg.toml", "not valid TOML"),
    (PRESET.replace(b"rows = 8", b'rows = "8"'), "cfg.toml:3", "key 'rows' = '8' must be an integer"),
    (PRESET.replace(b'"ws"', b'"diagonal"'), "cfg.toml:5", "key 'dataflow' = 'diagonal' is not a dataflow"),
    (PRESET.replace(b"clock_mhz = 1000.0", b"clock_mhz = nan"), "cfg.toml:10", "key 'clock_mhz' = nan"),
    (PRESET + b"[other]\n", "cfg.toml", "expected exactly one table [npu]"),
    (b"[npu]\nrows = 8\n", "cfg.toml", "missing key 'cols'"),
])
@pytest.mark.parametrize("command", ["simulate", "export-rtl"])
def test_bad_npu_config_file(work, tmp_path, capsys, content, location, message, command):
    cfg = tmp_path / "cfg.toml"
    cfg.write_bytes(content)
    if command == "simulate":
        argv = ["simulate", work / "q", "--engine", "model", "--input", work / "x.npy",
                "--config", cfg, "-o", tmp_path / "s", "-q"]
    else:
        argv = ["export-rtl", "--config", cfg, "--out", tmp_path / "r"]
    _fails(argv, capsys, location, message)


# ---- outputs never replace inputs --------------------------------------------------------

def _cases(w, t):
    """(argv, the input that must survive) for every command that writes an output."""
    m, q, c, x = w / "m", w / "q", w / "c.npy", w / "x.npy"
    IS, CONTAINS, REPLACES = "is the", "contains the", "would replace"
    return [
        (["quantize", m, "--calib", c, "-o", m, "-q"], m, IS),                 # OUT is the model
        (["quantize", m / "graph.nnef", "--calib", c, "-o", m, "-q"], m, CONTAINS),  # its folder
        (["quantize", m, "--calib", c, "-o", w, "-q"], m, CONTAINS),           # the model inside OUT
        (["quantize", m, "--calib", c, "--eval", c, "-o", c, "-q"], c, IS),    # OUT is the data
        (["simulate", q, "--engine", "model", "--input", x, "-o", q, "-q"], q, IS),
        (["simulate", q, "--engine", "model", "--input", x, "-o", w, "-q"], q, CONTAINS),
        (["export-vectors", q, "--input", x, "--out", q], q, IS),
        (["export-vectors", q, "--input", f"input={x}", "--out", w], q, CONTAINS),
        (["run", m, "--input", x, "--output", x], x, IS),
        (["run", m, "--input", x, "--dump", m], m, IS),
        (["run", m / "graph.nnef", "--input", x, "--output", m / "graph.nnef"], m / "graph.nnef", IS),
        (["run", m, "--input", x, "--output", m / "filter.dat"], m / "filter.dat", REPLACES),
        (["run", q, "--input", x, "--output", q / "quantization.json"], q / "quantization.json",
         REPLACES),
    ]


@pytest.mark.parametrize("index", range(13))
def test_output_overlapping_an_input_is_refused(work, tmp_path, capsys, index):
    """Refused with the conflict named; the place the hint proposes is then accepted, and
    neither run changes an input (on a copy of the work folder: the accepted run writes)."""
    w = tmp_path / "w"
    shutil.copytree(work, w, symlinks=True)
    argv, harmed, relation = _cases(w, tmp_path)[index]
    before = _inputs_digest(w)
    err = _fails(argv, capsys, relation, str(harmed))
    assert _inputs_digest(w) == before
    option = next(a for a in argv if a in ("-o", "--out", "--output", "--dump"))
    place = re.fullmatch(rf"write the output elsewhere, e\.g\. {option} (\S+)",
                         err.split("hint: ")[1].strip()).group(1)
    accepted = [str(a) for a in argv]
    accepted[accepted.index(option) + 1] = place
    assert main(accepted) == 0, capsys.readouterr().err
    after = _inputs_digest(w)           # (new files may appear inside an input folder)
    assert os.path.exists(place) and {k: after[k] for k in before} == before


def _inputs_digest(w) -> dict[str, str]:
    """The digest of every input file (m/, q/, c.npy, x.npy) that exists now."""
    files = [p for top in (w / "m", w / "q") for p in top.rglob("*") if p.is_file()]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files + [w / "c.npy", w / "x.npy"]}


def test_outputs_of_one_run_must_not_overlap(work, tmp_path, capsys):
    _fails(["run", work / "m", "--input", work / "x.npy", "--dump", tmp_path / "d",
            "--output", tmp_path / "d" / "y.npy"], capsys, "lies inside the --dump folder")
    _fails(["simulate", work / "q", "--engine", "amaranth", "--input", work / "x.npy",
            "-o", tmp_path / "s", "--vcd", tmp_path / "s" / "w.vcd", "-q"], capsys,
           "lies inside the output folder")
    assert list(tmp_path.iterdir()) == []


def test_symlinked_output_is_compared_by_real_path(work, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(work / "m")
    _fails(["quantize", work / "m", "--calib", work / "c.npy", "-o", link, "-q"], capsys,
           "is the model")


@pytest.mark.parametrize("command", ["quantize", "simulate", "export-vectors", "export-rtl",
                                     "run-output", "run-dump"])
@pytest.mark.parametrize("where,message", [
    ("afile/sub", "afile is a file, not a folder"),
    ("/proc/qsim-out", "cannot write in /proc"),
])
def test_unwritable_output_is_refused_before_work(work, tmp_path, capsys, command, where, message):
    out = work / where if not where.startswith("/") else where
    m, q, x = work / "m", work / "q", work / "x.npy"
    argv = {"quantize": ["quantize", m, "--calib", work / "c.npy", "-o", out, "-q"],
            "simulate": ["simulate", q, "--engine", "model", "--input", x, "-o", out, "-q"],
            "export-vectors": ["export-vectors", q, "--input", x, "--out", out],
            "export-rtl": ["export-rtl", "--out", out],
            "run-output": ["run", m, "--input", x, "--output", out],
            "run-dump": ["run", m, "--input", x, "--dump", out]}[command]
    _fails(argv, capsys, message)


def test_output_that_is_a_folder_or_a_file_of_the_wrong_kind(work, tmp_path, capsys):
    _fails(["run", work / "m", "--input", work / "x.npy", "--output", tmp_path], capsys,
           "a folder, the output is a file")
    _fails(["quantize", work / "m", "--calib", work / "c.npy", "-o", work / "afile", "-q"],
           capsys, "a file is in the way of the output folder")


# ---- option values argparse refuses (exit 2, usage) --------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["selftest", "--seed", "-1"], "--seed: -1 is less than 0"),
    (["export-vectors", "--corner-cases", "0", "--out", "x"], "--corner-cases: 0 is less than 1"),
    (["export-vectors", "--corner-cases", "2", "--seed", "-3", "--out", "x"], "-3 is less than 0"),
    (["quantize", "--calib-limit", "-1"], "--calib-limit: -1 is less than 1"),
    (["quantize", "--eval-limit", "ten"], "--eval-limit: 'ten' is not a whole number"),
])
def test_bad_option_values_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# ---- commands publish through qsim.atomic: a killed run leaves the old result whole --------

def test_killed_run_keeps_the_previous_outputs_whole(work, tmp_path):
    import subprocess
    import sys
    dump, out = tmp_path / "dump", tmp_path / "y.npy"
    argv = [sys.executable, "-m", "qsim", "run", str(work / "m"), "--input", str(work / "x.npy")]
    env = {k: v for k, v in os.environ.items() if k != "QSIM_TEST_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd()] + sys.path)

    def run(*extra, crash=None):
        return subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=300,
                              env=dict(env, **({"QSIM_TEST_CRASH_AT": crash} if crash else {})))

    assert run("--dump", str(dump), "--output", str(out)).returncode == 0
    good_dump, good_out = _tree_digest(dump), out.read_bytes()
    for point in ("built", "swapped"):              # before and after the exchange
        assert run("--dump", str(dump), crash=point).returncode == -9
        assert _tree_digest(dump) == good_dump       # old and new are the same bytes here
    assert run("--output", str(out), crash="built").returncode == -9
    assert out.read_bytes() == good_out
    assert len(list(tmp_path.iterdir())) > 2         # the killed runs' leftovers ...
    done = run("--dump", str(dump), "--output", str(out))
    assert done.returncode == 0 and "removed" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump", "y.npy"]   # ... are gone
    assert _tree_digest(dump) == good_dump and out.read_bytes() == good_out


# ---- a damaged quantization.json ------------------------------------------------------------

@pytest.mark.parametrize("edit,message", [
    (lambda doc: b"\xff\xfe{}", "not UTF-8 text"),
    (lambda doc: b"[" * 100000 + b"]" * 100000, "arrays or tables nested more than 200 levels deep"),
    (lambda doc: b"{", "quantization.json:1:2: not valid JSON"),
    (lambda doc: dict(doc, settings=["tosa"]), '"settings" must be an object, not list'),
    (lambda doc: dict(doc, settings={"target": {"a": 1}}), '"settings.target" is {\'a\': 1}'),
    (lambda doc: dict(doc, tensor_map=[1]), '"tensor_map" must be an object'),
    (lambda doc: dict(doc, tensor_map={"conv": {"tensor": ["x"]}}), "tensor_map['conv'] must be"),
    (lambda doc: dict(doc, tensor_map={"conv": {"tensor": "conv", "perm": [0, 0]}}),
     "a permutation of 0..rank-1"),
])
def test_damaged_quantized_model_description(work, tmp_path, capsys, edit, message):
    import json
    import shutil
    q = tmp_path / "q"
    shutil.copytree(work / "q", q)
    doc = json.loads((q / "quantization.json").read_text())
    new = edit(doc)
    (q / "quantization.json").write_bytes(new if isinstance(new, bytes) else json.dumps(new).encode())
    _fails(["run", q, "--input", work / "x.npy"], capsys, "quantization.json", message)


# ---- an output replaces only an earlier output of its command ------------------------------

@pytest.mark.parametrize("command", ["quantize", "simulate", "run-dump"])
def test_unrelated_folder_is_not_replaced(work, tmp_path, capsys, command):
    home = tmp_path / "home"
    (home / "photos").mkdir(parents=True)
    (home / "notes.txt").write_text("precious")
    before = _tree_digest(home)
    m, q, x = work / "m", work / "q", work / "x.npy"
    argv = {"quantize": ["quantize", m, "--calib", work / "c.npy", "-o", home, "-q"],
            "simulate": ["simulate", q, "--engine", "model", "--input", x, "-o", home, "-q"],
            "run-dump": ["run", m, "--input", x, "--dump", home]}[command]
    _fails(argv, capsys, "exists and is not an earlier", "no .qsim-output.json manifest",
           "notes.txt", "or empty")
    assert _tree_digest(home) == before
    (home / "photos").rmdir()
    (home / "notes.txt").unlink()
    assert main([str(a) for a in argv]) == 0                      # an empty folder is fine
    assert main([str(a) for a in argv]) == 0                      # and so is its own output


def test_empty_output_path_is_refused(work, capsys):
    _fails(["quantize", work / "m", "--calib", work / "c.npy", "-o", "", "-q"], capsys,
           "the output path is empty")
    _fails(["run", work / "m", "--input", work / "x.npy", "--dump", ""], capsys,
           "the output path is empty")


@pytest.mark.parametrize("argv", [
    ["export-vectors", "--corner-cases", "3", "--seed", "0", "--out", "new/../model"],
    ["export-rtl", "--config", "8x8", "--out", "new/../model"],
])
def test_an_output_reaching_an_input_through_a_missing_folder_and_dotdot_is_refused(tmp_path, monkeypatch, argv, capsys):
    """Found by benchmarks/fuzz.py: 'new/../model' looked missing (the OS resolves '..' only
    once 'new' exists), so the folder 'model' was replaced after 'new' was created."""
    from qsim.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "main.sknd").write_text("precious")
    assert main(argv) == 2
    assert "exists and is not" in capsys.readouterr().err
    assert (tmp_path / "model" / "main.sknd").read_text() == "precious"
    assert not (tmp_path / "new").exists()
