"""Spec 2.11 scatter/gather: GATHER (2.11.1) and SCATTER (2.11.2)."""
from __future__ import annotations

import numpy as np

from ...errors import UnpredictableError
from ..signature import F32, I8, I16, I32, Arg, Call, OperatorDef, define, modes

SG_MODES = modes(("signed 8", I32, I8), ("signed 16", I32, I16), ("signed 32", I32, I32),
                 ("fp32", I32, F32), names=("index_t", "value_t"))


def _require_indices(k: np.ndarray, extent: int) -> None:
    bad = (k < 0) | (k >= extent)
    if bad.any():
        n, w = (int(i) for i in np.argwhere(bad)[0])
        raise UnpredictableError(f"REQUIRE(0 <= k && k < K) fails: indices[{n}, {w}] = {int(k[n, w])}, "
                                 f"K = {extent}")


def _check_gather(call: Call):
    (n, k, c), (n2, w) = call.shapes
    call.error_if(n2 != n, "indices shape != [N,W]", f"values of shape {[n, k, c]}, indices {[n2, w]}")
    return [(n, w, c)]


def _gather(inputs, attrs):
    values, indices = inputs
    _require_indices(indices, values.shape[1])
    return [np.take_along_axis(values, indices.astype(np.int64)[:, :, None], axis=1)]


GATHER = define(OperatorDef(
    "GATHER", "2.11.1", inputs=(Arg("values", "value_t", (3,)), Arg("indices", "index_t", (2,))),
    attrs=(), outputs=(Arg("output", "value_t"),), modes=SG_MODES, check=_check_gather, ref=_gather))


def _check_scatter(call: Call):
    (n, k, c), (n2, w), (n3, w3, c3) = call.shapes
    call.error_if(n2 != n, "indices shape != [N,W]", f"values_in of shape {[n, k, c]}, indices {[n2, w]}")
    call.error_if((n3, w3, c3) != (n, w, c), "input shape != [N,W,C]",
                  f"input of shape {[n3, w3, c3]}, expected {[n, w, c]}")
    return [(n, k, c)]


def _scatter(inputs, attrs):
    values_in, indices, data = inputs
    _require_indices(indices, values_in.shape[1])
    out = values_in.copy()
    for n in range(indices.shape[0]):
        ks = indices[n].astype(np.int64)
        uniq, counts = np.unique(ks, return_counts=True)
        if (counts > 1).any():
            raise UnpredictableError(f"REQUIRE(output_modified[n,k,c] == false) fails: indices[{n}] writes "
                                     f"position k={int(uniq[counts > 1][0])} more than once")
        out[n, ks] = data[n]
    return [out]


SCATTER = define(OperatorDef(
    "SCATTER", "2.11.2",
    inputs=(Arg("values_in", "value_t", (3,)), Arg("indices", "index_t", (2,)), Arg("input", "value_t", (3,))),
    attrs=(), outputs=(Arg("values_out", "value_t"),), modes=SG_MODES, check=_check_scatter, ref=_scatter))
