"""qsim's compiled thread pool (kernels/task_pool.h): every part of a job runs once, on the range
the split defines, on at most the threads asked for, whatever the part and thread counts, with
several Python threads calling at once, and in a forked child of a process whose pool already had
workers."""
import multiprocessing
import threading

import numpy as np
import pytest

from qsim.kernels.extensions import extension

_task_pool = extension("_task_pool")


def starts(n, parts):
    """lo_of[i] for the split threads.split_rows makes: part p holds [n*p//parts, n*(p+1)//parts)."""
    parts = max(1, min(parts, n))
    bounds = [n * p // parts for p in range(parts + 1)]
    return np.repeat(bounds[:-1], np.diff(bounds))


def run(n, parts, threads):
    owner, lo_of, slot_of = np.zeros(n, np.int64), np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    _task_pool.record_parts(owner, lo_of, slot_of, parts, threads)
    return owner, lo_of, slot_of


@pytest.mark.parametrize("n,parts,threads", [(1, 1, 1), (1, 4, 2), (2, 2, 2), (7, 3, 3), (10, 8, 2), (64, 64, 4),
                                             (100, 7, 1), (5, 300, 3), (1_000_003, 2, 2), (1 << 20, 20, 5)])
def test_each_index_is_done_once_by_its_part(n, parts, threads):
    owner, lo_of, slot_of = run(n, parts, threads)
    assert (owner == 1).all()
    np.testing.assert_array_equal(lo_of, starts(n, parts))
    assert 0 <= slot_of.min() and slot_of.max() < threads
    # a part runs on one thread: its slot is the same over its range
    for lo in np.unique(lo_of):
        assert len(np.unique(slot_of[lo_of == lo])) == 1
    assert _task_pool.part_bounds(n, 3) == [0, n // 3, 2 * n // 3, n]


def test_back_to_back_jobs_reuse_the_workers():
    """thousands of small jobs (the pattern of an inference: a job per layer) all complete, on
    workers started once, and the workers do take parts"""
    owner, lo_of, slot_of = np.zeros(4096, np.int64), np.zeros(4096, np.int64), np.zeros(4096, np.int64)
    by_workers = _task_pool.parts_by_workers()
    for _ in range(3000):
        _task_pool.record_parts(owner, lo_of, slot_of, 8, 2)
    assert (owner == 3000).all()
    assert _task_pool.parts_by_workers() > by_workers      # not all 24000 parts ran on the caller
    started = _task_pool.workers_started()
    for threads in (2, 3, 2):
        _task_pool.record_parts(owner, lo_of, slot_of, 8, threads)
    assert 1 <= _task_pool.workers_started() <= max(started, 2)


def test_python_threads_calling_at_once_all_get_their_results():
    """a call that finds the pool busy with another thread's job runs its parts itself: the
    same indices, each once"""
    n, rounds, callers = 20_000, 200, 4
    results, errors = [], []

    def caller(seed):
        try:
            owner, lo_of, slot_of = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
            for r in range(rounds):
                parts = 2 + (seed + r) % 5
                _task_pool.record_parts(owner, lo_of, slot_of, parts, 2)
                np.testing.assert_array_equal(lo_of, starts(n, parts))
            results.append(owner)
        except Exception as err:           # reported below: a thread's assert would be lost
            errors.append(err)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == callers and all((owner == rounds).all() for owner in results)


def _child_job(queue):
    owner, lo_of, slot_of = run(10_000, 6, 3)
    queue.put(bool((owner == 1).all()) and bool((lo_of == starts(10_000, 6)).all()))


def test_a_forked_child_starts_its_own_workers():
    """the parent's workers do not exist in a forked child (the sweep's process pool forks):
    the child's first job must start new ones instead of waiting for the parent's"""
    run(100, 3, 3)
    assert _task_pool.workers_started() >= 2
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_job, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's pool job did not finish in 60 s")
    assert child.exitcode == 0 and queue.get(timeout=5) is True


def test_a_worker_asleep_is_woken():
    """with no spinning at all every job finds the workers asleep on the condition variable"""
    _task_pool.set_spin_us(0)
    try:
        owner = sum(run(1000, 4, 2)[0] for _ in range(300))
    finally:
        _task_pool.set_spin_us(100)
    assert (owner == 300).all()
