/* The interface of qsim's compiled thread pool (kernels/task_pool.h, module qsim.kernels._task_pool).

A kernel module runs one operation's independent ranges on the pool without going back to Python:

    qsim_pool_run(fn, &ctx, n, parts, threads)

calls fn(&ctx, slot, lo, hi) once for each part = 0 .. parts-1 with [lo, hi) = [n*part/parts,
n*(part+1)/parts), on at most `threads` threads (the caller and threads-1 of the pool's workers), and
returns when all have returned. The threads claim parts one at a time, so a thread that starts late
(a worker waking up, a core taken by another process) takes fewer: more parts than threads evens the
load out. `slot` (0 .. threads-1) names the thread that runs the part: a thread runs its parts one
after another, so per-slot scratch is never shared. Call it without the GIL; fn must not touch
Python objects and must write only what its own range owns, so the results do not depend on which
thread ran which part (nor on `parts`, when the kernel's per-element arithmetic does not depend on
its range: every qsim kernel holds this).

The pool lives in one extension module, so that every kernel module shares its workers (two pools would
spin against each other on a small machine). Other modules get qsim_pool_run through the capsule
QSIM_POOL_CAPSULE at import time (PyCapsule_Import, in the module's Cython).
*/
#ifndef QSIM_TASK_POOL_API_H
#define QSIM_TASK_POOL_API_H

#include <stdint.h>

typedef void (*qsim_task_fn)(void *ctx, int slot, int64_t lo, int64_t hi);
typedef void (*qsim_pool_run_fn)(qsim_task_fn fn, void *ctx, int64_t n, int parts, int threads);

/* Parts per thread a kernel cuts its range into (when the range has that many indices). */
#define QSIM_PARTS_PER_THREAD 4

static inline int qsim_parts_for(int64_t n, int threads) {
    int64_t parts = threads <= 1 ? 1 : (int64_t)threads * QSIM_PARTS_PER_THREAD;
    return (int)(parts < n ? parts : (n > 0 ? n : 1));
}

#define QSIM_POOL_CAPSULE "qsim.kernels._task_pool.RUN"

/* The first and one-past-last index of part `part` of [0, n) cut into `parts` (as threads.split_rows
   cuts: every part gets n/parts or n/parts + 1 indices, in order). */
static inline int64_t qsim_part_bound(int64_t n, int parts, int part) {
    return (int64_t)(((__int128)n * part) / parts);
}

#endif
