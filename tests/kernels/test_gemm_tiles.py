"""The int8 GEMM at the edges of its tiles, on every ISA path this CPU runs (the AMX path's
16-row x 16-column x 64-byte tiles, the VNNI path's 6-row x 64-column register block, the AVX2
path's 16-column panels): K just below, at and above a tile's 64 bytes, M and N off the tile
sizes, the -128 x -128 product, zero points at both ends of int8, 1 and 2 threads, and sums of
a' * w that wrap modulo 2^32 while the spec's result fits int32. The ids name the path."""
import os
import platform

import numpy as np
import pytest

from kernel_harness import ISAS, tosa_run
from qsim.kernels.cpu_features import Isa, detected_features, forced_isa, supported_isas


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _linux_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (IndexError, ValueError):
        return False


def test_amx_path_offered_exactly_where_the_cpu_and_kernel_allow_it():
    flags = _cpu_flags()
    cpu_has = {"amx_tile", "amx_int8", "avx512_vnni"} <= flags
    offered = Isa.AVX512AMX in supported_isas()
    assert offered == detected_features()["amx_int8"]
    if offered:
        assert cpu_has, "AMX offered on a CPU that does not report amx_tile/amx_int8"
    if cpu_has and platform.system() == "Linux" and _linux_at_least(5, 16):
        # Linux grants the tile data permission since 5.16 (arch_prctl ARCH_REQ_XCOMP_PERM)
        assert offered, "the CPU reports AMX but qsim does not offer the avx512amx path"
    print(f"kernel paths under test: {', '.join(ISAS)}")


@pytest.fixture(params=["1", "2"], ids=["threads1", "threads2"])
def threads(request, monkeypatch):
    monkeypatch.setenv("QSIM_THREADS", request.param)
    return int(request.param)


def _exact_fc(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int, wzp: int) -> np.ndarray:
    """The spec's result in int64, written out here (not the code under test)."""
    return (x.astype(np.int64) - izp) @ (w.astype(np.int64) - wzp).T + bias


def _on(isa: str, op: str, inputs, attrs):
    with forced_isa(isa):
        return tosa_run(op, inputs, attrs, backend="kernels")[0]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (15, 63, 15), (16, 64, 16), (17, 65, 17), (31, 127, 33),
                                   (33, 128, 48), (40, 200, 100), (257, 576, 65), (5, 1100, 130)])
@pytest.mark.parametrize("izp,wzp", [(-128, 0), (0, -128), (127, 127), (-128, 127)])
def test_fully_connected_across_tile_edges(isa, m, k, n, izp, wzp, threads):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    x = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    x[0], w[0] = -128, -128                             # the -128 x -128 product, a whole row
    x[-1, ::2] = 127
    bias = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
    want = _exact_fc(x, w, bias, izp, wzp)
    assert np.abs(want).max() < 1 << 31                 # the shapes keep the spec's result in int32
    got = _on(isa, "FULLY_CONNECTED", [x], dict(weight=w, bias=bias, input_zp=izp, weight_zp=wzp))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
# C a multiple of 64: the AMX path reads A in place (s8 x s8 tiles), batches of H rows off the
# 16-row tiles included; other C: the u8 activation buffer
@pytest.mark.parametrize("shape", [(8, 128, 64, 128), (3, 17, 65, 33), (2, 1, 1, 1), (3, 17, 128, 33),
                                   (2, 40, 64, 70), (1, 2, 192, 5)])
def test_batched_matmul_across_tile_edges(isa, shape, threads):
    b_, h, c, w_ = shape
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(-128, 128, (b_, h, c)).astype(np.int8)
    b = rng.integers(-128, 128, (b_, c, w_)).astype(np.int8)
    a[:, 0], b[:, :, 0] = -128, -128
    for azp, bzp in ((-128, 0), (127, -128)):
        want = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - azp, b.astype(np.int64) - bzp)
        got = _on(isa, "MATMUL", [a, b], dict(A_zp=azp, B_zp=bzp))
        np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("h,w,c", [(9, 11, 20), (3, 32, 64), (2, 48, 128)])
def test_conv2d_3x3_across_tile_edges(isa, h, w, c, threads):
    # (9, 11, 20): taps of 20 channels (each tap's run 20 bytes, K = 180 ends inside a tile) over
    # 99 output rows that do not line up with 16-row tiles (the AMX path copies the rows);
    # (3, 32, 64) and (2, 48, 128): runs of whole tiles, 32-row groups inside one output row
    # (the AMX path reads those in place) or across two (copied)
    rng = np.random.default_rng(h * w * c)
    x = rng.integers(-128, 128, (1, h, w, c)).astype(np.int8)
    wt = rng.integers(-128, 128, (19, 3, 3, c)).astype(np.int8)
    bias = rng.integers(-1000, 1000, 19).astype(np.int32)
    attrs = dict(weight=wt, bias=bias, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                 input_zp=-128, weight_zp=127)
    xp = np.pad(x.astype(np.int64) + 128, ((0, 0), (1, 1), (1, 1), (0, 0)))  # padding holds x == zp
    want = np.zeros((1, h, w, 19), np.int64) + bias
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nhwc,oc->nhwo", xp[:, dy:dy + h, dx:dx + w], wt[:, dy, dx].astype(np.int64) - 127)
    np.testing.assert_array_equal(_on(isa, "CONV2D", [x], attrs), want.astype(np.int32), err_msg=f"on {isa}")


@pytest.mark.parametrize("isa", ISAS)
def test_wrapping_sums_of_the_shifted_operands_give_the_exact_result(isa):
    # x == input_zp == 127 everywhere: the spec's sum is 0, the result the bias, while the
    # kernels' sum of a' * w = 255 * 127 * 70000 > 2^31 wraps modulo 2^32 (and the column
    # correction with it): only arithmetic exact modulo 2^32 gives the bias back
    k = 70000
    x = np.full((3, k), 127, np.int8)
    w = np.full((2, k), 127, np.int8)
    w[1, ::2] = -128
    bias = np.array([(1 << 31) - 1, -(1 << 31)], np.int32)
    got = _on(isa, "FULLY_CONNECTED", [x], dict(weight=w, bias=bias, input_zp=127, weight_zp=0))
    assert got.tolist() == [[(1 << 31) - 1, -(1 << 31)]] * 3



@pytest.mark.skipif(Isa.AVX512AMX not in supported_isas(), reason="this CPU offers no AMX path")
def test_amx_gemm_called_before_any_feature_detection_gets_its_permission():
    # a fresh process that calls the AMX GEMM without qsim.kernels.cpu_features having asked
    # Linux for the tile permission: the kernel asks itself (no SIGILL), and the result is exact
    import subprocess
    import sys
    code = (
        "import numpy as np\n"
        "from qsim.kernels.extensions import extension\n"
        "t = extension('_tosa_ops')\n"
        "rng = np.random.default_rng(1)\n"
        "x = rng.integers(-128, 128, (40, 128), dtype=np.int8); w = rng.integers(-128, 128, (33, 128), dtype=np.int8)\n"
        "a = t.prepare_input_u8(t.ISA_AVX512VNNI, x.reshape(40, 1, 1, 1, 128), 1, 1, 1, 128, (1, 1, 1), (0, 0, 0), 128).reshape(-1)\n"
        "data, colsum = t.pack_weights(t.ISA_AVX512AMX, w.reshape(33, 1, 128))\n"
        "cc = (-128 * colsum.astype(np.int64)).astype(np.int32)\n"
        "out = np.empty((40, 33), np.int32)\n"
        "t.gemm(t.ISA_AVX512AMX, a, np.arange(40, dtype=np.int64) * 128, np.zeros(1, np.int64), 32, data, 33, cc, None, out, 1)\n"
        "assert np.array_equal(out, x.astype(np.int64) @ w.T.astype(np.int64)), 'wrong'\n"
        "print('exact')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "exact"
