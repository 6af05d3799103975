"""Thread count plumbing (qsim.threads, --threads, QSIM_THREADS) and that the integer kernels
give the same bits on 1 and 2 threads."""
import os

import numpy as np
import pytest

from qsim import threads
from qsim.cli import main
from qsim.errors import UsageError
from qsim.kernels import gemm_ops


def test_thread_count_reads_the_environment(monkeypatch):
    monkeypatch.setenv("QSIM_THREADS", "3")
    assert threads.thread_count() == 3
    monkeypatch.delenv("QSIM_THREADS")
    assert threads.thread_count() == threads.available_cores()


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5", "100000"])
def test_bad_thread_counts_are_usage_errors(monkeypatch, bad):
    monkeypatch.setenv("QSIM_THREADS", bad)
    with pytest.raises(UsageError) as err:
        threads.thread_count()
    assert "QSIM_THREADS" in str(err.value) and repr(bad) in str(err.value)
    assert "whole number" in err.value.hint


def test_cli_threads_option_rejects_a_bad_count_with_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("QSIM_THREADS", raising=False)
    assert main(["--threads", "zero", "selftest"]) == 2
    err = capsys.readouterr().err
    assert "--threads = 'zero' is not a thread count" in err
    monkeypatch.delenv("QSIM_THREADS", raising=False)


def test_set_threads_sets_the_environment_and_numpys_openblas(monkeypatch):
    monkeypatch.setenv("QSIM_THREADS", "1")
    assert threads.blas_threads() is not None     # numpy's bundled OpenBLAS was found
    try:
        threads.set_threads(2)
        assert os.environ["QSIM_THREADS"] == "2" and threads.blas_threads() == 2
        threads.set_threads(1)
        assert os.environ["QSIM_THREADS"] == "1" and threads.blas_threads() == 1
    finally:
        monkeypatch.delenv("QSIM_THREADS")
        threads.apply_blas_threads()


@pytest.mark.parametrize("rows,n", [(0, 2), (1, 2), (63, 2), (1000, 2), (1000, 3), (7, 7)])
def test_split_rows_covers_every_row_once(monkeypatch, rows, n):
    monkeypatch.setenv("QSIM_THREADS", str(n))
    hits = np.zeros(rows, np.int64)
    spans = []

    def work(lo, hi):
        spans.append((lo, hi))
        hits[lo:hi] += 1
    threads.split_rows(rows, work, min_rows=1)
    assert np.all(hits == 1)
    assert len(spans) == max(1, min(n, rows))


def _conv_case(rng, oc=24):
    x = rng.integers(-128, 128, (2, 30, 30, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (oc, 3, 3, 16), dtype=np.int8)
    attrs = dict(weight=w, bias=rng.integers(-1000, 1000, oc).astype(np.int32), pad=(1, 1, 1, 1),
                 stride=(1, 1), dilation=(1, 1), input_zp=-3, weight_zp=0)
    return x, attrs


def test_int8_conv_is_bit_identical_on_one_and_two_threads(monkeypatch):
    rng = np.random.default_rng(3)
    x, attrs = _conv_case(rng)
    counts = []
    real_count = gemm_ops.split_count
    monkeypatch.setattr(gemm_ops, "split_count", lambda rows, *a, **kw: counts.append(real_count(rows, *a, **kw))
                        or counts[-1])
    monkeypatch.setenv("QSIM_THREADS", "1")
    one = gemm_ops.conv2d([x], attrs)[0]
    monkeypatch.setenv("QSIM_THREADS", "2")
    two = gemm_ops.conv2d([x], attrs)[0]
    assert counts[-1] == 2                     # the two-thread run really ran the rows on two threads
    np.testing.assert_array_equal(one, two)
    # and both equal the direct int64 sum (independent of the kernel)
    xp = np.pad(x.astype(np.int64) + 3, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros(one.shape, np.int64)
    for ky in range(3):
        for kx in range(3):
            ref += np.einsum("nhwc,oc->nhwo", xp[:, ky:ky + 30, kx:kx + 30], attrs["weight"][:, ky, kx].astype(np.int64))
    np.testing.assert_array_equal(one, ref + attrs["bias"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_split_rows_works_in_a_forked_child(monkeypatch):
    """A child forked after the pool started must not wait on the parent's (absent) threads."""
    monkeypatch.setenv("QSIM_THREADS", "2")
    threads.split_rows(200, lambda lo, hi: None, min_rows=1)      # the parent's pool exists
    pid = os.fork()
    if pid == 0:                                                    # child: exit 0 when done
        try:
            hits = np.zeros(200, np.int64)
            threads.split_rows(200, lambda lo, hi: hits.__setitem__(slice(lo, hi), 1), min_rows=1)
            os._exit(0 if hits.sum() == 200 else 1)
        finally:
            os._exit(2)
    deadline = __import__("time").monotonic() + 30
    while __import__("time").monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        __import__("time").sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("split_rows hung in the forked child")


def test_wait_in_order_raises_the_first_failure_in_list_order_after_all_are_done():
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from qsim.threads import wait_in_order
    release = threading.Event()
    finished = []

    def slow_failure():
        release.wait(5)
        finished.append("first")
        raise ValueError("first")

    def fast_failure():
        finished.append("second")
        raise KeyError("second")

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(slow_failure), pool.submit(fast_failure)]
        futures[1].exception(5)          # the later one has failed already
        release.set()
        with pytest.raises(ValueError, match="first"):
            wait_in_order(futures)
        assert all(f.done() for f in futures) and sorted(finished) == ["first", "second"]
    wait_in_order([])                    # nothing to wait for: returns


def test_a_pinned_thread_count_holds_for_its_block_and_nests(monkeypatch):
    """the executor reads QSIM_THREADS once per inference (pinned_thread_count): inside the block
    a change of the variable is not seen, after it it is; an inner block keeps the outer value"""
    monkeypatch.setenv("QSIM_THREADS", "3")
    with threads.pinned_thread_count():
        monkeypatch.setenv("QSIM_THREADS", "2")
        assert threads.thread_count() == 3
        with threads.pinned_thread_count():
            assert threads.thread_count() == 3
            monkeypatch.setenv("QSIM_THREADS", "5")
        assert threads.thread_count() == 3
    assert threads.thread_count() == 5


def test_an_inference_uses_the_limit_and_count_of_its_start(monkeypatch):
    """execute pins the thread count and the tensor limit around its op loop; the next
    inference reads the environment again"""
    from qsim import ir, limits
    from qsim.errors import DataError
    from qsim.runtime.executor import execute
    seen = []
    x = ir.Tensor("x", ir.DType.F32, (1, 4, 8, 8))
    y = ir.Tensor("y", ir.DType.F32, (1, 4, 8, 8))
    graph = ir.Graph("g", ("x",), ("y",), (ir.Op(ir.OpKind.get("math.exp"), ("x",), ("y",)),), {"x": x, "y": y})
    from qsim.runtime import float_ops
    real_exp = float_ops.OPS["math.exp"]

    def spying_exp(ins, at):
        seen.append((threads.thread_count(), limits.max_tensor_bytes()))
        return real_exp(ins, at)
    monkeypatch.setitem(float_ops.OPS, "math.exp", spying_exp)
    monkeypatch.setenv("QSIM_THREADS", "2")
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    execute(graph, {"x": np.zeros((1, 4, 8, 8), np.float32)})
    assert seen == [(2, 1 << 20)]
    monkeypatch.setenv("QSIM_THREADS", "1")
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "2K")
    execute(graph, {"x": np.zeros((1, 4, 8, 8), np.float32)})
    assert seen[-1] == (1, 2048) and threads.thread_count() == 1
