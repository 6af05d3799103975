"""The embedded Fashion-MNIST model and data.

The float forward pass here is a test oracle written from the NNEF 2.0 formulas
(nn.conv 4.4.1 with explicit padding, nn.batch_norm 4.4.4, nn.relu, math.mean_reduce
4.2.6, nn.linear) reading the .dat files; it is compared with PyTorch's logits that
tools/train_zoo.py stored in tests/zoo/fashion_cnn_reference.npz.
"""
import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from qsim import zoo
from qsim.errors import DataError
from qsim.skriptnd.parser import parse
from qsim.tensorfile import read_tensor
from qsim.zoo.fashion_mnist import read_idx, read_split

HERE = Path(__file__).parent
# 4.4.1 conv attributes of the exported graph: (stride, padding) per stage
STAGES = ((1, 1), (2, 1), (2, 1), (2, 1))
RECORDED_FULL_TEST_TOP1 = 91.37      # docs/quantize.md, from tools/train_zoo.py (PyTorch)


def declared_variables(text):
    block = re.search(r"@variable\s*\{(.*?)\}", text, re.S).group(1)
    return {name: tuple(int(d) for d in dims.split(","))
            for name, dims in re.findall(r"(\w+)\s*:\s*real\[([^\]]*)\]", block)}


@pytest.fixture(scope="module")
def tensors():
    folder = zoo.model_path()
    variables = declared_variables((folder / "main.sknd").read_text())
    return {name: read_tensor(folder / f"{name}.dat", expected_shape=shape)
            for name, shape in variables.items()}


def forward(t, x, dtype=np.float64):
    h = x.astype(dtype)
    t = {k: v.astype(dtype) for k, v in t.items()}
    for i, (stride, pad) in enumerate(STAGES, start=1):
        w = t[f"conv{i}_filter"]
        n, c, kh, kw = w.shape
        p = np.pad(h, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        # windows [b, c, oh, ow, kh, kw] at the strided positions, then one matmul (im2col)
        win = np.lib.stride_tricks.sliding_window_view(p, (kh, kw), axis=(2, 3))
        win = win[:, :, ::stride, ::stride]
        b, _, oh, ow = win.shape[:4]
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(b * oh * ow, c * kh * kw)
        out = (cols @ w.reshape(n, -1).T).reshape(b, oh, ow, n).transpose(0, 3, 1, 2)
        bn = {k: t[f"bn{i}_{k}"][None, :, None, None]
              for k in ("mean", "variance", "bias", "scale")}
        out = (out - bn["mean"]) / np.sqrt(bn["variance"] + dtype(1e-5)) * bn["scale"] + bn["bias"]
        h = np.maximum(out, 0.0)
    return h.mean(axis=(2, 3)) @ t["fc_filter"].T + t["fc_bias"]


def test_model_folder_parses_and_declares_every_dat(tensors):
    folder = zoo.model_path()
    module = parse((folder / "main.sknd").read_text(), str(folder / "main.sknd"))
    assert module is not None
    dat_files = {p.stem for p in folder.glob("*.dat")}
    assert dat_files == set(tensors)
    trainable = [a.size for name, a in tensors.items() if not name.endswith(("_mean", "_variance"))]
    assert sum(trainable) == 61050
    assert all(a.dtype == np.float32 for a in tensors.values())


def test_float_model_reproduces_pytorch_logits(tensors):
    ref = np.load(HERE / "fashion_cnn_reference.npz")
    x = zoo.preprocess(ref["images"])
    logits = forward(tensors, x)
    assert logits.shape == ref["logits"].shape == (16, 10)
    np.testing.assert_allclose(logits, ref["logits"], atol=1e-4, rtol=1e-4)


def test_embedded_data():
    calib = zoo.calibration_images()
    assert calib.shape == (256, 1, 28, 28) and calib.dtype == np.float32
    assert calib.min() >= 0.0 and calib.max() <= 1.0 and calib.max() > 0.9
    images, labels = zoo.test_subset()
    assert images.shape == (1000, 1, 28, 28) and labels.shape == (1000,)
    assert set(np.unique(labels).tolist()) == set(range(10))
    package_bytes = sum(p.stat().st_size for p in Path(zoo.__file__).parent.rglob("*")
                        if p.is_file() and p.suffix not in (".py", ".pyc"))
    assert package_bytes < 1_000_000


def test_float_accuracy_on_embedded_subset(tensors):
    images, labels = zoo.test_subset()
    top1 = np.mean(forward(tensors, images, np.float32).argmax(axis=1) == labels)
    assert top1 >= 0.90


def test_full_test_set_when_installed(tensors):
    data = zoo.full_test_set()
    if data is None:
        pytest.skip("dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)")
    images, labels = data
    assert images.shape == (10000, 1, 28, 28) and labels.shape == (10000,)
    subset_images, subset_labels = zoo.test_subset()
    assert np.array_equal(images[:1000], subset_images)
    assert np.array_equal(labels[:1000], subset_labels)
    logits = np.concatenate([forward(tensors, images[k:k + 1000], np.float32)
                             for k in range(0, len(images), 1000)])
    top1 = 100 * np.mean(logits.argmax(axis=1) == labels)
    assert abs(top1 - RECORDED_FULL_TEST_TOP1) <= 0.05


def test_missing_full_test_set(tmp_path):
    assert zoo.full_test_set(tmp_path) is None
    with pytest.raises(DataError, match="apt-get install dataset-fashion-mnist"):
        zoo.full_test_set(tmp_path, required=True)


def write_gz(path, data: bytes):
    with gzip.open(path, "wb") as f:
        f.write(data)


def test_idx_reader(tmp_path):
    good = tmp_path / "ok.gz"
    write_gz(good, bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
    assert read_idx(good).tolist() == [[0, 1, 2], [3, 4, 5]]
    bad_type = tmp_path / "float.gz"
    write_gz(bad_type, bytes([0, 0, 0x0D, 1, 0, 0, 0, 1]) + bytes(4))
    with pytest.raises(DataError, match="not a uint8 IDX file"):
        read_idx(bad_type)
    short = tmp_path / "short.gz"
    write_gz(short, bytes([0, 0, 8, 1, 0, 0, 0, 9]) + bytes(4))
    with pytest.raises(DataError, match=r"need 9 bytes of data, the file has 4"):
        read_idx(short)
    not_gzip = tmp_path / "plain.gz"
    not_gzip.write_bytes(b"hello")
    with pytest.raises(DataError, match="cannot read gzipped IDX"):
        read_idx(not_gzip)


def test_split_mismatch_and_preprocess_errors(tmp_path):
    write_gz(tmp_path / "t10k-images-idx3-ubyte.gz",
             bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28]) + bytes(2 * 784))
    write_gz(tmp_path / "t10k-labels-idx1-ubyte.gz", bytes([0, 0, 8, 1, 0, 0, 0, 3]) + bytes(3))
    with pytest.raises(DataError, match="do not match"):
        read_split(tmp_path, "test")
    with pytest.raises(DataError, match="uint8 \\[N, 28, 28\\]"):
        zoo.preprocess(np.zeros((2, 28, 28), dtype=np.float32))


def test_unknown_model_name():
    with pytest.raises(DataError, match="no embedded model named 'resnet'"):
        zoo.model_path("resnet")
    assert zoo.default_model() is zoo.FASHION_CNN
    assert zoo.FASHION_CNN.classes[9] == "Ankle boot"
