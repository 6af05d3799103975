"""The LocalCluster a command starts for `--workers N` (qsim.cluster.distributed.open_pool): how
many workers it may have, how they are configured, and how it starts and stops.

Cap: at most MAX_WORKERS_PER_CORE worker processes per core. The engines are CPU-bound and
each worker takes one core's share of the work, so more workers than cores only add memory
and start-up time; thousands fork-bomb the machine. More than the
cap is a usage error, not a silent clamp: the user asked for something this machine cannot
give, and a run with another count could surprise them (a benchmark of N workers).
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from ..errors import UnsupportedError, UsageError
from ..threads import THREADS_ENV, thread_count

MAX_WORKERS_PER_CORE = 4


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def check_worker_count(workers: int) -> None:
    """Raises UsageError unless 1 <= `workers` <= the cap (module docstring)."""
    if workers < 1:
        raise UsageError(f"--workers {workers}: need at least 1", hint="--workers 1 runs in this process")
    cap = MAX_WORKERS_PER_CORE * default_workers()
    if workers > cap:
        shown = workers if workers < 10 ** 9 else f"{str(workers)[:6]}... ({len(str(workers))} digits)"
        raise UsageError(f"--workers {shown}: at most {cap} on this machine ({MAX_WORKERS_PER_CORE} "
                         f"per core, {default_workers()} cores)",
                         hint=f"leave --workers out for one worker per core ({default_workers()}); "
                              "more workers than cores do not run faster, and each costs memory; "
                              "for more, use an existing cluster with --scheduler")


# Dask's background sampling, slowed or off for our own LocalCluster (the workers, the nannies
# and the scheduler read these when they start). Measured on an idle 2-worker cluster: 0.07 of
# a core with Dask's defaults (the workers' statistical profiler, sampling the running task's
# stack every 10 ms, and the nannies' memory monitors every 100 ms, are most of it), 0.013 with
# these: 3 % of a 2-core machine given back to the tasks. The profiler only feeds the dashboard;
# the nanny still restarts a worker over its memory limit, within a second instead of 0.1 s.
QUIET_CLUSTER = {"distributed.worker.profile.enabled": False,
                 "distributed.worker.memory.monitor-interval": "1s",
                 "distributed.admin.system-monitor.interval": "2s",
                 "distributed.admin.tick.interval": "1s"}


def worker_threads(count: int) -> int:
    """The kernel threads (QSIM_THREADS) of each of `count` local worker processes: their share
    of this process's (QSIM_THREADS or every core), at least one. Each worker would otherwise
    take every core for its kernels and BLAS, and `count` workers would oversubscribe the
    machine (measured: a 2-worker ResNet-18 sweep spent 55 CPU s for the serial run's 42)."""
    return max(1, thread_count() // max(1, count))


# Timeouts of our LocalCluster, for a slow, loaded machine. The engines hold the GIL for a whole
# program, so a worker's event loop (its heartbeats, its answers to the scheduler) can stall
# for as long as a task runs, and longer when other processes take the cores. Past Dask's 30 s
# comm timeout a peer drops the connection (a CommClosedError traceback) and the scheduler the
# worker (the run prints "no worker left"); its nanny restarts it and the task runs again. The
# workers are this machine's processes: a silent one is busy, not lost (a dead one is seen at
# once by its nanny, and its socket closes).
PATIENT_CLUSTER = {"distributed.comm.timeouts.connect": "120s",
                   "distributed.comm.timeouts.tcp": "600s",
                   "distributed.scheduler.worker-ttl": "30 minutes",
                   "distributed.deploy.lost-worker-timeout": "120s"}
CLOSE_TIMEOUT_S = 60.0


def start_local_cluster(count: int):
    """A client of a new LocalCluster (`client.cluster`) of `count` one-thread worker processes,
    configured by the caller (local_cluster). On Linux the workers are forked (qsim.cluster.distributed's
    docstring). Forking is safe here because the start is synchronous: this process's other
    threads (the cluster's event loop, which forks) hold no lock the children could inherit
    locked, as the calling thread only waits. A worker the nanny restarts later (after it
    died) is spawned as Dask's configuration says, with the configuration its nanny got."""
    import logging

    import dask
    from distributed import Client, LocalCluster
    method = "fork" if sys.platform.startswith("linux") else \
        dask.config.get("distributed.worker.multiprocessing-method")
    try:
        # dashboard on any free port: the scheduler serves HTTP anyway, and two commands (or
        # test runs) on one machine must not fight over the default 8787
        with dask.config.set({"distributed.worker.multiprocessing-method": method}):
            cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.ERROR,
                                   env={THREADS_ENV: str(worker_threads(count))})
    except (RuntimeError, OSError, TimeoutError) as error:
        raise UnsupportedError(f"could not start a local Dask cluster of {count} worker processes ({error})",
                               hint="run in this process with --workers 1; from a script, start the "
                                    "cluster under `if __name__ == \"__main__\":`") from None
    return Client(cluster)


@contextmanager
def local_cluster(count: int) -> Iterator:
    """A client of a new LocalCluster of `count` workers (start_local_cluster), under
    QUIET_CLUSTER and PATIENT_CLUSTER for its whole life (the client and the scheduler in this
    process read the timeouts when they connect, not only at the start). Closed on exit: the
    client first (nothing of the run is pending any more), then the cluster, which retires its
    workers before it stops the scheduler."""
    import dask
    with dask.config.set({**QUIET_CLUSTER, **PATIENT_CLUSTER}):
        client = start_local_cluster(count)
        try:
            yield client
        finally:
            _close_quietly(client)


def _close_quietly(client) -> None:
    """Closes the client and its cluster. Once the run's results are in, what the closing
    meets (a worker slow to retire, a comm that a busy peer closes first: Dask logs them as
    errors, with tracebacks) changes nothing the command did, so logging is off in this
    process meanwhile (Dask's loggers carry levels of their own, so muting their parent would
    not do), and a close that fails or times out is left to the process's exit."""
    import logging
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        client.close(timeout=CLOSE_TIMEOUT_S)
        client.cluster.close(timeout=CLOSE_TIMEOUT_S)
    except (OSError, TimeoutError):         # CommClosedError is an OSError
        pass
    finally:
        logging.disable(before)
