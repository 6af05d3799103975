"""Fashion-MNIST data: the IDX reader, the model's preprocessing, the embedded subsets.

Fashion-MNIST (Zalando Research, MIT license): 28x28 grey images of 10 clothing classes,
60k training and 10k test images. qsim embeds 256 training images (calibration) and the
first 1000 test images with labels, as uint8 in compressed .npz files next to this module.
The full 10k test set is read from Debian's `dataset-fashion-mnist` package when it is
installed (/usr/share/datasets/fashion-mnist/).
"""
from __future__ import annotations

import gzip
import struct
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import DataError

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")
IMAGE_SHAPE = (1, 28, 28)          # C, H, W of one preprocessed input
CALIBRATION_FILE = "fashion_mnist_calib.npz"
TEST_SUBSET_FILE = "fashion_mnist_test1k.npz"


def preprocess(images_u8: np.ndarray) -> np.ndarray:
    """uint8 [N, 28, 28] → the model input: float32 [N, 1, 28, 28] = pixel / 255."""
    images_u8 = np.asarray(images_u8)
    if images_u8.dtype != np.uint8 or images_u8.ndim != 3 or images_u8.shape[1:] != (28, 28):
        raise DataError(f"Fashion-MNIST images must be uint8 [N, 28, 28], got "
                        f"{images_u8.dtype} {list(images_u8.shape)}")
    return (images_u8.astype(np.float32) / np.float32(255.0))[:, None, :, :]


def read_idx(path: Path) -> np.ndarray:
    """A gzipped IDX file (MNIST's container): 0x0000, type 0x08 (uint8), rank, big-endian
    u32 extents, then the data."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read gzipped IDX data ({exc})") from None
    if len(raw) < 4:
        raise DataError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    zero, type_code, rank = struct.unpack(">HBB", raw[:4])
    if zero != 0 or type_code != 0x08:
        raise DataError(f"{path}: not a uint8 IDX file (header {raw[:4].hex()}, expected "
                        f"0000 08 <rank>)")
    header = 4 + 4 * rank
    if len(raw) < header:
        raise DataError(f"{path}: IDX header promises {rank} extents but the file ends")
    dims = struct.unpack(f">{rank}I", raw[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != expected:
        raise DataError(f"{path}: IDX extents {list(dims)} need {expected} bytes of data, "
                        f"the file has {len(raw) - header}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def read_split(directory: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images [N, 28, 28] and labels [N] of 'train' or 'test' from an IDX folder."""
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(Path(directory) / f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(Path(directory) / f"{prefix}-labels-idx1-ubyte.gz")
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(f"{directory}: {split} images {list(images.shape)} and labels "
                        f"{list(labels.shape)} do not match")
    return images, labels


def _embedded(name: str) -> dict[str, np.ndarray]:
    source = resources.files(__package__).joinpath(name)
    try:
        with source.open("rb") as f, np.load(f) as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise DataError(f"embedded data {name} is missing from the qsim package",
                        hint="regenerate it with tools/train_zoo.py") from None


def calibration_images() -> np.ndarray:
    """The 256 embedded calibration inputs, preprocessed: float32 [256, 1, 28, 28]."""
    return preprocess(_embedded(CALIBRATION_FILE)["images"])


def test_subset() -> tuple[np.ndarray, np.ndarray]:
    """The first 1000 test inputs (float32 [1000, 1, 28, 28]) and labels (int64 [1000])."""
    data = _embedded(TEST_SUBSET_FILE)
    return preprocess(data["images"]), data["labels"].astype(np.int64)


def full_test_set(directory: Path | None = None, required: bool = False
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """All 10k test inputs and labels from the Debian package, or None when not installed.

    With required=True a missing package is a DataError saying how to install it.
    """
    directory = Path(directory) if directory is not None else DEBIAN_DIR
    if not (directory / "t10k-images-idx3-ubyte.gz").is_file():
        if required:
            raise DataError(f"the Fashion-MNIST test set is not installed ({directory} has no "
                            "t10k-images-idx3-ubyte.gz)",
                            hint="apt-get install dataset-fashion-mnist")
        return None
    images, labels = read_split(directory, "test")
    return preprocess(images), labels.astype(np.int64)
