"""How many cores qsim computes on, and splitting independent work over them.

`thread_count()`: the environment variable QSIM_THREADS (a positive whole number), else every
core this process may run on. The CLI's global `--threads N` sets the same variable for the run.
Users of the count:
- the compiled kernels (the float executor's convolutions, pooling and copies; the integer
  GEMMs, depthwise and RESCALE) take `split_count(...)` threads and run their parts on the
  compiled pool of kernels/task_pool.h without the GIL; `split_rows` runs disjoint row ranges
  of work that needs Python between its nogil calls on a pool of Python threads. Every output
  element is computed by one thread from the same inputs in the same order, so results are
  bit-identical for any thread count (the float GEMM's outputs are each one fma chain in k
  order, kernels/float_gemm.h);
- OpenBLAS's own worker threads spin while they wait for work, and on a shared machine a
  spinning worker keeps the core its partner needs (measured: ResNet-18 at 2 OpenBLAS threads
  under load 10 took 7x the CPU time of 1 thread): BLAS calls run side by side on this pool
  use `single_thread_blas`, small float products `use_one_blas_thread`;
- other GEMMs (quantization statistics) use numpy's BLAS (OpenBLAS) with the count set by
  `apply_blas_threads()` through OpenBLAS's own setter (found in numpy's bundled library
  with ctypes; a numpy built on another BLAS keeps that BLAS's own setting).
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable, Iterator

from .errors import UsageError
from .pinned import PinnedSetting

THREADS_ENV = "QSIM_THREADS"
MAX_THREADS = 256


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_threads(text: str, what: str = THREADS_ENV) -> int:
    """'4' -> 4. Raises UsageError naming `what` on anything but 1..MAX_THREADS."""
    text = str(text).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_THREADS:
        raise UsageError(f"{what} = {text!r} is not a thread count",
                         hint=f"give a whole number from 1 to {MAX_THREADS}, e.g. 2")
    return int(text)


_counts: dict[str, int] = {}


def _read_thread_count() -> int:
    text = os.environ.get(THREADS_ENV)
    if text is None or not text.strip():
        return available_cores()          # the affinity can change: asked each time
    count = _counts.get(text)
    if count is None:
        count = parse_threads(text)
        if len(_counts) < 64:
            _counts[text] = count
    return count


_thread_count = PinnedSetting(_read_thread_count)


def thread_count() -> int:
    """QSIM_THREADS when set, else all available cores. (Read on every call, as the variable may
    change, except inside pinned_thread_count(); the parsed value of each text is remembered.)"""
    return _thread_count.get()


def pinned_thread_count():
    """thread_count() read once for the block: the executor's op loop, one inference (qsim/pinned.py)."""
    return _thread_count.pinned()


def set_threads(n: int) -> None:
    """Uses n threads from now on (the kernels read QSIM_THREADS on each call; BLAS is told)."""
    os.environ[THREADS_ENV] = str(parse_threads(str(n), "--threads"))
    apply_blas_threads()


_blas_lib: ctypes.CDLL | None | bool = False   # False: not looked up yet; None: none found
_blas_threads: int | None = None
_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")


def _openblas():
    """numpy's bundled OpenBLAS (the already-loaded library: same handle, same state)."""
    global _blas_lib
    if _blas_lib is False:
        import numpy
        _blas_lib = None
        libs = os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs")
        for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            if any(hasattr(lib, name) for name in _SETTERS):
                _blas_lib = lib
                break
    return _blas_lib


def blas_threads() -> int | None:
    """The thread count numpy's OpenBLAS uses now (None without a bundled OpenBLAS)."""
    lib = _openblas()
    for name in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                 "openblas_get_num_threads64_", "openblas_get_num_threads"):
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            fn.restype = ctypes.c_int
            return int(fn())
    return None


def _set_blas_threads(n: int) -> None:
    global _blas_threads
    if n == _blas_threads:
        return
    lib = _openblas()
    for name in _SETTERS:
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_int], None
            fn(n)
            break
    _blas_threads = n


def apply_blas_threads() -> None:
    """Tells numpy's OpenBLAS to use thread_count() threads (once per distinct count)."""
    _set_blas_threads(thread_count())


def use_one_blas_thread() -> None:
    """numpy's OpenBLAS on one thread from now on (until apply_blas_threads). For the float
    executor's small products: switching back to QSIM_THREADS after each one (single_thread_blas)
    woke OpenBLAS's workers, which then spun on the other core (~5 ms of CPU per ResNet-18
    inference at 2 threads)."""
    _set_blas_threads(1)


@contextlib.contextmanager
def single_thread_blas() -> Iterator[None]:
    """numpy's OpenBLAS on one thread inside the block (for BLAS calls that qsim's own pool
    runs side by side); thread_count() threads again after it."""
    _set_blas_threads(1)
    try:
        yield
    finally:
        apply_blas_threads()


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _forget_pool_in_child() -> None:
    """A forked child (e.g. the NPU sweep's ProcessPoolExecutor workers) inherits the pool
    object but none of its threads: work submitted there would wait forever. The child
    starts its own pool on first use instead."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    if _pool is None or _pool_size < n:
        if _pool is not None:
            _pool.shutdown(wait=True)
        _pool, _pool_size = ThreadPoolExecutor(max_workers=n, thread_name_prefix="qsim"), n
    return _pool


def split_count(rows: int, min_rows: int = 64) -> int:
    """How many parts [0, rows) is cut into: one per thread (at most thread_count()), each at
    least min_rows long, at least one. (The compiled kernels take this as their `parts` and cut
    as split_rows does: part i is [rows*i//n, rows*(i+1)//n).)"""
    return max(1, min(thread_count(), rows // max(min_rows, 1)))


def split_rows(rows: int, work: Callable[[int, int], None], min_rows: int = 64) -> None:
    """Calls work(lo, hi) for disjoint ranges covering [0, rows): one range per thread (at
    most thread_count(), each at least min_rows long), the first on the calling thread.
    `work` must release the GIL to gain anything and must write only its own rows. (For work
    that needs Python between its nogil calls: a compiled kernel splits on the compiled pool
    instead, kernels/task_pool.h, which starts a part in microseconds, not tens of them.)"""
    n = split_count(rows, min_rows)
    if n == 1:
        work(0, rows)
        return
    bounds = [rows * i // n for i in range(n + 1)]
    futures = [_executor(n - 1).submit(work, bounds[i], bounds[i + 1]) for i in range(1, n)]
    work(bounds[0], bounds[1])
    for f in futures:
        f.result()


def wait_in_order(futures: list[Future]) -> None:
    """Waits for every future; the first failure in list order is raised, after the others
    have been cancelled or have finished (nothing of theirs runs on while the caller unwinds)."""
    try:
        for f in futures:
            f.result()
    finally:
        for f in futures:
            f.cancel()
        wait(futures)
