# cython: language_level=3
"""qsim's compiled thread pool (kernels/task_pool.h), shared by every kernel module.

The kernel modules reach the pool through the capsule RUN (kernels/task_pool_api.h) and split
their loops over it without the GIL; Python code keeps using qsim.threads.split_rows for work
that needs the interpreter. This module holds the one pool of the process and its settings.
"""
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int64_t


cdef extern from "task_pool.h" nogil:
    ctypedef void (*qsim_task_fn)(void *ctx, int slot, int64_t lo, int64_t hi)
    void qsim_pool_run(qsim_task_fn fn, void *ctx, int64_t n, int parts, int threads)
    int qsim_pool_install_fork_handler()
    void qsim_pool_set_spin_ns(int64_t ns)
    int qsim_pool_workers_started()
    int qsim_pool_inline_jobs()
    long qsim_pool_parts_by_workers()
    int64_t qsim_part_bound(int64_t n, int parts, int part)
    const char *QSIM_POOL_CAPSULE


if qsim_pool_install_fork_handler() != 0:
    raise OSError("qsim.kernels._task_pool: pthread_atfork failed")

RUN = PyCapsule_New(<void *>qsim_pool_run, QSIM_POOL_CAPSULE, NULL)


def set_spin_us(int64_t us):
    """How long a worker keeps spinning for the next part after finishing one (then it sleeps
    until woken): long enough to cover the Python between two kernel calls of one inference."""
    qsim_pool_set_spin_ns(us * 1000)


def workers_started():
    """Worker threads the pool has started (they live until the process exits)."""
    return qsim_pool_workers_started()


def parts_by_workers():
    """Parts the pool's workers have run (the calling threads ran the others)."""
    return qsim_pool_parts_by_workers()


def inline_jobs():
    """Calls that found the pool busy with another thread's call and ran their parts themselves."""
    return qsim_pool_inline_jobs()


cdef struct _RecordCtx:
    int64_t *owner
    int64_t *lo_of
    int64_t *slot_of


cdef void _record(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _RecordCtx *c = <_RecordCtx *>ctx
    cdef int64_t i
    for i in range(lo, hi):
        c.owner[i] += 1
        c.lo_of[i] = lo
        c.slot_of[i] = slot


def record_parts(int64_t[::1] owner, int64_t[::1] lo_of, int64_t[::1] slot_of, int parts, int threads):
    """Test hook: runs one pool job over [0, len(owner)) in `parts` parts on `threads` threads;
    each part adds 1 to owner[i] and writes its first index to lo_of[i] and the slot of the
    thread that ran it to slot_of[i], for its own indices. A correct pool leaves owner all ones,
    lo_of the split's part starts and slot_of in [0, threads)."""
    cdef _RecordCtx ctx
    if lo_of.shape[0] != owner.shape[0] or slot_of.shape[0] != owner.shape[0]:
        raise ValueError("record_parts: owner, lo_of and slot_of differ in length")
    if owner.shape[0] == 0:
        return
    ctx.owner, ctx.lo_of, ctx.slot_of = &owner[0], &lo_of[0], &slot_of[0]
    with nogil:
        qsim_pool_run(_record, &ctx, owner.shape[0], parts, threads)


def part_bounds(int64_t n, int parts):
    """[lo of part 0, lo of part 1, ..., n]: how a job of n indices is cut into `parts`."""
    return [qsim_part_bound(n, parts, p) for p in range(parts + 1)]
