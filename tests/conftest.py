import numpy as np
import pytest


@pytest.fixture
def rng():
    """A seeded generator: every random test is reproducible."""
    return np.random.default_rng(12345)
