"""`qsim run MODEL --input x.npy [--output] [--dump]` on a float graph."""
import numpy as np

import qsim
from qsim.cli import main
try:  # tests/skriptnd may or may not be a package
    from .test_execute_graph import small_cnn
except ImportError:
    from test_execute_graph import small_cnn


def test_run_writes_output_and_dump(tmp_path, rng, monkeypatch, capsys):
    g, _, _ = small_cnn(rng)
    monkeypatch.setattr(qsim, "load", lambda path: g, raising=False)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    rc = main(["run", "model", "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
               "--dump", str(tmp_path / "dump")])
    assert rc == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 5) and abs(float(y.sum()) - 1.0) < 1e-5
    assert sorted(p.name for p in (tmp_path / "dump").iterdir()) == sorted(n + ".npy" for n in g.tensors)
    np.testing.assert_array_equal(np.load(tmp_path / "dump" / "x.npy"), x)
    assert "y: float32[1, 5]" in capsys.readouterr().out


def test_run_bad_input_exits_2(tmp_path, rng, monkeypatch, capsys):
    g, _, _ = small_cnn(rng)
    monkeypatch.setattr(qsim, "load", lambda path: g, raising=False)
    np.save(tmp_path / "x.npy", np.zeros((2, 2), np.float32))
    assert main(["run", "m", "--input", str(tmp_path / "x.npy")]) == 2
    assert "input 'x' has shape [2, 2]" in capsys.readouterr().err
    assert main(["run", "m", "--input", "nope=" + str(tmp_path / "x.npy")]) == 2
    assert "has no input 'nope'" in capsys.readouterr().err
