"""The 16-bit GEMM modes (int48 accumulators, kernels/qgemm_i16.h on the VNNI and AMX paths,
the generic loop elsewhere) on every ISA path this CPU runs: 16x8 CONV2D / FULLY_CONNECTED
(|w - weight_zp| up to 255, weight zero points at both ends) and 16x16 MATMUL (weights split as
256 * hi + lo), K across the kernel's 256-product exact blocks and odd channel counts, -32768
everywhere, accumulations near the int48 limit. The oracle is the product in Python integers
(int64 numpy), written out here. The ids name the path."""
import numpy as np
import pytest

from kernel_harness import ISAS, tosa_run
from qsim.kernels.cpu_features import forced_isa


def _on(isa, op, inputs, attrs):
    with forced_isa(isa):
        return tosa_run(op, inputs, attrs, backend="kernels")[0]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 255, 17), (13, 256, 16), (6, 257, 33), (20, 513, 9)])
@pytest.mark.parametrize("wzp", [0, -128, 127])
def test_sixteen_by_eight_fully_connected(isa, m, k, n, wzp):
    rng = np.random.default_rng(m * k + n)
    x = rng.integers(-32768, 32768, (m, k)).astype(np.int16)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    x[0] = -32768                                   # the largest products of both signs
    w[0] = -128 if wzp >= 0 else 127
    bias = rng.integers(-(1 << 40), 1 << 40, n).astype(np.int64)
    want = x.astype(np.int64) @ (w.astype(np.int64) - wzp).T + bias
    got = _on(isa, "FULLY_CONNECTED", [x], dict(weight=w, bias=bias, input_zp=0, weight_zp=wzp))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want, err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("c", [3, 64, 131])
def test_sixteen_by_eight_conv2d(isa, c):
    rng = np.random.default_rng(c)
    x = rng.integers(-32768, 32768, (2, 5, 6, c)).astype(np.int16)
    x[0, 2] = -32768
    w = rng.integers(-128, 128, (11, 3, 3, c)).astype(np.int8)
    w[0] = 127
    bias = rng.integers(-1000, 1000, 11).astype(np.int64)
    attrs = dict(weight=w, bias=bias, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=-128)
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((2, 5, 6, 11), np.int64) + bias
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nhwc,oc->nhwo", xp[:, dy:dy + 5, dx:dx + 6], w[:, dy, dx].astype(np.int64) + 128)
    np.testing.assert_array_equal(_on(isa, "CONV2D", [x], attrs), want, err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", [(2, 5, 1, 3), (3, 17, 129, 20), (1, 4, 300, 16)])
def test_sixteen_by_sixteen_matmul(isa, shape):
    n, h, c, w = shape
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(-32768, 32768, (n, h, c)).astype(np.int16)
    b = rng.integers(-32768, 32768, (n, c, w)).astype(np.int16)
    a[:, 0], b[:, :, 0] = -32768, -32768           # (-32768)^2 = 2^30 terms: every pair is 2^31
    a[:, -1], b[:, :, -1] = 32767, -32768
    want = np.einsum("nhc,ncw->nhw", a.astype(np.int64), b.astype(np.int64))
    got = _on(isa, "MATMUL", [a, b], dict(A_zp=0, B_zp=0))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want, err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
def test_sixteen_by_sixteen_accumulation_near_the_int48_limit(isa):
    # 131071 terms of (-32768)^2 = 2^30: a sum of 2^47 - 2^30, the largest the int48 bound lets
    # through for this K, over many of the kernel's 128-pair blocks
    k = (1 << 17) - 1
    a = np.full((1, 2, k), -32768, np.int16)
    b = np.full((1, k, 3), -32768, np.int16)
    b[0, :, 1] = 32767
    got = _on(isa, "MATMUL", [a, b], dict(A_zp=0, B_zp=0))
    assert got[0, 0].tolist() == [k << 30, -k * 32768 * 32767, k << 30]
