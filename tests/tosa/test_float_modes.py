"""The fp32 modes qsim implements (secondary: floats are not bit-exact by spec 1.10). They run
the reference on either backend."""
import numpy as np
import pytest

from qsim.tosa import run

X = np.array([[-1.5, 2.5, -0.0, 4.0]], np.float32)


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_fp32_operators(backend):
    def one(op, inputs, attrs=None):
        out, = run(op, inputs, attrs or {}, backend=backend)
        assert out.dtype in (np.float32, np.int32, np.int16, np.bool_)
        return out
    assert one("ABS", [X]).tolist() == [[1.5, 2.5, 0.0, 4.0]]
    assert not np.signbit(one("ABS", [X])[0, 2])                     # -0 -> +0
    assert one("CLAMP", [X], dict(min_val=-1.0, max_val=3.0)).tolist() == [[-1.0, 2.5, 0.0, 3.0]]
    assert one("NEGATE", [X], dict(input1_zp=0, output_zp=0)).tolist() == [[1.5, -2.5, 0.0, -4.0]]
    assert one("FLOOR", [X]).tolist() == [[-2.0, 2.0, -0.0, 4.0]]
    assert one("CEIL", [X]).tolist() == [[-1.0, 3.0, -0.0, 4.0]]
    assert one("RECIPROCAL", [X])[0, 3] == 0.25 and one("RECIPROCAL", [X])[0, 2] == -np.inf
    assert one("RSQRT", [X])[0, 3] == 0.5 and np.isnan(one("RSQRT", [X])[0, 0])
    assert one("LOG", [X])[0, 2] == -np.inf
    assert one("MAXIMUM", [X, np.full_like(X, np.nan)]).tolist() != one("MAXIMUM", [X, X]).tolist()
    assert np.isnan(one("MAXIMUM", [X, np.full_like(X, np.nan)])).all()    # apply_max: NaN in, NaN out
    assert one("REDUCE_SUM", [X], dict(axis=1)).tolist() == [[5.0]]
    assert one("REDUCE_PRODUCT", [X[:, :2]], dict(axis=1)).tolist() == [[-3.75]]
    assert one("ARGMAX", [X], dict(axis=1)).tolist() == [3]
    assert one("CAST", [X], dict(out_t="int16")).tolist() == [[-2, 2, 0, 4]]    # ties to even
    assert abs(one("SIGMOID", [np.zeros((1,), np.float32)])[0] - 0.5) < 1e-7
    img = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    pooled = one("AVG_POOL2D", [img], dict(kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), input_zp=0, output_zp=0))
    assert pooled.ravel().tolist() == [2.5, 4.5, 10.5, 12.5]
    # padding is not counted in the float average either
    pooled = one("AVG_POOL2D", [img], dict(kernel=(2, 2), stride=(2, 2), pad=(1, 1, 1, 1), input_zp=0, output_zp=0))
    assert pooled[0, 0, 0, 0] == 0.0 and pooled[0, 1, 1, 0] == 7.5


def test_argmax_skips_nan():
    x = np.array([[np.nan, 1.0, 3.0, np.nan], [-np.inf, -np.inf, np.nan, -np.inf]], np.float32)
    assert run("ARGMAX", [x], {"axis": 1})[0].tolist() == [2, 0]
