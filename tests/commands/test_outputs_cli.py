"""Where outputs go, through `python -m qsim` as a user types it: new files beside or inside a
model folder are fine, what a command reads or a user's file is never replaced, permissions
follow the umask, a link to an output folder stays a link, and a closed stdout ends quietly."""
import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qsim
from qsim.atomic import MANIFEST
from qsim.cli import main

from quant.test_pipeline import write_tiny_model   # conv + relu, input [1, 2, 6, 6]

TREE = str(Path(qsim.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A tiny float model m/ (graph.nnef + .dat files), its quantized form q/, data files."""
    root = tmp_path_factory.mktemp("outputs")
    rng = np.random.default_rng(3)
    write_tiny_model(root, rng)
    assert main(["quantize", str(root / "m"), "--calib", str(root / "c.npy"), "-o", str(root / "q"),
                 "-q"]) == 0
    return root


def qsim_cli(*argv, cwd, umask=None, **kwargs):
    env = dict(os.environ, PYTHONPATH=TREE)
    return subprocess.run([sys.executable, "-m", "qsim", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
                          **kwargs)


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _unchanged(before: dict, after: dict) -> bool:
    """Every file of `before` is still there with the same bytes (new files may appear)."""
    return {k: after.get(k) for k in before} == before


# ---- the overlap rule: protect what the command reads and replaces, nothing more ----------

def test_outputs_beside_a_model_inside_its_folder_are_accepted_and_can_be_rewritten(work, tmp_path):
    """cd model_dir && qsim run graph.nnef --output y.npy (twice), --output out/y.npy, and the
    default qsim-out/... of quantize run there (twice: it replaces its own earlier output)."""
    m = tmp_path / "m"
    m.mkdir()
    for name in ("graph.nnef", "filter.dat", "bias.dat"):
        (m / name).write_bytes((work / "m" / name).read_bytes())
    model = _digests(m)
    for output in ("y.npy", "y.npy", "out/y.npy"):
        done = qsim_cli("run", "graph.nnef", "--input", work / "x.npy", "--output", output, cwd=m)
        assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(m / "y.npy"), np.load(m / "out" / "y.npy"))
    for _ in range(2):
        done = qsim_cli("quantize", "graph.nnef", "--calib", work / "c.npy", "-q", cwd=m)
        assert done.returncode == 0, done.stderr
    (folder,) = (m / "qsim-out").iterdir()
    assert (folder / "quantization.json").is_file() and (folder / MANIFEST).is_file()
    assert _unchanged(model, _digests(m))


def test_simulate_inside_a_quantized_folder_writes_its_default_output_there(work, tmp_path):
    """`qsim simulate .` in a quantized folder; the folder then holds a manifest and a report
    folder beside the model files, and qsim run and check still read it as before."""
    q = tmp_path / "q"
    q.mkdir()
    for p in (work / "q").iterdir():
        (q / p.name).write_bytes(p.read_bytes())
    model = _digests(q)
    for _ in range(2):
        done = qsim_cli("simulate", ".", "--engine", "model", "--input", work / "x.npy", "-q", cwd=q)
        assert done.returncode == 0, done.stderr
    (report,) = (q / "qsim-out").iterdir()
    assert (report / "report.json").is_file() and (report / MANIFEST).is_file()
    assert _unchanged(model, _digests(q))
    ran = qsim_cli("run", ".", "--input", work / "x.npy", "--output", tmp_path / "y.npy", cwd=q)
    assert ran.returncode == 0, ran.stderr
    assert qsim_cli("check", ".", cwd=q).returncode == 0
    same = qsim_cli("run", work / "q", "--input", work / "x.npy", "--output", tmp_path / "z.npy", cwd=q)
    assert same.returncode == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.load(tmp_path / "z.npy"))


@pytest.mark.parametrize("argv,conflict", [
    (["run", "graph.nnef", "--input", "../x.npy", "--output", "graph.nnef"],
     "--output graph.nnef is the model graph.nnef"),
    (["run", "graph.nnef", "--input", "../x.npy", "--output", "filter.dat"],
     "--output filter.dat would replace {m}/filter.dat, a file the model graph.nnef reads"),
    (["run", "graph.nnef", "--input", "../x.npy", "--dump", "."],
     "--dump . contains the model graph.nnef; replacing it would delete the model"),
    (["quantize", "graph.nnef", "--calib", "../c.npy", "-o", ".", "-q"],
     "-o . contains the model graph.nnef"),
    (["run", "graph.nnef", "--input", "../x.npy", "--output", "../x.npy"],
     "--output ../x.npy is the --input ../x.npy"),
])
def test_a_refusal_names_the_conflict_and_its_hint_is_accepted(work, tmp_path, argv, conflict):
    w = tmp_path / "w"
    (w / "m").mkdir(parents=True)
    for name in ("graph.nnef", "filter.dat", "bias.dat"):
        (w / "m" / name).write_bytes((work / "m" / name).read_bytes())
    for name in ("x.npy", "c.npy"):
        (w / name).write_bytes((work / name).read_bytes())
    before = _digests(w)
    refused = qsim_cli(*argv, cwd=w / "m")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert conflict.format(m=w / "m") in refused.stderr, refused.stderr
    option = next(a for a in argv if a in ("-o", "--output", "--dump"))
    place = re.search(rf"hint: write the output elsewhere, e\.g\. {option} (\S+)", refused.stderr).group(1)
    again = list(argv)
    again[again.index(option) + 1] = place
    accepted = qsim_cli(*again, cwd=w / "m")
    assert accepted.returncode == 0, accepted.stderr
    assert _unchanged(before, _digests(w))


@pytest.mark.parametrize("name", ["wave.txt", "wave", "wave.npy"])
def test_a_waveform_file_must_be_named_vcd(work, tmp_path, capsys, name):
    assert main(["simulate", str(work / "q"), "--engine", "amaranth", "--input", str(work / "x.npy"),
                 "--vcd", str(tmp_path / name), "-o", str(tmp_path / "s"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"--vcd {tmp_path / name}: the waveform is written in VCD format" in err
    assert f"hint: e.g. --vcd {tmp_path / 'wave'}.vcd" in err
    assert list(tmp_path.iterdir()) == []


# ---- no user file lost: a folder is replaced only when qsim wrote all of it -----------------

@pytest.mark.parametrize("command", ["quantize", "simulate", "simulate-sweep", "run-dump",
                                     "export-vectors", "export-rtl"])
def test_an_earlier_output_is_replaced_but_not_once_it_holds_a_users_file(work, tmp_path, command):
    out = tmp_path / "out"
    argv = {"quantize": ["quantize", work / "m", "--calib", work / "c.npy", "-o", out, "-q"],
            "simulate": ["simulate", work / "q", "--engine", "model", "--input", work / "x.npy",
                         "-o", out, "-q"],
            "simulate-sweep": ["simulate", work / "q", "--engine", "model", "--workers", "1",
                               "--input", work / "x.npy", "--sweep", "size=8,16", "-o", out, "-q"],
            "run-dump": ["run", work / "m", "--input", work / "x.npy", "--dump", out],
            "export-vectors": ["export-vectors", work / "q", "--input", work / "x.npy", "--out", out],
            "export-rtl": ["export-rtl", "--config", "8x8", "--out", out]}[command]
    for _ in range(2):
        done = qsim_cli(*argv, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    (out / "notes.txt").write_text("mine")
    mine = _digests(out)
    refused = qsim_cli(*argv, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "holds files qsim" in refused.stderr and "did not write: notes.txt;" in refused.stderr
    assert "choose another" in refused.stderr and "or move those files out of" in refused.stderr
    assert _digests(out) == mine


def test_a_dump_folder_of_the_users_own_arrays_is_not_replaced(work, tmp_path):
    mine = tmp_path / "arrays"
    mine.mkdir()
    np.save(mine / "a.npy", np.arange(3))
    refused = qsim_cli("run", work / "m", "--input", work / "x.npy", "--dump", mine, cwd=tmp_path)
    assert refused.returncode == 2
    assert "is not an earlier qsim run --dump output" in refused.stderr
    assert "holds a.npy" in refused.stderr
    np.testing.assert_array_equal(np.load(mine / "a.npy"), np.arange(3))


def test_a_link_to_an_earlier_output_stays_a_link_to_the_new_output(work, tmp_path):
    """-o LINK: the output lands in the folder LINK points to; a link to a folder that is not
    an earlier output is refused by the same rule as the folder itself."""
    disk = tmp_path / "disk"
    disk.mkdir()
    argv = ["quantize", work / "m", "--calib", work / "c.npy", "-q", "-o"]
    assert qsim_cli(*argv, disk / "q", cwd=tmp_path).returncode == 0
    (tmp_path / "link").symlink_to(disk / "q", target_is_directory=True)
    (disk / "q" / "report.html").unlink()                   # to see it come back
    done = qsim_cli(*argv, "link", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == str(disk / "q")
    assert (disk / "q" / "report.html").is_file() and sorted(p.name for p in disk.iterdir()) == ["q"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    (tmp_path / "to-mine").symlink_to(tmp_path / "mine", target_is_directory=True)
    refused = qsim_cli(*argv, "to-mine", cwd=tmp_path)
    assert refused.returncode == 2 and "holds notes.txt" in refused.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


# ---- permissions: as cp and numpy.save give them under the umask --------------------------

@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_output_folders_and_files_follow_the_umask(work, tmp_path, umask):
    out = tmp_path / "q"
    done = qsim_cli("quantize", work / "m", "--calib", work / "c.npy", "-o", out, "-q", cwd=tmp_path,
                    umask=umask)
    assert done.returncode == 0, done.stderr
    done = qsim_cli("run", out, "--input", work / "x.npy", "--output", tmp_path / "y.npy", "--dump",
                    tmp_path / "d", cwd=tmp_path, umask=umask)
    assert done.returncode == 0, done.stderr
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)      # noqa: E731
    assert {mode(out), mode(tmp_path / "d")} == {0o777 & ~umask}
    files = [p for p in out.iterdir()] + [p for p in (tmp_path / "d").iterdir()] + [tmp_path / "y.npy"]
    assert {p.suffix for p in files} >= {".dat", ".sknd", ".json", ".html", ".png", ".npy"}
    assert {mode(p) for p in files} == {0o666 & ~umask}


# ---- a closed stdout ends quietly, as a Unix tool killed by SIGPIPE -----------------------

def _long_chain_model(folder: Path, n: int = 6000) -> Path:
    """An NNEF model whose `qsim check` summary is far larger than a pipe's buffer (64 KiB)."""
    lines = ["version 1.0;", "graph g( input ) -> ( t%d )" % n, "{",
             "    input = external<scalar>(shape = [1, 4]);", "    t1 = relu(input);"]
    lines += [f"    t{k} = relu(t{k - 1});" for k in range(2, n + 1)] + ["}"]
    folder.mkdir()
    (folder / "graph.nnef").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("when", ["after-the-first-line", "before-any-output"])
def test_a_reader_that_goes_away_ends_qsim_quietly(tmp_path, when):
    model = _long_chain_model(tmp_path / "chain")
    env = dict(os.environ, PYTHONPATH=TREE)
    proc = subprocess.Popen([sys.executable, "-m", "qsim", "check", str(model)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if when == "after-the-first-line":
        assert proc.stdout.readline().startswith(str(model).encode())    # as `head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 141                  # 128 + SIGPIPE, as the shell reports
    assert err == ""                                      # no traceback, no "Exception ignored"


def test_the_summary_is_complete_when_the_reader_reads_it_all(tmp_path):
    model = _long_chain_model(tmp_path / "chain")
    done = qsim_cli("check", model, cwd=tmp_path)
    assert done.returncode == 0 and len(done.stdout) > 1 << 16
    assert done.stdout.rstrip().endswith("t6000: f32[1, 4]")
