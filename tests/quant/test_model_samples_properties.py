"""Property tests of the multi-input data reader (qsim/quant/calibration/data.py
load_model_samples): any .npz or folder of arrays either loads as one sample array per model
input, each of the input's sample shape and all of one count, or is a DataError; never another
exception."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qsim.errors import DataError
from qsim.quant.calibration.data import load_model_samples

SHAPES = {"image": (2, 3, 3), "features": (4,), "mask": (5,)}

arrays = st.builds(
    lambda n, shape, kind, seed: (np.random.default_rng(seed).normal(size=(n, *shape)) * 3).astype(kind),
    st.integers(0, 3), st.sampled_from([(2, 3, 3), (4,), (5,), (3,), (1, 4)]),
    st.sampled_from(["float32", "float64", "int64", "int8", "bool", "complex64"]), st.integers(0, 99))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=st.dictionaries(st.sampled_from(["image", "features", "mask", "x", "labels", "other"]), arrays,
                               max_size=5), as_folder=st.booleans())
def test_any_arrays_load_consistently_or_raise_a_data_error(tmp_path_factory, members, as_folder):
    folder = tmp_path_factory.mktemp("data")
    if as_folder:
        for name, value in members.items():
            np.save(folder / f"{name}.npy", value)
        path = folder
    else:
        path = folder / "d.npz"
        np.savez(path, **members)
    try:
        samples = load_model_samples(path, SHAPES)
    except DataError:
        return
    arrays_by_name = samples.arrays("image")
    assert set(arrays_by_name) == set(SHAPES)
    counts = {len(a) for a in arrays_by_name.values()}
    assert counts == {len(samples)} and len(samples) > 0
    for name, value in arrays_by_name.items():
        assert value.shape[1:] == SHAPES[name]
