"""`qsim run MODEL --input x.npy [--output] [--dump]` on a float model (qsim/commands/run.py)."""
import json

import numpy as np
import pytest

from qsim.cli import main

MODEL = """import nn;
import math;

graph G {
    @input {
        x: real[2, 3];
        z: real[2, 3];
    }
    @output {
        y: real[2, 3];
        s: real[2, 3];
    }
    @compose {
        r = nn.relu(x);
        y = math.mul(r, z);
        s = math.add(x, z);
    }
}
"""


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "main.sknd").write_text(MODEL)
    return folder


def _arrays(tmp_path, rng, shape=(2, 3)):
    x, z = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "z.npy", z)
    return x, z


def test_run_writes_outputs_and_dump(tmp_path, rng, model, capsys):
    x, z = _arrays(tmp_path, rng)
    out, dump = tmp_path / "out.npz", tmp_path / "dump"
    # z by name, x positional: it takes the first input not named
    rc = main(["run", str(model), "--input", f"z={tmp_path / 'z.npy'}", "--input", str(tmp_path / "x.npy"),
               "--output", str(out), "--dump", str(dump)])
    assert rc == 0
    with np.load(out) as got:
        np.testing.assert_array_equal(got["y"], np.maximum(x, 0) * z)
        np.testing.assert_array_equal(got["s"], x + z)
    names = ["r.npy", "s.npy", "x.npy", "y.npy", "z.npy"]
    assert sorted(p.name for p in dump.iterdir()) == [".qsim-output.json"] + names
    assert json.loads((dump / ".qsim-output.json").read_text()) == {"qsim output of": "run --dump",
                                                                    "files": names}
    np.testing.assert_array_equal(np.load(dump / "x.npy"), x)
    text = capsys.readouterr().out
    assert f"s: float32[2, 3] min {(x + z).min():.6g} max {(x + z).max():.6g}" in text


def test_float64_inputs_are_taken_as_the_declared_float32(tmp_path, rng, model):
    x, z = _arrays(tmp_path, rng)
    np.save(tmp_path / "x.npy", x.astype(np.float64))
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "z.npy"),
                 "--output", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz") as got:
        assert got["s"].dtype == np.float32
        np.testing.assert_array_equal(got["s"], x + z)


@pytest.mark.parametrize("specs, message", [
    (["{x}", "{z}", "{z}"], "the model has 2 input(s) (x, z), 3 --input given"),
    (["nope={x}"], "the model has no input 'nope'"),
    (["{x}"], "no --input for model input(s) z"),
    (["x={x}", "x={z}"], "input 'x' is given twice"),
    (["{bad}", "{z}"], "graph 'G': input 'x' has shape [3, 2], the graph declares [2, 3]"),
    (["{nan}", "{z}"], "(input 'x'): element [0, 1] is NaN"),
])
def test_bad_inputs_exit_2_with_the_reason(tmp_path, rng, model, capsys, specs, message):
    _arrays(tmp_path, rng)
    np.save(tmp_path / "bad.npy", np.zeros((3, 2), np.float32))
    np.save(tmp_path / "nan.npy", np.array([[0, np.nan, 0], [0, 0, 0]], np.float32))
    files = {k: str(tmp_path / f"{k}.npy") for k in ("x", "z", "bad", "nan")}
    args = ["run", str(model)]
    for spec in specs:
        args += ["--input", spec.format(**files)]
    assert main(args + ["--output", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


def test_without_dump_only_the_outputs_are_kept(tmp_path, rng, model, monkeypatch, capsys):
    """`qsim run` prints and writes the outputs only: the executor keeps just those (the other
    tensors go after their last reader); --dump needs every tensor."""
    from qsim.commands import run as run_command
    kept = []

    def recording(graph, inputs, backend="kernels", keep=None):
        kept.append(keep)
        return run_command_execute(graph, inputs, backend, keep=keep)

    run_command_execute = run_command.execute
    monkeypatch.setattr(run_command, "execute", recording)
    x, z = _arrays(tmp_path, rng)
    out = tmp_path / "out.npz"
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "z.npy"),
                 "--output", str(out)]) == 0
    assert [tuple(k) for k in kept] == [("y", "s")]
    with np.load(out) as got:
        assert set(got.files) == {"y", "s"}
        np.testing.assert_array_equal(got["s"], x + z)
    assert "y: float32[2, 3]" in capsys.readouterr().out
    assert main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "z.npy"),
                 "--dump", str(tmp_path / "dump")]) == 0
    assert kept[-1] is None


# ---- --output writes the format its suffix names -----------------------------------------

ONE_OUTPUT = MODEL.replace("        s: real[2, 3];\n", "").replace("        s = math.add(x, z);\n", "")


def _argv(model, tmp_path, output):
    return ["run", str(model), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "z.npy"),
            "--output", str(output)]


def test_npy_holds_the_one_output_and_npz_every_output_by_name(tmp_path, rng, model):
    x, z = _arrays(tmp_path, rng)
    (model / "main.sknd").write_text(ONE_OUTPUT)
    assert main(_argv(model, tmp_path, tmp_path / "y.npy")) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.maximum(x, 0) * z)
    assert main(_argv(model, tmp_path, tmp_path / "y.NPZ")) == 0        # one output, archived
    with np.load(tmp_path / "y.NPZ") as got:
        assert got.files == ["y"]
        np.testing.assert_array_equal(got["y"], np.maximum(x, 0) * z)


def test_several_outputs_into_an_npy_file_is_refused_before_running(tmp_path, rng, model, capsys,
                                                                     monkeypatch):
    from qsim.commands import run as run_command
    _arrays(tmp_path, rng)
    monkeypatch.setattr(run_command, "execute", lambda *a, **k: pytest.fail("ran the model"))
    assert main(_argv(model, tmp_path, tmp_path / "y.npy")) == 2
    err = capsys.readouterr().err
    assert "the model has 2 outputs (y, s); a .npy file holds one array" in err
    assert f"hint: use --output {tmp_path / 'y.npz'}: an archive of every output" in err
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("name,shown", [("y.txt", "the suffix '.txt'"), ("y", "no suffix"),
                                        ("y.npy.gz", "the suffix '.gz'")])
def test_an_unknown_suffix_is_refused(tmp_path, rng, model, capsys, name, shown):
    _arrays(tmp_path, rng)
    assert main(_argv(model, tmp_path, tmp_path / name)) == 2
    err = capsys.readouterr().err
    assert f"--output {tmp_path / name}: {shown} names no output format qsim writes" in err
    assert ".npy (the one output of a model that has one) or .npz" in err
    assert not (tmp_path / name).exists()


def test_any_output_name_is_a_key_of_the_archive(tmp_path, rng, model):
    """numpy.savez takes its arrays as keyword arguments: an output named 'file' clashed."""
    x, z = _arrays(tmp_path, rng)
    (model / "main.sknd").write_text(MODEL.replace("        s: real", "        file: real")
                                     .replace("        s = math.add", "        file = math.add"))
    assert main(_argv(model, tmp_path, tmp_path / "o.npz")) == 0
    with np.load(tmp_path / "o.npz") as got:
        assert sorted(got.files) == ["file", "y"]
        np.testing.assert_array_equal(got["file"], x + z)
