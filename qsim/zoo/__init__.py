"""Small embedded models and data, used as defaults (`qsim quantize` with no model) and in tests.

fashion_cnn: a float NNEF 2.0 model folder (main.sknd + .dat) of a Fashion-MNIST CNN,
4 x (3x3 conv + batch_norm + relu), global average pool (math.mean_reduce), nn.linear;
61,050 parameters; input float32 [batch, 1, 28, 28] = pixel / 255, output 10 logits.
Trained by tools/train_zoo.py (fixed seed); accuracy in docs/quantize.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import DataError
from .fashion_mnist import (CLASS_NAMES, calibration_images, full_test_set, preprocess,
                            test_subset)

__all__ = ["ZooModel", "FASHION_CNN", "default_model", "model_path", "calibration_images",
           "test_subset", "full_test_set", "preprocess", "CLASS_NAMES"]


@dataclass(frozen=True)
class ZooModel:
    name: str                          # folder name under qsim/zoo/, also the graph name
    input_shape: tuple[int, ...]       # one sample, without the batch axis
    classes: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The model folder (holding main.sknd)."""
        folder = Path(str(resources.files(__package__).joinpath(self.name)))
        if not (folder / "main.sknd").is_file():
            raise DataError(f"embedded model {self.name} is missing from the qsim package "
                            f"({folder / 'main.sknd'} not found)",
                            hint="regenerate it with tools/train_zoo.py")
        return folder


FASHION_CNN = ZooModel(name="fashion_cnn", input_shape=(1, 28, 28), classes=CLASS_NAMES)


def default_model() -> ZooModel:
    """The model `qsim quantize` uses when given none."""
    return FASHION_CNN


def model_path(name: str = FASHION_CNN.name) -> Path:
    if name != FASHION_CNN.name:
        raise DataError(f"no embedded model named {name!r}", hint=f"available: {FASHION_CNN.name}")
    return FASHION_CNN.path
