# The compiled pool's entry point for a kernel module (include "task_pool_client.pxi"): the
# module's `threads` claim parts of a kernel's range without the GIL (kernels/task_pool.h). The
# pool itself lives in qsim.kernels._task_pool, shared by every module through this capsule.
from cpython.pycapsule cimport PyCapsule_GetPointer

from qsim.kernels._task_pool import RUN as _POOL_CAPSULE


cdef extern from "task_pool_api.h" nogil:
    ctypedef void (*qsim_task_fn)(void *ctx, int slot, int64_t lo, int64_t hi)
    ctypedef void (*qsim_pool_run_fn)(qsim_task_fn fn, void *ctx, int64_t n, int parts, int threads)
    const char *QSIM_POOL_CAPSULE
    int qsim_parts_for(int64_t n, int threads)

cdef qsim_pool_run_fn _pool_run = <qsim_pool_run_fn>PyCapsule_GetPointer(_POOL_CAPSULE, QSIM_POOL_CAPSULE)
