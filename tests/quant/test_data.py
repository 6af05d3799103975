import numpy as np
import pytest

from qsim.errors import DataError
from qsim.quant.calibration.data import load_samples


def test_npy_and_npz_with_labels(tmp_path, rng):
    x = rng.normal(size=(5, 1, 4, 4)).astype(np.float32)
    np.save(tmp_path / "a.npy", x)
    s = load_samples(tmp_path / "a.npy", "input", (1, 4, 4))
    assert np.array_equal(s.inputs, x) and s.labels is None and len(s) == 5
    np.savez(tmp_path / "b.npz", x=x, y=np.arange(5))
    s = load_samples(tmp_path / "b.npz", "input", (1, 4, 4))
    assert s.labels.tolist() == [0, 1, 2, 3, 4]
    feeds = list(s.feeds("input", limit=2))
    assert len(feeds) == 2 and feeds[1][0]["input"].shape == (1, 1, 4, 4) and feeds[1][1] == 1
    np.save(tmp_path / "one.npy", x[0])
    assert len(load_samples(tmp_path / "one.npy", "input", (1, 4, 4))) == 1


@pytest.mark.parametrize("make,msg", [
    (lambda p: np.save(p / "d.npy", np.zeros((3, 2, 4, 4))), r"samples have shape \[2, 4, 4\]"),
    (lambda p: np.savez(p / "d.npz", a=np.zeros((3, 1, 4, 4)), b=np.zeros(3)), "cannot tell which array"),
    (lambda p: np.savez(p / "d.npz", x=np.zeros((3, 1, 4, 4)), y=np.zeros(2, int)), "labels must be 3"),
    (lambda p: np.save(p / "d.npy", np.full((2, 1, 4, 4), np.nan)),
     r"d.npy \(samples of input 'input'\): element \[0, 0, 0, 0\] is NaN"),
    (lambda p: (p / "d.txt").write_text("1 2 3"), "unknown data format"),
])
def test_bad_data_is_named(tmp_path, make, msg):
    make(tmp_path)
    path = next(tmp_path.iterdir())
    with pytest.raises(DataError, match=msg):
        load_samples(path, "input", (1, 4, 4))


def test_missing_path(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        load_samples(tmp_path / "nope.npy", "input", (1, 4, 4))


def test_image_folder_preprocessing(tmp_path):
    import matplotlib.image as mpimg
    img = np.zeros((8, 8, 3), dtype=np.float32)
    img[:, :, 0] = 1.0                      # pure red: grey = 1/3
    mpimg.imsave(tmp_path / "a.png", img)
    mpimg.imsave(tmp_path / "b.png", np.ones((8, 8, 3), dtype=np.float32))
    (tmp_path / "labels.txt").write_text("a.png 3\nb.png 7\n")
    s = load_samples(tmp_path, "input", (1, 4, 4), mean=(0.5,), std=(0.5,))
    assert s.inputs.shape == (2, 1, 4, 4)
    assert np.allclose(s.inputs[0], (1 / 3 - 0.5) / 0.5, atol=1e-2)
    assert np.allclose(s.inputs[1], 1.0, atol=1e-2)
    assert s.labels.tolist() == [3, 7]
    (tmp_path / "labels.txt").write_text("a.png x\n")
    with pytest.raises(DataError, match=r"labels.txt:1: expected"):
        load_samples(tmp_path, "input", (1, 4, 4))
