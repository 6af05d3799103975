/* qsim's compiled thread pool: the workers that run the parts of one kernel call (task_pool_api.h).

Why not Python threads: handing a part to a concurrent.futures worker and collecting it cost 40-60 us
per call back to back and ~140 us when the worker had gone to sleep (the worker takes the GIL to start
the call, the caller takes it back to finish), while a float convolution of EfficientNet-Lite0 takes
0.1-0.5 ms: two threads were slower than one inside an inference. Here the caller publishes a job in
shared memory and the workers, spinning for a short while after their last part, start it within a
microsecond or two; nothing takes the GIL.

Why not OpenMP: GCC's libgomp keeps its threads across fork() without noticing, so a forked child
(the sweep's process workers) that starts a parallel region can hang; its spin time is a process-wide
setting. This pool re-creates its workers in a forked child, and its spin time is its own.

Protocol (one job at a time; `dispatch` is held by the one caller publishing and waiting):
- the caller writes fn, ctx, n, parts, `pending` = parts and `claim` = (generation << 32) | (parts << 16),
  then `word`
  = (generation << 16) | threads with a release store. Every participant (the caller, and each worker
  w with w < threads that sees the new word) then claims parts one at a time by a compare-and-swap of
  `claim` from (generation, i) to (generation, i + 1), runs part i, and decrements `pending`
  (release). `claim` holds the job's part count too (bits 16-31), so the check that a part is left
  reads one atomic word. A claim whose generation is not the participant's job's fails: a late worker never
  runs a part of a later job. fn, ctx, n are read only after a successful claim, and the caller
  rewrites them only after `pending` reached 0 (acquire), i.e. after every claimed part finished.
  Because parts are claimed, not assigned, a worker that has not got a core yet (a loaded machine)
  costs nothing: the caller runs the parts nobody has taken.
- a worker spins on `word` for spin_ns after its last part, then sleeps on `wake`. It registers in
  `sleepers` (seq_cst) before re-reading `word`, and the caller reads `sleepers` (seq_cst) after storing
  `word`: either the caller sees the sleeper and broadcasts under `sleep_mu`, or the worker sees the new
  word and does not sleep.
- a second thread that calls while a job runs (another Python thread's kernel) runs all its parts
  itself, in order: the results are the same, only slower.
*/
#ifndef QSIM_TASK_POOL_H
#define QSIM_TASK_POOL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "task_pool_api.h"

#define QSIM_POOL_MAX_WORKERS 255      /* QSIM_THREADS is at most 256 */
#define QSIM_POOL_PART_BITS 16

static pthread_mutex_t qsim_pool_dispatch = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t qsim_pool_sleep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qsim_pool_wake = PTHREAD_COND_INITIALIZER;
static atomic_int qsim_pool_sleepers;
static atomic_uint_fast64_t qsim_pool_word;     /* (generation << 16) | threads of the job */
static atomic_int qsim_pool_pending;            /* parts of the job not yet finished */
static atomic_uint_fast64_t qsim_pool_claim;    /* (generation << 32) | (parts << 16) | next part to claim */
static uint_fast64_t qsim_pool_start_word[QSIM_POOL_MAX_WORKERS + 1];  /* `word` when worker w was made */
static qsim_task_fn qsim_pool_fn;
static void *qsim_pool_ctx;
static int64_t qsim_pool_n;
static int qsim_pool_started;                   /* workers running (only the dispatcher changes it) */
static atomic_int_fast64_t qsim_pool_spin_ns = 100000;
static atomic_int qsim_pool_jobs_run_inline;    /* calls that found the pool busy (for tests) */
static atomic_long qsim_pool_worker_parts;      /* parts the workers ran (for tests and tuning) */

static inline void qsim_pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline int64_t qsim_pool_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#define QSIM_POOL_MAX_PARTS 0xffff

static inline int qsim_pool_parts_of(uint_fast64_t claim) { return (int)((claim >> 16) & 0xffff); }

/* Claims and runs parts of job `generation` as thread `slot` until none is left; returns how many.
   The job (fn, ctx, n) is read only after a successful claim (see the protocol). */
static int qsim_pool_take_parts(uint_fast64_t generation, int slot) {
    uint_fast64_t claim = atomic_load_explicit(&qsim_pool_claim, memory_order_acquire);
    int done = 0;
    for (;;) {
        if ((claim >> 32) != (generation & 0xffffffffu) || (int)(claim & 0xffff) >= qsim_pool_parts_of(claim))
            return done;
        if (!atomic_compare_exchange_weak_explicit(&qsim_pool_claim, &claim, claim + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;                              /* claim now holds the current value */
        int part = (int)(claim & 0xffff), parts = qsim_pool_parts_of(claim);
        int64_t n = qsim_pool_n;
        qsim_pool_fn(qsim_pool_ctx, slot, qsim_part_bound(n, parts, part), qsim_part_bound(n, parts, part + 1));
        atomic_fetch_sub_explicit(&qsim_pool_pending, 1, memory_order_release);
        done++;
        claim = atomic_load_explicit(&qsim_pool_claim, memory_order_acquire);
    }
}

/* Waits until `word` differs from `seen`: spins spin_ns, then sleeps. Returns the new word. */
static uint_fast64_t qsim_pool_await(uint_fast64_t seen) {
    int64_t deadline = qsim_pool_now_ns() + atomic_load_explicit(&qsim_pool_spin_ns, memory_order_relaxed);
    for (unsigned i = 1;; i++) {
        uint_fast64_t word = atomic_load_explicit(&qsim_pool_word, memory_order_acquire);
        if (word != seen)
            return word;
        qsim_pool_relax();
        if ((i & 63) == 0 && qsim_pool_now_ns() >= deadline)
            break;
    }
    pthread_mutex_lock(&qsim_pool_sleep_mu);
    atomic_fetch_add(&qsim_pool_sleepers, 1);
    uint_fast64_t word;
    while ((word = atomic_load(&qsim_pool_word)) == seen)
        pthread_cond_wait(&qsim_pool_wake, &qsim_pool_sleep_mu);
    atomic_fetch_sub(&qsim_pool_sleepers, 1);
    pthread_mutex_unlock(&qsim_pool_sleep_mu);
    return word;
}

static void *qsim_pool_worker(void *arg) {
    int self = (int)(intptr_t)arg;                 /* 1-based: part `self` of a job */
    /* not `word` as it is now: the job that made this worker may be published already */
    uint_fast64_t seen = qsim_pool_start_word[self];
    for (;;) {
        seen = qsim_pool_await(seen);
        int threads = (int)(seen & ((1u << QSIM_POOL_PART_BITS) - 1));
        if (self < threads)                        /* no more threads than the caller asked for */
            atomic_fetch_add_explicit(&qsim_pool_worker_parts, qsim_pool_take_parts(seen >> QSIM_POOL_PART_BITS, self),
                                      memory_order_relaxed);
    }
    return NULL;
}

/* Starts workers until `want` run (fewer if the system refuses threads). Dispatcher only. */
static void qsim_pool_grow(int want) {
    while (qsim_pool_started < want) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        qsim_pool_start_word[qsim_pool_started + 1] = atomic_load(&qsim_pool_word);
        int failed = pthread_create(&thread, &attr, qsim_pool_worker, (void *)(intptr_t)(qsim_pool_started + 1));
        pthread_attr_destroy(&attr);
        if (failed)
            return;
        qsim_pool_started++;
    }
}

static void qsim_pool_run(qsim_task_fn fn, void *ctx, int64_t n, int parts, int threads) {
    if (n <= 0)
        return;
    if (parts > n)
        parts = (int)n;                            /* no empty parts */
    if (parts > QSIM_POOL_MAX_PARTS)
        parts = QSIM_POOL_MAX_PARTS;
    if (parts < 1)
        parts = 1;
    if (threads > parts)
        threads = parts;
    if (threads > QSIM_POOL_MAX_WORKERS + 1)
        threads = QSIM_POOL_MAX_WORKERS + 1;
    if (threads <= 1) {                            /* one thread: its parts in order, here */
        for (int p = 0; p < parts; p++)
            fn(ctx, 0, qsim_part_bound(n, parts, p), qsim_part_bound(n, parts, p + 1));
        return;
    }
    if (pthread_mutex_trylock(&qsim_pool_dispatch) != 0) {
        /* busy with another thread's job: this caller's parts run here, one after another */
        atomic_fetch_add_explicit(&qsim_pool_jobs_run_inline, 1, memory_order_relaxed);
        for (int p = 0; p < parts; p++)
            fn(ctx, 0, qsim_part_bound(n, parts, p), qsim_part_bound(n, parts, p + 1));
        return;
    }
    qsim_pool_grow(threads - 1);                   /* fewer if refused: the others take their parts */
    qsim_pool_fn = fn;
    qsim_pool_ctx = ctx;
    qsim_pool_n = n;
    atomic_store_explicit(&qsim_pool_pending, parts, memory_order_relaxed);
    uint_fast64_t generation = (atomic_load_explicit(&qsim_pool_word, memory_order_relaxed) >> QSIM_POOL_PART_BITS) + 1;
    atomic_store_explicit(&qsim_pool_claim, ((generation & 0xffffffffu) << 32) | ((uint_fast64_t)parts << 16),
                          memory_order_relaxed);
    atomic_store(&qsim_pool_word, (generation << QSIM_POOL_PART_BITS) | (uint_fast64_t)threads);
    if (atomic_load(&qsim_pool_sleepers) > 0) {
        pthread_mutex_lock(&qsim_pool_sleep_mu);
        pthread_cond_broadcast(&qsim_pool_wake);
        pthread_mutex_unlock(&qsim_pool_sleep_mu);
    }
    qsim_pool_take_parts(generation, 0);
    /* only parts a worker is running are left: spin, then give the core away while a worker
       that lost its core (a loaded machine) finishes */
    for (unsigned i = 1; atomic_load_explicit(&qsim_pool_pending, memory_order_acquire) > 0; i++) {
        if (i < 4096)
            qsim_pool_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&qsim_pool_dispatch);
}

/* A forked child has none of the parent's workers (and possibly a lock held by a thread that
   does not exist there): it starts from an empty pool. */
static void qsim_pool_after_fork_in_child(void) {
    pthread_mutex_t fresh_mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    qsim_pool_dispatch = fresh_mutex;
    qsim_pool_sleep_mu = fresh_mutex;
    qsim_pool_wake = fresh_cond;
    atomic_store(&qsim_pool_sleepers, 0);
    atomic_store(&qsim_pool_pending, 0);
    qsim_pool_started = 0;
}

static int qsim_pool_install_fork_handler(void) {
    return pthread_atfork(NULL, NULL, qsim_pool_after_fork_in_child);
}

static void qsim_pool_set_spin_ns(int64_t ns) {
    atomic_store_explicit(&qsim_pool_spin_ns, ns < 0 ? 0 : ns, memory_order_relaxed);
}

static int qsim_pool_workers_started(void) { return qsim_pool_started; }

static int qsim_pool_inline_jobs(void) { return atomic_load(&qsim_pool_jobs_run_inline); }

static long qsim_pool_parts_by_workers(void) { return atomic_load(&qsim_pool_worker_parts); }

#endif
